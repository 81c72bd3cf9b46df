"""Lab 01's reports: what its profiler, DataLoader and reference-workload cells print under the lesson's code."""
from __future__ import annotations

import dataclasses
import statistics

import torch

from ... import detectors, measure, workloads
from . import steps

ROLES = ("one-rank reference", "row to beat")  # the names lab 01's prose gives its 1-thread and one-per-core rows


def conv_macs(model: torch.nn.Module, sample: torch.Tensor) -> list[int]:
    """Each convolution's forward multiply-adds for one image (output values x inputs per output), in order."""
    macs: list[int] = []

    def count(layer, inputs, out):
        """Forward hook: append this convolution's multiply-adds for one image."""
        macs.append(out[0].numel() * layer.weight[0].numel())

    hooks = [layer.register_forward_hook(count) for layer in model.modules() if isinstance(layer, torch.nn.Conv2d)]
    try:
        with torch.no_grad():
            model(sample[:1])
    finally:
        for hook in hooks:
            hook.remove()
    return macs


def profile_lines(prof, macs: list[int], top: int = 12) -> list[str]:
    """The profile's top operators by total CPU time, as a table, and the convolutions' backward/forward ratio read
    against theory's range (steps.backward_reading)."""
    width = 60  # the DataLoader's row, enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__, whole
    said = [f"{f'operator (top {top} by total CPU time)':<{width}} {'self ms':>8} {'total ms':>9} {'calls':>6}"]
    for event in sorted(prof.key_averages(), key=lambda event: event.cpu_time_total, reverse=True)[:top]:
        key = event.key if len(event.key) <= width else event.key[:width - 3] + "..."  # cut names say so
        said.append(f"{key:<{width}} {event.self_cpu_time_total / 1e3:8.3f} {event.cpu_time_total / 1e3:9.3f} "
                    f"{event.count:6d}")
    cpu_ms = {event.key: event.cpu_time_total / 1e3 for event in prof.key_averages()}
    forward, backward = cpu_ms.get("aten::conv2d"), cpu_ms.get("aten::convolution_backward")
    if not (forward and backward and macs):
        return said + ["convolutions: this profile has no aten::conv2d or aten::convolution_backward row to compare"]
    reading = steps.backward_reading(forward, backward, steps.backward_arithmetic(macs))
    return said + [measure.short_lines(
        f"convolutions, total CPU time over these steps: forward (aten::conv2d) {forward:.2f} ms, backward "
        f"(aten::convolution_backward) {backward:.2f} ms; {reading}")]


def loader_lines(loader_times: dict, workers: int) -> list[str]:
    """The DataLoader table (epoch times, speed against num_workers=0, n/m where the measured load rules the ratios
    out), its noise line where a setting's epochs spread above 25 %, then the fastest setting read against theory."""
    base = loader_times["num_workers=0"].median
    refused = measure.unreadable(workers=1 + workers, what="processes")  # a worker beside this process
    said = []
    for name, timing in loader_times.items():
        speed = f"{base / timing.median:.2f}x" if refused is None or name == "num_workers=0" else measure.N_M
        said.append(f"{name:<28} {timing.median * 1e3:7.1f} ms per epoch (spread {timing.spread:4.0%}), "
                    f"{speed} the speed of num_workers=0")
    noise = detectors.noise_line((t.spread for t in loader_times.values()), what="settings")
    said += [noise] if noise else []  # the rule lab 00 taught: above 25 %, read the median only
    if refused:  # one figure per comparison: the measured ratios only as what these conditions gave
        return said + [measure.short_lines(
            f"{measure.N_M}: {measure.NOT_MEASURABLE}: {refused}; measured "
            + ", ".join(f"{n} {base / t.median:.2f}x" for n, t in loader_times.items() if n != "num_workers=0")
            + " (the conditions', not the knobs')")]
    fastest = min(loader_times, key=lambda name: loader_times[name].median)
    verdict = ("as predicted for small in-memory data" if fastest == "num_workers=0" else
               "against the prediction for small in-memory data: here the batches cost more to build than "
               "passing them from a worker")
    return said + [measure.short_lines(f"fastest here: {fastest}, {verdict}")]


def epoch_figures_line(call, fits: list, history, images: int) -> str:
    """num_workers=0's epoch (`call`, a Timing of whole calls of train.fit, less each call's start: its History in
    `fits`, warm-up round first, holds the epoch's own seconds) against section 3's (`history`: its epochs after the
    first, `images` each, at its epoch rate), with a verdict: the same epoch agrees within the two spreads printed
    before (the table's, and section 3's epochs' seconds)."""
    timed = fits[-len(call.times):]  # the calls of the timed rounds, after the warm-up round's
    start = statistics.median(t - fit.epochs[0].seconds for t, fit in zip(call.times, timed))
    here, there = call.median - start, images / history.epoch_samples_per_s
    # the spreads printed before for these two epochs: the table's above, and section 3's epochs' seconds (its
    # training rate's spread is of the epochs' median steps, another figure)
    spreads = (call.spread, measure.spread([e.seconds for e in history.epochs[1:] or history.epochs]))
    apart, noise = max(here, there) / min(here, there) - 1, max(spreads)
    within = f"their spreads (here {spreads[0]:.0%}, the table's; section 3 {spreads[1]:.0%}, its epochs' seconds)"
    verdict = (f"within {within}: the same epoch, as expected" if apart <= noise else
               f"more than {within}: the same work took different times at the two moments, and this cell measured "
               "no cause for it; section 3's is the lab's figure")
    return measure.short_lines(
        f"num_workers=0's epoch: {here * 1e3:.1f} ms (its {call.median * 1e3:.1f} ms call of fit less {start * 1e3:.1f} "
        f"ms to start it), section 3's {there * 1e3:.1f} ms ({images:,} images at its epoch rate): {apart:.0%} apart, "
        f"{verdict}")


