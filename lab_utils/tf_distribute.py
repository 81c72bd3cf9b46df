"""TensorFlow set-up for tf.distribute: quiet logs, devices configured before TF initialises, the strategy's devices."""
from __future__ import annotations

import os
from dataclasses import dataclass

from . import hardware

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # 2: errors only (TF logs to stderr at import; nbval compares stderr)


def quiet() -> None:
    """Silence TensorFlow's start-up log lines; call before the first `import tensorflow`."""
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)


@dataclass(frozen=True)
class TFDevices:
    """The devices a MirroredStrategy will mirror over, and why these."""

    names: tuple[str, ...]
    kind: str  # "gpu" | "logical-gpu" | "logical-cpu"
    reason: str

    def describe(self) -> str:
        return f"{len(self.names)} device(s), {self.kind}: {', '.join(self.names)}\n  why: {self.reason}"


ALREADY_INITIALISED = ("TensorFlow is already initialised in this process, so its devices can no longer be changed "
                       "(TensorFlow raised: {error}). Restart the kernel and call "
                       "lab_utils.tf_distribute.configure_devices(...) before anything else touches TensorFlow.")


def configure_devices(n_devices: int = 2, *, gpu_memory_mb: int = 2048,
                      hw: hardware.HardwareReport | None = None) -> TFDevices:
    """Make `n_devices` devices visible to tf.distribute: real GPUs, logical GPUs on one GPU, or logical CPUs."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer, got {n_devices!r}")
    quiet()
    import tensorflow as tf

    hw = hw or hardware.detect()
    gpus = tf.config.list_physical_devices("GPU")
    try:
        if len(gpus) >= n_devices:
            tf.config.set_visible_devices(gpus[:n_devices], "GPU")
            kind, reason = "gpu", f"{len(gpus)} GPU(s): one replica per GPU."
        elif gpus:
            config = [tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_mb)] * n_devices
            tf.config.set_visible_devices(gpus[:1], "GPU")
            tf.config.set_logical_device_configuration(gpus[0], config)
            kind, reason = "logical-gpu", (f"{n_devices} replicas but {len(gpus)} GPU: GPU 0 is split into {n_devices} "
                                           f"logical GPUs of {gpu_memory_mb} MB; they share its compute, so expect no speedup.")
        else:
            cpus = tf.config.list_physical_devices("CPU")
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * n_devices)
            kind, reason = "logical-cpu", (f"no GPU: the CPU is split into {n_devices} logical devices. They share one "
                                           f"thread pool over {hw.cpu_count} core(s), so MirroredStrategy runs correctly "
                                           "here but gains no speed; separate worker processes do.")
    except RuntimeError as err:
        raise RuntimeError(ALREADY_INITIALISED.format(error=err)) from None
    device_type = "GPU" if kind != "logical-cpu" else "CPU"
    names = tuple(d.name for d in tf.config.list_logical_devices(device_type))[:n_devices]
    return TFDevices(names, kind, reason)


# ---- MultiWorkerMirroredStrategy over local worker processes ----------------------------------------------------

def tf_config(ports, index: int, host: str = "127.0.0.1") -> dict:
    """The TF_CONFIG of worker `index` in a cluster of local workers listening on `ports`."""
    return {"cluster": {"worker": [f"{host}:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}


def _with_tf_config(rank: int, world_size: int, ports, worker, args, threads: int):
    """Runs in each spawned worker: set TF_CONFIG and TF's thread pools, then call the real worker."""
    import json

    os.environ["TF_CONFIG"] = json.dumps(tf_config(ports, rank))
    quiet()
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return worker(rank, world_size, *args)


def launch_workers(worker, n_workers: int, args: tuple = (), timeout: float = 180.0, threads: int = 1) -> list:
    """Start `n_workers` TF worker processes with their TF_CONFIG on free loopback ports; returns their results.

    lab_utils.launch does the process handling: a failing worker is re-raised here with its id and traceback, a
    hung one is killed at `timeout`, nothing is left running.
    """
    from .launch import free_port, launch

    ports = [free_port() for _ in range(n_workers)]
    return launch(_with_tf_config, n_workers, args=(ports, worker, tuple(args), threads), timeout=timeout, threads=threads)


@dataclass(frozen=True)
class TFTrainConfig:
    """A small custom-loop training run of the spec'd CNN on procedural images."""

    model: str = "cnn2d_2layer_fullconnected_2layer"
    global_batch: int = 128
    steps: int = 20
    lr: float = 0.05
    image_side: int = 28
    seed: int = 0
    multiworker: bool = True  # False: the default (single-device) strategy in the same loop


def train_custom_loop(cfg: TFTrainConfig) -> dict:
    """Train `cfg.steps` steps with strategy.run and compute_average_loss; returns losses, weights, step times."""
    import time

    import numpy as np
    import tensorflow as tf

    from . import data, spec

    strategy = tf.distribute.MultiWorkerMirroredStrategy() if cfg.multiworker else tf.distribute.get_strategy()
    n = cfg.global_batch * cfg.steps
    x, y = data.synthetic_images(n, image_shape=(1, cfg.image_side, cfg.image_side), seed=cfg.seed)
    dataset = tf.data.Dataset.from_tensor_slices((x.transpose(0, 2, 3, 1), y)).batch(cfg.global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    batches = iter(strategy.experimental_distribute_dataset(dataset.with_options(options)))
    with strategy.scope():
        model = spec.build_keras(spec.preset(cfg.model), (1, cfg.image_side, cfg.image_side), seed=cfg.seed)
        optimizer = tf.keras.optimizers.SGD(cfg.lr)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            per_example = loss_fn(labels, model(images, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=cfg.global_batch)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    @tf.function
    def step(batch):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=batch), axis=None)

    losses, seconds = [], []
    for _ in range(cfg.steps):
        start = time.perf_counter()
        losses.append(float(step(next(batches))))
        seconds.append(time.perf_counter() - start)
    weights = np.concatenate([v.numpy().ravel() for v in model.trainable_variables])
    return {"losses": losses, "step_seconds": seconds, "weights": weights,
            "replicas": strategy.num_replicas_in_sync}


def train_worker(rank: int, world_size: int, cfg: TFTrainConfig) -> dict:
    """One MultiWorkerMirroredStrategy worker of launch_workers: the custom loop, then its results."""
    return {"worker": rank, **train_custom_loop(cfg)}


def failing_worker(rank: int, world_size: int) -> int:
    """Worker 1 raises before joining the cluster."""
    if rank == 1:
        raise ValueError(f"worker {rank} could not read its shard")
    return rank


def hanging_worker(rank: int, world_size: int) -> int:
    """Worker 0 builds the cluster strategy and runs a collective; the other never joins, so worker 0 waits."""
    import time

    if rank != 0:
        time.sleep(600)
        return rank
    train_custom_loop(TFTrainConfig(steps=1, global_batch=8, image_side=8))
    return rank
