"""Around lab 02's DataParallel (its notebook's class, lab_utils.labs.lab02.lesson): devices for the replicas, the phases
the exercises write (scatter, gather, reduce_gradients), the threads and timer under its step (DevicePool,
PhaseTimer), a step's report, and the sweep against one device."""
from __future__ import annotations

import contextlib
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Self

import torch
import torch.nn as nn
import torch.nn.functional as F

from ... import data, hardware, measure, spec, workloads
from ... import detectors
from ...plots import Interval
from ...compare import max_abs_diff  # lab 02's notebook calls it as data_parallel.max_abs_diff
from ...tensors import tensor_bytes  # lab 02's notebook calls it as data_parallel.tensor_bytes

COORDINATOR_PHASES = ("scatter", "replicate", "gather", "loss", "reduce", "update")
PHASES = ("scatter", "replicate", "forward", "gather", "loss", "backward", "reduce", "update")


@dataclass(frozen=True)
class DevicePlan:
    """Which devices the replicas run on, which implementation runs the phases, and why."""

    devices: tuple[torch.device, ...]
    backend: str  # "torch" (torch.nn.parallel on distinct GPUs) or "threads" (lab 02's DataParallel, one thread per device)
    threads_per_device: int | None
    reason: str

    def describe(self) -> str:
        names = ", ".join(f"device {i} -> {d}" for i, d in enumerate(self.devices))
        runs = ("torch.nn.parallel's scatter/replicate/parallel_apply/gather" if self.backend == "torch"
                else "lab 02's DataParallel class, one thread per device")
        return f"{len(self.devices)} device(s), phases run by {runs}\n  {names}\n  why: {self.reason}"


