"""What a load run measured: latency percentiles, one run's summary (LoadSummary), its record (LoadRun), where its
time went (time_split), and the medians of interleaved repeats (LoadStats)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from .... import detectors, measure, report

SATURATED_SHARE = 0.95  # a run that answered less than this share of its arrived load did not keep up: the one rule
#                         for "kept up", the grid's and Exercise 3's (achieved_rps >= 0.95 x offered_rps)
LATE_GENERATOR_MS = 1.0  # a load generator whose median delay is above this did not offer the load it was asked to


TERMS = (f"offered / arrived: the rate asked for / the rate requests really came at (each load's line)\n"
         f"achieved: answers/s up to the last answer, less the final batch's wait after the last arrival\n"
         f"%: achieved / arrived (one decimal within a point of the line); kept up: % >= {SATURATED_SHARE:.0%}\n"
         f"  (medians of the rounds; Exercise 3's rule), else SATURATED;\n"
         f"  '(split)': the rounds' own % lie on both sides of {SATURATED_SHARE:.0%}\n"
         f"spread / p99 spread: how far the rounds' achieved rates / p99s lie apart (each round draws its own\n"
         f"  arrivals: a server that kept up scatters as they do); batch: the mean batch")


def near_line(share: float) -> str:
    """A share answered, with a decimal within a point of the kept-up line (94.6 %, not a '95 %' marked saturated);
    below the line it is rounded down, so the figure printed is on the line's side the rule put it (never '95.0%')."""
    if abs(share - SATURATED_SHARE) >= 0.01:
        return f"{share:.0%}"
    return f"{math.floor(share * 1000) / 1000:.1%}" if share < SATURATED_SHARE else f"{share:.1%}"


def kept_up(achieved_rps: float, arrived_rps: float | None) -> bool:
    """The one rule for keeping up: achieved >= SATURATED_SHARE x the rate that arrived (True without an arrival rate)."""
    return arrived_rps is None or achieved_rps >= SATURATED_SHARE * arrived_rps


def load_basis(capacity_rps: float, capacity_flags, bound_rps: float) -> tuple[float, str]:
    """The rate the serving loads are multiples of, and why: the measured batch-1 capacity, or, where it is flagged
    (a figure the run contradicts), the forward pass's bound, which a server can only fall short of."""
    if not capacity_flags:
        return capacity_rps, "what batch-1 serving answered in its bursts"
    return bound_rps, ("the forward pass's bound for batch-1 serving, not the flagged capacity "
                       f"({capacity_rps:.0f}/s):\n  the loads are never built on a figure the run contradicts")


def serving_row_label(server: str, load: str, offered_rps: float) -> tuple[str, str]:
    """A serving row's variant (its key in the results, the same on every run: the server alone, its load is the
    row's workload) and a note with the rate offered (which moves from run to run with the measured capacity)."""
    return server, f"{load} load: {offered_rps:.0f} requests/s offered"


def sweep_flags(small_batch: int, small, large_batch: int, large) -> list:
    """The batch sweep's flags on two neighbouring sizes (measure.Timing each, timed in the same interleaved rounds):
    report.batch_time_flags on their medians; where every round breaks the same rule, the effect repeats, so it is
    no busy machine's noise but a property of this machine, and it becomes a note saying so."""
    inverted = sum(lg < sm for sm, lg in zip(small.times, large.times))  # rounds where the larger batch took less time
    some = 2 <= len(small.times) and inverted < len(small.times)  # learner s13r8h: not "(a busy machine)" on a quiet run
    flags = report.batch_time_flags(small_batch, small.median, large_batch, large.median, less_time_cause=(
        f"in {inverted} of {len(small.times)} rounds only: noise, the lines below" if some else None))
    if not flags or len(small.times) < 2:
        return flags
    work = large_batch / small_batch
    if large.median < small.median:  # less time for more work: the notebook times the dense layer alone next
        every = inverted == len(small.times)
        said, cause = f"less time than batch {small_batch}", "its reading: the lines below"
    else:  # far more than proportional
        every = all(lg > report.SUPERLINEAR_MARGIN * work * sm for sm, lg in zip(small.times, large.times))
        said, cause = f"over {report.SUPERLINEAR_MARGIN * work:g}x batch {small_batch}'s time", "its cause: not tested here"
    if not every:
        return flags
    # the note names no cause the run did not test (learner s10c: 'likely the math library's kernel' stood above a
    # line that found the dense layer does not explain it)
    return [detectors.note(f"{said} in all {len(small.times)} rounds: repeatable, not noise ({cause})")]


