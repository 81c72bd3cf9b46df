"""Lab 02's own table cells and lines: the hot spot's refused times, and the ceiling that chunks set on a speedup."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from .... import detectors, measure

CHUNKED = "1 device in chunks"  # the launched table's extra baseline: one device running DataParallel's chunks in turn


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


def chunk_gain(whole, chunked) -> tuple[float, float, float]:
    """(median, low, high) of one device's whole-batch step over its step in chunks, round by round."""
    ratios = measure.paired_ratios(chunked, whole)
    low, high, _ = measure.ratio_range(ratios)
    return statistics.median(ratios), low, high


def ceiling(n_devices: int, gain_low: float) -> float:
    """The most n_devices replicas can give over one device's whole-batch step: n_devices x what running the batch in
    chunks alone gains (its range's low end; no less than n_devices: a chunk that is slower caps nothing)."""
    return n_devices * max(1.0, gain_low)


def speedup_flags(speedup: float, n_devices: int, gain_low: float, cause: str | None = None) -> list:
    """The super-linear check of a DataParallel speedup over one device: above n_devices but within the chunks'
    ceiling, a note that says why (each replica's smaller chunk runs faster per sample); above the ceiling, the usual
    flag (detectors.above_device_count, against the ceiling's n_devices)."""
    top = ceiling(n_devices, gain_low)
    if speedup <= n_devices or speedup > top:
        return detectors.above_device_count(speedup, n_devices, cause) if speedup > top else []
    return [detectors.note(f"{speedup:.2f}x on {n_devices} devices, within the {top:.2f}x that {n_devices} chunks "
                           "allow (the line under the table)")]


AGREES, EXPLAINED, CONTRADICTS = "agrees with the sweep", "explained by the chunks", "contradicts the sweep"


@dataclass(frozen=True)
class LaunchedFate:
    """The one status of the launched DataParallel speedup beside the sweep's at the neighbouring batches: `status`
    (AGREES, EXPLAINED or CONTRADICTS) and the row's warnings (a note, or [!] flags, never both)."""

    status: str
    flags: list


def launched_fate(speedup: float, n_devices: int, gain: tuple[float, float, float], neighbours: dict, *,
                  where: str, cause: str | None = None, busy_cores: tuple[float, int] | None = None,
                  lab_figure: str = "") -> LaunchedFate:
    """One status for DataParallel's launched speedup, by one rule: within the sweep's figures at the neighbouring
    batches (`neighbours`: batch -> speedup, +- detectors.TWICE_TOLERANCE), it agrees (a speedup above n_devices then
    reads against the chunks' ceiling: speedup_flags); outside them, the chunks' own gain (`gain`, chunk_gain) explains
    the gap only where the speedup without it (speedup / the gain's median) lies within them and the speedup within
    the ceiling: one note; otherwise the two figures contradict each other: the [!] alone, no note that explains."""
    values = list(neighbours.values())

    def outside(value: float) -> list:
        """detectors.outside_neighbours of `value` against the sweep's figures."""
        return detectors.outside_neighbours(value, values, what="DataParallel", where=where,
                                            tolerance=detectors.TWICE_TOLERANCE, cause=cause, busy_cores=busy_cores,
                                            lab_figure=lab_figure)

    if not outside(speedup):
        return LaunchedFate(AGREES, speedup_flags(speedup, n_devices, gain[1], cause))
    median, low, _ = gain
    without = speedup / median  # what the devices gave beyond the chunks' own gain
    if low > 1 and speedup <= ceiling(n_devices, low) and not outside(without):
        at = (f"batch {next(iter(neighbours))}" if len(neighbours) == 1 else
              "batches " + " and ".join(map(str, neighbours)))
        return LaunchedFate(EXPLAINED, [detectors.note(
            f"{speedup:.2f}x = the chunks' own {median:.2f}x (the line under the table) x {without:.2f}x from "
            f"{n_devices} devices, and {without:.2f}x lies within the sweep's {min(values):.2f}-{max(values):.2f}x at "
            f"{at} (+-{detectors.TWICE_TOLERANCE:.0%}): the chunks explain this figure's gap to the sweep")])
    flags = outside(speedup)
    return LaunchedFate(CONTRADICTS, flags + [f for f in speedup_flags(speedup, n_devices, gain[1], cause)
                                              if detectors.is_impossible(f)])


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
    return head + why + "; this table's is the lab's figure (interleaved with one device)", flags


