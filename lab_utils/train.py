"""The single-device training loop (seeded, timed step by step, with a progress bar), evaluation, a profiler without
its log noise. (Lab 01's GPU check: lab_utils/labs/lab01/gpu_check.py.)"""
from __future__ import annotations

import contextlib
import random
import statistics
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from . import measure
from .measure import samples_per_second, synchronize

WARMUP_STEPS = 3  # optimizer steps at the start of a run that the training rate leaves out


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
    """What one epoch measured; epoch_samples_per_s is the whole epoch's rate (loading, steps, no evaluation)."""

    epoch: int
    train_loss: float
    seconds: float
    epoch_samples_per_s: float
    test_loss: float | None = None
    test_accuracy: float | None = None


@dataclass
class History:
    """One training run: per-epoch statistics and every full-batch optimizer step's duration, batch fetch included."""

    epochs: list[EpochStats] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    steps_per_epoch: list[int] = field(default_factory=list)  # how many of step_seconds each epoch added
    batch_size: int = 0
    warmup_steps: int = WARMUP_STEPS

    @property
    def final_accuracy(self) -> float | None:
        return self.epochs[-1].test_accuracy if self.epochs else None

    @property
    def train_seconds(self) -> float:
        return sum(e.seconds for e in self.epochs)

    @property
    def samples_per_s(self) -> float:
        """The course's training rate: batch size over the median optimizer step, the first warm-up steps excluded."""
        return measure.throughput_from_step_times(self.batch_size, self.step_seconds, self.warmup_steps)

    @property
    def timed_steps(self) -> int:
        """Steps behind samples_per_s (warm-up excluded)."""
        return max(len(self.step_seconds) - self.warmup_steps, 0)

    def epoch_step_medians(self) -> list[float]:
        """Each epoch's median step duration (warm-up steps excluded): one repeat of the same work per epoch."""
        medians, start = [], 0
        for count in self.steps_per_epoch:
            kept = self.step_seconds[max(start, self.warmup_steps):start + count]
            medians += [statistics.median(kept)] if kept else []
            start += count
        return medians

    @property
    def spread(self) -> float:
        """How much the rate moved between epochs: spread of their median steps (a fraction; 0 with one epoch)."""
        medians = self.epoch_step_medians()  # medians: single slow steps, which any busy machine has, do not count
        return measure.spread(medians)

    @property
    def epoch_samples_per_s(self) -> float:
        """Median whole-epoch samples/s, the first epoch excluded when there are several (not the step rate)."""
        return measure.median_after_warmup([e.epoch_samples_per_s for e in self.epochs], 1)

    def table(self) -> str:
        """One line per epoch."""
        lines = [f"{'epoch':>5} {'train loss':>10} {'test loss':>9} {'test acc':>8} {'seconds':>8} {'epoch samples/s':>16}"]
        for e in self.epochs:
            tl = f"{e.test_loss:9.4f}" if e.test_loss is not None else f"{'-':>9}"
            ta = f"{e.test_accuracy:8.2%}" if e.test_accuracy is not None else f"{'-':>8}"
            lines.append(f"{e.epoch:>5} {e.train_loss:10.4f} {tl} {ta} {e.seconds:8.3f} {e.epoch_samples_per_s:16.0f}")
        return "\n".join(lines)


def _in_jupyter_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress_bar(total: int, desc: str, *, disable: bool = False):
    """A tqdm bar: tqdm's widget in a Jupyter kernel with ipywidgets, else a text bar on stdout."""
    from tqdm.std import tqdm as text_bar

    if disable or not _in_jupyter_kernel():
        return text_bar(total=total, desc=desc, disable=disable, file=sys.stdout, mininterval=0.5)
    try:
        from tqdm.notebook import IProgress
        from tqdm.notebook import tqdm as widget_bar
    except ImportError:
        IProgress = None
    if IProgress is None:  # ipywidgets missing: the text bar, finished on its last line
        return text_bar(total=total, desc=desc, file=sys.stdout, mininterval=0.5)
    from IPython.display import display

    class FinishedTextBar(widget_bar):
        """tqdm's widget, displayed with an id so that closing it refreshes its text form (what papermill saves)."""

        def close(self):
            if self.disable:  # closed already: tqdm closes a bar again when it is garbage-collected
                return
            super().close()
            self.display_handle.update(self.container)

    bar = FinishedTextBar(total=total, desc=desc, display=False, mininterval=0.5)
    bar.display_handle = display(bar.container, display_id=True)
    return bar


def fit(model, train_loader, *, epochs: int, lr: float = 0.05, momentum: float = 0.9, device="cpu",
        test_loader=None, seed: int = 0, optimizer=None, step=train_step, progress: bool = True) -> History:
    """Train `model` for `epochs` with SGD (or `optimizer`), timing every step and evaluating after each epoch."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    seed_everything(seed)
    model.to(device).train()
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    history = History(batch_size=train_loader.batch_size or 0)
    bar = progress_bar(epochs * len(train_loader), "training", disable=not progress)
    for epoch in range(1, epochs + 1):
        running, samples, sizes = torch.zeros((), device=device), 0, []
        synchronize(device)
        start = time.perf_counter()
        timer = measure.StepTimer(device, warmup=0)
        for x, y in train_loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            running += step(model, x, y, optimizer) * len(y)
            timer.tick()  # timed from the previous tick, batch fetch included, as in the parallel labs
            samples += len(y)
            sizes.append(len(y))
            bar.update()
        seconds = time.perf_counter() - start
        history.batch_size = history.batch_size or sizes[0]
        full = [s for s, n in zip(timer.seconds, sizes) if n == history.batch_size]
        history.step_seconds += full
        history.steps_per_epoch.append(len(full))
        stats = EpochStats(epoch, running.item() / samples, seconds, samples_per_second(samples, seconds))
        if test_loader is not None:
            stats.test_loss, stats.test_accuracy = evaluate(model, test_loader, device)
            bar.set_postfix(test_acc=f"{stats.test_accuracy:.3f}")
        history.epochs.append(stats)
    bar.close()
    return history


PROFILER_LOG_PREFIXES = ("USDT:", "STAGE:")


@contextlib.contextmanager
def quiet_profile(**kwargs):
    """torch.profiler.profile(**kwargs) without the 'USDT:'/'STAGE:' lines its C++ part logs; other stderr is kept."""
    from torch.profiler import profile

    from .launch import captured_stderr

    written = None
    try:
        with captured_stderr() as written, profile(**kwargs) as prof:
            yield prof
    finally:
        rest = [line for line in (written.text if written else "").splitlines()
                if not line.startswith(PROFILER_LOG_PREFIXES)]
        if rest:
            print("\n".join(rest), file=sys.stderr)