def behind_at_low(label: str, stats, load) -> str:
    """The flag on a server that saturated at the low load, sized to keep up: its rates, and the load only where the
    grid's window (`load`, a conditions.Load or None) was busy; on a quiet window it says the load does not explain it."""
    text = (f"{label} answered {stats.achieved_rps:.0f} of {stats.arrived_rps or stats.offered_rps:.0f} requests/s "
            "arrived" + (" (its rounds split)" if getattr(stats, "undecided", False) else ""))
    if load is not None and load.busy:
        return text + f": {load.cause()} while the grid ran, more than when the loads' rate was measured: rerun"
    quiet = f"other programs used {load.others:.1f} of {load.cores} cores" if load is not None else "no load reading"
    return (text + f": not the load ({quiet} while the grid ran): this server fell behind a load sized below "
            "batch-1's rate, a result of this run")


def kept_up_rounds(dynamic, batch1) -> tuple[int, int]:
    """In how many rounds batch-1 saturated while the dynamic batcher kept up (each round judged side by side, both
    servers on the same arrivals, by the one rule), of the rounds with an arrival rate: (those rounds, all)."""
    pairs = [(d, b) for d, b in zip(dynamic.runs, batch1.runs) if d.arrived_rps and b.arrived_rps]
    return sum(not kept_up(b.achieved_rps, b.arrived_rps) and kept_up(d.achieved_rps, d.arrived_rps)
               for d, b in pairs), len(pairs)


def kept_up_outcome(split: int, rounds: int, headline: str) -> str | None:
    """The dynamic-vs-batch-1 comparison's outcome where every round split (batch-1 saturated, `headline` kept up):
    a verdict on keeping up, which no ratio of answered rates gives (the kept-up server's rate is the load offered);
    None where the rounds do not all say so (then the paired ratio decides)."""
    if not rounds or split < rounds:
        return None
    return f"{headline} kept up where batch-1 saturated, in {split} of {rounds} rounds -> holds"


def allowance_words(v, stated: float | None = None) -> str:
    """The cost a no-worse-than verdict tested, in words: 'the 10% the claim allows', or where noisy pairs widened the
    claim's `stated` cost, both figures in one phrase (cell text said 10 %, the line 15 %: learner s15r9h)."""
    tested = 1 / v.holds_from - 1
    if stated is None or f"{tested:.0%}" == f"{stated:.0%}":
        return f"the {tested:.0%} the claim allows"
    return (f"the {tested:.0%} these pairs can resolve (the claim allows {stated:.0%}; "
            f"{measure.RESOLVE:g}x the pairs' scatter is wider)")


def allowed_cost(v, slower: str, stated: float | None = None) -> str:
    """Where a no-worse-than verdict holds with its whole range below 1: that `slower` was slower here, by less than
    the cost the claim tested allows (learner s11h: '0.98x (range 0.97-0.999) -> holds' read as a contradiction)."""
    if v.verdict != measure.HOLDS or v.holds_from is None or v.upper or v.high >= 1:
        return ""
    return f"{slower} was slower here (the whole range below 1), by less than {allowance_words(v, stated)}"


def allowance_outcome(v, slower: str, stated: float | None = None) -> str:
    """A no-worse-than verdict's outcome that reads plainly where it holds with `slower` slower in every pair: the
    figure once, then why slower still holds (learner s11r2h: 'holds; static was slower' read as a contradiction);
    any other outcome as measure.printed_outcome."""
    if not allowed_cost(v, slower):
        return measure.printed_outcome(v)
    top = "just below 1" if v.high >= 0.995 else f"{v.high:.2f}"
    return (f"{v.ratio:.2f}x (range {v.low:.2f} to {top}) -> holds: {slower} slower in every pair, but by less than "
            f"{allowance_words(v, stated)}")


