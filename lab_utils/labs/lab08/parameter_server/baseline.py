"""The single-process baseline: SGD in one process on the global batches a synchronous run averages over."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .... import tensors
from .config import PSConfig
from .shards import build_model, dataset_split, global_batch


def single_process_weights(cfg: PSConfig, n_workers: int, updates: int) -> np.ndarray:
    """One process, `updates` SGD steps on the global batches a synchronous run averages over; flat weights."""
    split = dataset_split(cfg.dataset, cfg.seed)
    model = build_model(split, cfg.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    for step in range(updates):
        x, y = global_batch(split, n_workers, step, cfg.batch_size)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return tensors.flat_weights(model).numpy()
