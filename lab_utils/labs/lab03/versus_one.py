"""Lab 03's recipe run beside lab 01's one device on the same digits, CNN and global batch: theory's prediction from
this run's own all-reduce, and whether the two step times bear it out."""
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


def parts_lines(*, one_ms: float, alone_ms: float, allreduce_ms: float, ddp_ms: float, world_size: int,
                batch: int) -> tuple[list[str], float]:
    """Theory's best step with its compute part measured: one rank alone (launched, DDP, its batch/N samples) plus
    the all-reduce, beside the measured step; the lines and the measured step over that sum."""
    half, model = one_ms / world_size, alone_ms + allreduce_ms
    ratio = ddp_ms / model
    said = [f"measured part: one rank alone, launched, on its {batch // world_size} samples: {alone_ms:.2f} ms a step, "
            f"{alone_ms / half:.1f}x the {half:.2f} ms theory assumed"]
    if abs(math.log(ratio)) <= math.log(1 + detectors.TWICE_TOLERANCE):
        said.append(f"with it: {alone_ms:.2f} + {allreduce_ms:.2f} ms all-reduce = {model:.2f} ms, the measured "
                    f"{ddp_ms:.2f} ms within {detectors.TWICE_TOLERANCE:.0%}: these two parts make up the step")
    else:
        said.append(f"with it: {alone_ms:.2f} + {allreduce_ms:.2f} ms all-reduce = {model:.2f} ms, the measured "
                    f"{ddp_ms:.2f} ms is {ratio:.2f}x that: {ddp_ms - model:+.2f} ms these two parts leave out")
    return said, ratio


def lines(*, ddp_rate: float, allreduce_ms: float, batch: int, world_size: int, lab01_rate: float | None,
          alone_rate: float | None = None, refused: str | None = None) -> list[str]:
    """The comparison's lines: both rates and step times, theory's prediction, the compute part measured (alone_rate:
    one launched rank alone on its batch/N samples) and the check, of the direction and of the figure (refused: the
    load's reason, measure.unreadable, then no verdict is read). No lab 01 row: one line saying so."""
    if not lab01_rate:
        return ["lab 01 has not recorded its training run here: no one-device step to compare these ranks with"]
    one_ms, ddp_ms = batch / lab01_rate * 1e3, batch / ddp_rate * 1e3
    slower, saved = predicted_slower(one_ms, allreduce_ms, world_size), saving_ms(one_ms, world_size)
    said = [f"lab 01, one device, same CNN, digits and batch {batch}: {lab01_rate:,.0f} samples/s ({one_ms:.2f} ms a "
            "step, in its notebook's kernel)",
            f"these {world_size} ranks: {ddp_rate:,.0f} samples/s ({ddp_ms:.2f} ms a step, launched processes), "
            f"all-reduce {allreduce_ms:.2f} ms of it (median, waits included)",
            f"theory: {world_size} ranks at best split that compute ({one_ms / world_size:.2f} ms each) and add the "
            f"all-reduce: they win while it is under the {saved:.2f} ms",
            f"prediction: {world_size} ranks " + (f"slower than one device ({allreduce_ms:.2f} > " if slower else
                                                 f"faster than one device ({allreduce_ms:.2f} <= ")
            + f"{saved:.2f} ms)"]
    figure = None
    if alone_rate:
        parts, figure = parts_lines(one_ms=one_ms, alone_ms=batch / world_size / alone_rate * 1e3,
                                    allreduce_ms=allreduce_ms, ddp_ms=ddp_ms, world_size=world_size, batch=batch)
        said += parts
    if refused:
        return said + [measure.short_lines(f"check: {measure.NOT_MEASURABLE} ({refused})")]
    ratio = ddp_ms / one_ms
    if abs(math.log(ratio)) <= math.log(1 + detectors.TWICE_TOLERANCE):
        verdict = (f"too close to tell: two runs minutes apart may differ by up to {detectors.TWICE_TOLERANCE:.0%}")
    elif (ratio > 1) == slower:
        verdict = "as predicted"
    else:
        verdict = "against the prediction: theory and this run disagree (each lab's load line says what else ran)"
    if figure is not None and verdict == "as predicted":
        verdict = ("the direction as predicted, and the figure as the measured parts give it" if
                   abs(math.log(figure)) <= math.log(1 + detectors.TWICE_TOLERANCE) else
                   f"the direction as predicted, but not the figure ({figure:.2f}x the measured parts)")
    return said + [f"check: a DDP step took {ratio:.2f}x one device's step: {verdict}"]
