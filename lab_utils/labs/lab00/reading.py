"""Lab 00's reports: what its timing cells print under the lesson's code (the cold call, the thread counts)."""
from __future__ import annotations

import math

from ... import detectors, measure


def cold_lines(cold: float, right) -> list[str]:
    """The cold call read against the warm repeats (`right`, a measure.Timing): how much slower, and how much the
    repeats swing; whether its one-off cost shows is Exercise 2's to compute (one_off_cost_lines reads it after)."""
    said = [f"the cold call took {cold / right.median:.2f}x the warm median; the repeats spread by "
            f"{right.spread:.0%} of the median"]
    if detectors.noise_line([right.spread]):  # above 25 %: the repeats disagree, so only their median is read
        said.append(detectors.noise_line([right.spread], what="timings"))
    return [measure.short_lines(line) for line in said]


def one_off_cost_lines(cost: float, cold: float, right) -> list[str]:
    """Exercise 2's one-off cost (`cost`, in s) of the cold call read against the warm repeats (`right`): what it is,
    or why this run cannot show it (the cold call within or below the repeats' range)."""
    if cost > 0:  # above every warm repeat: the one-off cost shows through the swings
        return [measure.short_lines(f"section 5's cold call, by your one_off_cost: {cost * 1e3:.1f} ms of one-off "
                                    "cost above the warm median: what timing one cold call would have mixed into "
                                    "the result")]
    where = "within" if cold >= min(right.times) else "below"
    return [measure.short_lines(
        f"section 5's cold call, by your one_off_cost: 0.0 ms: the cold call ({cold * 1e3:.1f} ms) lies {where} the "
        f"warm repeats' range ({min(right.times) * 1e3:.1f}-{max(right.times) * 1e3:.1f} ms), so the machine's "
        "swings hide its one-off cost in this run; one cold call is one sample, so it cannot stand for the step's "
        "time either way")]


def noise_lines(timings: dict) -> str:
    """The timing table's noise line, one sentence: that every row's repeats stayed within 25 %, or which rows spread
    more and whether their medians stand (the middle half of the repeats, computed)."""
    rows = [name for name, t in timings.items() if detectors.noisy_as_printed(t.spread)]  # spreads: in its row
    if not rows:
        return f"noise: every median above came from repeats within {detectors.NOISY_SPREAD * 100:.0f} %"
    named = (f"noise: {len(rows)} rows spread more than {detectors.NOISY_SPREAD * 100:.0f} % ({', '.join(rows)})"
             if len(rows) > 1 else f"noise: the row {rows[0]} spread more than {detectors.NOISY_SPREAD * 100:.0f} %")
    middle = detectors.middle_half_line({name: timings[name].times for name in rows})  # why they spread
    return measure.short_lines(named + (f"; {middle}" if middle else ": read the median only"))


def medians_uncertain(timings: dict) -> bool:
    """Whether a row's median is in doubt: its repeats spread more than 25 % and their middle half does too (or
    there are too few repeats to have a middle half)."""
    middles = {name: detectors.middle_spread(t.times) for name, t in timings.items()}
    return any(detectors.noisy_as_printed(t.spread)
               and (math.isnan(middles[name]) or detectors.noisy_as_printed(middles[name]))
               for name, t in timings.items())


def marked_spread(spread: float) -> str:
    """A summary row's spread, marked noisy the one way lab 00 teaches when it is above 25 % (as printed)."""
    noisy = f"; noisy: above {detectors.NOISY_SPREAD * 100:.0f} %, read the median only"
    return f"spread {spread:.0%}" + (noisy if detectors.noisy_as_printed(spread) else "")


def thread_ratio(rates: dict, settings: dict, noisy: bool, source: str = "") -> tuple[str, list] | None:
    """The most threads' rate over one thread's, as a flagged line ('not measurable here' where the measured load
    rules it out) and its flags; `source` says where the figure comes from; None with one thread only."""
    if len(settings) < 2:
        return None
    many = max(settings, key=lambda name: settings[name])
    ratio = rates[many] / rates["1 thread"]
    refused = measure.unreadable(settings[many], what="threads")  # then no flag reads the ratio either
    flags = measure.plausibility(speedup=ratio, devices=settings[many], threads=settings[many],
                                 refused=refused is not None)
    source = source or ("(of the medians; the noise line says whether they stand)" if noisy else "(of the medians)")
    line = measure.flagged(f"{many} vs 1 thread: " + measure.as_result(
        f"{ratio:.2f}x {source}" + ("" if flags else _theory(ratio, settings[many])),
        workers=settings[many], what="threads"), flags)
    return measure.short_lines(line), flags


def _theory(ratio: float, threads: int) -> str:
    """The ratio against theory's 'faster than one thread, at most `threads` x', where no flag reads it already."""
    if ratio > threads:  # above by less than noise: the note beside it reads it
        return ""
    if ratio <= 1:
        return f"; theory: faster than 1 thread, at most {threads}x"
    return f", within the at most {threads}x that {threads} threads can give (efficiency {ratio / threads:.0%})"
