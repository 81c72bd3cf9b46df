"""Lab 00: a timer that warms up and takes the median; the one-off cost a cold call shows; a speedup read against
theory."""
from __future__ import annotations

import itertools
import statistics

from ... import detectors
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
    "rules 1 and 3 of section 5: the warm-up calls run but are not timed; each timed call is timed on its own, with "
    "the clock you are given, not time.perf_counter; the result is a median, not a mean",
    setup="import statistics\nimport time")


# ---- one_off_cost -------------------------------------------------------------------------------------------------

def _cold_cases(rng):
    """Three runs, each with one slow warm repeat (mean above median), one an even count: a cold call just above every
    warm repeat (its cost shows), one far above the median yet below the slow repeat, one below the median (both
    hidden): a rule that compares the cold call with a multiple of the median, not with every repeat, fails one; and a
    cold call equal to the slowest repeat (not slower than every one: hidden), which `>=` for `>` gets wrong."""
    cases = []
    for where, n in (("above", rng.choice([5, 7])), ("between", rng.choice([6, 8])), ("below", rng.choice([5, 7]))):
        warm = [round(rng.uniform(0.018, 0.024), 5) for _ in range(n)]
        warm[rng.randrange(n)] = round(rng.uniform(0.075, 0.090), 5)  # one slow repeat
        median = statistics.median(warm)
        cold = {"above": max(warm) + rng.uniform(0.003, 0.010), "between": rng.uniform(3 * median, max(warm) - 0.003),
                "below": rng.uniform(min(warm), median - 0.0005)}[where]
        cases.append({"cold": round(cold, 5), "warm_times": warm})
    warm = [round(rng.uniform(0.018, 0.024), 5) for _ in range(4)] + [round(rng.uniform(0.075, 0.090), 5)]
    cases.append({"cold": max(warm), "warm_times": warm})  # exactly as slow as the slowest (slow) repeat
    return cases


def _cold_run(one_off_cost, cases):
    return [one_off_cost(c["cold"], list(c["warm_times"])) for c in cases]


def _cold_right(cold, warm):
    return cold - statistics.median(warm) if cold > max(warm) else 0.0


def _cold_expected(cases):
    return [_cold_right(c["cold"], c["warm_times"]) for c in cases]


_COLD_MISTAKES = {  # what each mistake returns for one case, by the words that name it
    "the cold call minus the *mean* warm repeat: one slow repeat pulls the mean up; subtract the median":
        lambda cold, warm: cold - statistics.mean(warm) if cold > max(warm) else 0.0,
    "the cold call minus the *fastest* warm repeat: a warm call costs the median; subtract that":
        lambda cold, warm: cold - min(warm) if cold > max(warm) else 0.0,
    "the cold call minus the *slowest* warm repeat: the slowest only decides whether the cost shows; the cost is "
    "measured from the median": lambda cold, warm: cold - max(warm) if cold > max(warm) else 0.0,
    "cold minus the median even where the cold call is not slower than every warm repeat: there the swings of the "
    "warm repeats are as large as the one-off cost, so it cannot be told from them: return 0.0":
        lambda cold, warm: cold - statistics.median(warm),
    "cold minus the median wherever the cold call is well above the median (above it, or above a multiple of it): a "
    "cold call below the slowest warm repeat is within the swings; only one slower than every warm repeat shows its "
    "cost":
        lambda cold, warm: max(cold - statistics.median(warm), 0.0),
    "cold minus the median where the cold call is as slow as the slowest warm repeat (>=): one equal to it is not "
    "slower than every warm repeat, so its cost is within the swings: use >":
        lambda cold, warm: cold - statistics.median(warm) if cold >= max(warm) else 0.0,
    "the cost in milliseconds: return seconds, as the times are given":
        lambda cold, warm: 1e3 * _cold_right(cold, warm),
    "a ratio (cold / median): return the seconds the cold call paid above the median, cold - median":
        lambda cold, warm: cold / statistics.median(warm) if cold > max(warm) else 0.0}


