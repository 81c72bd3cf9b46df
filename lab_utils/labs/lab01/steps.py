"""Lab 01's reading of one training run's step times (median against mean) and of its reference rows' noise."""
from __future__ import annotations

import statistics

from ... import detectors

SLOW = 2.0  # a step over this many times the median step waited for something: the same work takes the same time


def step_mix(step_seconds: list[float]) -> str:
    """What the timed steps' median and mean say about the two rates: close (within TWICE_TOLERANCE), or the mean
    pulled up by slow steps (how many, how slow, whether every other one), and which rate later labs compare."""
    median, mean = statistics.median(step_seconds), statistics.mean(step_seconds)
    if mean <= median * (1 + detectors.TWICE_TOLERANCE):
        return (f"mean step {mean / median:.2f}x the median, within {detectors.TWICE_TOLERANCE:.0%}: the steps took "
                "about the same time, so the two rates differ only by the epoch's short batch and its start")
    slow = [t > SLOW * median for t in step_seconds]
    count = sum(slow)
    # every other step: a slow step, a fast one, a slow one again, for most of the slow steps (a stretch of them)
    turns = sum(a and not b and c for a, b, c in zip(slow, slow[1:], slow[2:]))
    every_other = count >= 4 and turns >= 0.6 * count
    typical = statistics.median([t for t, s in zip(step_seconds, slow) if s]) if count else mean
    return (f"mean step {mean / median:.2f}x the median: {count} of {len(slow)} steps took over {SLOW:g}x it "
            f"(median of those {typical * 1e3:.1f} ms against {median * 1e3:.2f} ms)"
            + (", about every other step" if every_other else "")
            + ". The work of a step does not change, so a slow step waited: for a core another program held, or for "
              "this process's own pauses (the garbage collector, the loader). The training rate (the median) is the "
              "speed of a step that did not wait, the figure later labs compare; the epoch rate adds the waits")


def reference_noise(name: str, spread: float, steps: int) -> str | None:
    """A line for a reference row whose steps spread more than NOISY_SPREAD: it still serves (labs compare with the
    newest row) but only a gap beyond 2x to it is read; None when its steps agree."""
    if spread <= detectors.NOISY_SPREAD:
        return None
    return (f"noise: {name}'s {steps} steps spread {spread:.0%}, above {detectors.NOISY_SPREAD:.0%}: its median is "
            "still the reference the parallel labs compare with (the newest row of this workload), but they read "
            "only a gap beyond 2x to it as a contradiction; rerun this cell on a quiet machine for a firmer one")
