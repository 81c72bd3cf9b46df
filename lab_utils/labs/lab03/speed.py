"""Lab 03's speed comparison read one way: when a row of N workers beats the one-thread baseline by more than N, the
baseline ran slow in this run (the [!] under the table says so), so no ratio over it is read, anywhere."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ... import measure


def slowed_baseline(rates: dict[str, float], base_name: str, world_size: int) -> str | None:
    """Why this run's one-thread baseline reads as slowed, or None: a row beat it by more than `world_size`, which
    the same work on `world_size` times the hardware cannot (plausibility's [!] rule: speedup above the devices)."""
    base = rates[base_name]
    over = {name: rate / base for name, rate in rates.items() if name != base_name and rate / base > world_size}
    if not over:
        return None
    name, ratio = max(over.items(), key=lambda kv: kv[1])
    return (f"the one-thread baseline ran slow in this run ({name} got {ratio:.2f}x it on {world_size}x the "
            "hardware, more than the same work can gain)")


def speed_summary(rates: dict[str, float], base_name: str, world_size: int, slowed: str | None,
                  tolerance: float = 0.25) -> str:
    """The summary's speed figures over one thread, or, with a slowed baseline, Horovod-style over DDP and why the
    others are not read; DDP over N threads is buys_line's (learner s13r5c: each figure once in the summary)."""
    ddp, horovod, base = rates[f"{world_size} ranks, DDP"], rates[f"{world_size} ranks, Horovod-style"], rates[base_name]
    if slowed:
        return f"Horovod-style {horovod / ddp:.2f}x DDP; over one thread: not read, {slowed}"
    return f"{world_size} DDP ranks {ddp / base:.2f}x one thread; Horovod-style {horovod / base:.2f}x one thread"


def reading(ratio: float, tolerance: float) -> str:
    """How one speed ratio (above 1: faster) reads: 'too close to tell' within `tolerance`, else faster or slower."""
    if abs(math.log(ratio)) <= math.log(1 + tolerance):
        return "too close to tell"
    return "faster" if ratio > 1 else "slower"


def buys_line(rates: dict[str, float], world_size: int, tolerance: float,
              recipe_ratio: float | None = None, slowed: str | None = None) -> str:
    """The lab's question, what N ranks buy here, against one process with N threads: the 3-conv CNN's ratio and
    (recipe_ratio: lab 01's step over the recipe run's, same threads) the digits CNN's, each read within `tolerance`,
    then the predictions they settle and the takeaway (the ratios over one thread: speed_summary's line)."""
    ddp, threads = rates[f"{world_size} ranks, DDP"], rates[f"1 process x {world_size} threads"]
    against = [("3-conv CNN", ddp / threads)] + ([("digits CNN", recipe_ratio)] if recipe_ratio else [])
    readings = [(name, ratio, reading(ratio, tolerance)) for name, ratio in against]
    gain = ("a gain" if all(r == "faster" for _, _, r in readings) else
            "no gain" if all(r != "faster" for _, _, r in readings) else "a gain on one CNN only")
    return (f"what {world_size} ranks buy here: against one process with {world_size} threads, {gain}: " +
            ", ".join(f"{name} {ratio:.2f}x ({r})" for name, ratio, r in readings) + ". " +
            settle_line(readings[0][2], readings[1][2] if len(readings) > 1 else None, tolerance,
                        ceiling(rates, world_size, slowed)) +
            f". The takeaway: {lesson(readings[0][2])}")


def ceiling(rates: dict[str, float], world_size: int, slowed: str | None = None) -> float | None:
    """The most N ranks can beat one process's N threads by on the same cores (sections 4 and 6 joined): N threads
    that reach s times one thread waste 1 - s/N of the cores, which ranks can win at most, N/s; None where the
    one-thread baseline ran slow (slowed) or the threads wasted nothing."""
    speedup = rates[f"1 process x {world_size} threads"] / rates["1 process x 1 thread"]
    return None if slowed or speedup >= world_size else world_size / speedup


def ceiling_line(rates: dict[str, float], world_size: int, slowed: str | None = None) -> str:
    """The threads' measured waste and the ceiling it sets on the ranks' gain ('' where ceiling() is None)."""
    top = ceiling(rates, world_size, slowed)
    if top is None:
        return ""
    speedup = world_size / top
    return (f"{world_size} threads ran {speedup:.2f}x one thread on {world_size} cores, wasting "
            f"{1 - speedup / world_size:.0%} of them, so ranks could beat them by at most {top:.2f}x here")


def settle_line(conv: str, digits: str | None, tolerance: float, top: float | None = None) -> str:
    """Sections 4 and 6 as one theory: ranks beat threads by at most what threads waste (top: that
    ceiling, measured in section 6); then, in plain words per CNN (learner s13r7c: 'neither form's direction' needed
    decoding), what this run showed: ranks lose (what they pay exceeded the threads' waste), win, or level."""
    allows = "that ceiling" if top else "what the threads' waste allows"  # the ceiling's figure: said once, before
    # a learner walk: 'as section 4's threads that waste nothing predict' read against section 6's measured waste
    said = {"slower": "ranks lose: what they pay (the all-reduce, one more process) exceeded what the threads wasted",
            "faster": "ranks win, as threads that waste cores allow" + (", within that ceiling" if top else ""),
            "too close to tell": f"level (within {tolerance:.0%}), inside {allows}"}
    # the takeaway that follows states the theory itself: here only the ceiling section 6 measured
    theory = f"Section 6's threads left the ranks at most {top:.2f}x to win. " if top else ""
    if digits == conv:
        return f"{theory}Both CNNs: {said[conv]}"
    return f"{theory}3-conv CNN: {said[conv]}" + (f"; digits CNN: {said[digits]}" if digits else "")


def as_lab01_kernel() -> dict:
    """launch_jobs' settings for the one-process rows: a fresh interpreter that reads this kernel's OpenMP wait policy
    when torch loads, so its threads wait between operations as lab 01's kernel's did. A rank forked from the fork
    server has PASSIVE (launch's default: idle threads sleep at once, no spinning on a core other ranks need): learner
    s12r4c saw lab 03's 2-thread row 1.37x below lab 01's while the 1-thread rows agreed within 2%; measured here, a
    2-thread step of this CNN slept and woke its threads 132 times with PASSIVE, 0 times with the policy unset."""
    return {"start": "spawn", "env": {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}}


def allreduce_pair(*, table_ms: float, table_batch: int, sum_ms: float, batch: int,
                   wait_ms: float | None = None, after_ms: float | None = None,
                   tolerance: float = 0.25) -> str:
    """Section 6's all-reduce per step beside the bucket test's for the same gradients, and what this run can say of
    the gap: agreement within `tolerance`, or the wait for the other rank (wait_ms: rank 0's, measured from both
    ranks' hand-over times, where given), said plainly not to explain a gap it is too small for (learner s13r6c: a
    0.0 ms wait offered as the reason for 4.5 vs 2.0 ms). sum_ms: the sum timed as section 6 times it, from the
    bucket's hand-over to its result; after_ms: the line above's all-reduce after the last gradient, named with its
    span (learner s13r5c: 3.3 vs 3.1 ms)."""
    above = (f"; the {after_ms:.1f} ms above spans the last gradient to backward()'s return"
             if after_ms is not None else "")
    said = (f"the same gradients' all-reduce, from hand-over to sum as section 6 times it: {table_ms:.1f} ms a step "
            f"in section 6 ({table_batch} samples a rank), {sum_ms:.1f} ms here ({batch} a rank{above})")
    apart = max(table_ms, sum_ms) / max(min(table_ms, sum_ms), 1e-9)
    if apart <= 1 + tolerance:
        return said + f": within the {tolerance:.0%} two timings apart may differ by"
    if wait_ms is None:
        return said + f", {apart:.1f}x apart: this run did not time the wait for the other rank, which may explain it"
    # learner s13r7c: 3.2 vs 4.2 ms less a 0.6 ms wait left 3.6 ms, with nothing said of it; every figure as printed
    wait, rest = round(wait_ms, 1), round(round(sum_ms, 1) - round(wait_ms, 1), 1)
    said = (f"the same gradients' all-reduce, hand-over to sum: {sum_ms:.1f} ms here ({batch} samples a rank{above}), "
            f"of which {wait:.1f} ms was rank 0 waiting for the other rank (median; another batch changes it); ")
    apart = max(table_ms, rest) / max(min(table_ms, rest), 1e-9)
    if apart <= 1 + tolerance:
        return said + (f"the other {rest:.1f} ms is within {tolerance:.0%} of section 6's {table_ms:.1f} ms "
                       f"({table_batch} a rank)")
    if table_ms > rest:  # the larger figure first: "A is Nx B" with A the larger (a learner read 1.9 as 5.1x 9.8)
        return said + (f"section 6's {table_ms:.1f} ms is {apart:.1f}x this {rest:.1f} ms, beyond the {tolerance:.0%} "
                       "two timings may differ by: the gradient bytes are the same, and section 6's figure also holds "
                       "its rank's wait for the slower one, which it does not time apart")
    return said + (f"this {rest:.1f} ms is {apart:.1f}x section 6's {table_ms:.1f} ms, beyond the {tolerance:.0%} two "
                   "timings may differ by, for the same gradient bytes: this run does not time what else differs")


@dataclass(frozen=True)
class Reading:
    """Section 6's launches read once: medians (samples/s), the widest step spread and the flags of each row, why the
    comparison is refused (None: read), why the baseline ran slow (None: it did not), DDP's all-reduce per step (ms),
    and the lines to print, the sentence to repeat first."""

    rates: dict[str, float]
    spreads: dict[str, float]
    flags: dict[str, list]
    unreadable: str | None
    slowed: str | None
    comm_ms: float
    lines: list[str]


def headline(rates: dict[str, float], world_size: int, tolerance: float, slowed: str | None,
             unreadable: str | None) -> str:
    """The one plain sentence section 6 answers with: N DDP ranks over one thread, then against this run's own one
    process with N threads, read within `tolerance`, then the lesson the reading gives (learner s13r5c: one figure
    per comparison; the other labs' figures are the results table's notes, not a second reading here)."""
    ddp, threads = rates[f"{world_size} ranks, DDP"], rates[f"1 process x {world_size} threads"]
    if unreadable:
        return f"{world_size} DDP ranks against one process: {measure.NOT_MEASURABLE} ({unreadable})"
    ours = reading(ddp / threads, tolerance)
    over_one = "" if slowed else f"{ddp / rates['1 process x 1 thread']:.2f}x one process with one thread; "
    against = {"too close to tell": f"level with one process with {world_size} threads ({ddp / threads:.2f}x it: "
                                    f"within the {tolerance:.0%} two launches may differ by)",
               "faster": f"faster than one process with {world_size} threads ({ddp / threads:.2f}x it)",
               "slower": f"slower than one process with {world_size} threads ({ddp / threads:.2f}x it)"}[ours]
    top = ceiling_line(rates, world_size, slowed)  # sections 4 and 6 joined: the most ranks could win (s13r6c)
    return f"{world_size} DDP ranks ran {over_one}{against}. " + (f"{top[0].upper()}{top[1:]}. " if top else "") + \
        f"The lesson: {lesson(ours)}"


def lesson(conv: str) -> str:
    """What the 3-conv CNN's reading of DDP against threads teaches (conv: reading()'s word), said where it is read."""
    if conv == "faster":
        return "DDP's ranks beat one process's threads even on this CPU"
    return ("on a CPU, ranks and threads share the same cores, so ranks win at most what threads waste; "
            "DDP pays off where one process cannot use the other devices (a GPU or a machine per rank)")


def report(speed: dict, world_size: int, hw, results_dir, tolerance: float, unreadable: str | None = None) -> Reading:
    """Section 6's table of launches (`speed`: row name -> jobs, each a list of rank results) read against the
    one-thread row and lab 01's rows, with the busy-machine refusal (`unreadable`) and the slowed-baseline rule."""
    from ... import detectors, workloads

    rates = {name: float(np.median([job[0]["samples_per_s"] for job in jobs])) for name, jobs in speed.items()}
    spreads = {name: max(job[0]["step_spread"] for job in jobs) for name, jobs in speed.items()}
    base = rates["1 process x 1 thread"]
    step = workloads.STEP_3CONV.name
    lab01 = measure.reference_rate(step, "1 process x 1 thread", directory=results_dir)
    lab01_how = measure.reference_conditions(step, "1 process x 1 thread", threads=1, directory=results_dir)
    flags, table = {}, []
    for name, rate in rates.items():
        devices = world_size if "ranks" in name or "threads" in name else 1
        flags[name] = measure.plausibility(speedup=rate / base if devices > 1 else None, devices=devices,
                                           oversubscribed=devices > hw.cpu_count and not hw.gpus,
                                           baseline_rate=rate if devices == 1 and "1 thread" in name else None,
                                           reference_rate=lab01, reference_cause=lab01_how,
                                           threads=world_size if name.endswith("threads") else None,
                                           refused=unreadable is not None)  # a refused speedup (n/m): no flag reads it
        shown = f"{rate / base:5.2f}x" if unreadable is None or devices == 1 else "n/m"  # n/m: said below the table
        table.append(measure.table_row(f"{name:<30} {rate:8.0f} samples/s  {shown:>7}  "
                                       f"(steps spread {spreads[name]:.0%})", flags[name]))
    slowed = None if unreadable else slowed_baseline(rates, "1 process x 1 thread", world_size)
    said = [headline(rates, world_size, tolerance, slowed, unreadable)]  # prose: wrapped at the end
    notes = [detectors.noise_line(spreads.values(), "rows", over="steps") or "noise: no row's steps spread more than "
             f"{detectors.NOISY_SPREAD * 100:.0f} %"]
    if slowed:  # one reading everywhere: no ratio over a slowed baseline is read, here, in the table or the summary
        notes.append(f"so {slowed}: every 'x one thread' above is inflated by it")
    # busy (unreadable): the table's n/m and the first line's refusal say it once; no ratio is printed
    # the first line reads DDP against threads: no second line repeats its figure
    ddp_step = 256 / rates[f"{world_size} ranks, DDP"] * 1e3
    comm = float(np.median([job[0]["allreduce_ms"] for job in speed[f"{world_size} ranks, DDP"]]))
    notes.append(f"a DDP step took {ddp_step:.1f} ms, of which {comm:.1f} ms ({comm / ddp_step:.0%}) in the gradient "
                 "all-reduce (waiting for the slower rank included)")
    lines = [*map(measure.short_lines, said), "", *table, *map(measure.short_lines, notes[:1]),
             *measure.table_lines(flags.values(), list(flags)), *map(measure.short_lines, notes[1:])]
    return Reading(rates, spreads, flags, unreadable, slowed, comm, lines)


def beside_lab01(name: str, rate: float, spread: float | None, directory=None) -> str:
    """Lab 01's figure for the same one-process row and how far apart the two are, to add to the row's launched note
    (learner s13r6c: cell 88 promised each note names the other lab's figure; 10,776 vs 9,018 went unsaid), or ''
    where lab 01 has no such row or the results table's own note will name it (more apart than its repeats allow)."""
    from ... import detectors, workloads

    lab01 = measure.reference_row(workloads.STEP_3CONV.name, name, directory=directory)
    if lab01 is None or not lab01.samples_per_s or detectors.measured_twice(
            lab01.samples_per_s, lab01.spread, rate, spread, what="", first_name="", second_name="",
            condition="launched", under_row=True):
        return ""
    apart = max(rate, lab01.samples_per_s) / min(rate, lab01.samples_per_s)
    return f"; lab 01 measured {detectors.figure_text(lab01.samples_per_s)} in its kernel, {apart:.2f}x apart"


def results(reading: Reading, speed: dict, world_size: int, device: str, launched: list, directory=None) -> list:
    """The results rows of section 6's launches, each with its flags, the refusal on the rows read over the one-thread
    row, `launched` (lab 01 timed the 1-process rows in its kernel; its note names lab 01's figure, beside_lab01) on
    those, and a slowed baseline's condition."""
    from ... import detectors, workloads

    slow_base = [detectors.condition(reading.slowed)] if reading.slowed else []
    refused = (measure.refusal(f"{measure.NOT_MEASURABLE}: {reading.unreadable} ({measure.UNREAD})")
               if reading.unreadable else [])
    rows = []
    for name, rate in reading.rates.items():
        ranks = world_size if "ranks" in name else 1
        threads = world_size if name.endswith(f"x {world_size} threads") else 1
        parallel = ranks > 1 or threads > 1  # read over the one-thread row: refused with it
        strategy = "ddp" if "DDP" in name else ("horovod-style" if "Horovod" in name else "single-process")
        beside = beside_lab01(name, rate, reading.spreads[name], directory) if ranks == 1 else ""
        own = [detectors.condition(c + beside) for c in detectors.conditions_of(launched)] if beside else launched
        rows.append(measure.Result(
            lab="03", framework="torch", strategy=strategy, variant=name, world_size=ranks, device=device,
            batch_size=256, samples_per_s=rate, wall_s=256 / rate, threads=threads, repeats=len(speed[name]),
            spread=reading.spreads[name], workload=workloads.STEP_3CONV.name,
            flags=(*reading.flags[name], *(refused if parallel else []), *(own if ranks == 1 else []),
                   *(slow_base if name == "1 process x 1 thread" else []))))
    return rows


def speed_summary_lines(reading: Reading, world_size: int, launches: int, tolerance: float, *, recipe_rate: float,
                  lab01_rate: float | None, lab01_threads: int | None, load=None) -> list[str]:
    """The summary's speed lines: section 6's figures (flagged as its rows are, refused under load) and what N ranks
    buy, with the recipe run against lab 01's step where lab 01 used N threads (load: conditions.Load, for tests)."""
    ddp_name, threads_name = f"{world_size} ranks, DDP", f"1 process x {world_size} threads"
    figures = measure.as_result(speed_summary(reading.rates, "1 process x 1 thread", world_size, reading.slowed,
                                              tolerance), workers=world_size, load=load)
    said = [measure.short_lines(measure.flagged(
        f"speed (medians of {launches} launches each; the DDP and Horovod-style launches alternating): {figures}",
        reading.flags[ddp_name] + reading.flags[threads_name]))]
    if reading.unreadable:  # section 6 under load: the line above already refused these ratios
        return said
    recipe_ratio = recipe_rate / lab01_rate if lab01_rate and lab01_threads == world_size else None
    said.append(measure.short_lines(measure.as_result(buys_line(reading.rates, world_size, tolerance, recipe_ratio,
                                                                reading.slowed),
                                                      workers=world_size, load=load)))
    return said
