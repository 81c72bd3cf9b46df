"""Under DataParallel's phases: one thread (and CUDA stream) per device, each phase timed (DevicePool, PhaseTimer);
one device's step, for comparison."""
from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

import torch
import torch.nn as nn
import torch.nn.functional as F

from .... import measure
from ....plots import Interval
from .devices import DevicePlan
from .phases import StepReport, split_sizes, transfer_bytes


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
        self.cpu_seconds: dict[tuple[str, str], float] = {}  # (device row, phase) -> CPU time its thread used
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
            start, cpu = time.perf_counter(), time.thread_time()
            result = fn()
            if stream is not None:
                stream.synchronize()
        # the thread's CPU time beside its wall time: a pass that took longer but used no more CPU waited
        self.cpu_seconds[(self.pool.rows[i], name)] = time.thread_time() - cpu
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
                          transfer_bytes(model, xs, outputs), peak, list(notes), dict(self.cpu_seconds))


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


SETTLE_LIMIT_S = 0.05  # settle() waits at most this long: OpenMP's worker threads spin for a few ms after an operator
SETTLE_SLICE_S = 0.002  # the sleeps settle() measures this process's CPU over
SETTLE_IDLE = 0.25  # a slice in which this process used less than this share of one core: its other threads sleep


def settle(limit_s: float = SETTLE_LIMIT_S, slice_s: float = SETTLE_SLICE_S, idle: float = SETTLE_IDLE) -> float:
    """Wait, at most `limit_s`, until this process's other threads stop using CPU, and return the CPU seconds they used
    meanwhile: after an operator on several intra-op threads, OpenMP's worker threads busy-wait (spin) for some
    milliseconds on the cores that the next timed step needs (lab 02's probe: ~2 cores for ~5 ms after a step on 2
    threads, none after a step on 1). Run before each timed candidate, every candidate starts on idle cores."""
    burned, deadline = 0.0, time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        time.sleep(slice_s)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        burned += cpu
        if cpu < idle * wall:
            break
    return burned


def page_faults() -> int:
    """Minor page faults of this process so far (every thread): each one is a page of fresh memory the OS zeroed."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def gradients(model: nn.Module) -> list[torch.Tensor]:
    """Copies of the model's gradients, on the CPU."""
    return [p.grad.detach().cpu().clone() for p in model.parameters() if p.grad is not None]


def blocks_above(step, threshold: int) -> tuple[int, int] | None:
    """The CPU memory blocks that one call of step() allocates above `threshold` bytes, counted by torch's profiler:
    (their number, their bytes); None where this torch's profiler gives no memory events."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    try:  # the profiler's raw events: one "[memory]" event per allocation (bytes > 0) and per free (< 0)
        sizes = [e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    except AttributeError:
        return None
    big = [n for n in sizes if n > threshold]
    return len(big), sum(big)


@contextlib.contextmanager
def _quiet_stderr():
    """Standard error (the file descriptor, which C++ writes to) sent to /dev/null: the profiler's start and stop
    lines and its warning about blocks allocated before it started are no part of the lab's output."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
