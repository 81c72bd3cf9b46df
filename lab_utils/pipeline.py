"""Layer-split model parallelism and micro-batch pipelines (naive, GPipe, 1F1B), kept as data and run over real ranks.
The ops, and the library's schedule and step, are lab 04's notebook lesson code, exported to lab_utils.lessons.lab04;
around them this module keeps schedules as data, splitting the model, the stage's context, timing and activation
accounting, and running configurations over ranks."""
from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import data, spec
from .measure import alternating_rounds, synchronize
from .plots import Interval


# ---- schedules as data -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    """One operation of a stage: the forward ("F") or backward ("B") pass of one micro-batch."""

    kind: str
    micro: int

    def __str__(self) -> str:
        return f"{self.kind}{self.micro}"


@dataclass(frozen=True)
class Schedule:
    """For each of `stages` stages, the ordered operations over `micro_batches` micro-batches."""

    name: str
    stages: int
    micro_batches: int
    ops: tuple[tuple[Op, ...], ...]

    @property
    def theoretical_bubble(self) -> float:
        """(K - 1) / (M + K - 1): the idle share of K stages over M micro-batches with equal stage times."""
        return (self.stages - 1) / (self.micro_batches + self.stages - 1)

    def stage_ops(self, stage: int) -> tuple[Op, ...]:
        """The ops of one stage, in order."""
        return self.ops[stage]

    def describe(self) -> str:
        return "\n".join(f"stage {s}: " + " ".join(str(op) for op in ops) for s, ops in enumerate(self.ops))


