"""Lab 02's own table cells and lines: the hot spot's refused times, the launched speedup's one status, and the
allocator trap (one device's step with glibc's default allocator beside the fixed one)."""
from __future__ import annotations

import resource
import statistics
from dataclasses import dataclass

from .... import detectors, measure

def hotspot_times(alone_ms: float, step_ms: float, refused: bool) -> str:
    """The hot spot's time columns (serial phases, step, serial/step): n/m in each where the row is refused
    (oversubscribed: no speed measurement), since a share of two refused times is refused too."""
    if refused:
        return f"{measure.N_M:>15}{measure.N_M:>9}{measure.N_M:>11}"
    return f"{alone_ms:>12.2f} ms{step_ms:>6.1f} ms{alone_ms / step_ms:>11.0%}"


def oversubscribed_line(cores: int) -> str:
    """The line under the hot spot's table: what n/m means there, and why."""
    return (f"{measure.N_M}: {measure.NOT_MEASURABLE}: more devices than cores ({cores}), so the replicas shared cores: "
            "the row's times are no speed measurement (its bytes are counted, not timed)")


AGREES, CONTRADICTS = "agrees with the sweep", "contradicts the sweep"


@dataclass(frozen=True)
class LaunchedFate:
    """The one status of the launched DataParallel speedup beside the sweep's at the neighbouring batches: `status`
    (AGREES or CONTRADICTS) and the row's warnings."""

    status: str
    flags: list


def launched_batches(sweep_batches, batch: int) -> list[int]:
    """The sweep's batches the launched row at `batch` is checked against: `batch` itself where the sweep timed it
    (DataParallel's speedup need not move one way with the batch: it can peak between two sweep batches), else the
    nearest sweep batch on each side."""
    if batch in sweep_batches:
        return [batch]
    below = [b for b in sweep_batches if b <= batch][-1:] or list(sweep_batches[:1])
    above = [b for b in sweep_batches if b >= batch][:1] or list(sweep_batches[-1:])
    return list(dict.fromkeys(below + above))


def launched_fate(speedup: float, n_devices: int, neighbours: dict, *, where: str, cause: str | None = None,
                  busy_cores: tuple[float, int] | None = None, lab_figure: str = "",
                  settings: str = "the neighbouring settings") -> LaunchedFate:
    """One status for DataParallel's launched speedup, by one rule: within the sweep's figures at the neighbouring
    batches (`neighbours`: batch -> speedup, +- detectors.TWICE_TOLERANCE) it agrees, and a speedup above n_devices
    gets above_device_count's note or [!]; outside them the two figures contradict each other: the [!] alone."""
    above = detectors.above_device_count(speedup, n_devices, cause)
    flags = detectors.outside_neighbours(speedup, list(neighbours.values()), what="DataParallel", where=where,
                                         tolerance=detectors.TWICE_TOLERANCE, cause=cause, busy_cores=busy_cores,
                                         lab_figure=lab_figure, settings=settings)
    if not flags:
        return LaunchedFate(AGREES, above)
    return LaunchedFate(CONTRADICTS, flags + [f for f in above if detectors.is_impossible(f)])


TRACED = ("traced in this notebook's process, {steps} steps in a row with a timer around every phase, against a fresh "
          "launched process's rounds interleaved with one device")


def traced_line(traced_s: float, traced_spread: float, table_s: float, table_spread: float, *, batch: int,
                steps: int, launched: bool = False) -> tuple[str, list]:
    """The traced step (section 2) beside the launched table's DataParallel step: (the line, its [!] flags). Within
    detectors.TWICE_TOLERANCE they agree; beyond it, the line says why two methods may part further (up to
    detectors.CONDITION_FACTOR) than one method timed twice may; beyond that, measured_twice's [!]."""
    args = (batch / traced_s, traced_spread, batch / table_s, table_spread)
    condition = TRACED.format(steps=steps)
    flags = [f for f in detectors.measured_twice(*args, what=f"DataParallel's step (batch {batch})",
                                                 first_name="the traced step in section 2", second_name="this table",
                                                 condition=condition, when="in this run, minutes apart")
             if detectors.is_impossible(f)]
    gap = max(traced_s, table_s) / min(traced_s, table_s)
    head = (f"DataParallel's step, batch {batch}: traced in section 2 {traced_s * 1e3:.1f} ms, "
            f"{'launched' if launched else 'in this table'} {table_s * 1e3:.1f} ms, {gap:.2f}x apart")
    agree = detectors.twice_agree(*args)
    if flags:
        why = ""
    elif agree is not None:  # within the tolerance, or repeats too noisy to tell: the course's one rule says so
        why = f": {agree}"
    else:  # beyond what one method timed twice may part, within what two methods may
        why = (f": two methods, not one timed twice ({condition}), so they may part by up to "
               f"{detectors.CONDITION_FACTOR:g}x (the {detectors.TWICE_TOLERANCE:.0%} rule bounds one method timed "
               "twice)")
    return head + why + "; a cross-check only: the lab's figures for DataParallel at this batch are the sweep's", flags


def slower_line(verdict) -> str | None:
    """Where a DDP-vs-DataParallel verdict's whole range lies below 1 (decided or not), the line that says DDP was
    slower here and by how much; None otherwise (a refused verdict reads no range)."""
    if verdict.verdict == measure.CANNOT_SEE or verdict.high >= 1:
        return None
    return (f"  the whole range lies below 1: DDP was slower than DataParallel here, its step "
            f"{1 / verdict.high:.2f}-{1 / verdict.low:.2f}x DataParallel's")




