"""DataParallel's phases, one function each (the exercises re-implement scatter, gather and reduce_gradients), the
bytes they move, and a step's report of its phases."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from ....plots import Interval
from ....tensors import tensor_bytes

COORDINATOR_PHASES = ("scatter", "replicate", "gather", "loss", "reduce", "update")
PHASES = ("scatter", "replicate", "forward", "gather", "loss", "backward", "reduce", "update")


def split_sizes(n: int, parts: int) -> list[int]:
    """Sizes of `parts` chunks of n samples, differing by one at most: the first n % parts get one more."""
    if parts < 1:
        raise ValueError(f"need at least one device, got {parts}")
    if n < parts:
        raise ValueError(f"a batch of {n} sample(s) cannot be split across {parts} devices: every device needs at "
                         f"least one sample. Use a batch of at least {parts}, or fewer devices.")
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def scatter(batch: torch.Tensor, devices) -> list[torch.Tensor]:
    """Split `batch` along dim 0 into consecutive chunks (sizes from split_sizes), chunk i on devices[i]."""
    chunks = torch.split(batch, split_sizes(len(batch), len(devices)))
    return [chunk.to(device, non_blocking=True) for chunk, device in zip(chunks, devices)]


def gather(outputs, device) -> torch.Tensor:
    """Concatenate the replicas' outputs, in device order, on `device`."""
    return torch.cat([out.to(device) for out in outputs])


@torch.no_grad()
def reduce_gradients(model: nn.Module, replicas) -> None:
    """Add every replica's gradients into `model`'s (a sum: the loss was a mean over the whole gathered batch)."""
    for params in zip(model.parameters(), *(r.parameters() for r in replicas)):
        target, others = params[0], [p.grad for p in params[1:] if p.grad is not None]
        if not others:
            continue
        total = torch.stack([g.to(target.device) for g in others]).sum(0)
        if target.grad is None:
            target.grad = total
        else:
            target.grad.add_(total)


def transfer_bytes(model: nn.Module, input_chunks, output_chunks) -> dict:
    """Bytes each device sends and receives in one step (device 0 is the source and the destination of everything)."""
    weights = tensor_bytes(list(model.parameters()) + list(model.buffers()))
    grads = tensor_bytes(p for p in model.parameters() if p.requires_grad)
    moved = {0: {"sent": 0, "received": 0}}
    for i, (x, out) in enumerate(zip(input_chunks, output_chunks)):
        if i == 0:
            continue
        # to device i: its inputs, the weights, the gradient of its outputs; back to device 0: outputs, gradients
        to_i = tensor_bytes([x]) + weights + tensor_bytes([out])
        to_0 = tensor_bytes([out]) + grads
        moved[i] = {"sent": to_0, "received": to_i}
        moved[0]["sent"] += to_i
        moved[0]["received"] += to_0
    return moved


@dataclass
class StepReport:
    """What one data-parallel step measured."""

    loss: float
    batch_size: int
    chunk_sizes: list[int]
    intervals: list[Interval]
    bytes_moved: dict
    peak_memory_bytes: dict | None = None  # per device, only when the replicas are on distinct GPUs
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(i.end_s for i in self.intervals) - min(i.start_s for i in self.intervals)

    def device0_alone_seconds(self) -> float:
        """Seconds device 0 worked while the others waited (scatter, replicate, gather, loss, reduce, update)."""
        return sum(i.seconds for i in self.intervals if i.kind in COORDINATOR_PHASES and i.row == self.intervals[0].row)

    def phase_seconds(self) -> dict:
        """seconds[device row][phase] for this step."""
        table: dict
        table = {}
        for i in self.intervals:
            table.setdefault(i.row, {}).setdefault(i.kind, 0.0)
            table[i.row][i.kind] += i.seconds
        return table


def unaccounted_seconds(report) -> float:
    """One step's time that no phase accounts for: its span minus its slowest forward, its slowest backward and
    device 0's serial phases, all from this one step (not medians of different steps)."""
    table = report.phase_seconds()
    forward = max((t.get("forward", 0.0) for t in table.values()), default=0.0)
    backward = max((t.get("backward", 0.0) for t in table.values()), default=0.0)
    return report.seconds - forward - backward - report.device0_alone_seconds()


def median_phase_seconds(reports) -> dict:
    """Per device, the median over steps of each phase's seconds."""
    tables = [r.phase_seconds() for r in reports]
    rows = list(dict.fromkeys(row for t in tables for row in t))
    return {row: {phase: statistics.median(t.get(row, {}).get(phase, 0.0) for t in tables)
                  for phase in PHASES if any(phase in t.get(row, {}) for t in tables)} for row in rows}
