"""Lab 07 on a GPU: activation counting, fp16 + GradScaler accumulation, FSDP2 vs DDP.

FSDP2 and DDP are lab 07's workers (lab_utils.lessons.lab07, generated from its notebook), through the bench's
strategy_jobs."""
from __future__ import annotations

import torch

from ... import spec
from ...memory import INPUT_SHAPE, SavedActivations, full_weights


# ---- the GPU check -----------------------------------------------------------------------------------------------------

def _accumulation_update(device, dtype, scaler_enabled: bool, seed: int = 0) -> torch.Tensor:
    """The weight change of one SGD step over 4 micro-batches under autocast(dtype) with a GradScaler."""
    import torch.nn.functional as F

    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), INPUT_SHAPE, seed=seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type, enabled=scaler_enabled)
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.rand(64, *INPUT_SHAPE, generator=gen), torch.randint(0, 10, (64,), generator=gen)
    before = full_weights(model)
    for xm, ym in zip(x.chunk(4), y.chunk(4)):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(xm.to(device)), ym.to(device)) / 4
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return full_weights(model) - before


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
    reference = _accumulation_update(torch.device("cpu"), None, False)
    update = _accumulation_update(device, torch.float16, True).cpu()
    error = float((update - reference).norm() / reference.norm())
    results["fp16 autocast + GradScaler, 4 micro-batches"] = _verdict(error < 0.05, f"update differs by {error:.1%}")
    from ..bench.memory import strategy_jobs

    jobs = strategy_jobs(("ddp", "fsdp"), spec.cnn2d_2layer_fullconnected_2layer(), world_size=2, steps=3,
                         batch_per_rank=8)
    ddp, fsdp = launch_jobs(jobs, 2, timeout=120)
    diff = max(float(abs(f["weights"] - d["weights"]).max()) for f, d in zip(fsdp, ddp))
    results["FSDP2 with an explicit mesh on a CUDA machine vs DDP"] = _verdict(diff <= 1e-4, f"max |diff| {diff:.1e}")
    return results
