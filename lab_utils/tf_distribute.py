"""TensorFlow set-up for tf.distribute: quiet logs, devices configured before TF initialises, the strategy's devices."""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass

from . import hardware

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # 2: errors only (TF logs to stderr at import; nbval compares stderr)


# TF 2.21 writes these to the C-level stderr while it imports, before its log level applies (absl is not set up yet)
STARTUP_NOISE = ("WARNING: All log messages before absl::InitializeLog()", "port.cc:", "cpu_feature_guard.cc:",
                 "To enable the following instructions:", "rebuild TensorFlow with the appropriate compiler flags")


def quiet() -> None:
    """Silence TensorFlow's log lines below errors; call before the first `import tensorflow`."""
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)


def import_tensorflow():
    """Import TensorFlow with its start-up log lines removed from stderr (anything else still shows); returns it."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    quiet()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode(errors="replace").splitlines()
    kept = [line for line in lines if not any(noise in line for noise in STARTUP_NOISE)]
    if kept:
        print("\n".join(kept), file=sys.stderr)
    return tensorflow


@dataclass(frozen=True)
class TFDevices:
    """The devices a MirroredStrategy will mirror over, and why these."""

    names: tuple[str, ...]
    kind: str  # "gpu" | "logical-gpu" | "logical-cpu"
    reason: str

    def describe(self) -> str:
        return f"{len(self.names)} device(s), {self.kind}: {', '.join(self.names)}\n  why: {self.reason}"


ALREADY_INITIALISED = ("TensorFlow is already initialised in this process, so its devices can no longer be changed. "
                       "Restart the kernel and call lab_utils.tf_distribute.configure_devices(...) before anything "
                       "else touches TensorFlow. (TensorFlow said: {error})")


def configure_devices(n_devices: int = 2, *, gpu_memory_mb: int = 2048,
                      hw: hardware.HardwareReport | None = None) -> TFDevices:
    """Make `n_devices` devices visible to tf.distribute: real GPUs, logical GPUs on one GPU, or logical CPUs."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer, got {n_devices!r}")
    tf = import_tensorflow()
    tf.get_logger().setLevel("ERROR")  # e.g. the eager-MirroredStrategy performance warning
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
    # errors too: when a peer ends first, the collective runtime logs that it is gone; real failures still come
    # back as Python exceptions through launch
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    tf = import_tensorflow()
    tf.get_logger().setLevel("ERROR")

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
    """A small custom-loop training run of the spec'd CNN."""

    model: str = "cnn2d_2layer_fullconnected_2layer"
    dataset: str = "synthetic"  # "synthetic" (procedural image_side x image_side images) or "digits"
    global_batch: int = 128
    steps: int = 20
    lr: float = 0.05
    momentum: float = 0.9
    image_side: int = 28
    seed: int = 0
    multiworker: bool = True  # False: the default (single-device) strategy in the same loop


def _train_test(cfg: TFTrainConfig):
    """Channels-last train and test arrays for `cfg.dataset`."""
    from . import data

    if cfg.dataset == "digits":
        split = data.load_digits_split()
    elif cfg.dataset == "synthetic":
        split = data.synthetic_split(cfg.global_batch * cfg.steps, 512,
                                     image_shape=(1, cfg.image_side, cfg.image_side), seed=cfg.seed)
    else:
        raise ValueError(f"dataset must be 'digits' or 'synthetic', got {cfg.dataset!r}")
    return (split.x_train.transpose(0, 2, 3, 1), split.y_train, split.x_test.transpose(0, 2, 3, 1), split.y_test)


def channels_first(shape) -> tuple[int, int, int]:
    """(H, W, C) as the spec's (C, H, W)."""
    h, w, c = shape
    return (c, h, w)


def train_custom_loop(cfg: TFTrainConfig) -> dict:
    """Train `cfg.steps` steps with strategy.run and compute_average_loss; returns losses, weights, step times."""
    import time

    import numpy as np
    import tensorflow as tf

    from . import spec

    strategy = tf.distribute.MultiWorkerMirroredStrategy() if cfg.multiworker else tf.distribute.get_strategy()
    x, y, x_test, y_test = _train_test(cfg)
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if cfg.dataset == "digits":  # the same shuffle on every worker (same seed), reshuffled each pass
        dataset = dataset.shuffle(len(x), seed=cfg.seed).repeat()
    options = tf.data.Options()
    # from_tensor_slices has no files to split, so shard by element (AUTO would warn, then do the same)
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.batch(cfg.global_batch, drop_remainder=True).with_options(options)
    batches = iter(strategy.experimental_distribute_dataset(dataset))
    with strategy.scope():
        model = spec.build_keras(spec.preset(cfg.model), channels_first(x.shape[1:]), seed=cfg.seed)
        optimizer = tf.keras.optimizers.SGD(cfg.lr, momentum=cfg.momentum)
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

    losses, seconds, first_labels = [], [], None
    for _ in range(cfg.steps):
        batch = next(batches)
        if first_labels is None:
            first_labels = np.concatenate([t.numpy() for t in strategy.experimental_local_results(batch[1])])[:8]
        start = time.perf_counter()
        losses.append(float(step(batch)))
        seconds.append(time.perf_counter() - start)
    weights = np.concatenate([v.numpy().ravel() for v in model.trainable_variables])
    logits = model.predict(x_test, batch_size=256, verbose=0)
    return {"losses": losses, "step_seconds": seconds, "weights": weights, "replicas": strategy.num_replicas_in_sync,
            "test_accuracy": float((logits.argmax(axis=1) == y_test).mean()), "first_labels": first_labels.tolist()}


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


def _short_error(err: Exception) -> str:
    """`Type: message` with any printed tensor values cut out."""
    import re

    text = re.sub(r"\(PerReplica:\{.*?\}\)", "(PerReplica:{...})", str(err), flags=re.S)
    return f"{type(err).__name__}: {' '.join(text.split())[:400]}"


def keras_fit_worker(rank: int, world_size: int, cfg: TFTrainConfig) -> dict:
    """Try Keras's model.fit under MultiWorkerMirroredStrategy; returns the error it raises, or its history."""
    import tensorflow as tf

    from . import spec

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x, y, _, _ = _train_test(cfg)
    with strategy.scope():
        model = spec.build_keras(spec.preset(cfg.model), channels_first(x.shape[1:]), seed=cfg.seed)
        model.compile(optimizer=tf.keras.optimizers.SGD(cfg.lr, momentum=cfg.momentum),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    try:
        history = model.fit(x, y, batch_size=cfg.global_batch, epochs=1, verbose=0)
    except Exception as err:  # noqa: BLE001 - the point is to report whatever Keras raises
        return {"worker": rank, "error": _short_error(err)}
    return {"worker": rank, "error": None, "loss": history.history["loss"]}


def epoch_timer():
    """A Keras callback whose `.seconds` lists each epoch's wall time (Keras is imported only when called)."""
    import time

    import keras

    class EpochTimer(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self._start)

    return EpochTimer()


def replica_weight_spread(model) -> float:
    """The largest difference between the replicas' copies of any variable (0.0 when in sync)."""
    import numpy as np

    spread = 0.0
    for variable in model.weights:
        copies = [np.asarray(c) for c in getattr(getattr(variable, "value", variable), "values", [variable])]
        spread = max([spread] + [float(np.abs(c - copies[0]).max()) for c in copies[1:]])
    return spread
