"""Throughput: samples per second, from a duration or from the median step of a timed loop."""
from __future__ import annotations

import time

from .timing import after_warmup, median_after_warmup, spread, synchronize


def samples_per_second(samples: int, seconds: float) -> float:
    """Throughput; refuses a non-positive duration instead of dividing by it."""
    if seconds <= 0:
        raise ValueError(f"duration must be positive to compute a throughput, got {seconds!r} s")
    return samples / seconds


def throughput_from_step_times(batch_size: int, step_times, warmup: int) -> float:
    """Samples/s from per-step durations: drop the first `warmup` steps, use the median of the rest."""
    step_times = list(step_times)
    if len(step_times) <= warmup:
        raise ValueError(f"all {len(step_times)} step times are warm-up (warmup={warmup}); time more steps")
    return samples_per_second(batch_size, median_after_warmup(step_times, warmup))


class StepTimer:
    """Times a loop's steps: call tick() at the end of each; the median step, warm-up excluded, gives samples/s."""

    def __init__(self, device=None, warmup: int = 3):
        self.seconds: list[float]
        self.device, self.warmup, self.seconds = device, warmup, []
        self._last = time.perf_counter()

    def tick(self) -> None:
        synchronize(self.device)
        now = time.perf_counter()
        self.seconds.append(now - self._last)
        self._last = now

    def samples_per_s(self, batch_size: int) -> float | None:
        """batch_size over the median step time (the first `warmup` steps are not counted); None before any step."""
        return samples_per_second(batch_size, median_after_warmup(self.seconds, self.warmup)) if self.seconds else None

    def spread(self) -> float | None:
        """measure.spread of the counted steps."""
        return spread(after_warmup(self.seconds, self.warmup)) if self.seconds else None
