"""Verdicts on paired repeats: what the run decided, not what the prose assumed (recorded in verdicts.csv)."""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from .. import conditions, detectors, hardware, workloads
from . import lines
from .plausible import flagged, parts
from .results_table import NOT_MEASURABLE, run_conditions
from .store import store

HOLDS, REVERSED, UNDECIDED = "holds", "reversed", "not distinguishable here"
UNREAD = "measured and recorded, but its ratio is not read as a result"  # no ratio beside a reason that rules it out
CANNOT_SEE = "cannot be seen here"  # the measured conditions (a CPU quota, others' CPU, steal) rule the comparison out
RULE = "the rule: README, 'When a timing is read on a busy machine'"  # where every busy-machine refusal points
UNREADABLE_SHARE = 0.5  # other programs (and steal) took more than this share of the cores: no timing reads as a result
MIN_EFFECT = 0.05  # a median ratio within 5 % of 1 is no effect worth a verdict
MIN_PAIRS = 5  # fewer paired repeats cannot give a 90 % range (with 5, the range is their min..max at 93.75 %)
NO_DECISION = "these pairs cannot decide"  # an extra-work cost claim too noisy to test: a win would be noise too
RESOLVE = 3.0  # a tolerance this many times the pairs' scatter (half their range, relative) can be told apart
MAX_RESTATED = 0.30  # a no-worse-than claim is restated up to this tolerance; pairs that cannot tell that decide nothing
#                     (only a win does); an upper bound (decide's `upper`) is restated past it: noise only loosens it
CONFIDENCE = 0.90
BEYOND_LOAD = 2.0  # every pair favours one side by more than this factor: others' CPU blurs small differences, not
#                    one that every interleaved pair shows this large, so a busy machine does not rule it out


def paired_ratios(a, b, *, higher_is_better: bool = False) -> list[float]:
    """A's advantage over B in each pair of repeats a, b (Timings or lists): times, or rates with higher_is_better
    (> 1: A won)."""
    a, b = list(getattr(a, "times", a)), list(getattr(b, "times", b))
    if len(a) != len(b):
        raise ValueError(f"paired repeats need as many of A as of B, got {len(a)} and {len(b)}")
    # pair i is round i of A beside round i of B, run interleaved (time_interleaved, alternating_rounds)
    return [x / y for x, y in zip(a, b)] if higher_is_better else [y / x for x, y in zip(a, b)]


OTHER_ROUNDS = ("each median comes from other rounds: the comparison's figure is the verdict's, the median of the "
                "paired rounds' ratios")  # printed where medians of a pair stand beside its verdict


def medians_beside(v: "Verdict", medians_ratio: float, spreads=()) -> str:
    """Where a pair's two medians give another figure than its verdict: both figures, and why the verdict's is the
    comparison's, said once with the numbers (learner s13r6e: 1.55x from a table's rates beside a verdict's 1.25x,
    explained only by OTHER_ROUNDS); "" where they print alike or the verdict was refused (no figure)."""
    if v.verdict == CANNOT_SEE or f"{medians_ratio:.2f}" == f"{v.ratio:.2f}":
        return ""
    spread = (f", spreads {' and '.join(f'{s:.0%}'.replace('%', ' %') for s in spreads)}" if spreads else "")
    return (f"the two medians give {medians_ratio:.2f}x, the verdict {v.ratio:.2f}x: each median comes from other "
            f"rounds{spread}, while each paired ratio compares two steps timed side by side; the comparison's "
            "figure is the verdict's")


def paired_median(a, b, *, higher_is_better: bool = False) -> float:
    """The figure a verdict on paired repeats a, b prints: the median of paired_ratios (A's advantage over B). A
    table that compares the same pair prints this, not the ratio of its two medians (each from other rounds)."""
    return statistics.median(paired_ratios(a, b, higher_is_better=higher_is_better))