def _cold_judge(got, expected, cases):
    if any(g is None or isinstance(g, bool) or not isinstance(g, (int, float)) for g in got):
        return 0.0, "return the one-off cost in seconds, a number (0.0 where it is hidden)"
    close = lambda g, value: abs(g - value) <= 1e-9 + 1e-6 * abs(value)  # noqa: E731
    if all(close(g, e) for g, e in zip(got, expected)):
        return 1.0, "the cold call's cost above the median where it shows, 0.0 where the swings hide it"
    for what, way in _COLD_MISTAKES.items():  # named where it explains every case
        if all(close(g, way(c["cold"], c["warm_times"])) for g, c in zip(got, cases)):
            return 0.0, Named(f"that is {what}")
    g, e, c = next((g, e, c) for g, e, c in zip(got, expected, cases) if not close(g, e))
    return 0.0, (f"for a cold call of {c['cold'] * 1e3:.2f} ms and warm repeats {[round(t * 1e3, 2) for t in c['warm_times']]} "
                 f"ms, expected {e:.5f} s, got {g:.5f}")


ONE_OFF_COST = Exercise(
    "00", "one_off_cost", _cold_cases, _cold_run, _cold_expected, _cold_judge,
    "two questions: is the cold call slower than the slowest warm repeat (equal is not slower)? If so, how far does "
    "it lie above the warm median (not the mean, not the fastest repeat)?",
    setup="import statistics")


# ---- speedup_verdict ----------------------------------------------------------------------------------------------

RATIO_NOISE = detectors.ABOVE_100_NOISE  # how far a ratio of two medians may pass N by noise alone
VERDICTS = ("as predicted", "at the limit", "not faster", "impossible")


def _verdict_cases(rng):
    """Thirteen made-up pairs of median step times (s) on 2 and 4 threads, speedups drawn inside each verdict's range
    and away from its edges: two as predicted, two at the limit (one on 4 threads above N + 0.1: 10 % of N, not 0.1),
    four not faster (one just below 1x, one on 4 threads between 1/4 and 1/2: the lower bound is 1/N, not the 0.5 of
    2 threads), and the two impossible ends (one above N by more than 10 % but less than
    25 %); then four exact edges: a speedup of exactly 1x (N threads as slow as one: not faster), exactly N (as
    predicted, the bound itself), exactly 1/N (not faster: impossible starts below it) and exactly 1.1 N (at the
    limit: impossible starts above it)."""
    cases = []
    for threads, low, high in ((2, 1.2, 1.8), (4, 1.5, 3.6), (2, 2.03, 2.17), (4, 4.15, 4.35), (2, 0.62, 0.92),
                               (2, 0.93, 0.98), (4, 0.55, 0.90), (4, 0.30, 0.45), (2, 2.6, 3.0), (4, 4.55, 4.9), (4, 0.12, 0.22)):
        one = round(rng.uniform(0.015, 0.030), 5)
        cases.append({"one_thread_s": one, "many_threads_s": round(one / rng.uniform(low, high), 6),
                      "threads": threads})
    one = round(rng.uniform(0.015, 0.030), 5)
    cases.append({"one_thread_s": one, "many_threads_s": one, "threads": 2})  # exactly 1x
    one = round(rng.uniform(0.015, 0.030), 5)
    cases.append({"one_thread_s": one, "many_threads_s": one / 4, "threads": 4})  # exactly N (one / 4 is exact)
    one = round(rng.uniform(0.015, 0.030), 5)
    cases.append({"one_thread_s": one, "many_threads_s": one * 4, "threads": 4})  # exactly 1/N (one * 4 is exact)
    many = 2.0 ** -6  # a power of two, so one / many gives back exactly 1.1 N (1.1 * 2 as Python computes it)
    cases.append({"one_thread_s": 2 * (1 + RATIO_NOISE) * many, "many_threads_s": many, "threads": 2})
    return cases


def _verdict_run(speedup_verdict, cases):
    return [speedup_verdict(c["one_thread_s"], c["many_threads_s"], c["threads"]) for c in cases]


def _verdict_of(speedup: float, threads: int, noise: float = RATIO_NOISE, low: float | None = None) -> str:
    """The verdict on `speedup` with N = `threads`: noise above N allowed, impossible below `low` (1/N)."""
    low = 1 / threads if low is None else low
    if speedup > threads * (1 + noise) or speedup < low:
        return "impossible"
    if speedup > threads:
        return "at the limit"
    return "as predicted" if speedup > 1 else "not faster"


def _verdict_expected(cases):
    return [_verdict_of(c["one_thread_s"] / c["many_threads_s"], c["threads"]) for c in cases]


