"""Ways of running the same training side by side (how many ranks, how many threads each), measured in alternating
rounds: what the benchmarks of labs 03 (DDP) and 05 (MultiWorkerMirroredStrategy) compare."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Iterable

from . import measure


@dataclass(frozen=True)
class Setup:
    """One way of running the same training: how many ranks, and how many threads each."""

    name: str
    ranks: int
    threads: int


@dataclass
class SetupFigures:
    """What one setup measured over the interleaved repeats."""

    setup: Setup
    samples_per_s: list[float] = field(default_factory=list)
    allreduce_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return statistics.median(self.samples_per_s)

    @property
    def spread(self) -> float:
        return measure.spread(self.samples_per_s)

    def as_json(self, global_batch: int) -> dict:
        return {"name": self.setup.name, "ranks": self.setup.ranks, "threads": self.setup.threads,
                "samples_per_s": round(self.rate, 1), "spread": round(self.spread, 3),
                "step_ms": round(1e3 * global_batch / self.rate, 2),
                "allreduce_ms": round(statistics.median(self.allreduce_ms), 2) if self.allreduce_ms else None}


def in_alternating_rounds(setups: Iterable[Setup], repeats: int,
                          run: Callable[[Setup, SetupFigures], None]) -> list[SetupFigures]:
    """run(setup, figures) for every setup, `repeats` rounds in alternating order."""
    figures = [SetupFigures(s) for s in setups]
    for f in measure.alternating_rounds(figures, repeats):
        run(f.setup, f)
    return figures