def summary_lines(items) -> list[str]:
    """The summary's comparison lines from (label, outcome, flags) items: an outcome that is not measurable here
    names its reason by number, said once below with the rule once, so a busy run's summary says each reason once."""
    from ....measure import verdicts
    reasons, lines = [], []
    for label, outcome, flags in items:
        outcome = str(outcome)
        if not outcome.startswith(measure.NOT_MEASURABLE + ": "):
            lines.append(measure.flagged(measure.lines.wrap(f"  {label}: {outcome}"), flags))  # 100 columns
            continue
        why = outcome[len(measure.NOT_MEASURABLE) + 2:]
        for said in (f" ({verdicts.UNREAD})", f" ({verdicts.RULE})", f": {verdicts.RERUN}"):
            why = why.replace(said, "")
        reasons += [why] if why not in reasons else []
        lines.append(measure.flagged(measure.lines.wrap(f"  {label}: {measure.NOT_MEASURABLE} "
                                                        f"(reason {reasons.index(why) + 1} below)"), flags))
    lines += [measure.lines.wrap(f"  reason {i}: {why}") for i, why in enumerate(reasons, 1)]
    if reasons:
        lines.append(measure.lines.wrap(f"  {measure.NOT_MEASURABLE}: "
                                        f"{verdicts.UNREAD.replace('its ratio', 'each ratio')}; "
                                        f"{verdicts.RERUN} ({verdicts.RULE})"))
    return lines


def latency_percentiles(arrivals_s, done_s, end_s: float, percentiles=(50, 95, 99)) -> list[float]:
    """Latency percentiles in ms, nearest rank; a request never answered (done None) counts as waiting until end_s."""
    if not len(arrivals_s) or len(arrivals_s) != len(done_s):
        raise ValueError(f"need one done time per arrival, got {len(arrivals_s)} arrivals and {len(done_s)} done times")
    latencies = sorted((end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s))
    n = len(latencies)
    return [1e3 * latencies[max(0, math.ceil(p / 100 * n) - 1)] for p in percentiles]


@dataclass(frozen=True)
class LoadSummary:
    """One load run in numbers: offered and achieved load, latency percentiles (ms), batch sizes, what went wrong."""

    label: str
    offered_rps: float | None  # the rate asked for
    arrived_rps: float | None  # the rate at which requests really arrived (a Poisson count varies around the rate)
    achieved_rps: float
    requests: int
    answered: int
    failed: int
    unanswered: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_batch: float
    lag_ms: float
    batcher_error: str | None = None

    @property
    def saturated(self) -> bool:
        """True when the server did not keep up: achieved load short of the arrived one, or many left unanswered."""
        return not kept_up(self.achieved_rps, self.arrived_rps) or self.unanswered > (1 - SATURATED_SHARE) * self.requests

    def text(self) -> str:
        """Two lines under 100 columns: the rates and the mean batch; the latencies and what went wrong."""
        offered = f"{self.offered_rps:.0f}/s" if self.offered_rps else "a burst"
        arrived = f"  arrived {self.arrived_rps:.0f}/s" if self.arrived_rps else ""
        more = ">= " if self.unanswered else ""
        head = f"{self.label}: " if self.label else ""
        line = (f"{head}offered {offered}{arrived}  achieved {self.achieved_rps:.0f}/s  mean batch {self.mean_batch:.1f}\n"
                f"  latency ms: p50 {more}{self.p50_ms:.1f}  p95 {more}{self.p95_ms:.1f}  p99 {more}{self.p99_ms:.1f}")
        if self.unanswered or self.failed:
            line += f"  ({self.unanswered} unanswered, {self.failed} errors)"
        return line


