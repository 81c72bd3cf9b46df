"""Lab 03's speed comparison read one way: when a row of N workers beats the one-thread baseline by more than N, the
baseline ran slow in this run (the [!] under the table says so), so no ratio over it is read, anywhere."""
from __future__ import annotations

import math

from ... import allocator, measure


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
    """The summary's speed figures: over one thread and over N threads (read within `tolerance`), or, with a slowed
    baseline, only the ratios that do not use it (DDP over N threads, Horovod-style over DDP) and why the others are
    not read."""
    ddp, threads = rates[f"{world_size} ranks, DDP"], rates[f"1 process x {world_size} threads"]
    horovod, base = rates[f"{world_size} ranks, Horovod-style"], rates[base_name]
    if slowed:
        return (f"{world_size} DDP ranks {ddp / threads:.2f}x one process with {world_size} threads "
                f"({reading(ddp / threads, tolerance)}); Horovod-style "
                f"{horovod / ddp:.2f}x DDP; over one thread: not read, {slowed}")
    return (f"{world_size} DDP ranks {ddp / base:.2f}x one thread, {ddp / threads:.2f}x one process with {world_size} "
            f"threads ({reading(ddp / threads, tolerance)}); Horovod-style {horovod / base:.2f}x one thread")


def reading(ratio: float, tolerance: float) -> str:
    """How one speed ratio (above 1: faster) reads: 'too close to tell' within `tolerance`, else faster or slower."""
    if abs(math.log(ratio)) <= math.log(1 + tolerance):
        return "too close to tell"
    return "faster" if ratio > 1 else "slower"


def buys_line(rates: dict[str, float], world_size: int, tolerance: float, slowed: str | None,
              recipe_ratio: float | None = None) -> str:
    """The lab's question, what N ranks buy here, from this run's own ratios: over one thread (unless the baseline
    ran slow), and over one process with N threads, the 3-conv CNN's and (recipe_ratio: lab 01's step over the
    recipe run's, same threads) the digits CNN's, each read within `tolerance`."""
    ddp, threads = rates[f"{world_size} ranks, DDP"], rates[f"1 process x {world_size} threads"]
    base = rates["1 process x 1 thread"]
    against = [("3-conv CNN", ddp / threads)] + ([("digits CNN", recipe_ratio)] if recipe_ratio else [])
    readings = [(name, ratio, reading(ratio, tolerance)) for name, ratio in against]
    gain = ("a gain" if all(r == "faster" for _, _, r in readings) else
            "no gain" if all(r != "faster" for _, _, r in readings) else "a gain on one CNN only")
    over_one = "" if slowed else f"{ddp / base:.2f}x one thread (3-conv CNN); "
    return (f"what {world_size} ranks buy here: {over_one}against one process with {world_size} threads, {gain}: " +
            ", ".join(f"{name} {ratio:.2f}x ({r})" for name, ratio, r in readings))


SAME = 0.05  # two rates this close are read as one: below what this machine's repeats resolve


def _apart(a: float, b: float) -> float:
    """How far apart two rates are, as the larger over the smaller (1.00x: equal)."""
    return max(a, b) / min(a, b)


def _ratios_line(here: float, lab01: float, world_size: int, tolerance: float) -> str:
    """Both labs' figures within `tolerance`: their 'N threads over one' ratios compared, agreeing only within it."""
    ratio_apart = _apart(here, lab01)
    return (f"the two {world_size}-thread figures are within {tolerance:.0%} of each other; '{world_size} threads "
            f"over one' {here:.2f}x here, {lab01:.2f}x in lab 01, "
            f"{ratio_apart:.2f}x apart: " + (f"they agree within {tolerance:.0%}" if ratio_apart <= 1 + tolerance else
                                            f"beyond the {tolerance:.0%} two runs may differ by"))


