"""Lab 01 on a GPU: training equals the CPU, pinned copies, the missing-synchronize trap.

Moved from lab_utils/train.py: the learner's module holds only what a lab imports."""
from __future__ import annotations

import contextlib
import statistics
import time

import torch

from ... import data, measure, spec
from ...compare import max_abs_diff
from ...tensors import flat_weights
from ...train import fit


# ---- lab 01 on a GPU ----------------------------------------------------------------------------------------------

GPU_CHECKS = ("training on cuda:0 equals the CPU", "pin_memory + non_blocking copies", "timing without synchronize")


@contextlib.contextmanager
def _full_float32():
    """Convolutions and matmuls in full float32 on the GPU (TF32 off), so CPU and GPU results can be compared."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _check_training(steps: int, tolerance: float) -> str:
    split = data.synthetic_split(steps * 32, 64, image_shape=(1, 16, 16), num_classes=4, seed=0)
    weights = {}
    with _full_float32():
        for device in ("cpu", "cuda:0"):
            model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(4), (1, 16, 16), seed=0)
            loader = data.make_loader(data.to_dataset(split.x_train, split.y_train), 32, seed=0)
            fit(model, loader, epochs=1, device=device, progress=False)
            weights[device] = flat_weights(model)
    diff = max_abs_diff(weights["cpu"], weights["cuda:0"])
    verdict = "passed" if diff <= tolerance else "failed"
    return f"{verdict}: max |weight difference| {diff:.1e} after {steps} SGD steps (tolerance {tolerance:g})"


def _check_pinned_copy(repeats: int = 20) -> str:
    batch = torch.rand(256, 3, 64, 64)  # a typical image batch, 12.6 MB
    pinned = batch.pin_memory()
    timings = measure.time_interleaved({"pageable, blocking": lambda: batch.to("cuda:0"),
                                        "pinned, non_blocking": lambda: pinned.to("cuda:0", non_blocking=True)},
                                       warmup=2, repeats=repeats, device="cuda:0")
    rates = ", ".join(f"{name} {batch.nbytes / t.median / 1e9:.1f} GB/s (spread {t.spread:.0%})" for name, t in timings.items())
    if not torch.equal(pinned.to("cuda:0", non_blocking=True).cpu(), batch):
        return f"failed: the pinned, non-blocking copy differs from the batch; {rates}"
    return f"passed: copies equal; host to cuda:0, median of {repeats} interleaved copies of 12.6 MB: {rates}"


def _check_synchronize(repeats: int = 5) -> str:
    a = torch.rand(4096, 4096, device="cuda:0")

    def work():
        for _ in range(10):
            a @ a

    synced = measure.time_it(work, warmup=1, repeats=repeats, device="cuda:0").median
    unsynced = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        work()  # the timer stops when the kernels are queued, not when they have run
        unsynced.append(time.perf_counter() - start)
        torch.cuda.synchronize()
    without = statistics.median(unsynced)
    numbers = (f"ten 4096x4096 matmuls: {without * 1e3:.3f} ms without synchronize (the launches only), "
               f"{synced * 1e3:.3f} ms with it (the work), medians of {repeats}")
    return ("passed: " if without < 0.5 * synced else "failed: no gap between the two timings; ") + numbers


def gpu_check(steps: int = 5, tolerance: float = 1e-4) -> dict[str, str]:
    """Lab 01 on cuda:0: `steps` SGD steps equal a CPU run within `tolerance`; pinned, non-blocking host-to-GPU copies
    measured against pageable ones; the missing-synchronize trap measured. Each check: "passed: ..." or "failed: ..."
    with its numbers; "skipped: no GPU" without CUDA."""
    if not torch.cuda.is_available():
        return {name: "skipped: no GPU" for name in GPU_CHECKS}
    checks = (lambda: _check_training(steps, tolerance), _check_pinned_copy, _check_synchronize)
    results = {}
    for name, run in zip(GPU_CHECKS, checks):
        try:
            results[name] = run()
        except Exception as exc:  # report every check, whatever one of them hits
            results[name] = f"failed: {type(exc).__name__}: {exc}"
    return results