@dataclass
class LoadRun:
    """Everything one run_load recorded."""

    label: str
    requests: list
    start_s: float
    end_s: float
    offered_rps: float | None
    arrived_rps: float | None
    lag_median_s: float
    lag_max_s: float
    batcher_error: str | None

    def final_wait_s(self) -> float:
        """How long the final batch waited, after the last request had arrived, for company that could not come:
        from the later of the last arrival and the previous batch's answer to its forward pass's start (0 where the
        forward passes were not stamped, or requests were left unanswered)."""
        done = [r.done_s for r in self.requests if r.done_s is not None]
        if not done or len(done) < len(self.requests):
            return 0.0
        last = max(done)
        started = [r.started_s for r in self.requests if r.done_s == last and r.started_s is not None]
        if not started:
            return 0.0
        before = max((d for d in done if d < last), default=self.start_s)
        return max(0.0, min(started) - max(before, max(r.arrival_s for r in self.requests)))

    def span_s(self) -> float:
        """The run's span for its answered rate: start -> last answer (or the end, with requests unanswered), less
        the final batch's wait after the last arrival, which measures max_wait_ms, not how fast the server answers."""
        unanswered = any(r.done_s is None for r in self.requests)
        last = self.end_s if unanswered else max(r.done_s for r in self.requests)
        return last - self.start_s - self.final_wait_s()

    def summary(self) -> LoadSummary:
        """Achieved requests/s (answered without error, over span_s), percentiles, batch sizes."""
        reqs = self.requests
        ok = [r for r in reqs if r.done_s is not None and r.error is None]
        failed = sum(r.error is not None for r in reqs)
        unanswered = sum(r.done_s is None for r in reqs)
        p50, p95, p99 = latency_percentiles([r.arrival_s for r in reqs], [r.done_s for r in reqs], self.end_s)
        batches = [r.batch_size for r in ok]
        mean_batch = len(batches) / sum(1 / b for b in batches) if batches else 0.0  # per batch, not per request
        return LoadSummary(self.label, self.offered_rps, self.arrived_rps, len(ok) / self.span_s(), len(reqs),
                           len(ok), failed, unanswered, p50, p95, p99, mean_batch, 1e3 * self.lag_median_s,
                           self.batcher_error.strip().splitlines()[-1] if self.batcher_error else None)


BUSY_SHARE = 0.9  # forward passes that took this share of a run or more: the server computed nearly all the time


def time_split(run: LoadRun, passes) -> str:
    """A load run's time split: its forward passes, `passes` ((requests, seconds) each), against the rest of the run
    (collecting, waiting, answering), from its start to its last answer; a saturated run says which side lost the race:
    computing nearly all the time (its batches were too small to answer the load) or not (its time went elsewhere)."""
    stats, passes, span = run.summary(), list(passes), run.span_s()
    served, busy = sum(n for n, _ in passes), sum(s for _, s in passes)
    share, computing_rps, mean = busy / span, served / busy if busy else 0.0, served / max(1, len(passes))
    text = (f"{len(passes)} passes of {mean:.1f} requests ({busy / max(1, len(passes)) * 1e3:.2f} ms each), "
            f"{share:.0%} of the run; {computing_rps:.0f} requests/s while they ran; answered {stats.achieved_rps:.0f}/s"
            + (f", {near_line(stats.achieved_rps / stats.arrived_rps)} of the {stats.arrived_rps:.0f}/s that arrived "
               f"({'saturated' if stats.saturated else 'kept up'})" if stats.arrived_rps else ""))
    if not stats.saturated:
        return text
    if share >= BUSY_SHARE:
        return (text + f"\n    saturated with its forward passes running {share:.0%} of the time: batches of {mean:.1f} "
                f"answer {computing_rps:.0f}/s at most, below the load")
    return (text + f"\n    saturated while its forward passes ran only {share:.0%} of the time: the rest went outside them, "
            "to collecting batches (with a max_wait_ms, waiting for requests), answering, or a thread waiting for a core")


SLOWED_PASS = 1.5  # a load run's forward pass over this many times the sweep's (larger) batch was slowed ("within 1.5x")


