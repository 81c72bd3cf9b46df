"""Lab 08's short lines about its verdicts: one line per claim for the summary (each verdict's notes stay where it was
printed), and the line that says when a median lies above the bound theory predicts while the verdict holds."""
from __future__ import annotations

import math
import statistics

from .... import detectors, measure


def summary_line(verdict: measure.Verdict, label: str | None = None, predicted_cost: float | None = None) -> str:
    """'<claim>: <outcome>; predicted: <prediction>', the outcome as the verdict printed it (measure.printed_outcome:
    the claim tested, the figure, its range, the verdict word), without its notes; a verdict the conditions ruled out reads as it did where it was printed ('cannot be seen
    here'), without a figure. `predicted_cost`: a no-worse-than prediction's own cost; where the claim tested was
    restated weaker, the line says what became of the prediction (its median missed it, or it was not tested)."""
    head = label or verdict.claim
    if verdict.verdict == measure.CANNOT_SEE:
        return f"{head}: {measure.CANNOT_SEE} (its verdict above says why)"
    outcome = measure.printed_outcome(verdict)  # the verdict's outcome as printed (the claim tested leads it)
    if verdict.notes and outcome.endswith(f" ({verdict.notes})"):
        outcome = outcome[:-len(verdict.notes) - 3]  # its notes stay under the verdict above
    fate = prediction_fate(verdict, predicted_cost)
    if "missed" in fate:  # the prediction's fate leads: 'holds' then reads as the weaker claim's
        return (f"{head}: prediction missed ({verdict.expected}): {fate.split('missed, ', 1)[1]}; only a weaker "
                f"claim held: {outcome}")
    return f"{head}: {outcome}; predicted: {verdict.expected}" + fate


def prediction_headline(verdict: measure.Verdict, predicted_cost: float, first: str, second: str, what: str) -> str:
    """One plain sentence over a no-worse-than verdict, about the prediction the markdown made: 'Hogwild ended at
    0.95x sync's late accuracy (median of 5 pairs): the predicted 5 % is missed ...; the weaker 10 % these pairs can
    resolve holds' (learner s13r5g: 'holds' read as 'the prediction was right' while its 5 % was missed)."""
    if verdict.verdict == measure.CANNOT_SEE:
        return f"{first} vs {second}: {measure.CANNOT_SEE} (the verdict below says why)"
    floor = 1 / (1 + predicted_cost)
    d = digits_apart(verdict.ratio, floor)  # 0.9496 below 0.9524: never 'below' between two equal figures
    said = f"{first} ended at {verdict.ratio:.{d}f}x {second}'s {what} (median of {verdict.repeats} pairs)"
    tested = verdict.tested().removeprefix("tested as ").strip("'")
    win_only = verdict.holds_from is not None and verdict.holds_from >= 1 - 1e-9  # too noisy: only a win decides
    # learner s13r8g: "'within 5%', as predicted and tested" over 0.92x from pairs too noisy to test any cost
    if not win_only and (verdict.holds_from is None or verdict.holds_from >= floor - 1e-9):  # tested as predicted
        return said + f": 'within {predicted_cost:.0%}', as predicted and tested: {verdict.verdict}"
    if verdict.ratio < floor:  # the outcome of the markdown's prediction leads (learner s13r6g: 'holds' remembered)
        near = verdict.high >= floor  # a near miss: the pairs' range reaches the prediction
        return (f"prediction missed{', narrowly' if near else ''}: {said}, below the {floor:.{d}f}x "
                f"(= 1/{1 + predicted_cost:g}) that the predicted {predicted_cost:.0%} allows"
                + (f" (its range {verdict.range_text()} reaches above it)" if near else "")
                + (f"; these pairs resolve only a win: {verdict.verdict}" if win_only else
                   f"; these pairs resolve only the weaker '{tested}': {verdict.verdict}"))
    said += f": inside the predicted {predicted_cost:.0%}, which these pairs scatter too much to test"
    if win_only:
        return said + f"; they resolve only a win: {verdict.verdict}"
    return said + f"; the weaker claim they can resolve, '{tested}': {verdict.verdict}"


