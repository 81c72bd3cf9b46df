"""Lab 02 on a GPU: the DataParallel step against one CPU device's gradients.

Moved from lab_utils/labs/lab02/data_parallel: the learner's module holds only what a lab imports."""
from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from ... import data, spec
from ...compare import max_abs_diff
from .data_parallel import DevicePlan, gradients, plan_devices, single_device_step
from .lesson import DataParallel


# ---- the GPU check ---------------------------------------------------------------------------------------------

GPU_TOLERANCE = 1e-4


def _gpu_gradient_check(step, model, reference) -> str:
    """'passed', or 'failed: ...' when the gradients `step(model)` returns differ from the CPU reference."""
    try:
        grads = step(model)
    except Exception as exc:  # report any failure on the GPU as a failed check, with its cause
        return f"failed: {type(exc).__name__}: {exc}"
    diff = max_abs_diff(grads, reference)
    return "passed" if diff <= GPU_TOLERANCE else f"failed: max |gradient - CPU| = {diff:.2e} > {GPU_TOLERANCE}"


def gpu_check() -> dict[str, str]:
    """Lab 02's step against one CPU device's gradients: replicas sharing cuda:0 (a CUDA stream each), and with two or
    more GPUs torch.nn.parallel's phases and nn.DataParallel itself."""
    names = ("DataParallel step, 2 replicas sharing cuda:0", "DataParallel step, torch.nn.parallel phases on every GPU",
             "nn.DataParallel on every GPU")
    if not torch.cuda.is_available():
        return {name: "skipped: no GPU" for name in names}

    gpus = torch.cuda.device_count()
    model = spec.build_torch(spec.cnn2d_3layer_fullconnected_3layer(), (1, 28, 28), seed=0)
    x, y = (torch.from_numpy(a) for a in data.synthetic_images(64, image_shape=(1, 28, 28), seed=1))
    cpu = copy.deepcopy(model)
    single_device_step(cpu, x, y, threads=None)
    reference = gradients(cpu)

    def our_step(plan):
        def step(m):
            with DataParallel(m, plan) as parallel:
                parallel.step(x, y)
                return gradients(parallel.model)
        return step

    def wrapper_step(m):
        wrapped = nn.DataParallel(m.cuda())
        F.cross_entropy(wrapped(x.cuda()), y.cuda()).backward()
        return gradients(m)

    shared = DevicePlan((torch.device("cuda", 0),) * 2, "threads", None, "gpu_check: replicas sharing cuda:0")
    steps = {names[0]: our_step(shared)}
    if gpus >= 2:
        steps[names[1]] = our_step(plan_devices(gpus, backend="torch"))
        steps[names[2]] = wrapper_step
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # TF32 convolutions round to 10 bits: compare float32 with float32
    try:
        out = {name: _gpu_gradient_check(step, copy.deepcopy(model), reference) for name, step in steps.items()}
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    for name in names[1:]:
        out.setdefault(name, f"skipped: needs 2 GPUs, this machine has {gpus}")
    return out
