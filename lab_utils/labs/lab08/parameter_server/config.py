"""One parameter-server run as data: PSConfig (mode, gradients, batch, learning rate, straggler, ...), checked before
any rank starts."""
from __future__ import annotations

from dataclasses import dataclass

MODEL = "cnn2d_2layer_fullconnected_2layer"
MODES = ("sync", "async")


@dataclass(frozen=True)
class PSConfig:
    """One parameter-server run: the server applies `gradients` worker gradients in all, then every rank stops."""

    mode: str = "sync"              # "sync": average one gradient of every worker per update; "async": apply each
    gradients: int = 240            # gradients the server applies (sync: a multiple of the number of workers)
    batch_size: int = 32            # samples per gradient (one worker's batch)
    lr: float = 0.1                 # learning rate of a synchronous update (global batch n_workers x batch_size)
    momentum: float = 0.9
    straggler_factor: float = 1.0   # the last worker's whole iteration (pull, compute, push) takes this many times as long
    damped: bool = False            # async: each gradient's learning rate divided by (1 + its staleness)
    snapshot_every: int = 16        # keep a copy of the weights every this many applied gradients
    warmup: int = 8                 # first gradients left out of the throughput
    seed: int = 0
    dataset: str = "digits"         # "digits" (8x8 handwritten digits) or "synthetic" (28x28 procedural images)
    timeout_s: float = 60.0         # the longest the server waits for a gradient
    label: str = ""

    def validate(self, n_workers: int) -> "PSConfig":
        """Raise, before any rank starts, on settings that cannot run; return self."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"a parameter server needs at least one worker (n_workers >= 1), got {n_workers!r}")
        if self.gradients < 1 or self.batch_size < 1 or self.snapshot_every < 1:
            raise ValueError(f"gradients, batch_size and snapshot_every must be positive, got {self.gradients}, "
                             f"{self.batch_size} and {self.snapshot_every}")
        if self.mode == "sync" and self.gradients % n_workers:
            raise ValueError(f"a synchronous update uses one gradient of every worker: gradients={self.gradients} "
                             f"must be a multiple of n_workers={n_workers}")
        if self.warmup < 0 or self.gradients - self.warmup < 2 * n_workers:
            raise ValueError(f"warmup={self.warmup} leaves too little to time: keep 0 <= warmup and gradients - "
                             f"warmup >= 2 x n_workers ({2 * n_workers})")
        if self.straggler_factor < 1:
            raise ValueError(f"straggler_factor={self.straggler_factor} must be >= 1 (1: no straggler)")
        if self.dataset not in ("digits", "synthetic"):
            raise ValueError(f"dataset must be 'digits' or 'synthetic', got {self.dataset!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")
        return self

    @property
    def name(self) -> str:
        """A short label: the mode, damping and straggler factor."""
        return self.label or f"{self.mode}{' damped' if self.damped else ''} x{self.straggler_factor:g}"
