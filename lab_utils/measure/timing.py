"""Timers that warm up, synchronize and take medians; the one spread; the alternating order of repeats."""
from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from typing import Iterable, TypeVar

from .. import conditions

T = TypeVar("T")


def synchronize(device=None) -> None:
    """Wait for queued GPU work on `device` (no-op on CPU), so a timer measures work, not launches."""
    import torch

    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def intra_op_threads(n: int | None):
    """Run the block with `n` intra-op threads in this thread (None: leave as is), then restore."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def spread(values) -> float:
    """How far repeats scatter: (max - min) / median, a fraction (0.25 is 25 %); 0.0 for < 2 values or median 0."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    return (max(values) - min(values)) / abs(middle) if middle else 0.0


def numbered_rounds(items: Iterable[T], rounds: int) -> list[tuple[int, T]]:
    """(round, item) for `rounds` rounds of `items`, every other one reversed (A B, B A, A B, ...) so slow drift hits
    all alike."""
    listed = list(items)
    return [(r, item) for r in range(rounds) for item in (listed if r % 2 == 0 else listed[::-1])]


def alternating_rounds(items: Iterable[T], rounds: int) -> list[T]:
    """The items of numbered_rounds, in its order: A B, B A, A B, ..."""
    return [item for _, item in numbered_rounds(items, rounds)]


def after_warmup(times, warmup: int) -> list[float]:
    """The repeats a median counts: all but the first `warmup`, or all of them when the warm-up would leave none."""
    times = list(times)
    return times[warmup:] or times


def median_after_warmup(times, warmup: int) -> float:
    """The median of after_warmup(times, warmup); a ValueError when there are no times at all."""
    return statistics.median(after_warmup(times, warmup))


@dataclass(frozen=True)
class Timing:
    """Seconds of each timed repeat (warm-up runs excluded) and summary statistics."""

    times: tuple[float, ...]
    warmup: int

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """measure.spread of the repeats: how noisy they were."""
        return spread(self.times)

    def __str__(self) -> str:
        return (f"median {self.median * 1e3:.3f} ms over {len(self.times)} repeats "
                f"(min {min(self.times) * 1e3:.3f}, max {max(self.times) * 1e3:.3f}; {self.warmup} warm-up run(s) excluded)")


def time_it(fn, *, warmup: int = 2, repeats: int = 5, device=None) -> Timing:
    """Call fn() `warmup` times untimed, then `repeats` times timed, synchronizing `device` around each."""
    return time_interleaved({"fn": fn}, warmup=warmup, repeats=repeats, device=device)["fn"]


def time_interleaved(fns: dict, *, warmup: int = 1, repeats: int = 5, device=None, before: dict | None = None) -> dict:
    """{name: Timing} of `fns` run in alternating rounds; `before[name]()` runs untimed right before each run."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    before = before or {}
    names = list(fns)
    times: dict[str, list[float]]
    times = {name: [] for name in names}
    with conditions.measuring():
        _run_interleaved(fns, names, times, warmup, repeats, device, before)
    return {name: Timing(tuple(times[name]), warmup) for name in names}


def _run_interleaved(fns, names, times, warmup, repeats, device, before) -> None:
    for round_, name in numbered_rounds(names, warmup + repeats):
        if name in before:
            before[name]()
        synchronize(device)
        start = time.perf_counter()
        fns[name]()
        synchronize(device)
        if round_ >= warmup:
            times[name].append(time.perf_counter() - start)