def _binomial_tail(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def ratio_range(ratios, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): sign-test range for the median of paired ratios; too few pairs give min..max."""
    ordered = sorted(float(r) for r in ratios)
    n = len(ordered)
    if not n:
        raise ValueError("need at least one paired ratio")
    k = 1
    # k-th smallest..k-th largest, k the largest with 2 P(Binomial(n, 1/2) <= k - 1) <= 1 - confidence; coverage is
    # its true confidence. Distribution-free: assumes only that the rounds' ratios are independent
    while k < n // 2 and 2 * _binomial_tail(k, n) <= 1 - confidence:
        k += 1
    return ordered[k - 1], ordered[n - k], 1 - 2 * _binomial_tail(k - 1, n)


def ratio_scatter(ratios, confidence: float = CONFIDENCE) -> float:
    """How far paired ratios scatter: half their ratio_range over their median (0.08: +-8 %); an effect smaller than
    RESOLVE times this cannot be told apart from these pairs."""
    low, high, _ = ratio_range(ratios, confidence)
    return (high - low) / (2 * statistics.median(float(r) for r in ratios))


def shown(value: float, edges) -> str:
    """`value` with 2 decimals, or more (up to 4) where 2 would print it equal to an edge it is not equal to (a range's
    end of 0.9998 as '1.00' beside the 1 it must lie above)."""
    for digits in (2, 3, 4):
        text = f"{value:.{digits}f}"
        if all(value == edge or text != f"{edge:.{digits}f}" for edge in edges):
            return text
    return f"{value:.4f}"


BUSY_NOTE = "measured while other programs used"  # conditions.Load.note(): the load, said once on a refused line
RERUN = "rerun with nothing else running"  # the advice a busy-machine refusal ends with


def _split_reason(reason: str) -> tuple[str, str]:
    """(the cause a refused verdict's line names, '. Rerun ...' to end it where the cause is others' CPU, else '');
    the rule's README section is named by the reason itself (outcome(), as_result), not by the line."""
    cause = reason[:-len(f" ({RULE})")] if reason.endswith(f" ({RULE})") else reason
    cause, _, _ = cause.partition(f": {RERUN}")
    return cause, (f". {RERUN[0].upper()}{RERUN[1:]}" if "other programs used" in reason else "")


def _refused_figure_note(note: str) -> bool:
    """A note about the pairs' figure, scatter or range, or the claim they let a verdict test: a refused verdict
    prints no figure (it stays in verdicts.csv), so none of these either."""
    return note.startswith(("these pairs scatter by", "restated:", "the whole range lies"))


@dataclass(frozen=True)
class Verdict:
    """A decided claim: median paired `ratio`, its ratio_range [low, high], `verdict` HOLDS, REVERSED, UNDECIDED or
    CANNOT_SEE (then `reason` says why the measured conditions rule it out)."""

    claim: str  # short id of what is compared, e.g. "DDP vs DataParallel"
    expected: str  # what theory predicts, in words, e.g. "DDP faster"
    ratio: float  # > 1 is the expected direction
    low: float
    high: float
    verdict: str
    repeats: int
    unit: str = "x"
    lab: str = ""
    notes: str = ""  # e.g. that the machine was busy while the repeats ran
    holds_from: float | None = None  # a no-worse-than claim: it holds while the whole range lies above this ratio
    reason: str = ""  # CANNOT_SEE: why these conditions cannot show the claim (also the first of the notes)
    same_work: bool = False  # A and B do the same work the same way, started differently (a launcher): no big win
    workload: str = ""  # the registered workload it was measured on, or the two its sides ran (workloads.BOTH)
    extra_work: bool = False  # A does B's work and more (a record, a check): a cost claim, A cannot be faster
    upper: bool = False  # an upper bound on A's advantage (decide's `upper`): it holds while the range lies below

    def direction(self) -> str:
        """Which side of 1 means what, for this verdict's ratio (a later lab prints it beside the ratio it reads)."""
        first = self.claim.split(" vs ")[0] if " vs " in self.claim else "the first named"
        if self.extra_work:
            return f"above 1 means {first} was faster, below 1 that it cost time"
        if self.holds_from is not None:
            return f"above 1 favours {first}"
        return f"{'below' if self.upper else 'above'} 1 means {self.expected}"

    def __str__(self) -> str:
        """The claim and its outcome on the first line, then, indented: the claim tested (a no-worse-than claim), the
        figure with its range, the notes, the flags; each wrapped at lines.WIDTH. Where the conditions ruled it out:
        the claim, 'cannot be seen here', then its cause (the load once) and what to do, and no figure (the pairs'
        figure is recorded in verdicts.csv, never printed beside a refusal); a later busy-machine refusal in the same
        notebook cell points to the load said above (lines.LOAD_ABOVE)."""
        side = "below" if self.upper else "above"
        direction = self.direction()
        meaning = (f"{direction}; it holds while the whole range lies {side} "
                   f"{shown(self.holds_from, (self.low, self.high))}{self._threshold_source()}"
                   if self.holds_from is not None else direction)
        own = f"{CANNOT_SEE}: {self.reason}"
        notes = [n for n in self.notes.replace(own, "").split("; ") if n]  # the reason itself may hold "; "
        claim = f"{self.claim} [{self.workload}]" if self.workload else self.claim
        flags = detectors.reverses_theory(self) + (detectors.same_work_faster(self) if self.same_work else [])
        if self.verdict == CANNOT_SEE:  # the claim, the outcome; its prediction, its cause (the load once), what to do
            cause, rerun = _split_reason(self.reason)
            load_named = lines.busy_refusal(self.reason)
            if lines.said_before("load" if load_named else cause):  # said above in this cell: point to it
                return lines.wrap(lines.glued(f"verdict, {claim} ({self.expected}):", f"{CANNOT_SEE}: "
                                              f"{lines.LOAD_ABOVE if load_named else 'as above'}"))
            notes = [n for n in notes if not _refused_figure_note(n) and not (load_named and n.startswith(BUSY_NOTE))]
            impossible = [] if load_named else flags  # the same work faster: that figure is the refusal's cause
            return lines.stacked(lines.glued(f"verdict, {claim}:", CANNOT_SEE), [
                f"predicted: {self.expected}",  # what a quiet rerun would test, said once
                f"why: {cause}{rerun}", *parts(impossible + notes)])
        tested = ""
        if self.holds_from is not None:  # the claim tested leads; the prediction, if restated weaker, after it
            tested = f"{self.tested()} (predicted: {self.expected}{self._restated()})"
        figure = (f"{self.figure_text()}{self.unit} ({meaning}; range {self.range_text()} over {self.repeats} "
                  "paired repeats)")
        said = list(dict.fromkeys(detectors.notes(notes)))
        warned = parts(flags + detectors.extra_work_faster(self, MIN_EFFECT))  # [!] under the verdict's figure
        head = lines.glued(f"verdict, {claim}:", self.verdict)
        if warned and warned[0].startswith("("):  # said before: the verdict's first line points to it
            head, warned = f"{head}  {warned[0]}", warned[1:]
        return lines.stacked(head, [tested, figure, f"note: {'; '.join(said)}" if said else "", *warned])

    def figure_text(self) -> str:
        """The ratio with as many decimals as its range's ends show (lab 12: '1.00x' beside a range 0.998-0.998)."""
        edges = (1.0,) if self.holds_from is None else (1.0, self.holds_from)
        digits = max(len(shown(end, edges).split(".")[-1]) for end in (self.low, self.high))
        return f"{self.ratio:.{max(2, digits)}f}"

    def range_text(self) -> str:
        """'low-high', each end with the decimals that show which side of 1 (and of the claim's threshold) it lies."""
        edges = (1.0,) if self.holds_from is None else (1.0, self.holds_from)
        return f"{shown(self.low, edges)}-{shown(self.high, edges)}"

    def tested(self) -> str:
        """A no-worse-than claim in its own terms, before its threshold: the cost tested (restated or not); an upper
        bound: how far ahead A may be."""
        if self.upper:
            ahead = self.holds_from - 1 if self.holds_from else 0.0
            if ahead < 0.005:
                return "tested as not ahead at all (these pairs are too noisy to test a small lead)"
            return f"tested as 'ahead by no more than {ahead:.0%}'"
        cost = 1 / self.holds_from - 1 if self.holds_from else 0.0
        if NO_DECISION in self.notes:  # an extra-work cost claim past MAX_RESTATED: no outcome decides
            return f"too noisy to test a cost up to {MAX_RESTATED:.0%}: {NO_DECISION}"
        if cost < 0.005:  # MAX_RESTATED exceeded: no cost claim is tested, a win is the only outcome that decides
            return f"too noisy to test a cost up to {MAX_RESTATED:.0%}: only a win could decide"  # the note says why
        return f"tested as 'no worse by more than {cost:.0%}'"

    def _threshold_source(self) -> str:
        """' (= 1/1.08)' where a cost claim's threshold is 1/(1 + cost): a learner reads 8 % worse as 0.92 (issue 51)."""
        if self.upper or not self.holds_from or self.holds_from >= 1:
            return ""
        cost = round(100 * (1 / self.holds_from - 1))
        return f" (= 1/{1 + cost / 100:.2f})" if abs(1 / (1 + cost / 100) - self.holds_from) < 1e-3 else ""

    def _restated(self) -> str:
        """'; restated weaker, see the note' where the pairs' noise made the claim tested weaker than the prediction."""
        return "; restated weaker, see the note" if "restated:" in self.notes else ""

    def outcome(self) -> str:
        """This verdict's outcome in one phrase, for a summary or a later lab that reuses the comparison: the verdict
        word with its ratio and range (and its notes: the conditions it was decided under), or, where the conditions ruled it out, 'not measurable here: <why>' with the
        ratio only as what those conditions gave (never a bare ratio a reader takes for a result)."""
        if self.verdict == CANNOT_SEE:
            return f"{NOT_MEASURABLE}: {self.reason} ({UNREAD})"
        text = f"{self.ratio:.2f}{self.unit} (range {self.range_text()}) -> {self.verdict}"
        if self.holds_from is not None:  # the claim actually tested leads, never only the prediction
            text = f"{self.tested()}: {text}"
        return f"{text} ({self.notes})" if self.notes else text  # the conditions it was decided under

    def verdict_cells(self) -> dict:
        """This verdict's cells in verdicts.csv (the store adds the machine and the time)."""
        return {**dataclasses.asdict(self), "direction": self.direction()}

    def record(self, directory=None, hw: hardware.HardwareReport | None = None) -> "Verdict":
        """Append to <results dir>/verdicts.csv; returns self, so `print(measure.verdict(...).record())` does both."""
        write_verdict(self, directory, hw)
        return self


def printed_outcome(v: Verdict) -> str:
    """v.outcome() to print in a summary: where the load refused it and this notebook cell said the load already (a
    verdict, a table's refusal), 'not measurable here: the load above'; outcome() itself stays whole (recorded)."""
    if v.verdict == CANNOT_SEE and lines.busy_refusal(v.reason) and lines.said_before("load"):
        return f"{NOT_MEASURABLE}: {lines.LOAD_ABOVE}"
    return v.outcome()


def small_effect_note(ratio: float, above: bool, min_effect: float = MIN_EFFECT) -> str:
    """Why a range wholly on one side of 1 decides nothing: its median lies within `min_effect` of 1 (learner s13r6d,
    lab 13: 1.021x with range 1.004-1.06 read 'not distinguishable' with the rule unprinted)."""
    return (f"the whole range lies {'above' if above else 'below'} 1, but {ratio:.3f}x is within {min_effect:.0%} of 1, "
            f"the smallest effect the course calls a result")


def decide(ratios, *, claim: str, expected: str, lab: str = "", min_effect: float = MIN_EFFECT,
           confidence: float = CONFIDENCE, unit: str = "x", no_worse_than: float | None = None,
           workers: int | None = None, timed: bool = True, same_work: bool = False, workload=None,
           extra_work: bool = False, upper: bool = False, max_restated: float = MAX_RESTATED,
           load: "conditions.Load | None" = None, between: str | None = None, against_one: bool = True,
           what: str = "ranks", seeded: bool = False, one_is_a: bool = False) -> Verdict:
    """The Verdict on paired ratios oriented so that > 1 is what theory predicts (`expected` says it in words).
    `workload`: the registered workload (lab_utils.workloads) both sides ran, or its name, or the two they ran (two
    models), printed on the verdict's line and recorded (required to record it);
    `workers` (> 1): the claim is that N ranks or threads beat one; `timed`: the ratios are speeds or times, which a
    busy machine or a CPU quota can make unreadable (CANNOT_SEE, with its reason; accuracies are not timed);
    `seeded` (with timed=False): the figures come from seeded runs that give the same numbers on a busy machine (a
    synchronous run's accuracy), so no note names the load they were measured under;
    `same_work`: A and B run the same work the same way, started differently (a launcher, a scheduler), so a
    no-worse-than claim that A wins by far cannot be read either (detectors.same_work_faster);
    `extra_work`: A does B's work and more (a record, a check), so A faster is noise (detectors.extra_work_faster);
    `upper`: the claim bounds A's advantage from above, read from A's side: A slower than B (the whole range below
    1), or with `no_worse_than` A ahead of B by at most that much (the whole range below 1 + it, restated by the same
    rule, and past MAX_RESTATED too: more noise loosens an upper bound, never tightens it); decided as the mirror
    claim on the inverted ratios. `max_restated`: the largest tolerance a no-worse-than claim is restated to; beyond
    it only a win decides. `load`: the conditions the pairs were measured under (one launch's window), by default
    run_conditions(). `between`: A and B both run the `workers` (two setups of N ranks, not N against one): a load
    that rules them out reads 'so no difference between <between> can be read'. `against_one` False: both sides run
    the N `workers` (DDP against DataParallel), so a refusal speaks of the two sides, not of a speedup over one.
    `what`: what the workers are (ranks, threads, devices), in the refusal's words. `one_is_a`: A is the one worker
    and B the N (one device against spatial ranks), so the N workers' rate over one's is 1 / the ratio."""
    named = "" if workload is None else workloads.verdict_name(workload)
    ratios = [float(r) for r in ratios]
    if any(not math.isfinite(r) or r <= 0 for r in ratios):
        raise ValueError(f"paired ratios must be positive numbers, got {ratios}")
    if upper:
        if same_work or extra_work:
            raise ValueError("an upper-bound claim is not a cost claim: same_work and extra_work do not apply")
        mirror = decide([1 / r for r in ratios], claim=claim, expected=expected, lab=lab, min_effect=min_effect,
                        confidence=confidence, unit=unit, no_worse_than=no_worse_than, workers=workers, timed=timed,
                        workload=workload, max_restated=math.inf, load=load, between=between,
                        against_one=against_one, what=what, seeded=seeded,
                        one_is_a=not one_is_a)  # the mirror's A is B: the one worker if B was
        return _from_the_other_side(mirror)
    low, high, _ = ratio_range(ratios, confidence)
    middle = statistics.median(ratios)
    verdict, notes, holds_from = UNDECIDED, [], None
    # no_worse_than (a fraction): the claim is that A costs at most that much more than B (same work, e.g. two
    # orders of it), not that A wins; a win counts as holding. A tolerance smaller than RESOLVE x the pairs' own
    # scatter cannot be told apart here: the claim is restated as the tolerance these pairs can resolve, and says so
    if len(ratios) >= MIN_PAIRS and no_worse_than is not None:
        spread_of_pairs = ratio_scatter(ratios, confidence)
        tolerance = max(no_worse_than, RESOLVE * spread_of_pairs)
        if f"{tolerance:.0%}" == f"{no_worse_than:.0%}":  # a restatement that reads "10 %, not 10 %" restates nothing
            tolerance = no_worse_than
        if tolerance > no_worse_than:  # up to a whole percent, as it is printed: its floor then agrees with the text
            tolerance = math.ceil(round(tolerance * 100, 6)) / 100
        if tolerance > no_worse_than and low > 1 / (1 + no_worse_than) and tolerance <= max_restated:
            tolerance = no_worse_than  # the whole range already clears the claim as stated: it holds as stated
        if tolerance > no_worse_than:
            notes.append(f"restated: these pairs scatter by {spread_of_pairs:.1%}, so only a cost above {tolerance:.0%} "
                         f"({RESOLVE:g}x that scatter, rounded up) stands out: the claim tested is 'no worse by more than "
                         f"{tolerance:.0%}', not {no_worse_than:.0%} (a noisier run tests a weaker claim)")
        floor = 1 / (1 + tolerance)
        # restated past max_restated: too weak a claim to test (a prediction's own tolerance is tested as it is)
        too_weak = tolerance > max(max_restated, no_worse_than)
        holds_from = 1.0 if too_weak else floor
        if too_weak and extra_work:  # A does B's work and more: its win is noise, so no outcome of these pairs decides
            holds_from = 1 / (1 + no_worse_than)  # the claim's own threshold, as predicted
            notes[-1:] = [(f"these pairs scatter by {spread_of_pairs:.1%}: a cost would have to exceed {tolerance:.0%} "
                           f"({RESOLVE:g}x that scatter) to stand out, past {max_restated:.0%}, the largest cost the "
                           f"course will test, and a win of the side doing more work is noise: {NO_DECISION}")]
        elif too_weak and low > 1:  # too noisy to test the tolerance, but A won outright
            notes[-1:] = [(f"these pairs scatter by {spread_of_pairs:.1%}, too much to test a cost of {no_worse_than:.0%}, "
                          f"but the whole range lies above 1, a win: no cost at all")]  # replaces the restated note, if any
            verdict = HOLDS
        elif too_weak:  # a claim this weak says nothing: the pairs cannot decide
            notes[-1:] = [(f"these pairs scatter by {spread_of_pairs:.1%}: a cost would have to exceed {tolerance:.0%} "
                           f"({RESOLVE:g}x that scatter) to stand out, more than the {max_restated:.0%} the course "
                           "tests, so only a win could decide")]  # learner s12r3e lab 06: the longer note took 3 readings
        elif low > floor:
            verdict = HOLDS
        elif high < 1 and middle <= floor:
            verdict = REVERSED
    elif len(ratios) >= MIN_PAIRS:
        if low > 1 and middle >= 1 + min_effect:
            verdict = HOLDS
        elif high < 1 and middle <= 1 / (1 + min_effect):
            verdict = REVERSED
        elif low > 1 or high < 1:  # one side of 1, but too small an effect: the rule says so where it decides
            notes.append(small_effect_note(middle, low > 1, min_effect))
    load = load if load is not None else run_conditions()
    decided = Verdict(claim, expected, middle, low, high, verdict, len(ratios), unit, lab, "", holds_from,
                      same_work=same_work, workload=named, extra_work=extra_work)
    both_run_n = between is not None or not against_one  # N vs N: no N-vs-one rate to check against the free cores
    unread = (f"no difference between {between}" if between is not None else
              "neither side's speed, nor their difference," if not against_one else conditions.UNREAD_OVER_ONE)
    n_over_one = None if both_run_n else 1 / middle if one_is_a else middle  # the N workers' rate over one's
    reason = (unreadable(workers, load, what, ratio=n_over_one, unread=unread)
              if timed and len(ratios) >= MIN_PAIRS else None)  # fewer decide nothing
    if reason is not None and unreadable(workers, None if load is None else _quiet(load)) is None \
            and beyond_load(ratios):  # only the others' CPU ruled it out, and every pair shows a large factor
        notes.append(f"the machine was busy, but every one of {len(ratios)} pairs favours one side by more than "
                     f"{BEYOND_LOAD:g}x ({min(ratios):.2f}-{max(ratios):.2f}x): a busy machine blurs small "
                     "differences, not one this large in every pair")
        reason = None
    if reason is None and same_work and detectors.same_work_faster(decided):
        reason = (f"the same work ran {middle:.2f}x faster one way, which no way of running it can do: the other way "
                  "was slowed, so no cost can be read from these pairs")
    if reason is not None:  # a note that states a result would contradict "cannot be seen": it keeps the figures only
        notes = [n.replace("but the whole range lies above 1, a win: no cost at all",
                           "and though the whole range lies above 1, these conditions make that no result") for n in notes]
        notes = [n for n in notes if not n.startswith("restated:")]  # no claim was tested: none restated either
        verdict, notes = CANNOT_SEE, [f"{CANNOT_SEE}: {reason}"] + notes
    notes += [] if seeded and not timed else condition_notes(load)  # a seeded figure is the same on a busy machine
    return dataclasses.replace(decided, verdict=verdict, notes="; ".join(notes), reason=reason or "")


def _from_the_other_side(mirror: Verdict) -> Verdict:
    """A verdict decided on inverted ratios (B's advantage), printed from A's side as an upper-bound claim."""
    notes = (mirror.notes.replace("test a cost of", "test a lead of").replace("only a cost above", "only a lead above")
             .replace("a cost would have to", "a lead would have to").replace("'no worse by more than", "'ahead by no more than")
             .replace("lies above 1, a win: no cost at all", "lies below 1: not ahead at all")
             .replace("lies above 1, these", "lies below 1, these"))
    return dataclasses.replace(mirror, ratio=1 / mirror.ratio, low=1 / mirror.high, high=1 / mirror.low, notes=notes,
                               holds_from=None if mirror.holds_from is None else 1 / mirror.holds_from, upper=True)


def beyond_load(ratios) -> bool:
    """Every paired ratio lies beyond BEYOND_LOAD on the same side of 1 (a factor no busy machine explains)."""
    ratios = [float(r) for r in ratios]
    return bool(ratios) and (min(ratios) > BEYOND_LOAD or max(ratios) < 1 / BEYOND_LOAD)


def _quiet(load: "conditions.Load") -> "conditions.Load":
    """`load` with nobody else on the machine: what unreadable() says of the CPU budget alone."""
    return dataclasses.replace(load, others=0.0, steal=0.0)


def unreadable(workers: int | None = None, load: "conditions.Load | None" = None, what: str = "ranks",
               ratio: float | None = None, unread: str = conditions.UNREAD_OVER_ONE) -> str | None:
    """Why a timed comparison cannot be read here, or None: `workers` (> 1: N ranks or threads against one) that this
    CPU budget or what others left free cannot run side by side, or that ran `ratio` x one's rate, more than those
    free cores allow (the others' share was not steady: the ratio is theirs as much as the workers'); or other
    programs (and steal) that took more than UNREADABLE_SHARE of the cores while it was measured. `load` defaults to
    run_conditions(); `what`: what the workers are (ranks, threads, devices); `unread`: what the refusal says cannot
    be read (two setups that both run N workers name their own comparison, and pass no `ratio`)."""
    load = load if load is not None else run_conditions()
    if workers and workers > 1:
        why = conditions.speedup_visible(workers, load=load, what=what, unread=unread)
        if why:
            return why
        if load is not None and unsteady_load(ratio, workers, load, what):  # one rule for N vs 1 on a busy machine
            return (f"other programs used {load.others + load.steal:.1f} of {load.cores} cores while this measured"
                    f"{unsteady_load(ratio, workers, load, what)}, so {unread} can be read from this run "
                    f"({RULE})")
    if load is not None and load.others + load.steal > UNREADABLE_SHARE * load.cores:
        return (f"other programs used {load.others + load.steal:.1f} of {load.cores} cores while it was measured: "
                f"{RERUN} ({RULE})")
    return None


def as_result(text: str, workers: int | None = None, load: "conditions.Load | None" = None, what: str = "ranks",
              ratio: float | None = None) -> str:
    """A summary's measured figure as a result, or, where unreadable() rules it out, 'not measurable here: <why>'
    with no figure: a ratio printed beside the reason would seem to refute it (the rates stay in the results CSV).
    `ratio`: the N workers' measured rate over one's; beyond what the load's free cores allow, the refusal says the
    load was not steady over its window (the rates printed elsewhere would otherwise contradict the reason)."""
    why = unreadable(workers, load, what, ratio)
    if why is None:
        return text
    unsteady = "" if unsteady_load(ratio, workers, load, what) in why else unsteady_load(ratio, workers, load, what)
    return f"{NOT_MEASURABLE}: {why} ({UNREAD}){unsteady}"


def refusal(text: str) -> list[str]:
    """[text] where `text` (as_result's line or a verdict's outcome()) refuses its figure ('not measurable here: ...'),
    else []: the note a recorded row carries, so that a later lab (lab 10) refuses the row's ratio as its lab did."""
    return [text] if str(text).startswith(NOT_MEASURABLE) else []


def refusal_of(flags) -> str:
    """The refusal a recorded row carries (refusal()'s note, read back from its flags), else '': the reader of refusal."""
    return next((str(f) for f in flags if refusal(str(f))), "")


def as_paired_result(text: str, ratios, load: "conditions.Load | None" = None) -> str:
    """as_result for a figure from paired rounds (`ratios`, one per round): read on a busy machine too when every
    round favours one side by more than BEYOND_LOAD (the rule verdicts apply), and then it says so."""
    load = load if load is not None else run_conditions()
    if unreadable(None, load) is None or not beyond_load(ratios):
        return as_result(text, load=load)
    ratios = [float(r) for r in ratios]
    return (f"{text}, read although the machine was busy: every one of {len(ratios)} rounds favours one side by more "
            f"than {BEYOND_LOAD:g}x ({min(ratios):.2f}-{max(ratios):.2f}x), which a busy machine does not explain")


N_M = "n/m"  # a table's cell for a ratio the run refuses: not measurable here (the line under the table says why)


def table_ratio(ratios, load: "conditions.Load | None" = None, row_flags=()) -> str:
    """A table's cell for a figure from paired rounds (`ratios`, one per round): their median as '1.23x', or N_M
    where the measured conditions refuse it as as_paired_result does (a busy machine, unless every round favours one
    side by more than BEYOND_LOAD), or where `row_flags` (the row's detector flags) mark its medians suspect (`*`):
    a figure the table itself calls suspect is not printed either (SUSPECT_N_M says so under the table)."""
    ratios = [float(r) for r in ratios]
    load = load if load is not None else run_conditions()
    if detectors.impossible(detectors.listed(row_flags)):
        return N_M
    if unreadable(None, load) is not None and not beyond_load(ratios):
        return N_M
    return f"{statistics.median(ratios):.2f}x"


SUSPECT_N_M = f"{N_M} on a row marked *: a median of that row is suspect (its flag above), so no figure is read from its rounds"


def n_m_line(load: "conditions.Load | None" = None) -> str:
    """The line under a table whose cells table_ratio may refuse: what n/m means and why here; '' when the
    conditions refuse nothing."""
    why = unreadable(None, load if load is not None else run_conditions())
    return f"{N_M}: {NOT_MEASURABLE}: {why}" if why else ""


def unsteady_load(ratio: float | None, workers: int | None, load: "conditions.Load | None",
                  what: str = "ranks") -> str:
    """'; ...' when `workers` ran `ratio` x one worker's rate, beyond (by MIN_EFFECT) the most the cores that `load`
    left free allow (min(N, free) / min(1, free)): the others' share is a mean over the window, not steady; else ''."""
    if ratio is None or not workers or workers < 2 or load is None:
        return ""
    free = load.cores - load.others - load.steal
    if free <= 0:
        return ""
    bound = min(workers, free) / min(1.0, free)
    if ratio <= bound * (1 + MIN_EFFECT):
        return ""
    return (f"; the rates measured give {workers} {what} more than the {free:.1f} free core(s) allow: the others' "
            "share (a mean over the window) was not steady")


def condition_notes(load: "conditions.Load | None") -> list[str]:
    """A verdict's notes naming the conditions it was measured under (others' CPU and steal when busy, the CPU quota
    and its throttled share when there is one); [] on a quiet machine without a quota."""
    if load is None:
        return []
    notes = load.note()  # busy: others' CPU and steal; throttled: the quota and its throttled share
    if load.quota_cpus is not None and not load.throttled:
        notes.append(f"measured under a {load.quota_source} of {hardware.cpus_text(load.quota_cpus)}, throttled in "
                     f"{load.throttled_share * 100:.0f} % of its periods")
    return notes


def verdict(a, b, *, claim: str, expected: str, higher_is_better: bool = False, lab: str = "",
            min_effect: float = MIN_EFFECT, confidence: float = CONFIDENCE,
            no_worse_than: float | None = None, workers: int | None = None, timed: bool = True,
            same_work: bool = False, workload=None, extra_work: bool = False, upper: bool = False,
            load: "conditions.Load | None" = None, between: str | None = None, against_one: bool = True,
            what: str = "ranks", seeded: bool = False, one_is_a: bool = False) -> Verdict:
    """decide() on A's advantage over B in paired repeats a, b: times, or rates with higher_is_better (> 1: A won)."""
    return decide(paired_ratios(a, b, higher_is_better=higher_is_better), claim=claim, expected=expected, lab=lab,
                  min_effect=min_effect, confidence=confidence, no_worse_than=no_worse_than, workers=workers,
                  timed=timed, same_work=same_work, workload=workload, extra_work=extra_work, upper=upper, load=load,
                  between=between, against_one=against_one, what=what, seeded=seeded, one_is_a=one_is_a)


def write_verdict(verdict: Verdict, directory=None, hw: hardware.HardwareReport | None = None) -> Path:
    """Append one verdict to <results dir>/verdicts.csv with the machine's fingerprint; returns the path."""
    return store(directory).append(verdict, hw)


def in_plain_words(v: Verdict, setup: str, baseline: str, why: str = "") -> str:
    """A verdict in one plain phrase, for a section's first line or a summary: 'SETUP: 0.65x the speed of BASELINE
    (35 % slower; range ..), as predicted WHY'; a refusal as printed_outcome says it, with no figure."""
    if v.verdict == CANNOT_SEE:
        return f"{setup} vs {baseline}: {printed_outcome(v)}"
    change = abs(v.ratio - 1)
    how = ("the same speed" if change < 0.005 else
           f"{change:.0%} {'faster' if v.ratio > 1 else 'slower'}").replace("%", " %")
    read = {HOLDS: f"as predicted{' ' + why if why else ''}",
            REVERSED: f"[!] against the prediction ({v.expected})",
            UNDECIDED: f"too noisy to decide the prediction ({v.expected})"}[v.verdict]
    notes = f" ({v.notes})" if v.notes else ""
    if v.verdict == HOLDS and v.holds_from is not None and (v.ratio > 1 if v.upper else v.ratio < 1):
        # a no-worse-than claim held on the other side of 1: never 'as predicted' over a figure pointing the other way
        margin = (v.holds_from - 1) if v.upper else (1 / v.holds_from - 1)
        read = (f"against the predicted direction ({v.expected}), but within the {margin:.0%} margin this run's "
                "test allows: no difference it can resolve").replace("%", " %")
        notes = ""  # the margin is said here; the verdict below says how it was set
    return f"{setup}: {v.ratio:.2f}x the speed of {baseline} ({how}; range {v.range_text()}), {read}{notes}"