@dataclasses.dataclass
class ReferenceReport:
    """What the reference-workload cell printed, and each row's flags for its results row."""

    lines: list[str]
    flags: dict
    threaded: str | None  # the one-per-core row's name, None where it did not run
    threads_line: str | None  # its ratio over one thread, read against theory (or the load's refusal)

    def row_flags(self, name: str) -> list:
        """The flags of row `name` for the results CSV: its own, and the refusal of its ratio where it was refused."""
        refused = measure.refusal(self.threads_line) if name == self.threaded and self.threads_line else []
        return list(self.flags[name]) + refused


def reference_report(ref_threads: dict, ref_timings: dict, device: str, cpu_count: int, default_threads: int,
                     steps_timed: int) -> ReferenceReport:
    """The reference workload's rows (rate, ratio to one thread, spread, role), their noise, the one-per-core ratio
    read against theory's at most N x (n/m where the measured load rules it out), or why that row is missing."""
    rates = {name: measure.samples_per_second(256, t.median) for name, t in ref_timings.items()}
    base = next(iter(rates.values()))
    several = device == "cpu" and len(ref_threads) > 1
    threaded = max(ref_threads, key=lambda name: ref_threads[name]) if several else None
    threads_line = None if threaded is None else measure.as_result(
        steps.threads_reading(rates[threaded] / base, ref_threads[threaded]),
        workers=ref_threads[threaded], what="threads", ratio=rates[threaded] / base)
    threads_refused = bool(threads_line and measure.refusal(threads_line))  # then the row prints n/m, no figure
    flags, said = {}, []
    for i, (name, t) in enumerate(ref_timings.items()):
        threads = ref_threads[name] if device == "cpu" else 1
        refused = threads_refused and name == threaded
        flags[name] = measure.plausibility(speedup=rates[name] / base if threads > 1 else None, devices=threads,
                                           oversubscribed=threads > cpu_count, refused=refused)
        versus = ((f"{measure.N_M:>5}   " if refused else f"{rates[name] / base:5.2f}x  ") if len(rates) > 1 else "")
        role = ROLES[0] if i == 0 and device == "cpu" else ROLES[1] if name == threaded else ""
        said.append(measure.flagged(f"{name:<22} {rates[name]:7.0f} samples/s {versus}(median of {steps_timed} "
                                    f"steps, spread {t.spread:.0%})  {role}".rstrip(), flags[name]))
    noisy = steps.reference_noise({name: t.spread for name, t in ref_timings.items()}, steps_timed)
    if noisy:  # the noisy rows, in one line: whether they still serve
        said.append(measure.short_lines(noisy))
    if threads_line:  # the ratio of the medians above, read against the prediction
        said.append(measure.short_lines(f"{threaded} vs 1 thread: {threads_line}"))
    if device == "cpu" and len(ref_threads) == 1:  # the one-per-core row was promised: say why it is missing
        said.append(measure.short_lines(f"1 process x {cpu_count} threads: skipped, " + (
            "this machine has one core" if cpu_count == 1 else
            f"the thread count fitted at the top of this notebook is {default_threads}: the other core(s) were taken "
            "then (by other programs or a CPU quota), and a thread per core would wait for them; rerun with nothing "
            "else running to measure it")))
    return ReferenceReport(said, flags, threaded, threads_line)


def summary_rows(ref_rates: dict, reference: ReferenceReport, ref_timings: dict, device: str, steps_timed: int,
                  loader_report: list[str]) -> list[str]:
    """The summary's reference rows (each named by its role, with its flags) and the DataLoader cell's last line
    (its verdict, or its refusal as 'not measurable here'), each marked '(from above)' where the figure is repeated."""
    said = []
    for i, (name, rate) in enumerate(ref_rates.items()):  # another model on larger images: the rates later labs use
        role = ROLES[0] if i == 0 and device == "cpu" else ROLES[1] if name == reference.threaded else ""
        said.append(measure.short_lines(measure.flagged(
            f"{role or 'reference workload'}, {workloads.STEP_3CONV.name} (batch 256), {name}: {rate:,.0f} samples/s "
            f"(median of {steps_timed} interleaved steps, spread {ref_timings[name].spread:.0%})",
            reference.flags[name])))
    if loader_report[-1].startswith(measure.N_M):  # the DataLoader cell's refusal: one comparison, one load figure
        return said + [f"DataLoader settings: {measure.NOT_MEASURABLE} (from above)"]
    return said + [measure.short_lines(f"DataLoader (3 interleaved epochs each), {loader_report[-1]} (from above)")]


def efficiency_against_prediction(yours: float, threads: int) -> str:
    """Exercise 4's efficiency read against section 4's prediction (faster than one thread, at most `threads` x):
    within, above or below its bounds, 1/threads to 100 %."""
    bounds = f"the predicted efficiency of {1 / threads:.0%}-100% (a speedup above 1x, at most {threads}x)"
    if yours > 1:  # section 4's line carries the note or the [!] that reads it
        return f"above {bounds}: section 4's line says how to read it"
    if yours <= 1 / threads:
        return f"below {bounds}: the threads were not faster than one thread here"
    return f"within {bounds}"