def slower_line(verdict) -> str | None:
    """Where a DDP-vs-DataParallel verdict's whole range lies below 1 (decided or not), the line that says DDP was
    slower here and by how much; None otherwise (a refused verdict reads no range)."""
    if verdict.verdict == measure.CANNOT_SEE or verdict.high >= 1:
        return None
    return (f"  the whole range lies below 1: DDP was slower than DataParallel here, its step "
            f"{1 / verdict.high:.2f}-{1 / verdict.low:.2f}x DataParallel's")


LOOSE = 2.0  # one rank's all-reduce median over this many times another's: mostly waiting, a loose bound


def loose_bound_line(allreduce_ms) -> str | None:
    """Where one rank's all-reduce median is over LOOSE x another's, the line that says the bound built on the larger
    (the verdict's all-reduce share) is loose: that rank mostly waited inside the all-reduce for the other to arrive,
    and the faster rank's time is nearer the communication itself; None where the ranks' times are close."""
    times = [float(t) for t in allreduce_ms]
    if len(times) < 2 or min(times) <= 0 or max(times) <= LOOSE * min(times):
        return None
    slow, fast = times.index(max(times)), times.index(min(times))
    return (f"  the bound the verdict below tests is loose: rank {slow}'s {max(times):.2f} ms includes waiting inside the all-reduce for rank "
            f"{fast}, whose own took {min(times):.2f} ms, so up to {1 - min(times) / max(times):.0%} of it is waiting, "
            "not communication (theory: the all-reduce proper is nearer the smaller time)")


def chunk_line(speedup: float | None, n_devices: int, batch: int, gain: tuple[float, float, float]) -> str:
    """Why DataParallel may beat n_devices x one device here, computed: the chunks' own gain and the ceiling it sets;
    `speedup`: DataParallel's over one device, None where the run refuses it (then the line does not read it)."""
    median, low, high = gain
    head = (f"one device running the batch as DataParallel's {n_devices} chunks of {batch // n_devices}, one after "
            f"another, in the same rounds: {median:.2f}x its whole-batch step (range {low:.2f}-{high:.2f})")
    if low <= 1:
        return (head + f": not faster per sample over the whole range, so {n_devices}x one device is DataParallel's "
                "ceiling here" + (f" (its {speedup:.2f}x read against {n_devices}x)" if speedup is not None else ""))
    top = ceiling(n_devices, low)
    return (head + f": a smaller chunk runs faster per sample (the page faults below are one measured cause), so "
            f"{n_devices} replicas may reach {n_devices} x {low:.2f} = {top:.2f}x one device (the range's low end), "
            f"more than {n_devices}x" + (f"; DataParallel's {speedup:.2f}x is {speedup / top:.0%} of that"
                                         if speedup is not None else ""))


def faults_line(per_step: dict, baseline: str = "1 device", same_work: str = CHUNKED) -> str:
    """The candidates' page faults per step, and what they say: where the whole-batch baseline faults in over 10x the
    pages that the same work in chunks does, its large tensors were handed back to the OS and mapped afresh each step."""
    shown = ", ".join(f"{name} {n:,.0f}" for name, n in per_step.items())
    head = f"page faults per step (pages of fresh memory the OS zeroed): {shown}"
    whole, chunks = per_step.get(baseline, 0), per_step.get(same_work)
    if chunks is None:
        return head
    if whole > 10 * max(chunks, 10):
        return (head + f": over 10x as many for {baseline}'s whole batch as for the same work in chunks: its large tensors go back to the OS when freed and are mapped afresh each step, a page "
                "at a time, where the chunks' smaller ones are reused. That slows the baseline, so a speedup over it "
                "can exceed the device count")
    return head + f": {baseline} faults in no more than 10x the pages of the same work in chunks here"