def pass_flags(splits: dict, sweep_s: dict) -> list[str]:
    """Flags on the forward passes of several load runs, `splits` {label: [(requests, seconds), ...]}, against the
    batch sweep (`sweep_s`, {batch: median seconds}; a run's passes are read against the smallest swept batch that
    holds their mean): passes that took over SLOWED_PASS x that sweep figure, and a run whose passes held more requests
    yet took less time each than another's where the sweep's figures grow from the one batch to the other."""
    means = {label: (sum(n for n, _ in p) / len(p), sum(t for _, t in p) / len(p)) for label, p in splits.items() if p}
    swept = {label: min((b for b in sweep_s if b >= n), default=max(sweep_s)) for label, (n, _) in means.items()}
    flags = []
    for label, (n, t) in means.items():
        b = swept[label]
        if t > SLOWED_PASS * sweep_s[b]:
            flags.append(f"{label}: passes of {n:.1f} requests took {t * 1e3:.2f} ms, {t / sweep_s[b]:.1f}x the sweep's "
                         f"batch {b} ({sweep_s[b] * 1e3:.2f} ms): slowed in this run, not by their size")
    for small, (n_s, t_s) in means.items():
        for large, (n_l, t_l) in means.items():
            if n_l > n_s and t_l < t_s and sweep_s[swept[large]] > sweep_s[swept[small]]:
                flags.append(f"{large}: passes of {n_l:.1f} requests took less ({t_l * 1e3:.2f} ms) than {small}'s of "
                             f"{n_s:.1f} ({t_s * 1e3:.2f} ms), against the sweep: {small}'s split explains its run only")
    return flags


@dataclass(frozen=True)
class LoadStats:
    """Medians over interleaved repeats of one (server, load) pair, and how far the repeats spread."""

    label: str
    load: str
    offered_rps: float | None
    arrived_rps: float | None
    achieved_rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_batch: float
    saturated: bool
    rounds: int
    spread_rps: float
    spread_p99: float
    runs: tuple = field(repr=False, default=())

    @classmethod
    def of(cls, label: str, load: str, runs) -> "LoadStats":
        med = lambda name: statistics.median(getattr(r, name) for r in runs)  # noqa: E731
        arrived = med("arrived_rps") if runs[0].arrived_rps else None
        # the medians printed, judged by the one rule (kept_up): the row a learner checks by hand, and Exercise 3's
        saturated = not kept_up(med("achieved_rps"), arrived) if arrived else any(r.saturated for r in runs)
        return cls(label, load, runs[0].offered_rps, arrived, med("achieved_rps"), med("p50_ms"),
                   med("p95_ms"), med("p99_ms"), med("mean_batch"), saturated, len(runs),
                   measure.spread(r.achieved_rps for r in runs), measure.spread(r.p99_ms for r in runs), tuple(runs))

    @property
    def share(self) -> float | None:
        """The achieved rate as a share of the arrived one (medians), None without an arrival rate."""
        return self.achieved_rps / self.arrived_rps if self.arrived_rps else None

    @property
    def undecided(self) -> bool:
        """True when the rounds' own achieved/arrived shares fall on both sides of SATURATED_SHARE: the mark (kept up
        or SATURATED) then rests on a difference smaller than these rounds resolve."""
        shares = [r.achieved_rps / r.arrived_rps for r in self.runs if r.arrived_rps]
        return len(shares) > 1 and min(shares) < SATURATED_SHARE <= max(shares)

    @property
    def flags(self) -> list[str]:
        """Warnings about these figures: a load generator that fell behind its schedule (noise is the table's line)."""
        flags = []
        lag = max((r.lag_ms for r in self.runs), default=0.0)
        if lag > LATE_GENERATOR_MS:
            flags.append(f"the load generator sent requests {lag:.1f} ms late (median; a busy machine), counted as "
                         "latency")
        return flags

    HEADER = (f"{'server':<13} {'achieved':>8} {'%':>5} {'spread':>6} {'p50':>7} {'p95':>7} {'p99':>7} "
              f"{'p99 spread':>10} {'batch':>5}\n"
              "              (requests/s)              (latency, ms)")  # % beside achieved, away from the spreads

    def load_line(self) -> str:
        """The line above this load's rows: the rate offered and, in the same sentence, why the rate that arrived
        differs (random arrivals; it is the % column's base); the same for every server (within a round every server
        meets the same arrivals)."""
        head = f"{self.load} load: {self.offered_rps or 0:.0f} requests/s offered"
        if not self.arrived_rps:
            return head
        draws = [r.arrived_rps for r in self.runs if r.arrived_rps]
        rounds = (f" (rounds: {min(draws):.0f} to {max(draws):.0f}/s)"  # each round draws its own arrivals
                  if len(draws) > 1 and measure.spread(draws) >= 0.05 else "")
        return f"{head}; random arrivals brought {self.arrived_rps:.0f}/s{rounds}, the % base"

    def text(self) -> str:
        """One row under HEADER and its load_line; >= marks a percentile that is a lower bound (requests were left
        unanswered); under 100 columns with both marks (learner s11h: the marks fell off a 100-column screen)."""
        bound = ">=" if any(r.unanswered for r in self.runs) else "  "
        return measure.flagged(
            f"{self.label:<13} {self.achieved_rps:8.0f} "
            + (f"{near_line(self.share):>5}" if self.share is not None else "     ")
            + f" {self.spread_rps:6.0%} {bound}{self.p50_ms:5.1f} {bound}{self.p95_ms:5.1f} {bound}{self.p99_ms:5.1f} "
            f"{self.spread_p99:10.0%} {self.mean_batch:5.1f}" + (" SATURATED" if self.saturated else "")
            + (" (split)" if self.undecided else ""),
            self.flags)


