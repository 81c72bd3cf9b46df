"""The straggler: a worker whose whole iteration is stretched by a factor, by sleeping (no core held)."""
from __future__ import annotations

import statistics
import time


def straggle(busy_s: float, factor: float) -> float:
    """Sleep (factor - 1) x busy_s, so that busy_s of work takes `factor` times as long; returns the sleep (s)."""
    extra = max(0.0, (factor - 1.0) * busy_s)
    if extra:
        # a sleep holds no core: wall time only, like a worker waiting on a slow disk or sharing its machine
        time.sleep(extra)
    return extra


class Straggler:
    """Stretches a worker's whole iteration (pull, compute, push) by `factor`; call before_push before each push: it
    times the iteration itself, from one call to the next."""

    def __init__(self, factor: float):
        self.factor = float(factor)
        self.busy: list[float] = []
        self.slept: list[float] = []
        self._mark: float | None = None

    def before_push(self, first_estimate_s: float) -> float:
        """Sleep (factor - 1) x the median busy iteration so far (pull, compute, push, timed between calls);
        `first_estimate_s` (the compute time) stands in for it until one iteration has been timed."""
        now = time.perf_counter()
        if self._mark is not None:
            # busy: the time since the previous call less its sleep (the push, the pull with its wait, the compute)
            self.busy.append(now - self._mark - self.slept[-1])
        base = statistics.median(self.busy) if self.busy else first_estimate_s  # until an iteration is timed
        self.slept.append(straggle(base, self.factor) if self.factor > 1 else 0.0)
        self._mark = now
        return self.slept[-1]

    @property
    def busy_ms(self) -> float:
        """Measured: the median busy iteration (pull with its wait, compute, push) in ms; nan before one is timed."""
        return 1e3 * statistics.median(self.busy) if self.busy else float("nan")

    @property
    def sleep_basis_ms(self) -> float:
        """Measured: the median busy time its sleeps were set from (each sleep / (factor - 1)), in ms; nan without
        one: a running median, so it differs from busy_ms where early iterations ran longer or shorter."""
        sleeps = self.slept[1:]  # the first sleep stood on the first compute time, and slowdown leaves it out too
        if self.factor <= 1 or not sleeps:
            return float("nan")
        return 1e3 * statistics.median(sleeps) / (self.factor - 1)

    @property
    def slowdown(self) -> float:
        """Measured: an iteration's median wall time (sleep included) over its median busy time (1.0 unknown)."""
        pairs = list(zip(self.busy, self.slept[1:]))  # busy[i] ran between sleeps i and i + 1
        if not pairs:
            return 1.0
        return statistics.median(b + s for b, s in pairs) / statistics.median(b for b, _ in pairs)
