"""The resume exercise's small problem (lab 11): the same model, batches and step wherever it runs."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def one_thread():
    """torch on one intra-op thread inside the block, as many as before after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resume_problem(seed: int = 0):
    """A small seeded model and its SGD optimizer with momentum (its state must be saved too)."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def resume_batch(step: int):
    """The batch of training step `step` (0, 1, ...): the same for a given step in every run."""
    import torch

    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randn(16, 6, generator=gen), torch.randint(0, 3, (16,), generator=gen)


def resume_step(model, optimizer, batch) -> float:
    """One optimizer step on `batch`; its loss."""
    import torch.nn.functional as F

    x, y = batch
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.detach())
