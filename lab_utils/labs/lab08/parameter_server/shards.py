"""What every rank of lab 08 builds for itself: the dataset's split, each worker's shard and its k-th batch, the global
batch one process sees, and the course CNN with its seeded initial weights."""
from __future__ import annotations

import functools

import numpy as np
import torch

from .... import data, spec, tensors
from .config import MODEL


@functools.lru_cache(maxsize=4)
def dataset_split(dataset: str = "digits", seed: int = 0) -> data.Split:
    """The train/test split every rank builds for itself (the same in every process; read once per process)."""
    if dataset == "digits":
        return data.load_digits_split()
    return data.synthetic_split(4096, 512, image_shape=(1, 28, 28), seed=seed)


def input_shape(split: data.Split) -> tuple[int, int, int]:
    """(C, H, W) of the split's images."""
    channels, height, width = (int(s) for s in split.x_train.shape[1:])
    return channels, height, width


def worker_batch(split: data.Split, worker: int, n_workers: int, step: int, batch_size: int):
    """(x, y) of worker `worker`'s `step`-th batch from its rows worker-1, worker-1+n_workers, ... (wraps around)."""
    shard = np.arange(worker - 1, len(split.x_train), n_workers)
    rows = shard[(step * batch_size + np.arange(batch_size)) % len(shard)]
    return torch.from_numpy(split.x_train[rows]), torch.from_numpy(split.y_train[rows])


def global_batch(split: data.Split, n_workers: int, step: int, batch_size: int):
    """The `step`-th batch of every worker, in rank order: what one process sees for one synchronous update."""
    parts = [worker_batch(split, w, n_workers, step, batch_size) for w in range(1, n_workers + 1)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def build_model(split: data.Split, seed: int | None = None):
    """The course CNN for the split's images (seeded weights when `seed` is given)."""
    return spec.build_torch(spec.preset(MODEL), input_shape(split), seed=seed)


def initial_weights(split: data.Split, seed: int) -> torch.Tensor:
    """The CNN's seeded initial weights as one flat vector (the server's copy of the model)."""
    return tensors.flat_weights(build_model(split, seed))