def plan_devices(n_devices: int | None = None, hw: hardware.HardwareReport | None = None,
                 backend: str = "auto") -> DevicePlan:
    """Pick devices for `n_devices` replicas: distinct GPUs, else one shared GPU, else CPU cores."""
    hw = hw or hardware.detect()
    gpus = len(hw.gpus)
    if n_devices is None:
        n_devices = gpus if gpus >= 2 else 2
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer (number of replicas), got {n_devices!r}")
    if backend not in ("auto", "torch", "threads"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'threads', got {backend!r}")
    if gpus >= n_devices:
        devices = tuple(torch.device("cuda", i) for i in range(n_devices))
        chosen = "torch" if backend == "auto" and n_devices >= 2 else ("threads" if backend == "auto" else backend)
        return DevicePlan(devices, chosen, None, f"{gpus} GPU(s): one replica per GPU, the phases are "
                          + ("torch.nn.parallel's, as in nn.DataParallel." if chosen == "torch"
                             else "DataParallel's own threads."))
    if backend == "torch":
        raise ValueError(f"backend 'torch' needs {n_devices} GPUs (torch.nn.parallel has no CPU implementation); "
                         f"this machine has {gpus}. Use backend='threads' or 'auto'.")
    if gpus:
        return DevicePlan((torch.device("cuda", 0),) * n_devices, "threads", None,
                          f"{n_devices} replicas but {gpus} GPU: the replicas share cuda:0, each thread on its own "
                          "CUDA stream, so kernels can overlap but no work is added; read phase times, not speedup.")
    cores, limit = hardware.rank_limit(hw)
    if n_devices > limit:
        raise ValueError(f"n_devices={n_devices} is impossible here: each device is a thread on a CPU core and this "
                         f"machine has {cores}; use at most {limit} (ideally <= {hw.cpu_count}).")
    reason = (f"no GPU: each device is a thread of this process with one intra-op thread, so {n_devices} device(s) "
              f"use {n_devices} of {hw.cpu_count} core(s).")
    if n_devices > hw.cpu_count:
        reason += f" Warning: {n_devices} devices on {hw.cpu_count} core(s) are oversubscribed; do not read speed from it."
    return DevicePlan((torch.device("cpu"),) * n_devices, "threads", 1, reason)


# ---- the phases, one function each (the exercises re-implement scatter, gather and reduce_gradients) ----

def split_sizes(n: int, parts: int) -> list[int]:
    """Sizes of `parts` chunks of n samples, differing by one at most: the first n % parts get one more."""
    if parts < 1:
        raise ValueError(f"need at least one device, got {parts}")
    if n < parts:
        raise ValueError(f"a batch of {n} sample(s) cannot be split across {parts} devices: every device needs at "
                         f"least one sample. Use a batch of at least {parts}, or fewer devices.")
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def scatter(batch: torch.Tensor, devices) -> list[torch.Tensor]:
    """Split `batch` along dim 0 into consecutive chunks (sizes from split_sizes), chunk i on devices[i]."""
    chunks = torch.split(batch, split_sizes(len(batch), len(devices)))
    return [chunk.to(device, non_blocking=True) for chunk, device in zip(chunks, devices)]


def gather(outputs, device) -> torch.Tensor:
    """Concatenate the replicas' outputs, in device order, on `device`."""
    return torch.cat([out.to(device) for out in outputs])


@torch.no_grad()
def reduce_gradients(model: nn.Module, replicas) -> None:
    """Add every replica's gradients into `model`'s (a sum: the loss was a mean over the whole gathered batch)."""
    for params in zip(model.parameters(), *(r.parameters() for r in replicas)):
        target, others = params[0], [p.grad for p in params[1:] if p.grad is not None]
        if not others:
            continue
        total = torch.stack([g.to(target.device) for g in others]).sum(0)
        if target.grad is None:
            target.grad = total
        else:
            target.grad.add_(total)


def transfer_bytes(model: nn.Module, input_chunks, output_chunks) -> dict:
    """Bytes each device sends and receives in one step (device 0 is the source and the destination of everything)."""
    weights = tensor_bytes(list(model.parameters()) + list(model.buffers()))
    grads = tensor_bytes(p for p in model.parameters() if p.requires_grad)
    moved = {0: {"sent": 0, "received": 0}}
    for i, (x, out) in enumerate(zip(input_chunks, output_chunks)):
        if i == 0:
            continue
        # to device i: its inputs, the weights, the gradient of its outputs; back to device 0: outputs, gradients
        to_i = tensor_bytes([x]) + weights + tensor_bytes([out])
        to_0 = tensor_bytes([out]) + grads
        moved[i] = {"sent": to_0, "received": to_i}
        moved[0]["sent"] += to_i
        moved[0]["received"] += to_0
    return moved


@dataclass
class StepReport:
    """What one data-parallel step measured."""

    loss: float
    batch_size: int
    chunk_sizes: list[int]
    intervals: list[Interval]
    bytes_moved: dict
    peak_memory_bytes: dict | None = None  # per device, only when the replicas are on distinct GPUs
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(i.end_s for i in self.intervals) - min(i.start_s for i in self.intervals)

    def device0_alone_seconds(self) -> float:
        """Seconds device 0 worked while the others waited (scatter, replicate, gather, loss, reduce, update)."""
        return sum(i.seconds for i in self.intervals if i.kind in COORDINATOR_PHASES and i.row == self.intervals[0].row)

    def phase_seconds(self) -> dict:
        """seconds[device row][phase] for this step."""
        table: dict
        table = {}
        for i in self.intervals:
            table.setdefault(i.row, {}).setdefault(i.kind, 0.0)
            table[i.row][i.kind] += i.seconds
        return table


def median_phase_seconds(reports) -> dict:
    """Per device, the median over steps of each phase's seconds."""
    tables = [r.phase_seconds() for r in reports]
    rows = list(dict.fromkeys(row for t in tables for row in t))
    return {row: {phase: statistics.median(t.get(row, {}).get(phase, 0.0) for t in tables)
                  for phase in PHASES if any(phase in t.get(row, {}) for t in tables)} for row in rows}


# ---- under DataParallel's phases: one thread (and CUDA stream) per device, each phase timed ----------------------

class DevicePool:
    """What lab 02's DataParallel runs on: one thread (and CUDA stream) per device of `plan`, and a PhaseTimer per
    step. A subclass writes the phases of one step: `_step_threads` (on these threads) and `_step_torch` (the GPUs)."""

    def __init__(self, plan: DevicePlan):
        self.plan, self.devices = plan, list(plan.devices)
        self.rows = [f"device {i} ({d})" for i, d in enumerate(self.devices)]  # the timeline's rows
        self.streams: list[torch.cuda.Stream | None] = [None] * len(self.devices)
        self._threads: ThreadPoolExecutor | None = None
        if plan.backend == "threads":
            n = plan.threads_per_device
            self._threads = ThreadPoolExecutor(len(self.devices), thread_name_prefix="dp-device",
                                               initializer=(lambda: torch.set_num_threads(n)) if n else None)
            if self.devices[0].type == "cuda":
                self.streams = [torch.cuda.Stream(d) for d in self.devices]

    def step(self, x, y, optimizer=None) -> StepReport:
        """One step on the full batch (x, y), optimizer.step() if one is given: the subclass's phases, timed."""
        if len(x) != len(y):
            raise ValueError(f"inputs and labels differ in length: {len(x)} vs {len(y)}")
        if self.plan.backend == "torch":
            return self._step_torch(x, y, optimizer)
        self.threads()  # refuses a closed pool before any phase runs
        with measure.intra_op_threads(self.plan.threads_per_device):
            return self._step_threads(x, y, optimizer)

    def _step_threads(self, x, y, optimizer) -> StepReport:
        raise NotImplementedError("a DevicePool's subclass writes the phases of one step")

    def _step_torch(self, x, y, optimizer) -> StepReport:
        raise NotImplementedError("a DevicePool's subclass writes the phases of one step")

    def timer(self) -> PhaseTimer:
        """The timeline of a new step (it starts once every device has finished its queued work)."""
        return PhaseTimer(self)

    def threads(self) -> ThreadPoolExecutor:
        """The device threads (one per device)."""
        if self._threads is None:
            raise RuntimeError(f"this {type(self).__name__} was closed; create a new one")
        return self._threads

    def distinct_gpus(self) -> bool:
        return self.devices[0].type == "cuda" and len(set(self.devices)) == len(self.devices)

    def close(self) -> None:
        """Stop the device threads."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PhaseTimer:
    """The timeline of one step on `pool`'s devices: phases on device 0, phases on every device at once."""

    def __init__(self, pool: DevicePool):
        self.pool = pool
        self.intervals: list[Interval] = []
        if pool.distinct_gpus():
            for d in pool.devices:
                torch.cuda.reset_peak_memory_stats(d)
        self.sync()
        self.t0 = time.perf_counter()

    def sync(self) -> None:
        """Wait for every device's queued work."""
        for d in dict.fromkeys(self.pool.devices):
            measure.synchronize(d)

    def _interval(self, row: str, name: str, start: float) -> Interval:
        return Interval(row, name, start - self.t0, time.perf_counter() - self.t0)

    def phase(self, name: str, fn):
        """fn() on device 0, timed."""
        start = time.perf_counter()
        result = fn()
        measure.synchronize(self.pool.devices[0])
        self.intervals.append(self._interval(self.pool.rows[0], name, start))
        return result

    def everywhere(self, name: str, fns) -> list:
        """One fn per device at once, each on its device's thread; their results in device order."""
        futures = [self.pool.threads().submit(self._on_device, i, name, fn) for i, fn in enumerate(fns)]
        done = [f.result() for f in futures]  # re-raises a replica's exception here
        self.intervals += [interval for _, interval in done]
        return [result for result, _ in done]

    def _on_device(self, i: int, name: str, fn) -> tuple[Any, Interval]:
        """Run fn on device i's thread (and CUDA stream), timing it; returns (result, interval)."""
        device, stream = self.pool.devices[i], self.pool.streams[i]
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            if stream is not None:
                stream.wait_stream(torch.cuda.default_stream(device))
            start = time.perf_counter()
            result = fn()
            if stream is not None:
                stream.synchronize()
        return result, self._interval(self.pool.rows[i], name, start)

    def on_all(self, name: str, fn, n_devices: int):
        """fn(), which works on the first n_devices devices itself (torch.nn.parallel), timed on each of them."""
        start = time.perf_counter()
        result = fn()
        self.sync()
        self.intervals += [self._interval(row, name, start) for row in self.pool.rows[:n_devices]]
        return result

    def report(self, model: nn.Module, loss, x, xs, outputs, notes=()) -> StepReport:
        """What the step of `model` measured."""
        peak = ({i: torch.cuda.max_memory_allocated(d) for i, d in enumerate(self.pool.devices)}
                if self.pool.distinct_gpus() else None)
        return StepReport(float(loss), len(x), [len(c) for c in xs], self.intervals,
                          transfer_bytes(model, xs, outputs), peak, list(notes))


def single_device_step(model, x, y, optimizer=None, loss_fn=F.cross_entropy, threads: int | None = 1) -> float:
    """The baseline: forward, loss, backward (and update) of the whole batch on the model's device."""
    with measure.intra_op_threads(threads):
        model.zero_grad(set_to_none=True)
        device = next(model.parameters()).device
        loss = loss_fn(model(x.to(device)), y.to(device))
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        measure.synchronize(device)
    return float(loss.detach())


def gradients(model: nn.Module) -> list[torch.Tensor]:
    """Copies of the model's gradients, on the CPU."""
    return [p.grad.detach().cpu().clone() for p in model.parameters() if p.grad is not None]


# ---- the comparison lab 02 and `bench dp` run ----------------------------------------------------------------

SWEEP_WORKLOAD = workloads.SWEEP_3CONV.name
ONE_DEVICE = "1 device"


def threaded_name(n_devices: int) -> str:
    """The sweep's candidate that gives one device's step `n_devices` intra-op threads."""
    return f"1 device x {n_devices} threads"


def dp_name(n_devices: int) -> str:
    """The sweep's DataParallel candidate."""
    return f"DataParallel, {n_devices} devices"


@dataclass(frozen=True)
class Sweep:
    """What `sweep` measured: one result per candidate and batch size, and each device's median phases."""

    plan: DevicePlan
    repeats: int
    results: tuple[measure.Result, ...]
    phase_ms: dict  # batch size -> device row -> phase -> median ms
    timings: dict = field(default_factory=dict)  # batch size -> candidate -> measure.Timing (its interleaved repeats)

    @property
    def n_devices(self) -> int:
        return len(self.plan.devices)

    @property
    def batch_sizes(self) -> list[int]:
        return list(dict.fromkeys(r.batch_size for r in self.results))

    def result(self, batch_size: int, variant: str) -> measure.Result:
        """The row of one candidate (ONE_DEVICE, threaded_name(n) or dp_name(n)) at one batch size."""
        for r in self.results:
            if r.batch_size == batch_size and r.variant == variant:
                return r
        raise KeyError(f"no result {variant!r} at batch {batch_size}")

    def speedup(self, batch_size: int, variant: str) -> float:
        """A candidate's advantage over one device (one thread on a CPU) at the same batch: the median of their paired
        ratios over the interleaved rounds, the figure a verdict on the two prints (measure.paired_median)."""
        timings = self.timings[batch_size]
        return measure.paired_median(timings[variant], timings[ONE_DEVICE])


def _sweep_result(variant, strategy, world_size, threads, batch, timing, baseline, device, hw) -> measure.Result:
    """One candidate's row, flagged when its figures cannot be right."""
    resources = world_size * (threads or 1)
    speedup = measure.paired_median(timing, baseline) if resources > 1 else None
    flags = measure.plausibility(speedup=speedup, devices=resources,
                                 oversubscribed=not hw.gpus and resources > hw.cpu_count,
                                 threads=threads if world_size == 1 and (threads or 1) > 1 else None)
    return measure.Result(lab="02", framework="torch", strategy=strategy, variant=variant, workload=SWEEP_WORKLOAD,
                          world_size=world_size, device=str(device), batch_size=batch,
                          samples_per_s=measure.samples_per_second(batch, timing.median), wall_s=timing.median,
                          threads=threads, repeats=len(timing.times), spread=timing.spread, flags=tuple(flags))


def sweep(parallel_class, *, n_devices: int = 2, batch_sizes=(16, 256), repeats: int = 15, warmup: int = 3, seed: int = 0,
          hw: hardware.HardwareReport | None = None, progress: bool = True) -> Sweep:
    """Time interleaved steps of one device vs DataParallel over `n_devices`, for each batch size; returns a Sweep.
    `progress`: a line as each batch size is done (a busy machine can take minutes)."""
    hw = hw or hardware.detect()
    plan, single_plan = plan_devices(n_devices, hw), plan_devices(1, hw)
    model_spec = spec.cnn2d_3layer_fullconnected_3layer()
    singles = {ONE_DEVICE: single_plan.threads_per_device}  # threads: 1 on a CPU, None (torch's choice) on a GPU
    # on a CPU also one device with `n_devices` intra-op threads: what torch does without data parallelism
    if single_plan.threads_per_device:
        singles[threaded_name(n_devices)] = n_devices
    many = dp_name(n_devices)
    results, phases, all_timings = [], {}, {}
    started = time.perf_counter()
    for i, batch in enumerate(batch_sizes):
        x, y = (torch.from_numpy(a) for a in data.synthetic_images(batch, image_shape=(1, 28, 28), seed=seed))
        models = {n: spec.build_torch(model_spec, (1, 28, 28), seed=seed).to(single_plan.devices[0]) for n in singles}
        optimizers = {n: torch.optim.SGD(m.parameters(), lr=0.01) for n, m in models.items()}
        with parallel_class(spec.build_torch(model_spec, (1, 28, 28), seed=seed), plan) as parallel:
            parallel_opt = torch.optim.SGD(parallel.model.parameters(), lr=0.01)
            reports = []
            candidates: dict[str, Callable[..., Any]] = {
                n: (lambda n=n: single_device_step(models[n], x, y, optimizers[n], threads=singles[n])) for n in singles}
            candidates[many] = lambda: reports.append(parallel.step(x, y, parallel_opt))
            timings = measure.time_interleaved(candidates, warmup=warmup, repeats=repeats, device=plan.devices[0])
        base = timings[ONE_DEVICE]
        all_timings[batch] = timings
        results += [_sweep_result(n, "single", 1, threads, batch, timings[n], base, single_plan.devices[0], hw)
                    for n, threads in singles.items()]
        results.append(_sweep_result(many, "dp", n_devices, plan.threads_per_device, batch, timings[many], base,
                                     plan.devices[0], hw))
        phases[batch] = {r: {k: round(v * 1e3, 3) for k, v in parts.items()}
                         for r, parts in median_phase_seconds(reports[warmup:]).items()}
        if progress:
            print(f"sweep: batch {batch} timed, {i + 1} of {len(batch_sizes)} batch sizes done "
                  f"({time.perf_counter() - started:.0f} s so far)", flush=True)
    return Sweep(plan, repeats, tuple(results), phases, all_timings)


def print_sweep(result: Sweep) -> None:
    """The sweep's table, each figure with its spread, and the warnings under it."""
    print(f"(cnn2d_3layer_fullconnected_3layer, one training step, median of {result.repeats} interleaved steps; "
          f"backend {result.plan.backend}, devices {[str(d) for d in result.plan.devices]})")
    print(f"{'batch':>6}  {'candidate':<26}{'ms/step':>9}{'spread':>8}{'speedup':>9}")
    for batch in result.batch_sizes:
        for r in (x for x in result.results if x.batch_size == batch):
            speedup = result.speedup(batch, r.variant)
            print(f"{batch:>6}  {r.variant:<26}{r.wall_s * 1e3:9.2f}{r.spread:8.0%}{speedup:8.2f}x"
                  f"{detectors.marked(r.flags)}")
            for note in detectors.notes(r.flags):
                print(f"{'':>8}note: {note}")
    print(f"speedup: the median of the {result.repeats} paired ratios, one device's step over the candidate's in the "
          "same round (a verdict's figure; a verdict that names one device first prints its inverse)")
    names = [f"batch {r.batch_size} {r.variant}" for r in result.results]
    for line in measure.table_lines([r.flags for r in result.results], names):
        print(line)
