"""Measuring pipeline configurations over real ranks, one rank per stage, with lab 04's `stage_worker`: the rounds it
is handed decide which steps it runs (every configuration in alternating rounds, warm-up first) and watch each step
(the notebook's `stage_step` with its ops watched, or the library's step timed whole)."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ....measure import alternating_rounds, synchronize
from .results import Measured, measured_by_label
from .split import stage_layers
from .stage import micro_batch_size
from .watch import watched_step


class OneStep:
    """What `stage_worker` runs unmeasured: one step of each configuration, in order, not watched."""

    def order(self, runs: int) -> list[int]:
        return list(range(runs))

    def step(self, i: int, stage_step, ctx, ops, forward_op, backward_op) -> None:
        stage_step(ctx, ops, forward_op, backward_op)

    def measured(self, i: int) -> dict:
        return {}


ONE_STEP = OneStep()


class Rounds(OneStep):
    """Every configuration `warmup + rounds` times in alternating order, each step started together on every stage and
    watched; the configurations at the indices in `library` run the library's step instead of the stage's ops."""

    def __init__(self, rounds: int, warmup: int, library: dict | None = None, library_schedule=None,
                 library_step=None):
        self.rounds, self.warmup = rounds, warmup
        self.library, self.library_schedule, self.library_step = library or {}, library_schedule, library_step
        self._runs, self._done = 0, 0
        self._steps: dict[int, list[dict]] = {}
        self._schedules: dict = {}  # library configuration -> its schedule, built on its first step

    def order(self, runs: int) -> list[int]:
        self._runs = runs
        return alternating_rounds(range(runs), self.warmup + self.rounds)

    def step(self, i: int, stage_step, ctx, ops, forward_op, backward_op) -> None:
        dist.barrier()  # every stage starts the step together
        if i in self.library:
            step = self._library_step(i, ctx)
        else:
            step = watched_step(stage_step, ctx, ops, forward_op, backward_op)
        self._done += 1
        if self._done > self.warmup * self._runs:  # past the warm-up rounds
            self._steps.setdefault(i, []).append(step)

    def measured(self, i: int) -> dict:
        return {"steps": self._steps.get(i, [])}

    def _library_step(self, i: int, ctx) -> dict:
        """One step of a library schedule (lab 04's library_step), as one timed event of this stage."""
        if i not in self._schedules:
            self._schedules[i] = self.library_schedule(ctx.stage, ctx.rank, ctx.stages, self.library[i], ctx.device)
        x = torch.cat(ctx.inputs) if ctx.inputs else None
        y = torch.cat(ctx.labels) if ctx.labels else None
        start = time.perf_counter()
        self.library_step(self._schedules[i], ctx.rank, ctx.stages, x, y)
        synchronize(ctx.device)
        return {"events": [("S", 0, start, time.perf_counter())], "peak_activation_bytes": None}  # not measured


def run_pipelines(runs, stages: int, stage_worker, forward_op, backward_op, *, library_runs=(), library_schedule=None,
                  library_step=None, rounds: int = 3,
                  warmup: int = 1, timeout: float = 300.0, group_timeout: float = 60.0) -> dict[str, Measured]:
    """Run every configuration `rounds` times interleaved over one rank per stage with `stage_worker` and the ops
    (lab 04's, or your own), each step watched; returns label -> Measured."""
    from ....launch import launch

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 timed steps and warmup >= 0, got rounds={rounds!r}, warmup={warmup!r}")
    everything = list(runs) + list(library_runs)
    labels = [r.label for r in everything]
    if len(set(labels)) != len(labels):
        raise ValueError(f"every run needs its own label, got {labels}")
    if library_runs and (library_schedule is None or library_step is None):
        raise ValueError("library_runs need library_schedule= and library_step=: lab 04's, or your own")
    for r in everything:
        micro_batch_size(r.batch_size, r.micro_batches)
        if len(stage_layers(r.model_spec(), r.split)) != stages:
            raise ValueError(f"run {r.label!r}: split {list(r.split)} makes {len(r.split) + 1} stages, not {stages}")
    library = {len(runs) + j: run for j, run in enumerate(library_runs)}
    measuring = Rounds(rounds, warmup, library, library_schedule, library_step)
    # group_timeout bounds each send, recv and barrier; timeout bounds the whole launch
    ranks = launch(stage_worker, stages, timeout=timeout,
                   args=(everything, forward_op, backward_op, group_timeout, measuring))
    return measured_by_label(everything, ranks)