def allocator_lines(timings: dict, faults: dict, *, batch: int) -> list[str]:
    """One device's step under two allocator settings timed in the same rounds (`timings`: label -> Timing, the
    course's fixed thresholds first; `faults`: label -> page faults per step): a line each, and the verdict the paired
    rounds give on the second against the first (slower as theory predicts, faster against it, or not distinguishable)."""
    (fixed_name, fixed), (other_name, other) = timings.items()
    width = max(len(name) for name in timings) + 2
    lines = [f"{name:<{width}}{t.median * 1e3:9.1f}{t.spread:8.0%}{faults[name]:13,.0f}" for name, t in timings.items()]
    ratios = measure.paired_ratios(fixed, other)  # the other's time over the fixed one's, round by round: > 1, slower
    median, (low, high, _) = statistics.median(ratios), measure.ratio_range(ratios)
    figure = f"{median:.2f}x the fixed one's (range {low:.2f}-{high:.2f}, {len(ratios)} paired rounds)"
    if low > 1:
        verdict = f"{other_name} slower: its step took {figure}, as theory predicts for fresh zeroed pages"
    elif high < 1:
        verdict = f"[!] {other_name} faster: its step took {figure}, against theory"
    else:
        verdict = f"not distinguishable here: {other_name}'s step took {figure}, a range that holds 1"
    return [f"one device's whole-batch step (batch {batch}), both settings in the same rounds:",
            f"{'allocator':<{width}}{'ms/step':>9}{'spread':>8}{'faults/step':>13}", *lines, f"verdict: {verdict}"]


def fresh_pages_line(blocks: int, nbytes: int, faults: float, *, threshold: int, page: int | None = None) -> str:
    """Why the held-low allocator faults so often: the bytes one step allocates in blocks above `threshold` (each
    served with fresh pages), in pages of `page` bytes (this machine's page size), beside the faults per step."""
    page = page or resource.getpagesize()
    pages = nbytes / page
    return (f"why so many faults: one step allocates {nbytes / 2**20:.1f} MiB in {blocks} blocks above "
            f"{threshold // 1024} KiB (activations, their gradients, the backward's temporaries, the weights' "
            f"gradients; counted by torch's profiler), each served with fresh pages under the held-low threshold: "
            f"{pages:,.0f} pages of {page // 1024} KiB, against {faults:,.0f} faults/step measured "
            f"(faults / pages = {faults / pages:.2f})")


def trap_payoff_line(fixed, trapped, dp_speedup: float, n_devices: int, *, dp_figure: str) -> str:
    """The payoff of the allocator section: DataParallel's speedup (`dp_speedup`, over one device with the fixed
    allocator) as it would read against a one-device baseline caught in the trap (`trapped`, paired with `fixed`)."""
    slowed = statistics.median(measure.paired_ratios(fixed, trapped))  # the trapped step over the fixed one
    reads = slowed * dp_speedup
    over = "above" if reads > n_devices else "not above"
    return (f"with the trap on one device's step only, DataParallel would read as {slowed:.2f} x {dp_speedup:.2f} = "
            f"{reads:.2f}x one device ({dp_figure}), {over} the {n_devices}x that {n_devices} devices allow at most")


@dataclass(frozen=True)
class StepFigure:
    """One timing of DataParallel's step at one batch: where it was taken, its median and spread (seconds), device 0's
    lone time in it (ms) and how it was timed (the method, in words)."""

    where: str
    step_s: float
    spread: float
    alone_ms: float
    how: str


def one_figure_lines(lab: StepFigure, others, *, batch: int) -> tuple[list[str], list]:
    """DataParallel's step at `batch` as the lab timed it in several cells: one row each, the lab's figure (`lab`,
    the sweep's, the only one timed beside one device) first, the others as a factor of it with their method, then
    whether each lies within detectors.TWICE_TOLERANCE of it, within CONDITION_FACTOR (two methods), or beyond ([!])."""
    width = max(len(f.where) for f in (lab, *others)) + 2
    lines = [f"DataParallel's step at batch {batch}, timed in {1 + len(others)} cells (ms per step; device 0 alone in brackets):",
             f"  {lab.where:<{width}}{lab.step_s * 1e3:7.2f} ({lab.alone_ms:.2f})  the lab's: {lab.how}"]
    flags: list = []
    far = []
    for f in others:
        lines.append(f"  {f.where:<{width}}{f.step_s * 1e3:7.2f} ({f.alone_ms:.2f})  {f.step_s / lab.step_s:.2f}x "
                     f"the lab's: {f.how}")
        flags += [x for x in detectors.measured_twice(batch / lab.step_s, lab.spread, batch / f.step_s, f.spread,
                                                      what=f"DataParallel's step (batch {batch})",
                                                      first_name=lab.where, second_name=f.where,
                                                      condition="timed in another cell, by another method")
                  if detectors.is_impossible(x)]
        if max(f.step_s, lab.step_s) / min(f.step_s, lab.step_s) - 1 > detectors.TWICE_TOLERANCE:
            far.append(f.where)
    said = (f"all within the {detectors.TWICE_TOLERANCE:.0%} by which two timings of one step may differ: quote the "
            "lab's" if not far else
            f"{' and '.join(far)} beyond {detectors.TWICE_TOLERANCE:.0%} of the lab's figure, within the "
            f"{detectors.CONDITION_FACTOR:g}x two methods may part: quote the lab's, which one device shares")
    lines.append(measure.short_lines(f"so: {said}"))
    return lines, flags
