"""The single-device training loop: seeded, with a progress bar, evaluation and a history."""
from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .measure import samples_per_second, synchronize


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) random number generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_step(model, x, y, optimizer, loss_fn=F.cross_entropy) -> torch.Tensor:
    """One optimisation step on a batch; returns the (detached) loss."""
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


@torch.no_grad()
def evaluate(model, loader, device="cpu", loss_fn=F.cross_entropy) -> tuple[float, float]:
    """Mean loss and accuracy of `model` over `loader`."""
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        total_loss += loss_fn(logits, y, reduction="sum").item()
        correct += (logits.argmax(dim=1) == y).sum().item()
        count += len(y)
    model.train(was_training)
    return total_loss / count, correct / count


@dataclass
class EpochStats:
    """What one epoch measured."""

    epoch: int
    train_loss: float
    seconds: float
    samples_per_s: float
    test_loss: float | None = None
    test_accuracy: float | None = None


@dataclass
class History:
    """Per-epoch statistics of one training run."""

    epochs: list[EpochStats] = field(default_factory=list)

    @property
    def final_accuracy(self) -> float | None:
        return self.epochs[-1].test_accuracy if self.epochs else None

    @property
    def train_seconds(self) -> float:
        return sum(e.seconds for e in self.epochs)

    @property
    def samples_per_s(self) -> float:
        """Median epoch throughput, the first (warm-up) epoch excluded when there are several."""
        kept = self.epochs[1:] if len(self.epochs) > 1 else self.epochs
        return statistics.median(e.samples_per_s for e in kept)

    def table(self) -> str:
        """One line per epoch."""
        lines = [f"{'epoch':>5} {'train loss':>10} {'test loss':>9} {'test acc':>8} {'seconds':>8} {'samples/s':>10}"]
        for e in self.epochs:
            tl = f"{e.test_loss:9.4f}" if e.test_loss is not None else f"{'-':>9}"
            ta = f"{e.test_accuracy:8.2%}" if e.test_accuracy is not None else f"{'-':>8}"
            lines.append(f"{e.epoch:>5} {e.train_loss:10.4f} {tl} {ta} {e.seconds:8.3f} {e.samples_per_s:10.0f}")
        return "\n".join(lines)


def fit(model, train_loader, *, epochs: int, lr: float = 0.05, momentum: float = 0.9, device="cpu",
        test_loader=None, seed: int = 0, optimizer=None, step=train_step, progress: bool = True) -> History:
    """Train `model` for `epochs` with SGD (or `optimizer`), evaluating after each epoch; returns a History."""
    from tqdm.auto import tqdm

    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    seed_everything(seed)
    model.to(device).train()
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    history = History()
    bar = tqdm(total=epochs * len(train_loader), disable=not progress, desc="training", mininterval=0.5)
    for epoch in range(1, epochs + 1):
        running, samples = torch.zeros((), device=device), 0
        synchronize(device)
        start = time.perf_counter()
        for x, y in train_loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            running += step(model, x, y, optimizer) * len(y)
            samples += len(y)
            bar.update()
        synchronize(device)
        seconds = time.perf_counter() - start
        stats = EpochStats(epoch, running.item() / samples, seconds, samples_per_second(samples, seconds))
        if test_loader is not None:
            stats.test_loss, stats.test_accuracy = evaluate(model, test_loader, device)
            bar.set_postfix(test_acc=f"{stats.test_accuracy:.3f}")
        history.epochs.append(stats)
    bar.close()
    return history
