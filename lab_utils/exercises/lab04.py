"""Lab 04: the GPipe order, the bubble of a timeline, the best split."""
from __future__ import annotations

from .core import Exercise, close, register


# ---- the GPipe order ------------------------------------------------------------------------------------------------

def _gpipe_cases(rng):
    return [[rng.randint(1, 4), rng.randint(1, 8)] for _ in range(4)] + [[3, 2]]


def _gpipe_run(gpipe_order, cases):
    return [[[str(op) for op in ops] for ops in gpipe_order(k, m)] for k, m in cases]


def _gpipe_expected(cases):
    from .. import pipeline as pl

    return [[[str(op) for op in ops] for ops in pl.gpipe(k, m).ops] for k, m in cases]


def _gpipe_judge(got, expected, cases):
    from .. import pipeline as pl

    for g, e, (k, m) in zip(got, expected, cases):
        if g == e:
            continue
        if len(g) != k:
            return 0.0, f"return one list per stage ({k} lists for {k} stages), got {len(g)}"
        if g == [[str(op) for op in ops] for ops in pl.one_f_one_b(k, m).ops]:
            return 0.0, "that is 1F1B; GPipe runs every forward first (F0 ... F{M-1}), then every backward"
        if g and sorted(g[0]) == sorted(e[0]):
            return 0.0, ("every op is there, in the wrong order: all forwards F0 ... F{M-1}, then all backwards "
                         "B0 ... B{M-1}, the same on every stage")
        return 0.0, f"gpipe_order({k}, {m}) should give {e[0]} on each stage, got {g[0] if g else g}"
    return 1.0, "all forwards, then all backwards, on every stage"


GPIPE_ORDER = Exercise("04", "gpipe_order", _gpipe_cases, _gpipe_run, _gpipe_expected, _gpipe_judge,
                       "GPipe: all forwards, then all backwards, on every stage")


# ---- the bubble of a measured timeline ---------------------------------------------------------------------------------

def _bubble_cases(rng):
    cases = []
    for stages in (2, 3, 4):
        intervals, clock = [], round(rng.uniform(0, 3), 3)  # the first op need not start at 0
        for op in range(2 * stages + 2):
            start = round(clock + rng.uniform(0, 0.5), 4)
            clock = round(start + rng.uniform(0.5, 2), 4)
            intervals.append([f"stage {op % stages}", "forward" if op < stages + 1 else "backward", start, clock])
        cases.append({"stages": stages, "intervals": intervals})
    return cases


def _bubble_run(bubble, cases):
    from ..plots import Interval

    return [float(bubble([Interval(*i) for i in c["intervals"]], c["stages"])) for c in cases]


def _bubble_expected(cases):
    from .. import pipeline as pl
    from ..plots import Interval

    return [pl.bubble_fraction([Interval(*i) for i in c["intervals"]], c["stages"]) for c in cases]


def _bubble_judge(got, expected, cases):
    for g, e, c in zip(got, expected, cases):
        if abs(g - e) <= 1e-9:
            continue
        busy = sum(b - a for _, _, a, b in c["intervals"])
        last = max(b for *_, b in c["intervals"])
        if abs(g - (1 - e)) <= 1e-9:
            return 0.0, "that is the busy share (utilisation); the bubble is the idle share: 1 minus it"
        if abs(g - (1 - busy / (c["stages"] * last))) <= 1e-9:
            return 0.0, "the makespan runs from the first start, not from time 0: last end - first start"
        return 0.0, (f"on a {c['stages']}-stage timeline expected {e:.4f}, got {g:.4f}: bubble = 1 - (sum of op "
                     "durations) / (stages x makespan)")
    return 1.0, "idle share of stages x makespan"


BUBBLE = Exercise("04", "bubble", _bubble_cases, _bubble_run, _bubble_expected, _bubble_judge,
                  "idle time over stages x makespan; the makespan is last end - first start")


# ---- the best split ----------------------------------------------------------------------------------------------------

def stage_sums(times, split) -> list[float]:
    """Total time of each stage of a split."""
    bounds = [0, *split, len(times)]
    return [sum(times[a:b]) for a, b in zip(bounds, bounds[1:])]


def _split_cases(rng):
    cases = [[[5.0, 7.0, 7.0, 4.0, 0.1, 0.8, 0.1], 2], [[10.0, 1.0, 1.0, 1.0], 2]]
    return cases + [[[round(rng.uniform(0.1, 9), 2) for _ in range(rng.randint(4, 8))], rng.randint(2, 4)] for _ in range(6)]


def _split_run(best_split, cases):
    return [[int(i) for i in best_split(list(times), stages)] for times, stages in cases]


def _split_expected(cases):
    from .. import pipeline as pl

    return [list(pl.balanced_split(times, stages)) for times, stages in cases]


def _split_judge(got, expected, cases):
    for g, e, (times, stages) in zip(got, expected, cases):
        valid = len(g) == stages - 1 and g == sorted(set(g)) and all(0 < i < len(times) for i in g)
        if not valid:
            return 0.0, (f"{stages} stages over {len(times)} layers need {stages - 1} increasing split point(s) "
                         f"between 1 and {len(times) - 1}, got {g}")
        best, yours = max(stage_sums(times, e)), max(stage_sums(times, g))
        if yours > best + 1e-9:
            even = [round(len(times) * s / stages) for s in range(1, stages)]
            if g == even:
                return 0.0, "that splits by layer count; balance the measured times instead"
            return 0.0, (f"times {times}, {stages} stages: your split's slowest stage takes {yours:.2f}, but a split "
                         f"exists whose slowest stage takes {best:.2f}: try every split")
    return 1.0, "the slowest stage is as fast as it can be"


BEST_SPLIT = Exercise("04", "best_split", _split_cases, _split_run, _split_expected, _split_judge,
                      "try every contiguous split and keep the one whose slowest stage is fastest",
                      setup="import itertools")

register(GPIPE_ORDER, BUBBLE, BEST_SPLIT)
