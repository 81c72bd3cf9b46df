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
    cpu_seconds: dict = field(default_factory=dict)  # (device row, phase) -> its thread's CPU seconds (the threads)

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


PARALLEL_PHASES = ("forward", "backward")
SAME_PASS = 0.05  # replicas' passes within this share of each other took about the same time
NO_WAIT_MS = 0.05  # device 0's wait for the slower replica below this (ms): no wait worth a line


def replica_lines(reports) -> list[str]:
    """Under the traced step: device 0's wait for the slower replica after each parallel phase (the white gap after
    its bar, which is no unaccounted time), and where one replica's pass took longer, whether its thread used more CPU
    (it computed longer) or not (it waited: for a core, or for the GIL); medians over `reports`."""
    rows = list(dict.fromkeys(i.row for r in reports for i in r.intervals))
    if len(rows) < 2 or not reports:
        return []
    med = lambda values: statistics.median(values)  # noqa: E731
    wall = {(row, ph): med([r.phase_seconds().get(row, {}).get(ph, 0.0) for r in reports]) * 1e3
            for row in rows for ph in PARALLEL_PHASES}
    cpu = {key: med([r.cpu_seconds.get(key, 0.0) for r in reports]) * 1e3 for key in wall}
    waits = {ph: med([_wait_after(r, rows[0], ph) for r in reports]) * 1e3 for ph in PARALLEL_PHASES}
    over = f"medians over {len(reports)} steps" if len(reports) > 1 else "one step"
    lines = [f"device 0 waited for the slower replica {waits['forward']:.2f} ms after its forward and "
             f"{waits['backward']:.2f} ms after its backward ({over}): the white gap after its bar is that wait"
             if max(waits.values()) >= NO_WAIT_MS else
             f"device 0 waited for no slower replica ({over}): its forward and backward ended last or level"]
    for ph in PARALLEL_PHASES:
        slow, fast = max(rows, key=lambda row: wall[(row, ph)]), min(rows, key=lambda row: wall[(row, ph)])
        if wall[(slow, ph)] <= (1 + SAME_PASS) * wall[(fast, ph)] or not any(cpu.values()):
            continue
        extra, extra_cpu = wall[(slow, ph)] - wall[(fast, ph)], cpu[(slow, ph)] - cpu[(fast, ph)]
        why = ("it computed longer: the same work at a lower speed (its core, cache or memory)" if extra_cpu > extra / 2
               else "it computed about as long and waited the rest: for a core, or for the GIL")
        lines.append(f"{slow.split(' (')[0]}'s {ph} took {wall[(slow, ph)]:.2f} ms, {fast.split(' (')[0]}'s "
                     f"{wall[(fast, ph)]:.2f} ms; their threads' CPU time {cpu[(slow, ph)]:.2f} vs "
                     f"{cpu[(fast, ph)]:.2f} ms: {why}")
    return lines


def _wait_after(report, row: str, phase: str) -> float:
    """Seconds between `row`'s end of `phase` and the last device's end of it (0 where `row` ended last)."""
    ends = [i.end_s for i in report.intervals if i.kind == phase]
    own = [i.end_s for i in report.intervals if i.kind == phase and i.row == row]
    return max(ends) - max(own) if ends and own else 0.0
