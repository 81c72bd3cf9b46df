"""Lab 08's short lines about its verdicts: one line per claim for the summary (each verdict's notes stay where it was
printed), and the line that says when a median lies above the bound theory predicts while the verdict holds."""
from __future__ import annotations

from .... import measure


def summary_line(verdict: measure.Verdict, label: str | None = None) -> str:
    """'<claim> (<prediction>): <figure> -> <outcome>' in one short line, no notes; a verdict the conditions ruled out
    reads as it did where it was printed ('cannot be seen here'), without a figure."""
    head = f"{label or verdict.claim} ({verdict.expected})"
    if verdict.verdict == measure.CANNOT_SEE:
        return f"{head}: {measure.CANNOT_SEE} (its verdict above says why)"
    tested = f"{verdict.tested()}: " if verdict.holds_from is not None else ""
    return f"{head}: {tested}{verdict.ratio:.2f}{verdict.unit} -> {verdict.verdict}"


def above_bound_line(verdict: measure.Verdict, bound: float) -> str:
    """Where an upper-bound verdict holds on a bound restated looser than theory's `bound` while its median lies above
    `bound`: one line saying so and what the 'holds' covers; '' otherwise."""
    if verdict.verdict != measure.HOLDS or verdict.ratio <= bound or verdict.holds_from is None:
        return ""
    return (f"the median {verdict.ratio:.2f}x lies above theory's bound {bound:.2f}x: the verdict's 'holds' is for the "
            f"looser {verdict.holds_from:.2f}x that pairs this noisy can test, so this run does not test the bound itself "
            "(a quieter run, with tighter pairs, can)")


def cause_line(staleness: measure.Verdict, buffer: measure.Verdict, *, sync: float, as_run: float, fresh: float,
               per_worker: float) -> str:
    """What the replays measured of async's lower accuracy, from their two verdicts and medians (late accuracy of the
    runs replayed as run, without staleness, with a momentum buffer per worker; sync's): two short lines."""
    if staleness.verdict == measure.HOLDS:
        share = (fresh - as_run) / (sync - as_run) if sync > as_run else float("nan")
        part = ("" if share != share else "; that is all of the gap to sync" if share >= 1 else
                f"; that is {share:.0%} of the gap to sync")
        first = (f"why async ended lower, measured: staleness. The same updates without it end at {fresh:.1%}, the "
                 f"runs at {as_run:.1%}, sync at {sync:.1%}{part}")
    else:
        how = "ended lower" if staleness.verdict == measure.REVERSED else "are not distinguishable from the runs"
        first = (f"why async ended lower: not explained by this run (the replays without staleness {how}: "
                 f"{fresh:.1%} vs {as_run:.1%})")
    if buffer.verdict == measure.HOLDS:
        won = (per_worker - as_run) / (fresh - as_run) if fresh > as_run else float("nan")
        back = "" if won != won else f": it wins back {won:.0%} of what staleness cost"
        second = (f"how: with a momentum buffer per worker (Hogwild's recipe), the stale gradients kept, the replays end "
                  f"at {per_worker:.1%}{back}, so the one shared buffer is how " +
                  ("most of it is lost" if won == won and won > 0.5 else "part of it is lost"))
    else:
        how = "end lower" if buffer.verdict == measure.REVERSED else "are not distinguishable from the runs"
        second = (f"how: the replays with a momentum buffer per worker {how} ({per_worker:.1%}): this run does not "
                  "show the shared buffer as how staleness costs")
    return f"{first}\n{second}"


def order_line(a, b, a_name: str, b_name: str) -> str:
    """Where the medians of a and b (late accuracies, round i of each from the same launch) order the two sides one
    way and the paired rounds' ratios the other: one line with the rounds' ratios, the comparison's figure; '' where
    both point the same way."""
    import statistics
    pairs = measure.paired_ratios(a, b, higher_is_better=True)
    paired, ma, mb = statistics.median(pairs), statistics.median(a), statistics.median(b)
    if (paired > 1) == (ma > mb) or paired == 1 or ma == mb:
        return ""
    return (f"{a_name} vs {b_name}: the medians ({ma:.1%} vs {mb:.1%}) point the other way from the rounds; round by "
            f"round, {a_name} over {b_name}: {', '.join(f'{r:.2f}' for r in pairs)}, median {paired:.2f}x, the "
            "verdict's figure (each median comes from other rounds)")


def restated_within_line(verdict: measure.Verdict, predicted: float) -> str:
    """Where a no-worse-than claim was restated weaker although its whole range lies within the `predicted` cost:
    one line saying why the range alone does not test it; '' otherwise."""
    if "restated:" not in verdict.notes or verdict.holds_from is None or verdict.low < 1 / (1 + predicted):
        return ""
    cost = verdict.tested().removeprefix("tested as 'no worse by more than ").rstrip("'")
    return (f"its range {verdict.range_text()} lies within {predicted:.0%}, yet {verdict.repeats} pairs only show how "
            f"far these pairs went: a cost is tested from {measure.verdicts.RESOLVE:g}x their scatter (lab 02's rule), "
            f"so this run tests {cost}, not {predicted:.0%}")
