"""Hogwild on launched ranks: objects handed to every rank in shared memory, what the watching rank records, and one
run's ranks' values as a server-like result."""
from __future__ import annotations

import time

import numpy as np
import torch

from .... import tensors
from .config import PSConfig

_SHARED: dict = {}


class ShareWithRanks:
    """A `prepare` for lab_utils.launch that hands objects in shared memory to every rank: `shared(name)` there."""

    def __init__(self, **objects):
        for name, obj in objects.items():
            tensors = list(obj.parameters()) if isinstance(obj, torch.nn.Module) else [obj]
            if not all(isinstance(t, torch.Tensor) and (t.is_shared() or t.is_cuda) for t in tensors):
                raise ValueError(f"{name} is not in shared memory: call {name}.share_memory() (a module) or "
                                 f"{name}.share_memory_() (a tensor) first, or every rank gets a copy of its own")
        self.objects = objects

    def __call__(self) -> None:
        # launch pickles `prepare` like a process argument: a shared tensor arrives as a handle to the same memory
        _SHARED.update(self.objects)


def shared(name: str):
    """In a rank started with prepare=ShareWithRanks(name=...): that object, in the memory every rank shares."""
    try:
        return _SHARED[name]
    except KeyError:
        raise RuntimeError(f"nothing called {name!r} was shared with this rank: launch with "
                           f"prepare=parameter_server.ShareWithRanks({name}=...)") from None


def watch(model, progress, cfg: PSConfig, start: float, poll_s: float = 0.001) -> dict:
    """Hogwild rank 0: poll `progress`, snapshot the weights every cfg.snapshot_every gradients until all are done."""
    total = (cfg.gradients // progress.numel()) * progress.numel()
    snapshots, warm, due = [], (0, 0.0) if cfg.warmup == 0 else None, cfg.snapshot_every
    while True:
        done, now = int(progress.sum()), time.perf_counter() - start
        if warm is None and done >= cfg.warmup:
            warm = (done, now)
        if done >= due:
            snapshots.append((done * cfg.batch_size, now, tensors.flat_weights(model)))
            due = (done // cfg.snapshot_every + 1) * cfg.snapshot_every
        if done >= total:
            return {"warm": warm, "total": total, "snapshots": snapshots}
        time.sleep(poll_s)


def hogwild_result(values: list, cfg: PSConfig) -> dict:
    """One Hogwild run's ranks' values (rank 0 watched, the others trained) as a server-like result."""
    watcher, trainers = values[0], values[1:]
    end = max(t["seconds"] for t in trainers)
    (warm_done, warm_s), snapshots = watcher["warm"], watcher["snapshots"]
    if warm_done >= watcher["total"]:  # the run ended before the watcher saw the warm-up end: time all of it
        warm_done, warm_s = 0, 0.0
    return {"config": cfg, "weights": watcher["weights"], "seconds": end,
            "samples_per_s": (watcher["total"] - warm_done) * cfg.batch_size / (end - warm_s),
            "snapshot_samples": [s for s, _, _ in snapshots], "snapshot_seconds": [t for _, t, _ in snapshots],
            "snapshots": np.stack([w for *_, w in snapshots]) if snapshots else np.empty(0)}