def verdict_text(verdict: measure.Verdict, predicted_cost: float) -> str:
    """The verdict as printed, its first line's outcome 'prediction missed' where its median missed the prediction's
    own cost and only a weaker claim was tested (learner s13r6g: the block opened 'holds' for a missed prediction)."""
    text = str(verdict)
    if "missed" not in prediction_fate(verdict, predicted_cost):
        return text
    first, _, rest = text.partition("\n")
    if first.endswith(f": {verdict.verdict}"):
        first = first[:-len(verdict.verdict)] + "prediction missed"  # the weaker claim's outcome: the line above
    return measure.lines.wrap(first) + ("\n" + rest if rest else "")


def digits_apart(a: float, b: float, least: int = 2, most: int = 6) -> int:
    """The fewest decimals (at least `least`) at which a and b print differently; `most` where none do."""
    return next((d for d in range(least, most) if f"{a:.{d}f}" != f"{b:.{d}f}"), most)


def prediction_fate(verdict: measure.Verdict, predicted_cost: float | None) -> str:
    """Where a no-worse-than claim was tested weaker than its prediction's `predicted_cost`: '; the predicted 5 %:
    missed by the median ...' or '; the predicted 5 % itself not tested here'; '' otherwise."""
    if predicted_cost is None or verdict.holds_from is None or verdict.upper:
        return ""
    floor = 1 / (1 + predicted_cost)  # the prediction holds while the ratio stays above this
    if verdict.holds_from >= floor - 1e-9:  # tested as predicted (or stricter): the outcome is the prediction's
        return ""
    if verdict.ratio < floor:
        d = digits_apart(verdict.ratio, floor)  # 0.9496 below 0.9524: never 'below' between two equal figures
        return (f"; the predicted {predicted_cost:.0%}: missed, its median {verdict.ratio:.{d}f}{verdict.unit} lies "
                f"below {floor:.{d}f}{verdict.unit} (= 1/{1 + predicted_cost:g}, a {predicted_cost:.0%} cost)")
    return f"; the predicted {predicted_cost:.0%} itself not tested here (these pairs scatter too much)"


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
        part = ("" if share != share else (f"; more than the gap: {100 * (fresh - sync):.1f} points above sync (theory: a replay steps per "
                "gradient, n times sync's steps for the same samples)") if fresh > sync else "; that is all of the gap to sync" if share >= 1 else
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
    return measure.lines.wrap(
        f"{a_name} vs {b_name}: the two medians ({ma:.1%} vs {mb:.1%}) come from different rounds, so they can point "
        f"the other way from the rounds' own ratios, {', '.join(f'{r:.2f}' for r in pairs)}, whose median the "
        "verdict below reads")


def restated_within_line(verdict: measure.Verdict, predicted: float) -> str:
    """Where a no-worse-than claim was restated weaker although its whole range lies within the `predicted` cost:
    one line saying why the range alone does not test it; '' otherwise."""
    if "restated:" not in verdict.notes or verdict.holds_from is None or verdict.low < 1 / (1 + predicted):
        return ""
    cost = verdict.tested().removeprefix("tested as 'no worse by more than ").rstrip("'")
    return (f"its range {verdict.range_text()} lies within {predicted:.0%}, yet {verdict.repeats} pairs only show how "
            f"far these pairs went: a cost is tested from {measure.verdicts.RESOLVE:g}x their scatter (lab 02's rule), "
            f"so this run tests {cost}, not {predicted:.0%}")


def bound_line(verdict: measure.Verdict, bound: float) -> str:
    """A direction verdict's figure (async ahead, no straggler) read against theory's upper bound on the lead: within
    it, or above it (in every pair, or only in some); '' where the verdict did not hold."""
    if verdict.verdict != measure.HOLDS:
        return ""
    if verdict.ratio <= bound:
        return (f"its figure {verdict.ratio:.2f}x lies within theory's bound {bound:.2f}x: async gained no more than "
                "the idle share it overlaps")
    where = ("in every pair" if verdict.low > bound else
             f"in the median only (its range {verdict.range_text()} reaches below it)")
    return (f"its figure {verdict.ratio:.2f}x lies above theory's bound {bound:.2f}x, {where}: async gained more than "
            "the idle share, which the bound alone does not explain")


def core_share_line(compute_ms: list[float], shares: list[float]) -> str:
    """Worker 1's compute per gradient (its core also runs the server) against the others', with each one's share of
    its core while computing (CPU time over wall time): theory's prediction (worker 1 slower) and, computed, whether
    the difference is the cores' shares or the work itself. Short lines, the later ones indented."""
    c1, co = compute_ms[0], statistics.median(compute_ms[1:])
    s1, so = shares[0], statistics.median(shares[1:])
    cpu1, cpuo = c1 * s1, co * so  # CPU ms per gradient: the work itself, whatever took the core meanwhile
    lines = [f"worker 1 (its core also runs the server): {c1:.2f} ms per gradient, {s1:.0%} of its core while computing",
             f"the other(s): {co:.2f} ms per gradient, {so:.0%} of their core"]
    d = c1 / co - 1
    if abs(d) <= 0.05:
        return "\n  ".join(lines + ["alike within 5 %: the server's share did not show here"])
    lines.append(f"worker 1 {d:.0%} slower in these runs (theory: slower; set against the digits run under the "
                 "staleness histograms)" if d > 0 else
                 f"worker 1 {-d:.0%} faster in these runs (theory: slower; set against the digits run under the "
                 "staleness histograms)")
    if abs(cpu1 / cpuo - 1) <= 0.05:  # the same work per gradient: the shares explain the difference
        lower = "worker 1's core" if s1 < so else "the other core"
        lines += [f"the same CPU time per gradient ({cpu1:.2f} and {cpuo:.2f} ms), so the cores' shares explain it:",
                  f"the server and other programs took more of {lower}"]
    else:  # time per gradient = CPU time / share: which factor moved it more
        by_share, by_work = so / s1, cpu1 / cpuo
        lines.append(f"{c1 / co:.2f}x the others' time = {by_work:.2f}x their CPU time per gradient "
                     f"x {by_share:.2f}x from the cores' shares")
        lines.append("the cores' shares moved it most" if abs(math.log(by_share)) >= abs(math.log(by_work)) else
                     "the work itself moved it most (its CPU time): this run cannot tell why")
    lines.append(others_share_line(shares))
    return "\n  ".join(lines)


def others_share_line(shares: list[float]) -> str:
    """Who took the rest of each worker's core while it computed: the server runs on worker 1's core only, so what
    the other workers lost went to other programs; worker 1's loss is the server's and other programs' together."""
    rest1, rest_o = _rest(shares[0]), _rest(statistics.median(shares[1:]))
    text = (f"the rest of worker 1's core, {rest1:.0%}, went to the server and other programs (not split here)"
            f"\n  the rest of the other(s)' cores, {rest_o:.0%}, went to other programs only (the server is not there)")
    if rest_o > max(0.10, rest1):
        text += "\n  so other programs on this machine, not the server, slowed the other(s) most"
    elif rest_o > 0.10:
        text += "\n  so other programs on this machine took part of every core"
    above = [share for share in shares if 1 - share <= -SHARE_ROUNDING]
    if above:  # more CPU time than wall time: impossible for one thread, so the two clocks disagree
        text = measure.flagged(text, [detectors.Flag(detectors.Kind.CONTRADICT, (
            f"a worker's CPU time is {max(above):.0%} of its wall time, above 100 % for one thread: the two clocks "
            "disagree (a rest below 0 % is no program's share)"))])
    return text


SHARE_ROUNDING = 0.005  # a core share this far above 1 is a CPU clock's rounding: its rest reads 0 %, not -0 %


def _rest(share: float) -> float:
    """What a worker's core spent elsewhere (1 - share): a hair below 0 (clock rounding) is 0; beyond, kept as is."""
    rest = 1 - share
    return 0.0 if -SHARE_ROUNDING < rest < 0 else rest


def iteration_line(fewest: int, counts: dict[int, int], workers: list[dict], seconds: float | None = None) -> str:
    """Why worker `fewest` sent fewest gradients in an asynchronous run, from each worker's medians per gradient:
    compute, and the rest of an iteration (pull with its wait, push); how much of the count ratio its longer
    iterations explain (all, part or none), and which part of the iteration is longer. Short indented lines."""
    import statistics
    others = [w for w in counts if w != fewest]
    compute = {w: workers[w - 1]["compute_ms"] for w in counts}
    rest = {w: workers[w - 1]["iteration_ms"] - compute[w] for w in counts}
    fewer = statistics.median(counts[w] for w in others) / counts[fewest]
    longer = (compute[fewest] + rest[fewest]) / statistics.median(compute[w] + rest[w] for w in others)
    slower = compute[fewest] / statistics.median(compute[w] for w in others)
    waits = rest[fewest] / statistics.median(rest[w] for w in others)
    lines = [f"worker {w}: compute {compute[w]:.2f} ms + pull and push {rest[w]:.2f} ms per gradient (medians)"
             for w in counts]
    said = explained(longer, fewer)
    if seconds and longer > fewer * 1.10:  # medians above the counts: each worker's mean, computed
        tail = {w: seconds * 1e3 / counts[w] / (compute[w] + rest[w]) for w in counts}
        said = ("the medians predict more than the counts show; a count follows the mean iteration (the run's "
                f"{seconds:.2f} s over its count), not the median: " + mean_over_median(tail))
    lines += [f"worker {fewest}'s iterations {longer:.2f}x as long (its compute {slower:.2f}x, its pull and push "
              f"{waits:.2f}x), its gradients {fewer:.2f}x fewer: {said}"]
    return "\n  ".join(lines)


def mean_over_median(ratios: dict[int, float]) -> str:
    """Each worker's mean iteration over its median, with the side it lies on (learner s15r9g: 'above the median by
    0.92x' was below it); a mean above the median is a tail of long iterations."""
    parts = [f"{r:.2f}x for worker {w} (" + ("above: a tail of long iterations" if r > 1 else "below") + ")"
             for w, r in ratios.items()]
    return "mean / median " + ", ".join(parts)


def explained(predicted: float, counted: float) -> str:
    """How far a ratio of iteration times (`predicted`) accounts for a ratio of gradient counts (`counted`): within
    10 % both ways, more than it (the counts are closer than the times), part of it, or none of it; counts below 1x
    point the other way."""
    if counted / 1.10 <= predicted <= counted * 1.10:
        return "the iteration times account for the counts (within 10 %)"
    if counted < 1:  # the worker with the ratio's longer iterations sent more: the counts point the other way
        return (f"the counts point the other way ({counted:.2f}x: this worker sent more), which the iteration times' "
                f"{predicted:.2f}x do not explain")
    if predicted > counted:
        return ("the iteration times predict more than the counts show: counts follow each worker's mean "
                "iteration (its run time over its count), these are medians, which a tail of long iterations "
                "moves less")
    return (f"the iteration times account for part of the counts' {counted:.2f}x" if predicted >= 1.10 else
            f"the iteration times account for none of the counts' {counted:.2f}x")


def straggler_count_line(factor: float, counts: dict[int, int], workers: list[dict], server_on_1: bool) -> str:
    """Why the straggler (the last worker) sent fewer gradients than worker 1 by a ratio other than its `factor`: its
    sleep stretches its own iteration, pull, compute and push, `factor` times (its measured slowdown), not worker 1's;
    each one's iteration as measured (busy time, times the slowdown) gives the ratio the counts should follow. Short
    indented lines (learner s10l: x4 gave 2x fewer, the lab said messages, the cause is worker 1's core)."""
    last = max(counts)
    if min(counts[1], counts[last]) < 2:  # one gradient: no iteration timed yet (its busy time is nan)
        return (f"straggler x{factor:g}: worker 1 sent {counts[1]}, the straggler (worker {last}) {counts[last]}: "
                "under 2 gradients, so no iteration of that worker was timed and the counts are not read")
    fast, slow = workers[0], workers[last - 1]
    wall_1 = fast["iteration_ms"] * fast.get("slowdown", 1.0)
    wall_s = slow["iteration_ms"] * slow["slowdown"]
    counted, predicted = counts[1] / counts[last], wall_s / wall_1
    return "\n  ".join([
        f"straggler x{factor:g}: worker 1 sent {counts[1]}, the straggler (worker {last}) {counts[last]}: "
        f"{counted:.2f}x as many, not {factor:g}x",
        f"the straggler's iteration: {slow['iteration_ms']:.2f} ms busy x its slowdown {slow['slowdown']:.2f} = "
        f"{wall_s:.2f} ms (medians)" + slowdown_said(factor, slow),
        f"worker 1's iteration: {wall_1:.2f} ms (compute {fast['compute_ms']:.2f} + pull and push "
        f"{fast['iteration_ms'] - fast['compute_ms']:.2f})" + (", its core also runs the server" if server_on_1 else ""),
        f"the straggler stretches its own iteration, not worker 1's: {wall_s:.2f} / {wall_1:.2f} = {predicted:.2f}x;",
        explained(predicted, counted)])


def slowdown_said(factor: float, slow: dict) -> str:
    """Why the straggler's measured slowdown is not `factor`, from its own record: each sleep is (factor - 1) x the
    median busy time so far, a running median that can lie off the whole run's (learner s13r5g: 4.72 at k = 4, the
    throughput table's 4.00, unexplained); '' within 5 % of `factor` or without the record."""
    basis = slow.get("sleep_basis_ms", float("nan"))
    if math.isnan(basis) or abs(slow["slowdown"] / factor - 1) <= 0.05:
        return ""
    side = "above" if basis > slow["iteration_ms"] else "below"
    return (f"\n    {slow['slowdown']:.2f}x, not {factor:g}x: each sleep is {factor - 1:g} x the median busy time so far, "
            f"and those running medians ({basis:.2f} ms, median) lie {side} the whole run's {slow['iteration_ms']:.2f} ms")


def staleness_count_line(factor: float, by_worker: dict[int, float], counts: dict[int, int]) -> str:
    """The staleness section's prediction checked: the worker that sent fewest gradients is about as many versions
    old as the others' gradients per gradient of its own (learner s12r3g: 1.91 printed twice, never said equal)."""
    fewest = min(counts, key=lambda w: counts[w])
    if counts[fewest] == 0:
        return ""
    others = sum(n for w, n in counts.items() if w != fewest)
    per_own, stale = others / counts[fewest], by_worker[fewest]
    said = ("as predicted (within 10 %)" if per_own / 1.10 <= stale <= per_own * 1.10 else
            f"not as predicted: {stale / per_own:.2f}x that ratio")
    return (f"straggler x{factor:g}: worker {fewest} (fewest gradients) has mean staleness {stale:.2f}; the others "
            f"sent {others}/{counts[fewest]} = {per_own:.2f} gradients per gradient of its own: {said}")


def worker_1_runs_line(throughput_ratio: float, digits_ratio: float) -> str:
    """Worker 1's compute per gradient over the others' in the throughput runs and in the digits run, in one sentence:
    slower in both (as theory predicts), faster in both, or the runs disagree (learner s15r9g: one section printed
    'faster, not as theory predicts', the other showed it slower)."""
    figures = (f"worker 1's compute per gradient over the others': {throughput_ratio:.2f}x in the throughput runs, "
               f"{digits_ratio:.2f}x in this digits run")
    side = {r > 1.05 if abs(r - 1) > 0.05 else None for r in (throughput_ratio, digits_ratio)}
    if side == {True}:
        return f"{figures}: slower in both, as theory predicts (its core also runs the server)"
    if side == {False}:
        return f"{figures}: faster in both, not as theory predicts (slower: its core also runs the server)"
    return (f"{figures}: the runs disagree, so whether the server slows worker 1's compute is not distinguishable "
            "across these runs (theory: slower)")


def staleness_report(async_first: dict, factors, n_workers: int, server_on_1: bool,
                     throughput_worker_1: float | None = None) -> list[str]:
    """The lines under the staleness histograms (one run per straggler factor): first the checked predictions (each
    fewest sender's staleness against the others' gradients per own; the straggler's counts, not k; who sent fewest
    without a straggler), then a `details:` block with the figures behind them (learner s13r6g: 25 lines of fragments
    hid the one checked prediction)."""
    from .staleness import staleness_by_worker
    checked, details = [], []
    for f, r in async_first.items():
        by_worker = staleness_by_worker(r)
        counts = {w: r["order"].count(w) for w in by_worker}
        details.append(f"straggler x{f:g}, the first run: mean staleness {statistics.mean(r['staleness']):.2f}, largest "
                       f"{max(r['staleness'])}; " + ", ".join(f"worker {w} {s:.2f} ({counts[w]} gradients)"
                                                              for w, s in by_worker.items()))
        checked.append(staleness_count_line(f, by_worker, counts))
    if factors[-1] > 1 and n_workers > 1:  # the prediction: the counts follow the two measured iterations, not k
        r = async_first[factors[-1]]
        counts = {w: r["order"].count(w) for w in range(1, n_workers + 1)}
        if counts[1] and counts[n_workers]:
            head, _, rest = straggler_count_line(factors[-1], counts, r["workers"], server_on_1).partition("\n  ")
            checked.append(head + (" (why: under details)" if rest else ""))
            details.append(f"why not {factors[-1]:g}x: {rest}" if rest else "")
    if factors[0] == 1:  # the prediction, checked: which worker sent fewest without a straggler
        r = async_first[factors[0]]
        counts = {w: r["order"].count(w) for w in staleness_by_worker(r)}
        fewest = min(counts, key=lambda w: counts[w])
        if max(counts.values()) <= 1.25 * min(counts.values()):
            checked.append("no straggler: the workers sent alike (within 25 %): as predicted")
        else:
            checked.append(
                f"no straggler: worker {fewest} sent fewest ({counts[fewest]} of {sum(counts.values())}): "
                + ("the worker the prediction names (its core also runs the server)" if fewest == 1 and server_on_1
                   else "not the worker the prediction names"))
            if throughput_worker_1 and server_on_1:  # worker 1's compute against the others': both sections' runs
                digits = r["workers"][0]["compute_ms"] / statistics.median(w["compute_ms"] for w in r["workers"][1:])
                checked.append(worker_1_runs_line(throughput_worker_1, digits))
            details.append("no straggler, this digits run (the throughput runs above are other runs):\n  "
                           + iteration_line(fewest, counts, r["workers"], r.get("seconds"))
                           + "\n  in this run, " + others_share_line([w["core_share"] for w in r["workers"]]))
    details = [line for line in details if line]
    return [line for line in checked if line] + (["details:"] + ["  " + line.replace("\n", "\n  ")
                                                                 for line in details] if details else [])


def fell_back_line(rows: dict[str, tuple], target: float) -> str:
    """Rows whose median run reached `target` at a snapshot but whose median late accuracy lies below it: one line
    saying that a run can pass the target and fall back (late accuracy is the mean of the last snapshots); '' if none."""
    fell = [row for row, (hit, late) in rows.items() if hit and late < target]
    if not fell:
        return ""
    return (f"{', '.join(fell)}: reached {target:.0%} at a snapshot, yet its late accuracy lies below it: a run can "
            "pass the target and fall back (late accuracy is the mean of its last snapshots)")


def nearest(figures: dict[str, float], value: float) -> str:
    """The name of the figure that lies nearest `value` (a tie: the first named)."""
    return min(figures, key=lambda name: abs(figures[name] - value))


def overlap_line(verdict: measure.Verdict, bound: float, round_ms: float, iteration_ms: float,
                 compute_ms: float) -> str:
    """The no-straggler verdict read in every outcome: theory's bound, the measured figure, and why async falls short
    of the bound (each worker still waits for its own update); sync's round over an async worker's iteration is
    printed only where it accounts for the measured figure (within 5 %): one theory figure, one measured, otherwise."""
    predicted = round_ms / iteration_ms
    off = verdict.ratio / predicted - 1
    return "\n  ".join([
        f"reading: theory's bound {bound:.2f}x assumes async hides all of sync's idle share; measured "
        f"{verdict.ratio:.2f}x ({verdict.verdict})",
        f"async runs: a worker's iteration {iteration_ms:.1f} ms, {iteration_ms - compute_ms:.1f} ms of it outside "
        "its compute (its push, the server's update, its pull: a worker waits for its own update)",
        (f"sync's round {round_ms:.1f} ms over that iteration predicts {predicted:.2f}x, the measured figure "
         f"{abs(off):.1%} {'above' if off > 0 else 'below'} it (within 5 %): async hid only what a worker does not "
         "wait for itself"
         if abs(off) <= 0.05 else  # no third figure for one question (learner s15r9g: 1.13x, 1.22x and 2.50x)
         ("so async cannot hide all of sync's idle share, and the bound is not reached; " if verdict.ratio < bound
          else "so async should not hide all of sync's idle share, yet it ended above the bound; ")
         + "how far from it the measured figure lies, these medians do not tell (a rate follows the mean "
         "iteration, not the median)")])


def gap_pointer(sync: float, async_: float, staleness: float, factor: float) -> str:
    """Where async ends below sync: how far (points), at what mean staleness, and where the lab tests theory's cause
    (learner s11r2g: 30 points at staleness ~1 went unexplained for 8 cells); '' where async did not end lower."""
    if async_ >= sync:
        return ""
    return (f"straggler x{factor:g}: async ends {100 * (sync - async_):.1f} points below sync (medians) with its "
            f"gradients {staleness:.2f} versions old on average; theory's suspect is the one momentum buffer all "
            "workers share (a stale gradient stays in it for about 10 steps): the replay section tests it")


def damped_rate_line(staleness_by_factor: dict) -> str:
    """'damping's size here: the damped runs stepped at 58 % of the base rate on average at x1, ...': the mean of
    1 / (1 + staleness) over the damped runs' gradients, per straggler factor (learner s12r4g: '~5 % of a stale push'
    beside a +17.6-point gain; each step moves the whole momentum buffer, so damping slows the run as a smaller
    learning rate would); '' without recorded staleness."""
    means = {f: statistics.fmean(1 / (1 + s) for s in stale) for f, stale in staleness_by_factor.items() if stale}
    if not means:
        return ""
    return ("damping's size here: the damped runs stepped at "
            + ", ".join(f"{m:.0%} of the base rate at x{f:g}" for f, m in sorted(means.items()))
            + " (the mean, over their gradients, of exercise 3's damped rate as a share of the base rate); each step "
            "moves the whole momentum buffer, "
            "so damping slows the run as a smaller learning rate would, not only a stale gradient's own push")


def damped_staleness_line(shares_by_factor: dict) -> str:
    """'stale share, damped vs undamped runs (medians): x1 76% vs 72%, ...': per straggler factor, the
    damped runs' median stale share beside the undamped runs' median and range, read against theory (a learning rate
    does not change how long a gradient takes, so no change): within the range, run-to-run arrival order; outside,
    said unexplained (learner s13r7g: the damped rows staler, 76 vs 72 %, unexplained). `shares_by_factor`: factor ->
    (undamped runs' shares, damped runs' shares); '' without both."""
    said, ranges, outside = [], [], []
    for f, (plain, damped) in sorted(shares_by_factor.items()):
        if not plain or not damped:
            continue
        d = statistics.median(damped)
        said.append(f"x{f:g} {d:.0%} vs {statistics.median(plain):.0%}")
        ranges.append(f"x{f:g} {min(plain):.0%}-{max(plain):.0%}")
        if not min(plain) <= d <= max(plain):
            outside.append(f"x{f:g}")
    if not said:
        return ""
    theory = "a learning rate does not change how long a gradient takes to compute"
    if outside:
        return (f"stale share, damped vs undamped runs (medians): {', '.join(said)} (undamped runs {', '.join(ranges)})"
                f": theory expects no change ({theory}); at {', '.join(outside)} the damped median lies outside the "
                "undamped runs' range: measured, not caused by the rate (a stale share follows how alike the "
                "workers' paces are, since alternating pushes make every gradient stale, and the pace of runs made "
                "at other moments on a shared machine can differ)")
    # one sentence: the medians, then the one reading (the undamped runs' own range is their arrival-order scatter)
    return (f"stale share, damped vs undamped runs (medians): {', '.join(said)}, no change beyond the undamped runs' "
            f"own scatter ({', '.join(ranges)}), as theory expects: {theory}")


def damping_takeaway(damped: dict, replay: measure.Verdict, remedies: measure.Verdict) -> str:
    """'damping, in one line: higher at x4 (1.08x); no gain this run can see at x1 (0.97x) and in the replays (0.95x);
    a buffer per worker beat it (1.35x)': the damped-lr verdicts (runs per straggler factor, the replays, against a
    buffer per worker) as one take-away (learner s13r7g, finding 3: x1 n.d., x4 holds, replay n.d., buried)."""
    def word(v: measure.Verdict) -> str:
        return {measure.HOLDS: "higher", measure.UNDECIDED: "no gain this run can see",
                measure.REVERSED: "lower"}.get(v.verdict, "not read (its verdict says why)")
    cases = [(f"at x{f:g}", v) for f, v in sorted(damped.items())] + [("in the replays", replay)]
    by_word: dict[str, list[str]] = {}
    for where, v in cases:
        by_word.setdefault(word(v), []).append(f"{where} ({v.ratio:.2f}x)")
    def listed(places: list[str]) -> str:
        return places[0] if len(places) == 1 else ", ".join(places[:-1]) + " and " + places[-1]
    said = "; ".join(f"{w} {listed(places)}" for w, places in by_word.items())
    buffer = {measure.HOLDS: "beat it", measure.REVERSED: "lost to it"}.get(remedies.verdict,
                                                                          "not distinguishable from it")
    return (f"damping, in one line: damped lr against undamped, late accuracy: {said}; a momentum buffer per "
            f"worker {buffer} ({remedies.ratio:.2f}x)")



def tf_accuracy_line(tf_accuracy: float, *, sync: float, as_run: float, fresh: float, tf_steps: int,
                     sync_steps: int, n_workers: int) -> str:
    """TensorFlow's accuracy in one sentence: which statistic it is, which torch figure it lies nearest, and, where it
    lies above sync, the measured reason a run can (a step per gradient, as the replays without staleness take)."""
    head = f"TensorFlow's {tf_accuracy:.1%} is one run's final accuracy, so it ranks against no median above;"
    if tf_accuracy > sync and fresh > sync:
        return (f"{head} it lies above sync's {sync:.1%}, as the torch replays without staleness ({fresh:.1%}) do: "
                f"both take a step per gradient ({tf_steps} steps here), where sync averages {n_workers} gradients "
                f"per step ({sync_steps} steps)")
    if tf_accuracy > sync:
        return (f"{head} it lies above sync's {sync:.1%} and the torch replays without staleness ({fresh:.1%}): "
                "its initial weights and batches differ (Strategy 3), and this lab does not measure which lifts it")
    near = nearest({"the torch replays without staleness": fresh, "the torch runs as run": as_run}, tf_accuracy)
    return (f"{head} it lies nearer {near} (replays {fresh:.1%}, runs {as_run:.1%}); TensorFlow counts no versions, "
            "so its staleness is not measured")
