"""Reading the ranks' results: one configuration's measured steps as timelines every stage agrees on, and the
unsplit model's reference to compare them with."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import torch.nn.functional as F

from .... import spec
from ....plots import Interval
from ....tensors import flat_grads
from .schedules import bubble_fraction, make_schedule, makespan, simulate
from .stage import PipelineRun


KINDS = {"F": "forward", "B": "backward", "S": "step"}  # "step": a library step, timed whole (no per-op timeline)


@dataclass
class Measured:
    """One configuration's measured steps, as timelines all stages agree on."""

    run: PipelineRun
    stages: int
    timelines: list[list[Interval]]  # per timed step, every stage's ops (a library step: one interval per stage)
    peak_activation_bytes: list[int] | None  # per stage, the most held between ops in any step (library: not measured)
    stage_grads: list[np.ndarray]     # per stage, its parameters' gradients after the last step
    logits: np.ndarray | None = None  # the last stage's outputs of the last step (hand-built ops only)

    @property
    def makespans(self) -> list[float]:
        return [makespan(t) for t in self.timelines]

    @property
    def makespan(self) -> float:
        """The median step's makespan (the lower median: a step that was measured, the one typical() draws)."""
        return statistics.median_low(self.makespans)

    @property
    def spread(self) -> float:
        """measure.spread of the steps' makespans."""
        from ....measure import spread

        return spread(self.makespans)

    def typical(self) -> list[Interval]:
        """The timeline of the median step by makespan: the step the charts draw."""
        return next(t for t in self.timelines if makespan(t) == self.makespan)

    @property
    def busy(self) -> float:
        """The configuration's busy time: the median over the steps of all stages' op times added up."""
        return statistics.median(busy_seconds(t) for t in self.timelines)

    @property
    def bubble(self) -> float:
        """The configuration's bubble, from its medians: 1 - busy / (stages x makespan). Every figure printed about a
        configuration is a median over its steps, so one slow step does not speak for all of them (learner s13r7d,
        lab 04 findings 1, 3-4: the median step by makespan had nearly the worst bubble of its 30 steps)."""
        self.bubbles  # a library step, timed whole, has none: raises
        return 1.0 - self.busy / (self.stages * self.makespan)

    @property
    def bubbles(self) -> list[float]:
        """The bubble fraction of every timed step; a library step, timed whole, has none."""
        if any(i.kind == KINDS["S"] for t in self.timelines for i in t):
            raise ValueError(f"{self.run.label!r} ran the library's schedule, timed as one step per stage: it has no "
                             "per-op timeline, so no bubble (the hand-built ops' runs have one)")
        return [bubble_fraction(t, self.stages) for t in self.timelines]

    @property
    def grads(self) -> np.ndarray:
        """Every stage's gradients in the unsplit model's parameter order."""
        return np.concatenate(self.stage_grads)

    @property
    def samples_per_s(self) -> float:
        return self.run.batch_size / self.makespan


def measured_by_label(runs, ranks) -> dict[str, Measured]:
    """Turn lab 04's stage_worker's per-rank results (measured in Rounds) into one Measured per run label."""
    stages = len(ranks)
    measured = {}
    for i, run in enumerate(runs):
        per_rank = [rank_results[i] for rank_results in ranks]
        timelines = []
        for k in range(len(per_rank[-1]["steps"])):
            events = [(s, e) for s, r in enumerate(per_rank) for e in r["steps"][k]["events"]]
            t0 = min(e[2] for _, e in events)
            timelines.append([Interval(f"stage {s}", KINDS[kind], a - t0, b - t0, str(m)) for s, (kind, m, a, b) in events])
        logits = per_rank[-1].get("logits")
        peaks = [[step["peak_activation_bytes"] for step in r["steps"]] for r in per_rank]
        measured[run.label] = Measured(run, stages, timelines,
                                       None if None in peaks[0] else [max(p) for p in peaks],
                                       [np.asarray(r["grads"]) for r in per_rank],
                                       None if logits is None else np.asarray(logits))
    return measured


def reference(run: PipelineRun):
    """The unsplit model on the same batch, on this process's CPU: (loss, logits, flat gradients)."""
    model = spec.build_torch(run.model_spec(), run.input_shape, seed=run.seed)
    x, y = run.batch()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    grads = flat_grads(model).numpy()
    return float(loss.detach()), logits.detach().numpy(), grads


def mean_op_seconds(intervals, stages: int) -> tuple[list[float], list[float]]:
    """Per stage, the mean measured forward and backward op durations (to simulate the same schedule ideally)."""
    fwd, bwd = [], []
    for s in range(stages):
        row = [i for i in intervals if i.row == f"stage {s}"]
        fwd.append(statistics.mean(i.seconds for i in row if i.kind == "forward"))
        bwd.append(statistics.mean(i.seconds for i in row if i.kind == "backward"))
    return fwd, bwd


def median_op_seconds(measured: Measured) -> tuple[list[float], list[float]]:
    """Per stage, the forward and backward op durations of a typical step of every timed step: the median over the
    steps of each step's mean (mean_op_seconds), so one slow step does not speak for all of them."""
    per_step = [mean_op_seconds(t, measured.stages) for t in measured.timelines]
    fwd, bwd = ([statistics.median(step[phase][s] for step in per_step) for s in range(measured.stages)]
                for phase in (0, 1))
    return fwd, bwd


def step_ops_makespan(measured: Measured, timeline) -> float:
    """The shortest `timeline` (one step of `measured`) its own op times allow: its schedule simulated with each op's
    measured duration and no transfer cost. The measured step cannot be shorter: the run only adds hand-overs."""
    schedule = make_schedule(measured.run.schedule, measured.stages, measured.run.micro_batches)
    kind_of = {name: kind for kind, name in KINDS.items()}
    seconds = {(int(i.row.rsplit(" ", 1)[1]), kind_of[i.kind], int(i.label)): i.seconds for i in timeline}
    return makespan(simulate(schedule, op_seconds=seconds))


def own_ops_makespan(measured: Measured) -> float:
    """The configuration's ops in order: the median over the steps of step_ops_makespan (each step's own op times,
    free hand-overs). Every step is at least its own ops in order, so the median makespan is at least this."""
    return statistics.median(ops_makespans(measured))


def ops_makespans(measured: Measured) -> list[float]:
    """step_ops_makespan of every timed step, in round order."""
    return [step_ops_makespan(measured, t) for t in measured.timelines]


def handover_seconds(measured: Measured) -> list[float]:
    """Per timed step, how much longer it took than its own ops in the schedule's order allow: the hand-overs
    (sending and receiving messages, the time between a stage's ops, waits for a core)."""
    return [m - s for m, s in zip(measured.makespans, ops_makespans(measured))]


def busy_seconds(timeline) -> float:
    """All stages' op times in one step, added up."""
    return sum(i.seconds for i in timeline)


def ideal_makespan(measured: Measured) -> float:
    """The makespan 'ideal' simulates: the schedule with each stage's typical op times (median_op_seconds), no
    transfer cost."""
    schedule = make_schedule(measured.run.schedule, measured.stages, measured.run.micro_batches)
    return makespan(simulate(schedule, *median_op_seconds(measured)))


def ideal_bubble(measured: Measured) -> float:
    """The bubble of the same schedule simulated with each stage's typical op times (median_op_seconds, the figures
    the lab prints per stage; no transfer cost)."""
    schedule = make_schedule(measured.run.schedule, measured.stages, measured.run.micro_batches)
    return bubble_fraction(simulate(schedule, *median_op_seconds(measured)), measured.stages)
