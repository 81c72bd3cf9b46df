"""What a parameter server measures while it runs: each applied gradient's worker, staleness and time, weight
snapshots and throughput after the warm-up (RunRecord)."""
from __future__ import annotations

import time

import torch

from .config import PSConfig


class RunRecord:
    """A server's measurements: each applied gradient's worker, staleness and time, weight snapshots, throughput."""

    def __init__(self, cfg: PSConfig):
        self.cfg = cfg
        self.start = time.perf_counter()
        self.log: list[tuple[int, int, int, float]] = []  # (worker, version it was computed on, staleness, seconds since the start)
        self.snapshots: list[tuple[int, float, torch.Tensor]] = []  # (samples applied, seconds, flat weights)
        self.warm: tuple[int, float] | None = (0, 0.0) if cfg.warmup == 0 else None  # (gradients applied, seconds) when the warm-up ended

    @property
    def count(self) -> int:
        """Gradients applied so far."""
        return len(self.log)

    def applied(self, worker: int, computed_on: int, staleness: int, weights: torch.Tensor) -> None:
        """Note one applied gradient (after the update, so a snapshot holds the new weights)."""
        now = time.perf_counter() - self.start
        self.log.append((worker, computed_on, staleness, now))
        if self.count % self.cfg.snapshot_every == 0:
            self.snapshots.append((self.count * self.cfg.batch_size, now, weights.detach().clone()))
        if self.warm is None and self.count >= self.cfg.warmup:
            self.warm = (self.count, now)

    def result(self, weights: torch.Tensor) -> dict:
        """Plain results: final weights, samples/s after the warm-up, the log and the snapshots."""
        if self.warm is None:
            raise RuntimeError(f"the run applied {self.count} gradients, no more than its warm-up of {self.cfg.warmup}: "
                               "give it more steps or a shorter warm-up")
        end = self.log[-1][3]
        return {"weights": weights.detach().clone(), "seconds": end,
                "samples_per_s": (self.count - self.warm[0]) * self.cfg.batch_size / (end - self.warm[1]),
                "order": [w for w, *_ in self.log], "computed_on": [v for _, v, _, _ in self.log],
                "staleness": [s for _, _, s, _ in self.log], "applied_seconds": [t for *_, t in self.log],
                "snapshot_samples": [s for s, _, _ in self.snapshots],
                "snapshot_seconds": [t for _, t, _ in self.snapshots],
                "snapshots": torch.stack([w for *_, w in self.snapshots]) if self.snapshots else torch.empty(0)}


def round_seconds(result: dict, n_workers: int) -> list[float]:
    """A synchronous run's rounds, each from one update (the run's start for the first) to the next: every worker's
    compute for an update lies inside its round, so a round's median is never below a worker's median compute."""
    if any(s != 0 for s in result["staleness"]) or len(result["staleness"]) % n_workers:
        raise ValueError(f"round_seconds reads synchronous runs (staleness 0, a multiple of {n_workers} gradients): "
                         "an asynchronous run has no rounds")
    ends = result["applied_seconds"][n_workers - 1::n_workers]  # an update applies n gradients at once: its last one
    return [end - start for start, end in zip([0.0] + ends[:-1], ends)]
