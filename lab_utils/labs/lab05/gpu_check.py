"""Lab 05 on a GPU: TensorFlow's MirroredStrategy step on 2 logical GPUs against the CPU.

The step is lab 05's make_train_step (lab_utils.labs.lab05.lesson, generated from its notebook), imported in the fresh
process once TensorFlow's devices are set."""
from __future__ import annotations

import os
import sys

from ...tf_distribute import import_tensorflow
from ...compare import max_abs_diff
from .exercises import one_step_update


# ---- the GPU check ------------------------------------------------------------------------------------------------

GPU_CHECKS = ("tensorflow sees the GPU", "2 logical GPUs", "MirroredStrategy step on the GPU")
GPU_TOLERANCE = 1e-4  # float32 convolutions on a GPU (TF32 off) against the CPU, after one SGD step


def _cuda_present() -> bool:
    """Whether this machine has an NVIDIA GPU (asked without importing TensorFlow or initialising CUDA)."""
    import shutil
    import subprocess

    if os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus"):
        return True
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0


def _gpu_check_here() -> dict[str, str]:
    """In a fresh process: split GPU 0 into 2 logical GPUs, one MirroredStrategy step, compared with the CPU."""
    import numpy as np

    tf = import_tensorflow()
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        reason = ("failed: a GPU is present but TensorFlow sees none (the CPU-only tensorflow-cpu wheel? "
                  "install tensorflow[and-cuda])")
        return dict.fromkeys(GPU_CHECKS, reason)
    tf.config.experimental.enable_tensor_float_32_execution(False)
    result = {GPU_CHECKS[0]: "passed"}
    tf.config.set_visible_devices(gpus[:1], "GPU")
    tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=1024)] * 2)
    logical = [d.name for d in tf.config.list_logical_devices("GPU")]
    result[GPU_CHECKS[1]] = "passed" if len(logical) == 2 else f"failed: TensorFlow made {len(logical)} logical GPUs"
    from .lesson import make_train_step  # imports TensorFlow: after its devices are set

    updates = {where: np.array(one_step_update(None, strategy, 64, seed=0, make_train_step=make_train_step)["update"])
               for where, strategy in (("gpu", tf.distribute.MirroredStrategy(logical)),
                                       ("cpu", tf.distribute.OneDeviceStrategy("/cpu:0")))}
    worst = max_abs_diff(updates["gpu"], updates["cpu"])
    result[GPU_CHECKS[2]] = ("passed" if worst <= GPU_TOLERANCE else
                             f"failed: max |GPU update - CPU update| = {worst:.2e} > {GPU_TOLERANCE:g}")
    return result


def gpu_check() -> dict[str, str]:
    """On a GPU: TensorFlow sees it, splits it into 2 logical GPUs, and a MirroredStrategy step over them equals the
    same step on the CPU. Runs in a fresh process, so the caller's process stays free of TensorFlow."""
    import json
    import subprocess

    if not _cuda_present():
        return dict.fromkeys(GPU_CHECKS, "skipped: no GPU")
    try:
        done = subprocess.run([sys.executable, "-m", __name__], capture_output=True, text=True, timeout=180,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    except subprocess.TimeoutExpired:
        return dict.fromkeys(GPU_CHECKS, "failed: the check did not finish within 180 s")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return dict.fromkeys(GPU_CHECKS, f"failed: the check process exited with code {done.returncode}: {last[:200]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":  # the fresh process gpu_check() starts
    import json

    print(json.dumps(_gpu_check_here()))
