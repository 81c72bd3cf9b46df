"""Lab 03's recipe run beside lab 01's one process on the same digits, CNN and global batch: theory's prediction from
this run's own all-reduce (a step time and its parts), the measured step and its parts, and one verdict naming
both step times."""
from __future__ import annotations

import math

from ... import detectors, measure


def _within(ratio: float) -> bool:
    """Whether two step times of one quantity agree within what two runs minutes apart may differ by."""
    return abs(math.log(ratio)) <= math.log(1 + detectors.TWICE_TOLERANCE)


def measured_line(*, ddp_ms: float, allreduce_ms: float, alone_ms: float | None, world_size: int, batch: int,
                  beside_ms: float | None = None) -> str:
    """The measured step and its parts: the compute part (one rank alone, launched, on its batch/N samples, where
    timed), what the compute lost beside the other ranks (beside_ms: a rank's compute while all ran, each step minus
    its own all-reduce, median), the all-reduce, and what neither times, labelled plainly as unaccounted."""
    if alone_ms is None:
        return (f"measured:   {ddp_ms:.2f} ms a step, of which {allreduce_ms:.2f} ms all-reduce "
                "(compute not timed on its own)")
    if beside_ms is not None:  # learner s13r7c: the unaccounted third of the step, measured
        rest, lost = ddp_ms - beside_ms - allreduce_ms, beside_ms - alone_ms
        return "\n".join([
            f"measured:   {alone_ms:.2f} ms compute alone (one rank launched alone, on its {batch // world_size} samples)",
            f"          {'+' if lost >= 0 else '-'} {abs(lost):.2f} ms {'more' if lost >= 0 else 'less'} compute beside "
            f"the other rank{'s' if world_size > 2 else ''} "
            f"({beside_ms:.2f} ms: each step minus its all-reduce)",
            f"          + {allreduce_ms:.2f} ms all-reduce",
            f"          {'+' if rest >= 0 else '-'} {abs(rest):.2f} ms left (the median step is not the sum of its "
            "parts' medians)",
            f"          = {ddp_ms:.2f} ms a step"])
    rest = ddp_ms - alone_ms - allreduce_ms
    return measure.short_lines(
        f"measured:   {alone_ms:.2f} ms compute (one rank alone, launched, on its {batch // world_size} samples) + "
        f"{allreduce_ms:.2f} ms all-reduce {'+' if rest >= 0 else '-'} {abs(rest):.2f} ms unaccounted (neither "
        f"part times it; this lab does not say where it goes) = {ddp_ms:.2f} ms a step", indent="            ")


def verdict_line(*, one_ms: float, ddp_ms: float, predicted_ms: float, world_size: int,
                 compute_gap_ms: float | None = None, unaccounted_ms: float | None = None,
                 beside_gap_ms: float | None = None) -> str:
    """One verdict: the direction (N ranks slower or faster than one process, as predicted or not), then the size
    (the measured step against the predicted one) and, where the parts were timed, which parts made the gap."""
    slower, ratio = predicted_ms > one_ms, ddp_ms / one_ms
    if _within(ratio):
        direction = (f"too close to tell ({ddp_ms:.2f} vs one process's {one_ms:.2f} ms: two runs minutes apart may "
                     f"differ by up to {detectors.TWICE_TOLERANCE:.0%})")
    else:
        word = "slower" if ratio > 1 else "faster"
        direction = (f"{world_size} ranks {word} than one process's {one_ms:.2f} ms, " +
                     ("as predicted" if (ratio > 1) == slower else
                      "against the prediction (each lab's load line says what else ran)"))
    size = ddp_ms / predicted_ms
    if _within(size):
        figure = (f"the measured {ddp_ms:.2f} ms within {detectors.TWICE_TOLERANCE:.0%} of the predicted "
                  f"{predicted_ms:.2f} ms")
    else:  # learner s12r3c: 'as predicted' beside '1.41x the predicted' read as a contradiction; say it is the size
        figure = (f"but {size:.2f}x " + ("slower" if size > 1 else "faster") + f" than predicted ({ddp_ms:.2f} vs "
                  f"{predicted_ms:.2f} ms)")
        if compute_gap_ms is not None and beside_gap_ms is not None:
            figure += (f": the compute took {abs(compute_gap_ms):.2f} ms "
                       + ("more" if compute_gap_ms > 0 else "less") + f" than theory's alone, and "
                       f"{abs(beside_gap_ms):.2f} ms " + ("more" if beside_gap_ms >= 0 else "less") + " beside the "
                       "other rank (two processes and gloo's threads sharing the cores)")
        elif compute_gap_ms is not None and unaccounted_ms is not None:
            figure += (f": the compute took {abs(compute_gap_ms):.2f} ms "
                       + ("more" if compute_gap_ms > 0 else "less") + f" than theory's, and {unaccounted_ms:.2f} ms "
                       "is unaccounted")
    return measure.short_lines(f"verdict: {direction}; {figure}")


def rank_compute_ms(one_step_ms: float, world_size: int, lab01_threads: int = 1, rank_threads: int = 1) -> float:
    """Theory's compute part of one rank: one device's step t on lab01_threads threads is lab01_threads * t of one
    thread's work if threads split it perfectly; each rank does 1/N of it on rank_threads threads."""
    return one_step_ms * lab01_threads / rank_threads / world_size