_VERDICT_MISTAKES = {
    "the speedup upside down (many_threads_s / one_thread_s): the speedup is the one-thread time over the N-thread "
    "time (the faster step is the shorter one)": lambda one, many, n: _verdict_of(many / one, n),
    "a speedup above N called impossible with no allowance for noise: a ratio of two medians moves by up to 10 % "
    "alone, so up to 1.1 N is 'at the limit'": lambda one, many, n: _verdict_of(one / many, n, noise=0.0),
    "an allowance of 0.1 above N: the allowance is 10 % OF N (1.1 N: 4.4 on 4 threads, not 4.1)":
        lambda one, many, n: "impossible" if one / many > n + 0.1 else _verdict_of(one / many, n),
    "an allowance of 25 % above N: that is the noise line's allowance for one setting's repeats; a ratio of two "
    "medians is steadier and gets 10 %": lambda one, many, n: _verdict_of(one / many, n, noise=0.25),
    "a speedup of exactly 1x called 'as predicted': N threads exactly as slow as one gained nothing, so 1x is 'not "
    "faster'; 'as predicted' starts ABOVE 1 (speedup > 1, not >= 1)":
        lambda one, many, n: "as predicted" if one / many == 1 else _verdict_of(one / many, n),
    "a speedup of exactly N called 'at the limit': 'at most N' includes N itself, so it is 'as predicted'; 'at the "
    "limit' starts ABOVE N (speedup > N, not >= N)":
        lambda one, many, n: "at the limit" if one / many == n else _verdict_of(one / many, n),
    "a speedup of exactly 1/N called 'impossible': 'from 1/N to 1' includes 1/N itself, so it is 'not faster'; "
    "'impossible' starts BELOW 1/N (speedup < 1/N, not <= 1/N)":
        lambda one, many, n: "impossible" if one / many == 1 / n else _verdict_of(one / many, n),
    "a speedup of exactly 1.1 N called 'impossible': 'above N by at most 10 %' includes 1.1 N itself, so it is 'at "
    "the limit'; 'impossible' starts ABOVE 1.1 N (speedup > 1.1 N, not >= 1.1 N)":
        lambda one, many, n: "impossible" if one / many == n * (1 + RATIO_NOISE) else _verdict_of(one / many, n),
    "a lower bound of 0.5 on every N: the lower bound is 1/N (0.25 on 4 threads); 0.5 is 1/N for 2 threads only":
        lambda one, many, n: _verdict_of(one / many, n, low=0.5),
    "no lower bound: a speedup below 1/N is impossible too (splitting the work adds only coordination, never N times "
    "the whole work), not merely 'not faster'": lambda one, many, n: _verdict_of(one / many, n, low=0.0),
    "every speedup up to 1 called impossible: from 1/N to 1 the threads' coordination cost more than it saved, "
    "possible though not predicted ('not faster'); only below 1/N is impossible":
        lambda one, many, n: _verdict_of(one / many, n, low=1.0 + 1e-12)}


def _verdict_judge(got, expected, cases):
    if any(g not in VERDICTS for g in got):
        wrong = next(g for g in got if g not in VERDICTS)
        return 0.0, f"return one of {', '.join(repr(v) for v in VERDICTS)} (got {wrong!r})"
    if got == expected:
        return 1.0, "each speedup read against at most N (10 % noise allowed) and at least 1/N"
    for what, way in _VERDICT_MISTAKES.items():  # named where it explains every case
        if got == [way(c["one_thread_s"], c["many_threads_s"], c["threads"]) for c in cases]:
            return 0.0, Named(f"that is {what}")
    g, e, c = next((g, e, c) for g, e, c in zip(got, expected, cases) if g != e)
    return 0.0, (f"for steps of {c['one_thread_s'] * 1e3:.2f} ms on 1 thread and {c['many_threads_s'] * 1e3:.2f} ms on "
                 f"{c['threads']} (speedup {c['one_thread_s'] / c['many_threads_s']:.2f}x), expected {e!r}, got {g!r}")


SPEEDUP_VERDICT = Exercise(
    "00", "speedup_verdict", _verdict_cases, _verdict_run, _verdict_expected, _verdict_judge,
    "the speedup is a ratio of step times, so the one-thread time goes on top; test the 'impossible' bounds (1.1 N, "
    "1/N) before 'at the limit', since a speedup above 1.1 N is above N too")
register(MEDIAN_TIME, ONE_OFF_COST, SPEEDUP_VERDICT)
