"""Lab 03's recipe run beside lab 01's one device on the same digits, CNN and global batch: theory's prediction from
this run's own all-reduce (a step time and its parts), the measured step and its parts, and one verdict naming
both step times."""
from __future__ import annotations

import math

from ... import detectors, measure


def saving_ms(one_step_ms: float, world_size: int) -> float:
    """What N ranks can save at best on one device's step t: each computes t/N, so t - t/N (t/2 on 2 ranks)."""
    return one_step_ms * (1 - 1 / world_size)


def predicted_slower(one_step_ms: float, allreduce_ms: float, world_size: int = 2) -> bool:
    """Theory: N ranks at best split one device's step t (t/N each) and add the gradient all-reduce a, so they lose
    to one device while a > t - t/N."""
    return allreduce_ms > saving_ms(one_step_ms, world_size)


def _within(ratio: float) -> bool:
    """Whether two step times of one quantity agree within what two runs minutes apart may differ by."""
    return abs(math.log(ratio)) <= math.log(1 + detectors.TWICE_TOLERANCE)


def measured_line(*, ddp_ms: float, allreduce_ms: float, alone_ms: float | None, world_size: int, batch: int) -> str:
    """The measured step and its parts: the compute part (one rank alone, launched, on its batch/N samples, where
    timed), the all-reduce, and what neither times, labelled plainly as unaccounted."""
    if alone_ms is None:
        return (f"measured:   {ddp_ms:.2f} ms a step, of which {allreduce_ms:.2f} ms all-reduce "
                "(compute not timed on its own)")
    rest = ddp_ms - alone_ms - allreduce_ms
    return measure.short_lines(
        f"measured:   {alone_ms:.2f} ms compute (one rank alone, launched, on its {batch // world_size} samples) + "
        f"{allreduce_ms:.2f} ms all-reduce {'+' if rest >= 0 else '-'} {abs(rest):.2f} ms unaccounted (timed by "
        f"neither part) = {ddp_ms:.2f} ms a step", indent="            ")


def verdict_line(*, one_ms: float, ddp_ms: float, predicted_ms: float, world_size: int) -> str:
    """One verdict: the direction (N ranks slower or faster than one device, as predicted or not) and the figure
    (the measured step time against the predicted one), naming both."""
    slower, ratio = predicted_ms > one_ms, ddp_ms / one_ms
    if _within(ratio):
        direction = (f"too close to tell ({ddp_ms:.2f} vs one device's {one_ms:.2f} ms: two runs minutes apart may "
                     f"differ by up to {detectors.TWICE_TOLERANCE:.0%})")
    else:
        word = "slower" if ratio > 1 else "faster"
        direction = (f"{world_size} ranks {word} than one device's {one_ms:.2f} ms, " +
                     ("as predicted" if (ratio > 1) == slower else
                      "against the prediction (each lab's load line says what else ran)"))
    figure = (f"the measured {ddp_ms:.2f} ms within {detectors.TWICE_TOLERANCE:.0%} of the predicted "
              f"{predicted_ms:.2f} ms" if _within(ddp_ms / predicted_ms) else
              f"the measured {ddp_ms:.2f} ms is {ddp_ms / predicted_ms:.2f}x the predicted {predicted_ms:.2f} ms")
    return measure.short_lines(f"verdict: {direction}; {figure}")


def lines(*, ddp_rate: float, allreduce_ms: float, batch: int, world_size: int, lab01_rate: float | None,
          alone_rate: float | None = None, refused: str | None = None) -> list[str]:
    """The comparison's lines: both rates and step times, theory's prediction (its step time and parts), the measured
    step and its parts (alone_rate: one launched rank alone on its batch/N samples), and one verdict naming both step
    times (refused: the load's reason, measure.unreadable, then no verdict is read). No lab 01 row: one line."""
    if not lab01_rate:
        return ["lab 01 has not recorded its training run here: no one-device step to compare these ranks with"]
    one_ms, ddp_ms = batch / lab01_rate * 1e3, batch / ddp_rate * 1e3
    half = one_ms / world_size
    predicted = half + allreduce_ms
    said = [f"lab 01, one device, same CNN, digits and batch {batch}: {lab01_rate:,.0f} samples/s, {one_ms:.2f} ms a "
            "step (in its kernel)",
            f"these {world_size} ranks: {ddp_rate:,.0f} samples/s, {ddp_ms:.2f} ms a step (launched processes)",
            f"theory: the {world_size} ranks split one device's compute and add the all-reduce (median, waits "
            "included):",
            f"prediction: {half:.2f} ms compute ({one_ms:.2f} / {world_size}) + {allreduce_ms:.2f} ms all-reduce = "
            f"{predicted:.2f} ms a step, " + ("slower" if predicted > one_ms else "faster") + " than one device",
            measured_line(ddp_ms=ddp_ms, allreduce_ms=allreduce_ms, world_size=world_size, batch=batch,
                          alone_ms=batch / world_size / alone_rate * 1e3 if alone_rate else None)]
    if refused:
        return said + [measure.short_lines(f"verdict: {measure.NOT_MEASURABLE} ({refused})")]
    return said + [verdict_line(one_ms=one_ms, ddp_ms=ddp_ms, predicted_ms=predicted, world_size=world_size)]
