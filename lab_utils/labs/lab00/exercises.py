"""Lab 00: a timer that warms up and takes the median."""
from __future__ import annotations

import itertools
import statistics

from ...exercises.core import Exercise, Named, register


class SimulatedClock:
    """A clock that only moves when the simulated work runs: the check does not depend on a busy machine."""

    def __init__(self):
        self.now = 0.0
        self.reads = 0  # how often the answer read it: twice per timed call, or twice for a loop timed as one block

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def _cases(rng):
    cases = []
    for i in range(4):  # odd and even counts: of an even count the median is the mean of the two middle calls
        if i % 2 == 0:
            warmup, repeats = rng.randint(1, 3), rng.choice([5, 7, 9])
        else:  # an even warm-up too: with an odd one, the median of every call is the upper middle timed call
            warmup, repeats = rng.choice([2, 4]), rng.choice([6, 8, 10])
        cold = [rng.uniform(0.040, 0.090) for _ in range(warmup)]  # first calls: much slower
        timed = [rng.uniform(0.008, 0.014) for _ in range(repeats)]
        timed[rng.randrange(repeats)] = rng.uniform(0.030, 0.060)  # one outlier the median must ignore
        cases.append({"warmup": warmup, "repeats": repeats, "durations": cold + timed})
    return cases


def _run(median_time, cases):
    out: list[dict] = []
    for case in cases:
        clock, calls = SimulatedClock(), []
        durations = iter(case["durations"])

        def work():
            calls.append(1)
            clock.now += next(durations, 0.010)

        seconds = median_time(work, case["warmup"], case["repeats"], clock=clock)
        try:
            out.append({"seconds": None if seconds is None else float(seconds), "calls": len(calls),
                        "clock_reads": clock.reads})
        except (TypeError, ValueError):  # the function returned, but not a number: say what it returned
            out.append({"seconds": None, "calls": len(calls), "clock_reads": clock.reads,
                        "returned": type(seconds).__name__})
    return out


def _expected(cases):
    # clock_reads None: any count is right (two reads per call, or one per call plus one, both time each call)
    return [{"seconds": statistics.median(c["durations"][c["warmup"]:]), "calls": c["warmup"] + c["repeats"],
             "clock_reads": None} for c in cases]


def _timed(case) -> list[float]:
    return case["durations"][case["warmup"]:]


