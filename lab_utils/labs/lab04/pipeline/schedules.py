"""Pipeline schedules as data: which stage runs which micro-batch's forward or backward, in what order (naive, GPipe,
1F1B); checked, simulated on an ideal timeline, and measured by makespan and bubble."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....plots import Interval


@dataclass(frozen=True)
class Op:
    """One operation of a stage: the forward ("F") or backward ("B") pass of one micro-batch."""

    kind: str
    micro: int

    def __str__(self) -> str:
        return f"{self.kind}{self.micro}"


@dataclass(frozen=True)
class Schedule:
    """For each of `stages` stages, the ordered operations over `micro_batches` micro-batches."""

    name: str
    stages: int
    micro_batches: int
    ops: tuple[tuple[Op, ...], ...]

    @property
    def theoretical_bubble(self) -> float:
        """(K - 1) / (M + K - 1): the idle share of K stages over M micro-batches with equal stage times."""
        return (self.stages - 1) / (self.micro_batches + self.stages - 1)

    def stage_ops(self, stage: int) -> tuple[Op, ...]:
        """The ops of one stage, in order."""
        return self.ops[stage]

    def describe(self) -> str:
        return "\n".join(f"stage {s}: " + " ".join(str(op) for op in ops) for s, ops in enumerate(self.ops))


def _check_sizes(stages: int, micro_batches: int) -> None:
    for name, value in (("stages", stages), ("micro_batches", micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def gpipe(stages: int, micro_batches: int) -> Schedule:
    """GPipe: every stage runs all forwards, then all backwards."""
    _check_sizes(stages, micro_batches)
    ops = tuple(tuple(Op("F", m) for m in range(micro_batches)) + tuple(Op("B", m) for m in range(micro_batches))
                for _ in range(stages))
    return Schedule("gpipe", stages, micro_batches, ops)


def naive(stages: int, micro_batches: int = 1) -> Schedule:
    """The plain layer split: the whole batch as one micro-batch, forward through every stage, then backward."""
    if micro_batches != 1:
        raise ValueError(f"the naive split has no micro-batches (micro_batches=1), got {micro_batches}")
    return Schedule("naive", stages, 1, gpipe(stages, 1).ops)


def one_f_one_b(stages: int, micro_batches: int) -> Schedule:
    """1F1B: stage s runs K - s - 1 warm-up forwards, then alternates one forward and one backward, then drains."""
    _check_sizes(stages, micro_batches)
    all_ops = []
    for s in range(stages):
        warmup = min(stages - s - 1, micro_batches)
        ops = [Op("F", m) for m in range(warmup)]
        for i in range(micro_batches - warmup):
            ops += [Op("F", warmup + i), Op("B", i)]
        ops += [Op("B", m) for m in range(micro_batches - warmup, micro_batches)]
        all_ops.append(tuple(ops))
    return Schedule("1f1b", stages, micro_batches, tuple(all_ops))


SCHEDULES = {"naive": naive, "gpipe": gpipe, "1f1b": one_f_one_b}


def make_schedule(name: str, stages: int, micro_batches: int) -> Schedule:
    """A schedule by name: 'naive', 'gpipe' or '1f1b'."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {sorted(SCHEDULES)}")
    return SCHEDULES[name](stages, micro_batches)


def max_in_flight(schedule: Schedule) -> list[int]:
    """Per stage, the most micro-batches whose forward ran and whose backward has not (activations held)."""
    peaks = []
    for ops in schedule.ops:
        live = peak = 0
        for op in ops:
            live += 1 if op.kind == "F" else -1
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


def simulate(schedule: Schedule, forward_s=1.0, backward_s=2.0, op_seconds=None) -> list[Interval]:
    """Ideal timeline, no transfer cost; forward_s/backward_s: scalar or per stage; op_seconds: each op's own duration,
    {(stage, "F" or "B", micro-batch): seconds}, in their place. Raises on bad order, deadlock."""
    check_schedule(schedule, deadlock=False)
    k = schedule.stages
    fwd: list[float] = np.broadcast_to(np.asarray(forward_s, dtype=float), (k,)).tolist()
    bwd: list[float] = np.broadcast_to(np.asarray(backward_s, dtype=float), (k,)).tolist()
    done: dict[tuple[int, str, int], float] = {}
    free = [0.0] * k
    position = [0] * k
    intervals = []
    while any(position[s] < len(schedule.ops[s]) for s in range(k)):
        progressed = False
        for s in range(k):
            if position[s] == len(schedule.ops[s]):
                continue
            op = schedule.ops[s][position[s]]
            if op.kind == "F":
                needs = [(s - 1, "F", op.micro)] if s > 0 else []
            else:
                needs = [(s, "F", op.micro)] + ([(s + 1, "B", op.micro)] if s < k - 1 else [])
            if any(n not in done for n in needs):
                continue
            start = max([free[s]] + [done[n] for n in needs])
            end = start + (op_seconds[(s, op.kind, op.micro)] if op_seconds is not None else
                           fwd[s] if op.kind == "F" else bwd[s])
            intervals.append(Interval(f"stage {s}", "forward" if op.kind == "F" else "backward", start, end,
                                      str(op.micro)))
            done[(s, op.kind, op.micro)] = end
            free[s], position[s], progressed = end, position[s] + 1, True
        if not progressed:
            stuck = {f"stage {s}": str(schedule.ops[s][position[s]]) for s in range(k) if position[s] < len(schedule.ops[s])}
            raise ValueError(f"schedule {schedule.name!r} deadlocks: every stage waits for another ({stuck})")
    return intervals


def check_schedule(schedule: Schedule, *, deadlock: bool = True) -> None:
    """Raise ValueError unless every stage runs each micro-batch's forward, then its backward, exactly once."""
    if len(schedule.ops) != schedule.stages:
        raise ValueError(f"schedule {schedule.name!r} lists {len(schedule.ops)} stages, expected {schedule.stages}")
    expected = sorted((kind, m) for kind in "BF" for m in range(schedule.micro_batches))
    for s, ops in enumerate(schedule.ops):
        if sorted((op.kind, op.micro) for op in ops) != expected:
            raise ValueError(f"stage {s} must run F and B of each micro-batch 0..{schedule.micro_batches - 1} "
                             f"exactly once; it runs {' '.join(map(str, ops))}")
        seen = set()
        for op in ops:
            if op.kind == "B" and op.micro not in seen:
                raise ValueError(f"stage {s} runs B{op.micro} before F{op.micro}: a backward needs its forward")
            seen.add(op.micro)
    for s in range(schedule.stages - 1):  # send/recv between neighbours is first in, first out
        for kind, what in (("F", "activations"), ("B", "gradients")):
            here = [op.micro for op in schedule.ops[s] if op.kind == kind]
            there = [op.micro for op in schedule.ops[s + 1] if op.kind == kind]
            if here != there:
                raise ValueError(f"stages {s} and {s + 1} run their {kind} ops in different micro-batch orders "
                                 f"({here} vs {there}): {what} arrive in the order they were sent")
    if deadlock:
        simulate(schedule)


def makespan(intervals) -> float:
    """From the first start to the last end."""
    intervals = list(intervals)
    return max(i.end_s for i in intervals) - min(i.start_s for i in intervals)


def bubble_fraction(intervals, stages: int) -> float:
    """Idle time over stages x makespan."""
    intervals = list(intervals)
    busy = sum(i.seconds for i in intervals)
    return 1.0 - busy / (stages * makespan(intervals))