def compute_line(*, alone_ms: float, theory_ms: float, one_ms: float) -> str:
    """The measured compute part against theory's, with the reason the markdown gives for its side (learner s12r3c:
    above theory's bound, with no reason said), and against lab 01's whole step where that is another figure."""
    same = abs(theory_ms / one_ms - 1) < 0.01  # lab 01's threads = the ranks': theory's compute is its whole step
    theory = f"theory's {theory_ms:.2f} ms" + (" (lab 01's whole step)" if same else "")
    # learner s12r4c: 'fixed costs ... outweighed the room imperfect threads leave' took three readings; one claim
    side = (f"above {theory}, before any all-reduce: half the batch did not halve the step, since its fixed costs "
            "(Python, one call per operator, DDP's hooks) stay whole" if alone_ms > theory_ms else
            f"below {theory}: lab 01's threads split its step less than perfectly, so one thread on a share of "
            "the batch did better than that share of their work")
    whole = ("" if same else f"; it already takes longer than lab 01's whole step ({one_ms:.2f} ms)"
             if alone_ms > one_ms else f"; it is below lab 01's whole step ({one_ms:.2f} ms)")
    return f"compute alone: one rank's {alone_ms:.2f} ms is {side}{whole}"


def _ms(value: float) -> float:
    """A time in ms at the 2 decimals the lines print it with."""
    return round(value, 2)


def _threads(n: int) -> str:
    """'1 thread', '2 threads'."""
    return f"{n} thread{'s' if n != 1 else ''}"


def lines(*, ddp_rate: float, allreduce_ms: float, batch: int, world_size: int, lab01_rate: float | None,
          alone_rate: float | None = None, refused: str | None = None, lab01_threads: int | None = None,
          rank_threads: int | None = 1, beside_ms: float | None = None) -> list[str]:
    """The comparison's lines: both rates and step times, theory's prediction (its step time and parts; each rank's
    compute from lab 01's step, its thread count lab01_threads and the ranks' rank_threads), the measured step and
    its parts (rank_threads None: ranks on GPUs; alone_rate: one launched rank alone on its batch/N samples), after one
    verdict naming both step times, which leads (refused: the load's reason, measure.unreadable, then no verdict is
    read). No lab 01 row: one line."""
    if not lab01_rate:
        return ["lab 01 has not recorded its training run here: no one-device step to compare these ranks with"]
    # every part at the 2 decimals it prints, so the printed sums add up (learner s13r5c: 1.16 + 1.18 = 2.35)
    one_ms, ddp_ms, allreduce_ms = _ms(batch / lab01_rate * 1e3), _ms(batch / ddp_rate * 1e3), _ms(allreduce_ms)
    each = f", {_threads(rank_threads)} each" if rank_threads else ""
    rank_threads = rank_threads or 1
    threads = lab01_threads or rank_threads
    who = f"one process with {_threads(lab01_threads)}" if lab01_threads else "one process"
    compute = _ms(rank_compute_ms(one_ms, world_size, threads, rank_threads))
    predicted = compute + allreduce_ms
    how = (f"{one_ms:.2f} / {world_size}" if threads == rank_threads else
           f"{one_ms:.2f} x {threads} / {rank_threads * world_size}" if rank_threads > 1 else
           f"{one_ms:.2f} x {threads} / {world_size}")
    theory = (f"theory: the {world_size} ranks split one process's compute and add the all-reduce (median, waits "
              "included):" if threads == rank_threads else
              f"theory: if lab 01's {_threads(threads)} split its step perfectly, {_threads(rank_threads)} takes "
              f"{threads / rank_threads:g}x as long; each rank computes 1/{world_size} of the batch at that speed, then "
              "adds the all-reduce (median, waits included):")
    said = [measure.short_lines(f"lab 01, {who}, same CNN and digits, batch {batch} (the ranks' global batch, "
                                f"{world_size} x {batch // world_size} a rank): {lab01_rate:,.0f} samples/s, "
                                f"{one_ms:.2f} ms a step (in its kernel)"),
            f"these {world_size} ranks{each}: {ddp_rate:,.0f} samples/s, {ddp_ms:.2f} ms a "
            "step (launched processes)",
            measure.short_lines(theory),
            measure.short_lines(f"prediction: {compute:.2f} ms compute ({how}) + {allreduce_ms:.2f} ms all-reduce = "
            f"{predicted:.2f} ms a step, " + ("slower" if predicted > one_ms else "faster") + " than one process"),
            measured_line(ddp_ms=ddp_ms, allreduce_ms=allreduce_ms, world_size=world_size, batch=batch,
                          alone_ms=_ms(batch / world_size / alone_rate * 1e3) if alone_rate else None,
                          beside_ms=_ms(beside_ms) if beside_ms is not None and alone_rate else None)]
    if refused:  # the verdict first, its figures after it (a learner walk: 15 lines buried it at the bottom)
        return [measure.short_lines(f"verdict: {measure.NOT_MEASURABLE} ({refused})"), *said]
    gaps: dict = {}
    if alone_rate:  # learner s11r2c: the measured compute part against lab 01's whole step, said outright
        alone_ms = _ms(batch / world_size / alone_rate * 1e3)
        gaps = {"compute_gap_ms": alone_ms - compute, "unaccounted_ms": ddp_ms - alone_ms - allreduce_ms}
        if beside_ms is not None:
            gaps["beside_gap_ms"] = _ms(beside_ms) - alone_ms
        said.append(measure.short_lines(compute_line(alone_ms=alone_ms, theory_ms=compute, one_ms=one_ms)))
    return [verdict_line(one_ms=one_ms, ddp_ms=ddp_ms, predicted_ms=predicted, world_size=world_size, **gaps), *said]