_WHOLE_MISTAKES = {  # named only where they explain every case (on one case, two of them can give the same number)
    "that is times[len(times) // 2] of the unsorted list, the call timed in the middle of the run: sort the times "
    "first (statistics.median sorts them, and of an even count takes the mean of the two middle ones)":
        lambda c: _timed(c)[len(_timed(c)) // 2],
    "that is sorted(times)[len(times) // 2], the middle call: of an even count of timed calls the median is the mean "
    "of the two middle ones (statistics.median does this for any count)":
        lambda c: sorted(_timed(c))[len(_timed(c)) // 2],
    "that is the median of the last warm-up call and the timed calls: run exactly `warmup` calls untimed, then time "
    "the `repeats` after them": lambda c: statistics.median(c["durations"][c["warmup"] - 1:])}


def _judge_plain(got, expected, cases):
    if all(g["calls"] == e["calls"] and g["seconds"] is not None for g, e in zip(got, expected)) and any(
            abs(g["seconds"] - e["seconds"]) > 1e-9 for g, e in zip(got, expected)):
        for what, way in _WHOLE_MISTAKES.items():
            if all(abs(g["seconds"] - way(c)) <= 1e-9 for g, c in zip(got, cases)):
                return 0.0, what
    for g, e, c in zip(got, expected, cases):
        if g["calls"] != e["calls"]:
            return 0.0, (f"fn was called {g['calls']} times for warmup={c['warmup']}, repeats={c['repeats']}: call it "
                         "warmup times untimed, then once per timed repeat")
        if g.get("returned"):
            return 0.0, (f"your median_time returned a {g['returned']}, not a number: return one number, the median "
                         "of the timed calls in seconds (statistics.median of your list of times)")
        if g["seconds"] is None:
            return 0.0, "return the median duration in seconds"
        if abs(g["seconds"] - e["seconds"]) <= 1e-9:
            continue
        timed, everything = c["durations"][c["warmup"]:], c["durations"]
        block = g["clock_reads"] is not None and g["clock_reads"] < c["repeats"]  # fewer reads than timed calls
        if block and abs(g["seconds"] - statistics.mean(timed)) <= 1e-9:
            return 0.0, (f"you timed the loop as one block ({g['clock_reads']} clock() reads for {c['repeats']} timed "
                         "calls): its time / repeats is the mean of the calls, which one slow call pulls up; read "
                         "clock() before and after each call and return the median of those times")
        if block and abs(g["seconds"] - sum(timed)) <= 1e-9:
            return 0.0, (f"you timed the loop as one block ({g['clock_reads']} clock() reads for {c['repeats']} timed "
                         "calls), so you got their total: read clock() before and after each call and return the "
                         "median of those times")
        known = {"the mean of the timed calls (one slow call pulls it up; the median ignores it)": statistics.mean(timed),
                 "the median of every call, warm-up included: skip the first `warmup` calls": statistics.median(everything),
                 "the mean of every call, warm-up included": statistics.mean(everything),
                 "the total time of the timed calls: divide nothing, take the median of the per-call times": sum(timed),
                 "the fastest call (the minimum), not the median: the minimum is the best case (timeit's choice); "
                 "the course reports the typical call, the median, and its spread": min(timed),
                 "the last call only: time each repeat and keep all of them": timed[-1],
                 f"the median of the first {c['repeats']} calls, warm-up included: time the {c['repeats']} calls "
                 "after the warm-up": statistics.median(everything[:c["repeats"]])}
        ends = list(itertools.accumulate(everything))  # the check's clock at the end of each call (it starts at 0)
        stamps = {"the median of clock() readings taken after each timed call": ends[c["warmup"]:],
                  "the median of clock() readings taken before each timed call": ([0.0] + ends)[c["warmup"]:-1]}
        for what, readings in stamps.items():
            if abs(g["seconds"] - statistics.median(readings)) <= 1e-9:
                return 0.0, (f"that is {what}: timestamps (moments on the clock), not durations; time each call as "
                             "clock() after it minus clock() before it")
        for what, value in known.items():
            if abs(g["seconds"] - value) <= 1e-9:
                return 0.0, f"that is {what}"
        ordered = sorted(timed)
        middle = len(ordered) // 2
        if len(ordered) % 2 == 0 and any(abs(g["seconds"] - ordered[i]) <= 1e-9 for i in (middle - 1, middle)):
            return 0.0, (f"that is one of the two middle calls in sorted order: of an even count ({len(ordered)} timed "
                         f"calls) the median is the mean of sorted(times)[{middle - 1}] and sorted(times)[{middle}] "
                         "(statistics.median does this for any count)")
        if any(abs(g["seconds"] - ordered[i]) <= 1e-9 for i in (middle - 1, middle + 1) if 0 <= i < len(ordered)):
            return 0.0, (f"that is a neighbour of the median in sorted order: of {len(ordered)} timed calls the median "
                         f"is sorted(times)[{middle}] (statistics.median finds it for any count)")
        if abs(g["seconds"] - e["seconds"] * 1e3) <= 1e-9 * 1e3:
            return 0.0, f"that is {g['seconds']:.3f}, the median in milliseconds: return seconds (do not multiply by 1000)"
        if abs(g["seconds"]) < min(timed) / 100:  # the check's clock moves only while fn runs; any other clock sees ~0
            return 0.0, (f"your median is {g['seconds'] * 1e3:.4f} ms where every timed call took at least "
                         f"{min(timed) * 1e3:.1f} ms on the clock you were given: time with clock(), the argument, "
                         "not time.perf_counter or another clock of your own")
        if g["seconds"] > max(everything):  # longer than the slowest call: not a call's duration
            return 0.0, (f"your median, {g['seconds'] * 1e3:.3f} ms, is longer than the slowest call "
                         f"({max(everything) * 1e3:.3f} ms): a median of durations cannot be; subtract clock() before "
                         "a call from clock() after it, and keep those differences, not the readings")
        return 0.0, f"expected the median of the {c['repeats']} timed calls, {e['seconds'] * 1e3:.3f} ms, got {g['seconds'] * 1e3:.3f} ms"
    return 1.0, "warm-up skipped, median of the timed calls"


GENERIC = ("expected the median of", "return the median duration")  # the messages that name no mistake


def _judge(got, expected, cases):
    """_judge_plain's score; a message that names the mistake is Named, so check() adds no hint repeating it."""
    fraction, message = _judge_plain(got, expected, cases)
    return fraction, message if fraction >= 1.0 or message.startswith(GENERIC) else Named(message)


MEDIAN_TIME = Exercise(
    "00", "median_time", _cases, _run, _expected, _judge,
    "call fn warmup times untimed, then time each of the repeats with clock() and return their median",
    setup="import statistics\nimport time")
register(MEDIAN_TIME)