def unflagged_less_time(batch_sweep, sweep, sweep_flags, skip=()) -> list[str]:
    """One line per pair of neighbouring sizes where the larger batch's median took less time than the smaller one's
    but by no more than the margin that raises a flag (detectors.LESS_TIME_TOLERANCE): the run says it saw it and why
    no flag stands beside it (learner s10k: batch 4 under batch 2, no flag, no word). One line each: the caller wraps.
    skip: (small, large) pairs said elsewhere (learner s13r5h: 'not flagged' here, 'repeatable, not noise' below)."""
    lines = []
    for (small, large), flags in zip(zip(batch_sweep, batch_sweep[1:]), sweep_flags[1:]):
        small_s, large_s = sweep[small].median, sweep[large].median
        if flags or large_s >= small_s or (small, large) in skip:
            continue
        less, margin = 1 - large_s / small_s, detectors.LESS_TIME_TOLERANCE
        fine = f"{large_s * 1e3:.2f}" == f"{small_s * 1e3:.2f}"  # equal at 2 decimals: show a third ('3.09 vs 3.09')
        lines.append(f"batch {large} took less time than batch {small} ({large_s * 1e3:.{3 if fine else 2}f} vs "
                     f"{small_s * 1e3:.{3 if fine else 2}f} ms, {less:.{1 if less < 0.01 else 0}%} less): " + (f"within the {margin:.0%} by which two medians may differ, so not flagged"
                                              if less <= margin else f"beyond the {margin:.0%} by which two medians "
                                              "may differ, yet no flag stands beside it"))
    return lines


def inversions(batch_sweep, sweep, knee: int | None = None) -> list[tuple[int, int, str]]:
    """(smaller, larger, how) for each pair of neighbouring sizes whose medians invert theory's order: the larger batch
    took less time ('less time') or, up to the `knee` (where throughput levels off), gave fewer samples/s ('fewer
    samples/s'); the lab tests each, flagged or not."""
    found = []
    for small, large in zip(batch_sweep, batch_sweep[1:]):
        small_s, large_s = sweep[small].median, sweep[large].median
        if large_s < small_s:
            found.append((small, large, "less time"))
        elif large / large_s < small / small_s and (knee is None or large <= knee):
            found.append((small, large, "fewer samples/s"))
    return found


CAPACITY_CONDITION = ("the bursts queue every request at once, the high load's generator sends them one by one "
                      "while the server runs, on the same cores")


