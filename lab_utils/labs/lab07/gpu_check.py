"""Lab 07 on a GPU: activation counting, fp16 + GradScaler accumulation, FSDP2 vs DDP.

The accumulation runs lab 07's amp_worker and accumulate; FSDP2 and DDP are lab 07's workers, through the bench's
strategy_jobs (all lab_utils.labs.lab07.lesson, generated from its notebook)."""
from __future__ import annotations

import torch

from ... import spec
from ...compare import max_abs_diff
from ...memory import INPUT_SHAPE, SavedActivations
from ...tensors import flat_weights
from . import lesson as lab07

_DIGITS = (1, 8, 8)  # amp_worker's images: lab 01's digits


# ---- the GPU check -----------------------------------------------------------------------------------------------------

def _accumulation_updates(dtypes, seed: int = 0) -> list[torch.Tensor]:
    """The weight change of one SGD step over 4 micro-batches, per autocast dtype of `dtypes` (None: float32): lab 07's
    amp_worker running its `accumulate` (autocast, GradScaler, DDP's no_sync) on one rank."""
    from ...launch import launch_jobs

    gen = torch.Generator().manual_seed(seed)
    x, y = torch.rand(64, *_DIGITS, generator=gen).numpy(), torch.randint(0, 10, (64,), generator=gen).numpy()
    before = flat_weights(spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), _DIGITS, seed=seed))
    jobs = [(lab07.amp_worker, (lab07.accumulate, lab07.AmpJob(x, y, steps=1, dtype=dtype, per_rank=16,
                                                               micro=[0, 1, 2, 3], lr=0.1, seed=seed)))
            for dtype in dtypes]
    return [torch.as_tensor(runs[0]["weights"]) - before for runs in launch_jobs(jobs, 1, timeout=120)]


def _gpu_activations(device) -> tuple[int, int, int]:
    """(saved bytes counted on the CPU, counted on the GPU, bytes the GPU allocator holds after the forward)."""
    import torch.nn.functional as F

    counts = []
    for where in (torch.device("cpu"), device):
        model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), INPUT_SHAPE, seed=0).to(where)
        x, y = torch.rand(64, *INPUT_SHAPE, device=where), torch.randint(0, 10, (64,), device=where)
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        with SavedActivations(model) as saved:
            loss = F.cross_entropy(model(x), y)
        torch.cuda.synchronize(device)
        counts.append((saved.bytes, torch.cuda.memory_allocated(device) - before))
        loss.backward()
    return counts[0][0], counts[1][0], counts[1][1]


def _verdict(ok: bool, reason: str) -> str:
    return "passed" if ok else f"failed: {reason}"


def gpu_check() -> dict[str, str]:
    """Lab 07's core on a GPU, against the CPU: activation counting, fp16 + GradScaler accumulation, FSDP2 vs DDP."""
    if not torch.cuda.is_available():
        return {"memory": "skipped: no GPU"}
    from ...launch import launch_jobs

    device = torch.device("cuda:0")
    results = {}
    cpu_bytes, gpu_bytes, allocated = _gpu_activations(device)
    results["saved activations: GPU count equals CPU count"] = _verdict(
        gpu_bytes == cpu_bytes, f"{gpu_bytes} bytes on the GPU, {cpu_bytes} on the CPU")
    results["saved activations: the allocator holds them"] = _verdict(
        gpu_bytes <= allocated <= 1.1 * gpu_bytes + 2**20, f"counted {gpu_bytes} bytes, allocator grew by {allocated}")
    reference, update = _accumulation_updates((None, torch.float16))
    error = float((update - reference).norm() / reference.norm())
    results["fp16 autocast + GradScaler, 4 micro-batches"] = _verdict(error < 0.05, f"update differs by {error:.1%}")
    from .bench import strategy_jobs

    jobs = strategy_jobs(("ddp", "fsdp"), spec.cnn2d_2layer_fullconnected_2layer(), world_size=2, steps=3,
                         batch_per_rank=8)
    ddp, fsdp = launch_jobs(jobs, 2, timeout=120)
    diff = max(max_abs_diff(f["weights"], d["weights"]) for f, d in zip(fsdp, ddp))
    results["FSDP2 with an explicit mesh on a CUDA machine vs DDP"] = _verdict(diff <= 1e-4, f"max |diff| {diff:.1e}")
    return results