def _check_sizes(stages: int, micro_batches: int) -> None:
    for name, value in (("stages", stages), ("micro_batches", micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def gpipe(stages: int, micro_batches: int) -> Schedule:
    """GPipe: every stage runs all forwards, then all backwards."""
    _check_sizes(stages, micro_batches)
    ops = tuple(tuple(Op("F", m) for m in range(micro_batches)) + tuple(Op("B", m) for m in range(micro_batches))
                for _ in range(stages))
    return Schedule("gpipe", stages, micro_batches, ops)


def naive(stages: int, micro_batches: int = 1) -> Schedule:
    """The plain layer split: the whole batch as one micro-batch, forward through every stage, then backward."""
    if micro_batches != 1:
        raise ValueError(f"the naive split has no micro-batches (micro_batches=1), got {micro_batches}")
    return Schedule("naive", stages, 1, gpipe(stages, 1).ops)


def one_f_one_b(stages: int, micro_batches: int) -> Schedule:
    """1F1B: stage s runs K - s - 1 warm-up forwards, then alternates one forward and one backward, then drains."""
    _check_sizes(stages, micro_batches)
    all_ops = []
    for s in range(stages):
        warmup = min(stages - s - 1, micro_batches)
        ops = [Op("F", m) for m in range(warmup)]
        for i in range(micro_batches - warmup):
            ops += [Op("F", warmup + i), Op("B", i)]
        ops += [Op("B", m) for m in range(micro_batches - warmup, micro_batches)]
        all_ops.append(tuple(ops))
    return Schedule("1f1b", stages, micro_batches, tuple(all_ops))


SCHEDULES = {"naive": naive, "gpipe": gpipe, "1f1b": one_f_one_b}


def make_schedule(name: str, stages: int, micro_batches: int) -> Schedule:
    """A schedule by name: 'naive', 'gpipe' or '1f1b'."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {sorted(SCHEDULES)}")
    return SCHEDULES[name](stages, micro_batches)


def max_in_flight(schedule: Schedule) -> list[int]:
    """Per stage, the most micro-batches whose forward ran and whose backward has not (activations held)."""
    peaks = []
    for ops in schedule.ops:
        live = peak = 0
        for op in ops:
            live += 1 if op.kind == "F" else -1
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


def simulate(schedule: Schedule, forward_s=1.0, backward_s=2.0) -> list[Interval]:
    """Ideal timeline, no transfer cost; forward_s/backward_s: scalar or per stage. Raises on bad order, deadlock."""
    check_schedule(schedule, deadlock=False)
    k = schedule.stages
    fwd = [forward_s] * k if np.isscalar(forward_s) else list(forward_s)
    bwd = [backward_s] * k if np.isscalar(backward_s) else list(backward_s)
    done: dict[tuple[int, str, int], float] = {}
    free = [0.0] * k
    position = [0] * k
    intervals = []
    while any(position[s] < len(schedule.ops[s]) for s in range(k)):
        progressed = False
        for s in range(k):
            if position[s] == len(schedule.ops[s]):
                continue
            op = schedule.ops[s][position[s]]
            if op.kind == "F":
                needs = [(s - 1, "F", op.micro)] if s > 0 else []
            else:
                needs = [(s, "F", op.micro)] + ([(s + 1, "B", op.micro)] if s < k - 1 else [])
            if any(n not in done for n in needs):
                continue
            start = max([free[s]] + [done[n] for n in needs])
            end = start + (fwd[s] if op.kind == "F" else bwd[s])
            intervals.append(Interval(f"stage {s}", "forward" if op.kind == "F" else "backward", start, end,
                                      str(op.micro)))
            done[(s, op.kind, op.micro)] = end
            free[s], position[s], progressed = end, position[s] + 1, True
        if not progressed:
            stuck = {f"stage {s}": str(schedule.ops[s][position[s]]) for s in range(k) if position[s] < len(schedule.ops[s])}
            raise ValueError(f"schedule {schedule.name!r} deadlocks: every stage waits for another ({stuck})")
    return intervals


def check_schedule(schedule: Schedule, *, deadlock: bool = True) -> None:
    """Raise ValueError unless every stage runs each micro-batch's forward, then its backward, exactly once."""
    if len(schedule.ops) != schedule.stages:
        raise ValueError(f"schedule {schedule.name!r} lists {len(schedule.ops)} stages, expected {schedule.stages}")
    expected = sorted((kind, m) for kind in "BF" for m in range(schedule.micro_batches))
    for s, ops in enumerate(schedule.ops):
        if sorted((op.kind, op.micro) for op in ops) != expected:
            raise ValueError(f"stage {s} must run F and B of each micro-batch 0..{schedule.micro_batches - 1} "
                             f"exactly once; it runs {' '.join(map(str, ops))}")
        seen = set()
        for op in ops:
            if op.kind == "B" and op.micro not in seen:
                raise ValueError(f"stage {s} runs B{op.micro} before F{op.micro}: a backward needs its forward")
            seen.add(op.micro)
    for s in range(schedule.stages - 1):  # send/recv between neighbours is first in, first out
        for kind, what in (("F", "activations"), ("B", "gradients")):
            here = [op.micro for op in schedule.ops[s] if op.kind == kind]
            there = [op.micro for op in schedule.ops[s + 1] if op.kind == kind]
            if here != there:
                raise ValueError(f"stages {s} and {s + 1} run their {kind} ops in different micro-batch orders "
                                 f"({here} vs {there}): {what} arrive in the order they were sent")
    if deadlock:
        simulate(schedule)


def makespan(intervals) -> float:
    """From the first start to the last end."""
    intervals = list(intervals)
    return max(i.end_s for i in intervals) - min(i.start_s for i in intervals)


def bubble_fraction(intervals, stages: int) -> float:
    """Idle time over stages x makespan."""
    intervals = list(intervals)
    busy = sum(i.seconds for i in intervals)
    return 1.0 - busy / (stages * makespan(intervals))


# ---- splitting the spec'd CNN into stages ------------------------------------------------------------------------

def modules_per_layer(model_spec) -> list[int]:
    """How many torch modules spec.build_torch makes for each spec layer (a layer plus its ReLU)."""
    return [1 + (layer.get("activation") == "relu") for layer in spec.validate(model_spec)]


def check_split(model_spec, split) -> tuple[int, ...]:
    """`split` lists the spec-layer index where each stage after the first begins; returns it validated."""
    n = len(spec.validate(model_spec))
    split = tuple(split)
    if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in split):
        raise ValueError(f"split must list layer indices (integers), got {split!r}")
    if list(split) != sorted(set(split)) or (split and (split[0] < 1 or split[-1] > n - 1)):
        raise ValueError(f"split {list(split)} must be strictly increasing layer indices between 1 and {n - 1}: "
                         f"stage s+1 starts at layer split[s] of the {n}-layer spec")
    return tuple(int(i) for i in split)


def stage_layers(model_spec, split) -> list[range]:
    """The spec layers of each stage."""
    bounds = [0, *check_split(model_spec, split), len(spec.validate(model_spec))]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def build_stage(model_spec, input_shape, split, stage: int, seed: int = 0) -> nn.Sequential:
    """Stage `stage` of the spec'd model: the same weights as spec.build_torch(..., seed) has for those layers."""
    layers = stage_layers(model_spec, split)
    if not 0 <= stage < len(layers):
        raise ValueError(f"stage {stage} does not exist: split {list(split)} makes {len(layers)} stages")
    full = spec.build_torch(model_spec, input_shape, seed=seed)
    starts = np.cumsum([0] + modules_per_layer(model_spec))
    return full[int(starts[layers[stage].start]):int(starts[layers[stage].stop])]


def stage_input_shape(model_spec, input_shape, split, stage: int) -> tuple[int, ...]:
    """The shape (without batch) of the activation that enters `stage`."""
    first = stage_layers(model_spec, split)[stage].start
    return tuple(input_shape) if first == 0 else spec.output_shapes(model_spec, input_shape)[first - 1]


def _forward_backward(layer: nn.Module, inp: torch.Tensor):
    """One forward and backward pass of `layer` on `inp` (a gradient of ones), as a function to time."""
    def step():
        out = layer(inp)
        out.backward(torch.ones_like(out))
    return step


def layer_timings(model_spec, input_shape, batch_size: int = 64, repeats: int = 5, seed: int = 0,
                  threads: int | None = 1) -> list:
    """The measured forward + backward (measure.Timing) of each spec layer, with `threads` intra-op threads."""
    from .measure import intra_op_threads, time_interleaved

    model = spec.build_torch(model_spec, input_shape, seed=seed)
    starts = np.cumsum([0] + modules_per_layer(model_spec))
    x = torch.from_numpy(data.synthetic_images(batch_size, image_shape=tuple(input_shape), seed=seed)[0])
    steps = {}
    for i in range(len(starts) - 1):
        layer = model[int(starts[i]):int(starts[i + 1])]
        # the first layer's input is data: no gradient is computed for it
        steps[i] = _forward_backward(layer, x.detach().requires_grad_(i > 0))
        with torch.no_grad():
            x = layer(x)
    with intra_op_threads(threads):
        # round-robin, so that drift on a busy machine hits every layer alike
        timings = time_interleaved(steps, warmup=2, repeats=repeats)
    return [timings[i] for i in range(len(steps))]


def layer_times(model_spec, input_shape, batch_size: int = 64, repeats: int = 5, seed: int = 0,
                threads: int | None = 1) -> list[float]:
    """Measured seconds of forward + backward of each spec layer (the medians of layer_timings)."""
    return [t.median for t in layer_timings(model_spec, input_shape, batch_size, repeats, seed, threads)]


def balanced_split(times, stages: int) -> tuple[int, ...]:
    """The split into `stages` contiguous stages that minimises the slowest stage's total time."""
    n = len(times)
    if not 1 <= stages <= n:
        raise ValueError(f"cannot split {n} layers into {stages} stages: each stage needs at least one layer")
    best, best_split = math.inf, ()
    for cut in itertools.combinations(range(1, n), stages - 1):
        bounds = [0, *cut, n]
        slowest = max(sum(times[a:b]) for a, b in zip(bounds, bounds[1:]))
        if slowest < best - 1e-12:
            best, best_split = slowest, cut
    return tuple(best_split)


def stage_shares(times, split) -> list[float]:
    """Each stage's share of the total measured time."""
    bounds = [0, *split, len(times)]
    total = sum(times)
    return [sum(times[a:b]) / total for a, b in zip(bounds, bounds[1:])]


def micro_batch_size(batch_size: int, micro_batches: int) -> int:
    """Samples per micro-batch; the batch must divide evenly (so every micro-batch weighs the same in the loss)."""
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
        raise ValueError(f"micro_batches must be a positive integer, got {micro_batches!r}")
    if batch_size % micro_batches:
        lower, upper = batch_size - batch_size % micro_batches, batch_size - batch_size % micro_batches + micro_batches
        raise ValueError(f"a batch of {batch_size} does not split into {micro_batches} equal micro-batches: use a batch "
                         f"that is a multiple of {micro_batches} (e.g. {lower or upper} or {upper}), or a number of "
                         f"micro-batches that divides {batch_size}")
    return batch_size // micro_batches


# ---- one configuration, and the stage's context ------------------------------------------------------------------

@dataclass(frozen=True)
class PipelineRun:
    """One pipeline configuration: the model, its split, the batch, and the schedule."""

    label: str
    schedule: str = "gpipe"  # naive | gpipe | 1f1b
    micro_batches: int = 1
    batch_size: int = 256
    split: tuple[int, ...] = (5,)
    model: str = "cnn2d_3layer_fullconnected_3layer"
    image_side: int = 28
    batchnorm: bool = False
    seed: int = 0

    def model_spec(self) -> list[dict]:
        layers = spec.preset(self.model)
        return spec.with_batchnorm(layers) if self.batchnorm else layers

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (1, self.image_side, self.image_side)

    def batch(self):
        """The (images, labels) every configuration with this seed and size trains on."""
        x, y = data.synthetic_images(self.batch_size, image_shape=self.input_shape, seed=self.seed)
        return torch.from_numpy(x), torch.from_numpy(y)


# ---- a stage's context (the ops that run a schedule are lab 04's lesson: lab_utils.lessons.lab04) ---------------

@dataclass
class StageContext:
    """What one pipeline stage knows during one step, and what it keeps between its ops."""

    rank: int
    stages: int
    stage: nn.Module                # this rank's layers
    device: torch.device
    wire: torch.device              # where messages leave from and arrive: `device`, or host memory when gloo links GPUs
    micro_batches: int
    in_shape: tuple[int, ...]       # the shape of a received activation, micro-batch first (not used on the first stage)
    inputs: list = field(default_factory=list)   # first stage: the images, one tensor per micro-batch
    labels: list = field(default_factory=list)   # last stage: the labels, one tensor per micro-batch
    saved: dict = field(default_factory=dict)    # micro-batch -> what its backward needs
    pending: list = field(default_factory=list)  # sends started (isend) and not yet known to be delivered
    logits: dict = field(default_factory=dict)   # last stage: micro-batch -> the model's outputs

    @property
    def first(self) -> bool:
        return self.rank == 0

    @property
    def last(self) -> bool:
        return self.rank == self.stages - 1

    @classmethod
    def for_run(cls, run: "PipelineRun", stage: nn.Module, rank: int, stages: int, device, backend: str,
                batch=None) -> "StageContext":
        """A fresh context for one step of `run` on stage `rank` (the batch is run.batch() unless given)."""
        device = torch.device(device)
        wire = torch.device("cpu") if device.type == "cuda" and backend == "gloo" else device  # gloo sends host memory
        size = micro_batch_size(run.batch_size, run.micro_batches)
        x, y = batch if batch is not None else run.batch()
        return cls(rank, stages, stage, device, wire, run.micro_batches,
                   (size, *stage_input_shape(run.model_spec(), run.input_shape, run.split, rank)),
                   inputs=list(x.to(device).split(size)) if rank == 0 else [],
                   labels=list(y.to(device).split(size)) if rank == stages - 1 else [])


class _ComputeClock:
    """When the stage starts computing in an op: at its forward, or in backward when its output's gradient arrives."""

    def __init__(self, stage: nn.Module):
        self.started = None
        self._handles = [stage.register_forward_pre_hook(lambda module, args: self.mark()),
                         stage.register_forward_hook(self._watch_output)]

    def mark(self, *_):
        if self.started is None:
            self.started = time.perf_counter()

    def _watch_output(self, module, args, output):
        if isinstance(output, torch.Tensor) and output.requires_grad:
            # the blocking recv before this gradient is waiting, not work: it must not count as busy time
            output.register_hook(self.mark)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class _SavedBytes:
    """Bytes of the tensors autograd saves for backward inside a block (parameters and repeats not counted)."""

    def __init__(self, stage: nn.Module):
        self._params = {p.data_ptr() for p in stage.parameters()}
        self.seen: dict = {}

    def pack(self, tensor):
        key = (tensor.data_ptr(), tensor.numel())
        if tensor.data_ptr() not in self._params:
            self.seen[key] = tensor.numel() * tensor.element_size()
        return tensor

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def run_schedule(ctx: StageContext, ops, forward_op, backward_op) -> dict:
    """Run this stage's ops, then await its sends; returns each op's compute start and end, peak activation bytes."""
    clock, held, live, peak, events = _ComputeClock(ctx.stage), {}, 0, 0, []
    try:
        for op in ops:
            saved, clock.started = _SavedBytes(ctx.stage), None
            start = time.perf_counter()
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
                (forward_op if op.kind == "F" else backward_op)(ctx, op.micro)
            synchronize(ctx.device)
            events.append((op.kind, op.micro, clock.started or start, time.perf_counter()))
            if op.kind == "F":
                held[op.micro] = saved.total
                live += held[op.micro]
                peak = max(peak, live)
            else:
                live -= held.pop(op.micro, 0)
        for work in ctx.pending:
            work.wait()
    finally:
        clock.remove()
    return {"events": events, "peak_activation_bytes": peak}


# ---- running configurations over ranks ---------------------------------------------------------------------------

def _library_step(library_step, schedule, rank: int, world_size: int, batch, device) -> dict:
    """One step of a library schedule (lab 04's library_step), as one timed event of this stage."""
    x, y = batch
    start = time.perf_counter()
    library_step(schedule, rank, world_size, x.to(device), y.to(device))
    synchronize(device)
    return {"events": [("S", 0, start, time.perf_counter())], "peak_activation_bytes": None}  # not measured


def pipeline_worker(rank: int, world_size: int, runs, forward_op, backward_op, rounds: int = 3, warmup: int = 1,
                    timeout_s: float = 60.0, library_runs=(), library_schedule=None, library_step=None) -> list[dict]:
    """This rank's stage of `runs` and `library_runs`, each round; per run: timed steps, gradients, last outputs."""
    from .launch import process_group

    everything, hand = list(runs) + list(library_runs), len(runs)
    with process_group(timeout_s) as ctx:
        device = torch.device(ctx.device)
        if len(stage_layers(everything[0].model_spec(), everything[0].split)) != world_size:
            raise ValueError(f"split {list(everything[0].split)} makes {len(everything[0].split) + 1} stages but "
                             f"{world_size} ranks were launched: launch one rank per stage")
        modules = [build_stage(r.model_spec(), r.input_shape, r.split, rank, seed=r.seed).to(device) for r in everything]
        batches = [r.batch() for r in everything]
        schedules = [make_schedule(r.schedule, world_size, r.micro_batches).ops[rank] for r in runs]
        schedules += [library_schedule(m, rank, world_size, r, device) for r, m in zip(library_runs, modules[hand:])]
        results = [{"label": r.label, "steps": [], "device": ctx.device, "backend": ctx.backend} for r in everything]
        order = alternating_rounds(range(len(everything)), warmup + rounds)
        for n, i in enumerate(order):
            modules[i].zero_grad(set_to_none=True)
            dist.barrier()  # every stage starts the step together
            if i >= hand:
                step = _library_step(library_step, schedules[i], rank, world_size, batches[i], device)
            else:
                stage_ctx = StageContext.for_run(runs[i], modules[i], rank, world_size, device, ctx.backend, batches[i])
                step = run_schedule(stage_ctx, schedules[i], forward_op, backward_op)
                if stage_ctx.last:
                    results[i]["logits"] = torch.cat([stage_ctx.logits[m] for m in range(runs[i].micro_batches)])
            if n >= warmup * len(everything):  # past the warm-up rounds
                results[i]["steps"].append(step)
        for result, module in zip(results, modules):
            result["grads"] = torch.cat([p.grad.detach().flatten().cpu() for p in module.parameters()])
    return results


# ---- reading the ranks' results --------------------------------------------------------------------------------

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
        from .measure import spread

        return spread(self.makespans)

    def typical(self) -> list[Interval]:
        """The timeline of the median step: every figure printed about one step comes from this one."""
        return next(t for t in self.timelines if makespan(t) == self.makespan)

    @property
    def bubble(self) -> float:
        """The bubble fraction of the median step (typical())."""
        return self.bubbles[self.makespans.index(self.makespan)]

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


def collect(runs, ranks) -> dict[str, Measured]:
    """Turn pipeline_worker's per-rank results into one Measured per run label."""
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
    grads = torch.cat([p.grad.flatten() for p in model.parameters()]).numpy()
    return float(loss.detach()), logits.detach().numpy(), grads


def mean_op_seconds(intervals, stages: int) -> tuple[list[float], list[float]]:
    """Per stage, the mean measured forward and backward op durations (to simulate the same schedule ideally)."""
    fwd, bwd = [], []
    for s in range(stages):
        row = [i for i in intervals if i.row == f"stage {s}"]
        fwd.append(statistics.mean(i.seconds for i in row if i.kind == "forward"))
        bwd.append(statistics.mean(i.seconds for i in row if i.kind == "backward"))
    return fwd, bwd


def ideal_bubble(measured: Measured) -> float:
    """The bubble of the same schedule simulated with the median step's measured op times (no transfer cost)."""
    schedule = make_schedule(measured.run.schedule, measured.stages, measured.run.micro_batches)
    return bubble_fraction(simulate(schedule, *mean_op_seconds(measured.typical(), measured.stages)), measured.stages)


def run_pipelines(runs, stages: int, forward_op, backward_op, *, library_runs=(), library_schedule=None,
                  library_step=None, rounds: int = 3,
                  warmup: int = 1, timeout: float = 300.0, group_timeout: float = 60.0) -> dict[str, Measured]:
    """Run every configuration `rounds` times interleaved over one rank per stage; returns label -> Measured."""
    from .launch import launch

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
    # group_timeout bounds each send, recv and barrier; timeout bounds the whole launch
    ranks = launch(pipeline_worker, stages, timeout=timeout,
                   args=(list(runs), forward_op, backward_op, rounds, warmup, group_timeout, list(library_runs),
                         library_schedule, library_step))
    return collect(everything, ranks)