def capacity_agreement(burst_rps: float, burst_spread: float, saturated_rps: float, saturated_spread: float):
    """Batch-1 serving's capacity measured twice: its bursts, and the grid's high load where it saturated (answering as
    fast as it can). (the conclusion to print, flags): the two agree, cannot be told apart, or contradict each other
    (detectors.measured_twice). Neither is an upper bound on the other (learner s10k: 'at most 529/s' beside 577/s)."""
    flags = detectors.measured_twice(burst_rps, burst_spread, saturated_rps, saturated_spread,
                                     what="batch-1 serving's capacity", first_name="its bursts",
                                     second_name="the saturated high load", unit="requests/s",
                                     condition=CAPACITY_CONDITION)
    said = agreement_words(burst_rps, burst_spread, saturated_rps, saturated_spread) if not flags else (
        "see the flag" if any(detectors.kind_of(f) is not detectors.Kind.NOTE for f in flags) else "see the note")
    # learner s13r6h: the two figures stand on the line above; this one says what the second is, and which one counts
    # learner s13r7h: 'its capacity a second time, 5% from the bursts', more than ..., within ...: no flag; the lab's
    # figure stays the bursts'' was four clauses for 'this figure, close enough, the lab keeps that one'
    return (f"saturated, it answered as fast as it can: {saturated_rps:.0f}/s is its capacity measured a second time, "
            f"against the bursts' {burst_rps:.0f}/s: {said}; the lab keeps the bursts'"), flags


def agreement_words(first: float, first_spread: float, second: float, second_spread: float) -> str:
    """The two capacities where no flag stands: they agree only where their rounds' ranges overlap; a gap beyond that
    scatter but within the course's tolerance is said as such, never 'agree' (learner s12r4h: 'agree: 24% apart,
    within the 25%' read as a threshold picked to pass). The forward pass's bound is checked beside the bursts only."""
    gap = max(first, second) / min(first, second) - 1
    reach = [(v * (1 - s / 2), v * (1 + s / 2)) for v, s in ((first, first_spread), (second, second_spread))]
    if reach[0][0] <= reach[1][1] and reach[1][0] <= reach[0][1] and gap > detectors.TWICE_TOLERANCE:
        return (f"not comparable here: {gap:.0%} apart, but their rounds scatter by {first_spread:.0%} and "
                f"{second_spread:.0%}: too noisy to tell agreement from disagreement")
    if reach[0][0] <= reach[1][1] and reach[1][0] <= reach[0][1]:
        return (f"they agree: {gap:.0%} apart, within the scatter of their rounds ({first_spread:.0%}, "
                f"{second_spread:.0%})")
    return (f"{gap:.0%} apart, close enough: more than their rounds scatter, within the "
            f"{detectors.TWICE_TOLERANCE:.0%} two runs minutes apart may differ (no flag)")


# what lab 09's cells after its exercises read from the lab's own runs (the models, the servers, the loads, the grid):
# a kernel restarted to work on an exercise has none of them, and those cells say so instead of a NameError
MEASURED_NAMES = frozenset({"images", "input_shape", "model", "answer_here", "batcher", "loads", "broken", "grid"})
RESTART_HEAD = "this kernel has not run the sections above"
RESTART_REASON = "run the notebook from the top"


def medians_apart_line(mode_timings, load=None, base: str = "train mode", apart: float = 0.05) -> str | None:
    """Under the modes' table: the rows whose two medians give a speed-up `apart` or more from the paired column, and
    why the column is the figure (learner s13r7h: 'no_grad 1.881 vs train 2.141 ms, yet 1.00x'); None where none.
    A row whose column reads n/m under `load` (measure.table_ratio) is left out: it has no figure to prefer."""
    import statistics

    rows = []
    for b, timings in mode_timings.items():
        for name, t in timings.items():
            if name == base:
                continue
            ratios = measure.paired_ratios(t, timings[base])
            paired = statistics.median(ratios)
            medians = timings[base].median / t.median
            if abs(medians / paired - 1) >= apart and measure.table_ratio(ratios, load) != measure.N_M:
                rows.append(f"batch {b} {name}: {medians:.2f}x from the medians, {paired:.2f}x paired, spreads "
                            f"{timings[base].spread:.0%} and {t.spread:.0%}")
    if not rows:
        return None
    return measure.lines.wrap(
        "the medians and the speed-up disagree at " + "; ".join(rows) + ": each median comes from its own rounds, "
        "scattered by those spreads, while a paired ratio compares two passes timed side by side, so read the "
        "speed-up column")
