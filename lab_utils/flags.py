"""The detectors behind every `[!]`: one definition of each figure that cannot be right, and of the noise line.

A `[!]` is kept for a figure that is impossible or contradicts another one: a speedup above the device count
(efficiency above 100 %), a bandwidth or rate from a degenerate fit, more work taking less time, a setting that
saturates, a verdict that reverses theory. Each detector returns a list of warnings (empty when the figure is sound);
a warning never contains "; ", which joins several of them in a results row's `flags`.

Noise is not a flag: a table gets one line, `noise_line`, saying how many of its medians come from scattered repeats.
"""
from __future__ import annotations

import math

NOISY_SPREAD = 0.25  # repeats spread more than this (max - min over the median) are "noisy"


def above_device_count(speedup: float | None, devices: float | None) -> list[str]:
    """A speedup above the number of devices it used (efficiency above 100 %): impossible for the same work."""
    if speedup is None or not devices or speedup <= devices:
        return []
    return [f"speedup {speedup:.2f}x on {devices:g}x the hardware is efficiency {speedup / devices:.0%}, above 100 %: "
            "impossible for the same work, so the baseline was slowed (noise, another job, another framework in its "
            "process) or the runs did different work"]


def degenerate_fit(slope: float | None, what: str = "bandwidth") -> list[str]:
    """A fitted per-byte cost (slope) that is zero, negative or not a number: no `what` can be read from it."""
    if slope is not None and math.isfinite(slope) and slope > 0:
        return []
    shown = "not a number" if slope is None or not math.isfinite(slope) else f"{slope:.3g} s/byte"
    return [f"the fitted time per byte is {shown}: larger messages did not take longer here (noise swamped the "
            f"per-byte cost), so no {what} can be read from this fit; fit on larger messages or rerun on a quiet machine"]


def more_work_less_time(small_work: float, small_s: float, large_work: float, large_s: float, *,
                        what: str = "work", tolerance: float = 0.0) -> list[str]:
    """More work (large_work > small_work) that took less time, by more than `tolerance` (a fraction of the smaller
    work's time): impossible on the same hardware, so one of the two medians is off."""
    if large_work <= small_work or large_s >= small_s * (1 - tolerance):
        return []
    return [f"{large_work:g} {what} took less time ({large_s * 1e3:.3g} ms) than {small_work:g} "
            f"({small_s * 1e3:.3g} ms): more work cannot take less time, so one of the two medians is off (a busy "
            "machine) and ratios built on them are suspect"]


def saturated(offered_rps: float, answered_rps: float, *, keep_up: float = 0.9) -> list[str]:
    """A server that answered less than `keep_up` of the load offered to it: requests pile up, latency is the
    queue's, not the server's."""
    if offered_rps <= 0 or answered_rps >= keep_up * offered_rps:
        return []
    return [f"answered {answered_rps:,.0f} of {offered_rps:,.0f} requests/s offered: saturated, the queue grows and "
            "its latency is waiting, not serving"]


def reverses_theory(verdict) -> list[str]:
    """A measure.Verdict whose paired repeats clearly point against what theory predicts."""
    if getattr(verdict, "verdict", None) != "reversed":
        return []
    return [f"'{verdict.claim}' reversed here: theory predicts {verdict.expected}, and every plausible ratio of "
            "these paired repeats says the opposite; find what this machine does differently before trusting either"]


def noise_line(spreads, what: str = "medians") -> str:
    """One line for a table: how many of its `what` come from repeats spread more than NOISY_SPREAD (None and NaN
    spreads are not counted); '' when none did."""
    counted = [s for s in spreads if s is not None and math.isfinite(s)]
    noisy = sum(s > NOISY_SPREAD for s in counted)
    if not noisy:
        return ""
    return (f"noise: {noisy} of {len(counted)} {what} spread more than {NOISY_SPREAD * 100:.0f} % over their repeats: "
            "read the medians only")


def count(text: str) -> int:
    """How many `[!]` lines a printed text holds (the course aims at no more than 3 per lab on a quiet machine)."""
    return sum("[!]" in line for line in str(text).splitlines())