def baseline_lines(rates: dict[str, float], world_size: int, lab01_one: float | None, lab01_many: float | None,
                   tolerance: float, cause: str | None = None, lab01_allocator: str | None = None) -> list[str]:
    """This run's launched one-thread baseline beside lab 01's kernel figure: how far apart and why (cause: a measured
    cause, else the measured fact: which kind of process ran the step faster, and what is left to part them once
    both ran this run's allocator; `lab01_allocator`: lab 01's row's setting, allocator.setting(), None if unknown),
    then whether the N-thread figures agree, so a learner sees where the two labs' 'x one thread' differ. No lab 01
    row: one line saying so."""
    one, many = rates["1 process x 1 thread"], rates[f"1 process x {world_size} threads"]
    if not lab01_one:
        return ["lab 01 has not run here, so there is no lab 01 baseline to compare this one with"]
    apart = _apart(one, lab01_one)
    faster = ("this launched process ran the same step faster than lab 01's Jupyter kernel" if one > lab01_one else
              "lab 01's Jupyter kernel ran the same step faster than this launched process")
    here = allocator.setting()
    if lab01_allocator is None or not here:  # unknown, or no allocator lab_utils sets (not glibc): nothing to say
        left = ""
    elif not lab01_allocator:  # a row from before results rows recorded it
        left = ("; lab 01's row did not record its allocator, so the page faults a step (lab_utils.allocator) "
                "may part the two")
    elif lab01_allocator != here:  # then the page faults a step may differ
        left = (f"; lab 01's row ran {lab01_allocator}, this one {here}: another allocator, whose fresh pages "
                "a step can move a step (lab_utils.allocator)")
    else:
        left = ("; both take the same page faults, since lab_utils fixes the allocator, so what is left is two "
                "processes timed at different moments (the machine's load then, each one's own threads)")
    why = f"the same rate within {SAME:.0%}" if apart <= 1 + SAME else cause or faster + left
    said = [f"one thread: {one:,.0f} samples/s here (launched) vs {lab01_one:,.0f} in lab 01 (its kernel), "
            f"{apart:.2f}x apart: {why}"]
    if lab01_many:
        many_apart = _apart(many, lab01_many)
        said.append(f"{world_size} threads: {many:,.0f} here vs {lab01_many:,.0f} in lab 01, {many_apart:.2f}x apart: " + (
            f"they agree within {tolerance:.0%}, so '{world_size} threads over one' ({many / one:.2f}x here, "
            f"{lab01_many / lab01_one:.2f}x in lab 01) differs by the one-thread baseline"
            if many_apart <= 1 + tolerance and apart > max(many_apart, 1 + SAME) else
            _ratios_line(many / one, lab01_many / lab01_one, world_size, tolerance) if many_apart <= 1 + tolerance else
            f"the {world_size}-thread figures differ too, beyond the {tolerance:.0%} two runs may differ by"))
    return said


def allreduce_pair(*, table_ms: float, table_batch: int, after_ms: float, sum_ms: float, batch: int) -> str:
    """Why section 6's all-reduce per step and the bucket test's 'after the last gradient' need not agree for the
    same gradients: another batch per rank (another compute, so another wait for the slower rank), and another
    span timed (after the last gradient also holds DDP's work around the sum; sum_ms: the sum timed as section 6
    times it, from the bucket's hand-over to its result)."""
    return (f"section 6 timed the same gradients' all-reduce at {table_ms:.1f} ms a step: {table_batch} samples a "
            f"rank, from the bucket's hand-over to its sum. Here {batch} a rank, and the {after_ms:.1f} ms after the "
            f"last gradient also hold DDP's work around the sum (the sum alone, timed as there: {sum_ms:.1f} ms). "
            "Each includes waiting for the slower rank, which another batch changes: the figures need not agree")


def threads_verdict(rates: dict[str, float], world_size: int, tolerance: float, refused: str | None = None) -> str:
    """Theory's prediction, DDP's N one-thread ranks ahead of one process with N threads, checked by this run's
    medians (within `tolerance`: too close to tell; refused: the load's reason, then not read)."""
    ddp, threads = rates[f"{world_size} ranks, DDP"], rates[f"1 process x {world_size} threads"]
    claim = f"{world_size} DDP ranks vs 1 process x {world_size} threads (predicted: DDP ahead)"
    if refused:
        return f"{claim}: {measure.NOT_MEASURABLE} ({refused})"
    ratio = ddp / threads
    if abs(math.log(ratio)) <= math.log(1 + tolerance):
        return f"{claim}: {ratio:.2f}x, too close to tell (two launches may differ by {tolerance:.0%})"
    return f"{claim}: {ratio:.2f}x, " + ("as predicted" if ratio > 1 else "against the prediction")
