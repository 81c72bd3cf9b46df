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
