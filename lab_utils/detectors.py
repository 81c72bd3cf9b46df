"""The detectors behind every `[!]` (a figure that is impossible or contradicts another), each returning a list of
Flags, empty when sound. A Flag is its text with a Kind, and the kind carries its severity: IMPOSSIBLE kinds print as
`[!]`, a NOTE (oversubscribed cores, a busy machine, ...) as plain text, NOISE is one line per table (noise_line).
Whether a warning is `[!]` follows its kind, never its wording; a plain string given as a warning is a note."""
from __future__ import annotations

import enum
import itertools
import math
import numbers

NOISY_SPREAD = 0.25  # repeats spread more than this (max - min, or the middle half, over the median) are "noisy"

# Phrases the detectors' texts share (their wording only: a flag's kind, not its text, decides how it is shown).
ABOVE_100 = "above 100 %"
NO_FIT = "can be read from this fit"
LESS_TIME = "cannot take less time"
SATURATED = "requests/s offered: saturated"
REVERSED = "reversed here: theory predicts"
FLIPPED = "holds in one run and reversed in another"
CONTRADICT = "these two figures contradict each other"
WAITED = "more threads cannot cost that much"
ABOVE_BOUND = "above its own upper bound"
SAME_WORK = "faster on the same work"
OUTSIDE_AMDAHL = "no serial share of the work does that"
ABOUT_100 = "read it as about 100 %"  # an efficiency note's words (above_device_count within noise)


class Severity(enum.IntEnum):
    """How loudly a flag is said: noise (one line per table) < a note (plain text) < impossible (`[!]`)."""

    NOISE = 0
    NOTE = 1
    IMPOSSIBLE = 2


class Kind(enum.Enum):
    """What a flag says, with its severity: one kind per rule an impossible figure breaks (a table says each kind's
    flags in one line, in this order), then the note and the noise."""

    ABOVE_100 = ("efficiency above 100 %", Severity.IMPOSSIBLE)
    NO_FIT = ("no bandwidth from the fit", Severity.IMPOSSIBLE)
    LESS_TIME = ("more work in less time", Severity.IMPOSSIBLE)
    SATURATED = ("saturated server", Severity.IMPOSSIBLE)
    REVERSED = ("reversed against theory", Severity.IMPOSSIBLE)
    FLIPPED = ("verdicts that flip", Severity.IMPOSSIBLE)
    CONTRADICT = ("two figures that contradict", Severity.IMPOSSIBLE)
    WAITED = ("threads that waited", Severity.IMPOSSIBLE)
    ABOVE_BOUND = ("above its own bound", Severity.IMPOSSIBLE)
    SAME_WORK = ("the same work faster", Severity.IMPOSSIBLE)
    OUTSIDE_AMDAHL = ("a serial fraction outside 0..1", Severity.IMPOSSIBLE)
    NOTE = ("note", Severity.NOTE)
    CONDITION = ("measured under another condition", Severity.NOTE)
    NOISE = ("noise", Severity.NOISE)

    @property
    def severity(self) -> Severity:
        return self.value[1]

    @property
    def impossible(self) -> bool:
        """True for the kinds printed as `[!]`."""
        return self.severity is Severity.IMPOSSIBLE


class Flag(str):
    """A warning: its text (a Flag is the str of its text, so it prints and joins as one) and its Kind. String methods
    return plain strings, which are notes: build a changed flag with Flag(flag.kind, new_text)."""

    kind: Kind

    def __new__(cls, kind: Kind, text: str) -> "Flag":
        if not isinstance(kind, Kind):
            raise TypeError(f"a Flag's kind must be a detectors.Kind, got {kind!r}")
        flag = super().__new__(cls, text)
        flag.kind = kind
        return flag

    @property
    def text(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Flag({self.kind.name}, {str.__repr__(self)})"

    def __reduce__(self):  # flags cross processes (a rank's result): keep the kind
        return Flag, (self.kind, self.text)


def kind_of(warning: str) -> Kind:
    """A warning's Kind: a Flag's own; any other string is a note (its wording decides nothing)."""
    return warning.kind if isinstance(warning, Flag) else Kind.NOTE


def note(text: str) -> Flag:
    """A note: worth knowing beside a figure, not impossible."""
    return Flag(Kind.NOTE, text)


def condition(text: str) -> Flag:
    """A note that a figure was measured under a condition its lab says can move it (another process's company, an
    OpenMP wait policy): a figure measured twice, once so, is compared by measured_twice's `condition` rule."""
    return Flag(Kind.CONDITION, text)


def conditions_of(warnings) -> list[str]:
    """The condition notes among the warnings (condition())."""
    return [w for w in listed(warnings) if kind_of(w) is Kind.CONDITION]
NOISE_CAUSE = "noise, another job, another framework in its process"  # what slowed a figure when nothing was measured


ABOVE_100_NOISE = 0.10  # a speedup above the device count by at most this share is read as noise, not as impossible


def above_device_count(speedup: float | None, devices: float | None, cause: str | None = None) -> list[Flag]:
    """A speedup above the number of devices it used (efficiency above 100 %): impossible for the same work ([!])
    beyond ABOVE_100_NOISE; within it, a note (two medians or paired rounds move that much on a quiet machine).
    `cause`: what the measuring window saw slow the runs (a throttling quota, a busy machine: conditions.Load.cause())."""
    if speedup is None or not devices or speedup <= devices:
        return []
    efficiency = speedup / devices  # just above 100 %: one decimal, or it would print "100%, above 100 %"
    shown = f"{efficiency:.1%}" if efficiency < 1.01 else f"{efficiency:.0%}"
    if efficiency <= 1 + ABOVE_100_NOISE:
        return [note(f"speedup {speedup:.2f}x on {devices:g}x the hardware is efficiency {shown}: over 100 % by less "
                     f"than the {ABOVE_100_NOISE:.0%} that noise moves a ratio, so {ABOUT_100} (the most "
                     f"{devices:g}x the hardware can give)")]
    why = (f"the baseline was slowed: {cause.replace('; ', ', ')}" if cause else
           "the baseline was slowed (noise, another job, another framework in its process) or the runs did "
           "different work")
    return [Flag(Kind.ABOVE_100, f"speedup {speedup:.2f}x on {devices:g}x the hardware is efficiency {shown}, {ABOVE_100}: "
            f"impossible for the same work, so {why}")]


def _cause(cause: str | None) -> str:
    """The measured cause in a flag (without its final period or any '; '), else the usual suspects."""
    return cause.rstrip(".").replace("; ", ", ") if cause else NOISE_CAUSE


def more_threads_slower(speedup: float | None, threads: float | None, *, cause: str | None = None,
                        what: str = "one thread") -> list[Flag]:
    """The same work on N intra-op threads below 1/N of one thread's speed: splitting work over threads costs at most
    its coordination, never N times the whole; the threads waited for cores that something else held. With a measured
    `cause` (a busy machine, a quota) that wait is explained: a note naming it, not a `[!]`."""
    if speedup is None or not threads or threads <= 1 or speedup >= 1 / threads:
        return []
    if cause:
        return [note(f"{threads:g} threads ran the same work at {speedup:.2f}x {what}, below 1/{threads:g}: they "
                     f"waited for cores held elsewhere ({_cause(cause)}), so this figure measures that wait, not what "
                     f"{threads:g} threads can do (a wait the load explains: noted, not an impossible figure)")]
    return [Flag(Kind.WAITED, f"{threads:g} threads ran the same work at {speedup:.2f}x {what}, below 1/{threads:g}: {WAITED} (their "
            f"coordination is far smaller than the work), so they waited for cores held elsewhere ({_cause(cause)}) "
            "and ratios built on this figure are no speeds")]


def above_bound(value: float, bound: float, *, what: str, bound_name: str, unit: str = "/s",
                tolerance: float = 0.10) -> list[Flag]:
    """A figure above an upper bound the same run measured for it (by more than `tolerance`): one of the two is off."""
    if not bound or bound <= 0 or value <= bound * (1 + tolerance):
        return []
    return [Flag(Kind.ABOVE_BOUND, f"{what} {value:,.4g}{unit} is {value / bound:.2f}x {bound_name} {bound:,.4g}{unit}, {ABOVE_BOUND}: one of "
            "the two medians is off (a busy machine slowed the bound's measurement, or they measured different work)")]


def above_model(value: float, model: float, *, what: str, model_name: str, left_out: str, unit: str = "x",
                tolerance: float = 0.25) -> list[Flag]:
    """A figure above a model's prediction (by more than `tolerance`) where the model leaves out a cost that can only
    favour the figure (`left_out`): no bound is broken, so a note naming what the model leaves out, never `[!]`."""
    if not model or model <= 0 or value <= model * (1 + tolerance):
        return []
    return [note(f"{what} {value:,.4g}{unit} is {value / model:.2f}x {model_name} {model:,.4g}{unit}: the model is "
                 f"no upper bound, since it leaves out {left_out.rstrip('.')}")]


def load_reach(others: float, cores: int) -> float:
    """How far other programs' mean use of `others` of `cores` cores can move a ratio of two timings, if it all fell
    on one side: cores / (cores - others) (inf when they held every core)."""
    return cores / (cores - others) if others < cores else math.inf


def outside_neighbours(value: float, neighbours, *, what: str, where: str, tolerance: float = 0.25,
                       cause: str | None = None, busy_cores: tuple[float, int] | None = None,
                       lab_figure: str = "", settings: str = "the neighbouring settings") -> list[Flag]:
    """A ratio beyond every ratio of the same comparison measured at neighbouring settings by more than `tolerance`
    (a speedup at batch 256 far above those at batches 64 and 512): the two tables contradict each other; `cause`:
    what the measuring windows saw (a CPU quota, a busy machine: conditions.Load.cause()); `busy_cores`: (others'
    mean cores, cores), to say whether that load can explain the gap (load_reach); `lab_figure`: whose figures the
    lab reads (the flag says so, so that a reader knows which to believe); `settings`: where the others were measured."""
    neighbours = [float(v) for v in neighbours if v and v > 0]
    if not neighbours or value <= 0:
        return []
    low, high = min(neighbours), max(neighbours)
    if low / (1 + tolerance) <= value <= high * (1 + tolerance):
        return []
    gap = value / high if value > high else low / value
    measured = f"measured while {_cause(cause)}" if cause else "one of the two tables was measured while the machine was busy"
    if busy_cores is not None:  # the load measured, busy or not: can it explain the gap?
        others, cores = busy_cores
        reach = load_reach(others, cores)
        if round(others, 1) == 0 and not cause:  # nothing to weigh: say it plainly
            measured = (f"the machine was quiet, other programs using 0.0 of {cores:g} cores, so load does not "
                        f"explain the {gap:.2f}x gap: the two runs differed in how they ran")
        else:
            measured = (measured if cause else f"measured while other programs used {others:.1f} of {cores:g} cores")
            measured += (f", a mean load that can move a ratio by about {cores:g} / ({cores:g} - {others:.1f}) = "
                         f"{reach:.2f}x if it all fell on one side: "
                         + (f"enough to explain the {gap:.2f}x gap" if gap <= reach else
                            f"too little to explain the {gap:.2f}x gap unless it came in bursts, so the two runs "
                            "also differed in how they ran"))
    at_others = f"{low:.2f}x" if low == high else f"{low:.2f}-{high:.2f}x"
    return [Flag(Kind.CONTRADICT, f"{what} {value:.2f}x {where}, against {at_others} {settings}: {CONTRADICT} "
            f"({measured})" + (f", and the lab's figures are {lab_figure}" if lab_figure else ""))]


SAME_WORK_LIMIT = 1.25  # the same work one way beats the other way by more than this (whole range): not a cost claim


def same_work_faster(verdict, limit: float = SAME_WORK_LIMIT) -> list[Flag]:
    """A no-worse-than verdict on the same work started two ways (a launcher, a scheduler: measure.verdict's
    same_work) whose whole range lies above `limit`: a way of starting it cannot make it that much faster, so the
    other was slowed."""
    if getattr(verdict, "holds_from", None) is None or getattr(verdict, "low", 0.0) <= limit:
        return []
    return [Flag(Kind.SAME_WORK, f"'{verdict.claim}': {verdict.ratio:.2f}x, the whole range above {limit:.2f}, {SAME_WORK}: the claim is "
            "that one way costs little, and no way of running the same work makes it that much faster, so the other "
            "way was slowed (a busy machine) and no cost can be read here")]


def extra_work_faster(verdict, effect: float) -> list[Flag]:
    """A cost claim whose first side does the other's work and more (a record, a check: measure.verdict's extra_work)
    but came out faster in the median pair by more than `effect` (the verdicts' MIN_EFFECT): no saving, the pairs' noise; a note, since a cost
    claim's ratio scatters around 1 on a busy machine and its range says whether anything can be read."""
    if not getattr(verdict, "extra_work", False) or verdict.ratio <= 1 + effect:
        return []
    first = verdict.claim.split(" vs ")[0] if " vs " in verdict.claim else "the side with the extra work"
    return [note(f"{first} ran {verdict.ratio:.2f}x faster in the median pair although it does the other side's work "
                 "and more: extra work cannot make a step faster, so that figure is the noise between the pairs (the "
                 "machine's load moved), not a saving")]


def serial_fraction_outside(per_row, devices=()) -> list[Flag]:
    """Rows whose own Amdahl serial fraction (1/S - 1/N) / (1 - 1/N) lies outside 0..1 (`devices`: each row's N).
    Above 1 the row ran slower than one device: real (a cost Amdahl leaves out, such as communication), so a note
    that Amdahl's law cannot describe it. Below 0 it ran faster than linear: within ABOVE_100_NOISE of linear a note
    (noise), beyond it impossible for the same work, `[!]`."""
    rows = [(float(v), float(n) if n else None) for v, n in zip(per_row, list(devices) or [None] * len(per_row))]
    slower = [v for v, _ in rows if v > 1.0]
    faster = [(v, n) for v, n in rows if v < 0.0]

    def efficiency(s: float, n: float | None) -> float | None:  # S / N from a row's own s
        return None if not n or n <= 1 else 1 / (s * (1 - 1 / n) + 1 / n) / n

    impossible_rows = [v for v, n in faster if (efficiency(v, n) or math.inf) > 1 + ABOVE_100_NOISE]
    noisy = [v for v, n in faster if v not in impossible_rows]
    said: list[Flag] = []
    if slower:
        said.append(note(f"{len(slower)} of {len(per_row)} rows' own serial fraction(s) above 1 "
                         f"({', '.join(f'{v:.3f}' for v in slower)}): slower than one device, which Amdahl's law "
                         "cannot describe (a cost it leaves out, such as communication, outweighed the extra "
                         "hardware); the fit reads them as they are"))
    if noisy:
        said.append(note(f"{len(noisy)} of {len(per_row)} rows' own serial fraction(s) just below 0 "
                         f"({', '.join(f'{v:.3f}' for v in noisy)}): efficiency over 100 % by less than the "
                         f"{ABOVE_100_NOISE:.0%} that noise moves a ratio, so read it as about 0"))
    if impossible_rows:
        said.append(Flag(Kind.OUTSIDE_AMDAHL, f"{len(impossible_rows)} of {len(per_row)} rows' own serial fraction(s) "
                         f"below 0 ({', '.join(f'{v:.3f}' for v in impossible_rows)}): faster than linear, and "
                         f"{OUTSIDE_AMDAHL}: such a row measured something else (a slowed baseline, or other work)"))
    return said


def degenerate_fit(slope: float | None, what: str = "bandwidth") -> list[Flag]:
    """A fitted per-byte cost (slope) that is zero, negative or not a number: no `what` can be read from it."""
    if slope is not None and math.isfinite(slope) and slope > 0:
        return []
    shown = "not a number" if slope is None or not math.isfinite(slope) else f"{slope:.3g} s/byte"
    return [Flag(Kind.NO_FIT, f"the fitted time per byte is {shown}: larger messages did not take longer here (noise swamped the "
            f"per-byte cost), so no {what} {NO_FIT}; fit on larger messages or rerun on a quiet machine")]


FIT_MISS = 2.0  # a fitted line more than this factor from a point it was fitted to does not describe that point


def fit_misses(measured, fitted, names, *, what: str = "bandwidth", factor: float = FIT_MISS,
               cause: str = "a busy machine") -> list[Flag]:
    """A fit whose line lies more than `factor` from any of its own points (measured vs fitted, same order; `names`
    name the points): what the fit gives (`what`) cannot be read from it; `cause`: what moved the medians."""
    off = [(n, m, f) for n, m, f in zip(names, measured, fitted) if m > 0 and f > 0 and max(m / f, f / m) > factor]
    if not off:
        return []
    shown = ", ".join(f"{n} {m * 1e3:.3g} ms against {f * 1e3:.3g}" for n, m, f in off)
    return [Flag(Kind.NO_FIT, f"the fitted line misses its own points by more than {factor:g}x ({shown}): no {what} "
            f"{NO_FIT}; the medians do not follow one straight line here ({cause}), so read them, not the fit")]


def _apart(longer_s: float, longer_spread: float | None, shorter_s: float, shorter_spread: float | None) -> bool:
    """`longer_s` above `shorter_s` beyond their repeats: each median +- half its spread (None: 0) do not overlap."""
    return longer_s * (1 - (longer_spread or 0.0) / 2) > shorter_s * (1 + (shorter_spread or 0.0) / 2)


LESS_TIME_TOLERANCE = 0.10  # more work may take up to 10 % less time before it is flagged (two such medians are one)


def more_work_less_time(small_work: float, small_s: float, large_work: float, large_s: float, *,
                        what: str = "work", tolerance: float = LESS_TIME_TOLERANCE, small_spread: float | None = None,
                        large_spread: float | None = None, show=None,
                        busy_cores: tuple[float, int] | None = None, quiet_cause: str | None = None,
                        cause: str | None = None) -> list[Flag]:
    """More work that took less time, by more than `tolerance` (a fraction of small_s) and, where the spreads of the
    repeats are given, beyond them (each median +- half its spread): one of the medians is off. `show` writes an amount
    of work as the table beside the flag does (e.g. bytes as KiB); by default '<amount> <what>'. `busy_cores`:
    (others' mean cores, cores) measured over the window: the flag then names the cause that load can or cannot be;
    `quiet_cause`: what theory says moves such a time where that load cannot (e.g. the ranks' wake-up); `cause`: what
    the caller measured to be off (e.g. an inversion in some rounds only: noise), said instead of either."""
    if large_work <= small_work or large_s >= small_s * (1 - tolerance):
        return []
    if not _apart(small_s, small_spread, large_s, large_spread):
        return []  # the repeats of the two overlap: noise, not a contradiction
    if show is None:
        def show(amount):
            return f"{amount:g} {what}"
    return [Flag(Kind.LESS_TIME, f"{show(large_work)} took less time ({large_s * 1e3:.3g} ms) than {show(small_work)} "
            f"({small_s * 1e3:.3g} ms): more work {LESS_TIME}, so one of the two medians is off "
            f"({cause or _slowed_by(small_s / large_s, busy_cores, quiet_cause)}) and ratios built on them are suspect")]


def _slowed_by(gap: float, busy_cores: tuple[float, int] | None, quiet_cause: str | None = None) -> str:
    """What slowed a median `gap` times beyond its neighbour: a busy machine, unless the measured load cannot reach it."""
    if busy_cores is None:
        return "a busy machine"
    others, cores = busy_cores
    reach = load_reach(others, cores)
    if gap <= reach:
        return (f"other programs used {others:.1f} of {cores:g} cores while it was measured, enough to move a time "
                f"{reach:.2f}x: a busy machine")
    too_little = (f"other programs used {others:.1f} of {cores:g} cores on average while it was measured, too little "
                  f"to slow a median {gap:.1f}x")
    if quiet_cause:
        return f"{too_little}: not the load; {quiet_cause}"
    return (f"{too_little} unless it came in bursts: something ran in bursts the mean hides, or the "
            "ranks waited for each other's time slices")


def part_longer_than_whole(part_s: float, whole_s: float, *, part: str, whole: str, part_spread: float | None = None,
                           whole_spread: float | None = None) -> list[Flag]:
    """A part (one block's forward) whose median took longer than a whole that contains it (the full step), beyond
    their spreads (each median +- half its spread): one of the two medians is off."""
    if not _apart(part_s, part_spread, whole_s, whole_spread):
        return []
    return [Flag(Kind.LESS_TIME, f"{part} took {part_s * 1e3:.3g} ms, longer than {whole} ({whole_s * 1e3:.3g} ms), which contains it: the "
            f"whole does more work and {LESS_TIME}, so one of the two medians is off (a busy machine)")]


# What the op timestamps resolve at a stage boundary. A sending op's end is taken when gloo's isend returns, and isend
# writes the message into the socket in the sender's own thread: the receiver's recv can return, and its op start, while
# the sender is still in that call. Measured on the course's 2-core machine (a 3 MiB activation, gloo, 2 ranks): the
# sender returned a median 0.08 ms after the receiver; the committed quiet run's naive step (2 hand-overs) came out
# 0.3 ms shorter than its ops. perf_counter's 1 ns and the printed 0.1 ms are finer. So each hand-over may overlap by:
HANDOVER_S = 2.5e-4
OPS_TOLERANCE_S = 2 * HANDOVER_S  # a 2-stage step's path crosses a boundary twice (forward in, backward out)


def ops_tolerance(stages: int) -> float:
    """How much shorter than its ops a step of `stages` stages may be recorded: one hand-over per boundary crossed."""
    return 2 * (stages - 1) * HANDOVER_S


def shorter_than_its_ops(makespan_s: float, needed_s: float, *, what: str, cause: str | None = None,
                         tolerance_s: float = OPS_TOLERANCE_S) -> list[Flag]:
    """A pipeline step whose makespan is shorter (by more than `tolerance_s`, what the timestamps resolve: see
    HANDOVER_S) than its own ops need in their schedule's order with free transfers: the ops' recorded times overlap
    what they cannot overlap (an op's end recorded after the next stage had started). With a measured `cause` (a busy
    machine) that is explained: a note, not a `[!]`."""
    if makespan_s >= needed_s - tolerance_s:
        return []
    text = (f"{what} took {makespan_s * 1e3:.1f} ms, less than the {needed_s * 1e3:.1f} ms its own ops need in this "
            "order with free transfers: some op's recorded end came after the next stage had started (")
    end = "), so its busy time and bubble count that wait as work"
    if cause:
        return [note(text + f"a stage waited for a core after sending: {_cause(cause)}" + end)]
    return [Flag(Kind.LESS_TIME, text + "a stage waited for a core after sending, longer than handing over a message "
                 f"takes ({HANDOVER_S * 1e3:.2f} ms); with no other program measured on the cores, this job's own "
                 "processes held it: the other ranks, their gloo threads, the notebook's" + end)]


def saturated(offered_rps: float, answered_rps: float, *, keep_up: float = 0.9, rate: str = "offered") -> list[Flag]:
    """A server that answered less than `keep_up` of the load offered: requests pile up, latency is the queue's.
    `rate`: what `offered_rps` is (the rate asked for, or the one that arrived)."""
    if offered_rps <= 0 or answered_rps >= keep_up * offered_rps:
        return []
    return [Flag(Kind.SATURATED, f"answered {answered_rps:,.0f} of {offered_rps:,.0f} "
            f"{SATURATED.replace('offered', rate)}, the queue grows and "
            "its latency is waiting, not serving")]


def reverses_theory(verdict) -> list[Flag]:
    """A measure.Verdict whose paired repeats clearly point against what theory predicts."""
    if getattr(verdict, "verdict", None) != "reversed":
        return []
    return [Flag(Kind.REVERSED, f"'{verdict.claim}' {REVERSED} {verdict.expected}, and every plausible ratio of "
            "these paired repeats says the opposite; find what this machine does differently before trusting either")]


def flipped(verdicts) -> list[Flag]:
    """One claim's verdicts on one machine (strings, or rows with 'verdict') saying both 'holds' and 'reversed'."""
    said = {v if isinstance(v, str) else v["verdict"] for v in verdicts}
    if not {"holds", "reversed"} <= said:
        return []
    return [Flag(Kind.FLIPPED, f"this claim {FLIPPED} on this machine: its noise, not the claim, decides the answer here; "
            "trust neither run's verdict")]


def contradicts_reference(rate: float | None, reference: float | None, *, factor: float = 2.0,
                          what: str = "baseline", reference_name: str = "lab 01's", cause: str | None = None,
                          reference_cause: str | None = None) -> list[Flag]:
    """A rate more than `factor` off the same machine's reference rate on the same workload: they contradict; `cause`:
    what the measuring windows saw (a CPU quota, a busy machine: conditions.Load.cause()); `reference_cause`: how the
    reference was measured, as its row recorded it (measure.reference_conditions: its threads, a busy machine)."""
    if not rate or not reference or 1 / factor <= rate / reference <= factor:
        return []
    now = f"measured while {_cause(cause)}" if cause else ""
    then = _cause(reference_cause) if reference_cause else ""
    why = f"({', and '.join(p for p in (now, then) if p)})" if now or then else "(another framework or job held the cores)"
    return [Flag(Kind.CONTRADICT, f"{what} {rate:,.0f} samples/s is {rate / reference:.2f}x {reference_name} {reference:,.0f} on the same "
            f"workload: {CONTRADICT} {why}")]


def disagree(first_s: float, second_s: float, *, factor: float = 2.0, what: str = "the same quantity",
             first: str = "alone", second: str = "in the step", why: str = "") -> list[Flag]:
    """The same quantity timed two ways, more than `factor` apart: the two figures contradict each other."""
    high, low = max(first_s, second_s), min(first_s, second_s)
    if low <= 0 or high / low <= factor:
        return []
    return [Flag(Kind.CONTRADICT, f"{what} took {first_s * 1e3:.2f} ms {first} and {second_s * 1e3:.2f} ms {second}, {high / low:.1f}x apart: "
            f"{CONTRADICT}{why}")]


CONDITION_FACTOR = 2.0  # a figure measured under a condition that can move it: a note up to this far from its twin
TWICE_TOLERANCE = 0.25  # two medians of one quantity measured minutes apart agree within 25 %, whatever their
#                          spreads (the repeats of each scatter less than two runs minutes apart do)


def figure_text(value: float) -> str:
    """A measured figure as the tables print it: 54,280 from 1,000 up (never 5.428e+04), 4 significant digits below."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def measured_twice(first: float, first_spread: float | None, second: float, second_spread: float | None, *,
                   what: str, first_name: str, second_name: str, unit: str = "samples/s",
                   tolerance: float = TWICE_TOLERANCE, notes=(), condition: str = "",
                   condition_factor: float = CONDITION_FACTOR, when: str = "in this run",
                   suspect: str = "", under_row: bool = False) -> list[Flag]:
    """One quantity measured twice in one run: a flag when the two medians are further apart than the spreads of
    their repeats allow (each median +- half its spread) and more than `tolerance` apart; `notes` (what was noted
    about either measurement, e.g. a busy machine) are shown in the flag, as a possible cause. With a `condition`
    (what differed between the two, which its lab says can move the figure): a note naming it up to
    `condition_factor` apart, a flag only beyond. `when`: when the two were measured (e.g. "by two labs' runs 7 min
    apart"); `suspect`: the one measurement that carries a note, named as the likelier wrong figure; `under_row`:
    the note is printed under the second's row, whose own notes name the condition, so it says only the rest."""
    if not first or not second or first <= 0 or second <= 0:
        return []
    reach = [(v * (1 - (s or 0.0) / 2), v * (1 + (s or 0.0) / 2)) for v, s in ((first, first_spread),
                                                                               (second, second_spread))]
    ratio = max(first, second) / min(first, second)
    if ratio <= 1 + tolerance or (reach[0][0] <= reach[1][1] and reach[1][0] <= reach[0][1]):
        return []
    measured = (f"{what} was measured twice {when}, {figure_text(first)} {unit} by {first_name} and "
                f"{figure_text(second)} by {second_name}, {ratio:.2f}x apart")
    if condition and ratio <= condition_factor and under_row:  # learner s11r2c: one short line under the row
        if figure_text(first) in condition:
            return []  # the row's own note already names the other figure and how far apart
        return [note(f"{first_name} measured {figure_text(first)}: {ratio:.2f}x apart, allowed: rows timed under "
                     f"different conditions (the note just above) may lie up to {condition_factor:g}x apart")]
    if condition and ratio <= condition_factor:
        return [note(f"{measured}, under different conditions ({condition.rstrip('.')}), which its lab says can move "
                     f"such a figure by an amount theory does not fix: a note, not a contradiction (up to "
                     f"{condition_factor:g}x apart)".replace("; ", ", "))]
    why = (f"more than {condition_factor:g}x, more than its different conditions ({condition.rstrip('.')}) explain"
           if condition else "more than the spreads of their repeats allow")
    return [Flag(Kind.CONTRADICT, f"{measured}, {why}: {CONTRADICT} (the "
            "machine was busy during one of them, or they do not measure the same thing)"
            + (f"; noted then: {' / '.join(notes)}" if notes else "").replace("; ", ", ")
            + (f", only {suspect} carries such a note: it is the likelier wrong figure" if suspect else ""))]


def twice_agree(first: float, first_spread: float | None, second: float, second_spread: float | None, *,
                tolerance: float = TWICE_TOLERANCE) -> str | None:
    """Where measured_twice flags nothing, the conclusion to print beside the two figures: they agree (within the
    tolerance), or their repeats are too noisy to compare them (never "agree" for figures further apart than the
    tolerance); None where they clash (measured_twice says so)."""
    if measured_twice(first, first_spread, second, second_spread, what="", first_name="", second_name="",
                      tolerance=tolerance) or not first or not second:
        return None
    gap = max(first, second) / min(first, second) - 1
    if gap <= tolerance:
        return (f"they agree: {gap:.0%} apart, within the {tolerance:.0%} by which two measurements minutes apart "
                "may differ")
    return (f"cannot be compared here: {gap:.0%} apart, but their repeats spread by {first_spread or 0:.0%} and "
            f"{second_spread or 0:.0%}, so the two ranges overlap: too noisy to tell agreement from disagreement")


def measured_several(figures, *, what: str, unit: str = "samples/s",
                     tolerance: float = TWICE_TOLERANCE) -> list[Flag]:
    """One quantity measured several times in one run, `figures` as (who measured it, median, spread): every pair
    judged by measured_twice's one rule, a flag for each pair that clashes."""
    return [flag for (first_name, first, first_spread), (second_name, second, second_spread)
            in itertools.combinations(figures, 2)
            for flag in measured_twice(first, first_spread, second, second_spread, what=what, first_name=first_name,
                                       second_name=second_name, unit=unit, tolerance=tolerance)]


def several_agree(figures, *, tolerance: float = TWICE_TOLERANCE) -> str | None:
    """Where measured_several flags nothing, the conclusion on its widest pair (twice_agree's words); None where a
    pair clashes (measured_several says which)."""
    figures = list(figures)
    if len(figures) < 2 or measured_several(figures, what="", tolerance=tolerance):
        return None
    (low_name, low, low_spread), (high_name, high, high_spread) = (min(figures, key=lambda f: f[1]),
                                                                   max(figures, key=lambda f: f[1]))
    said = twice_agree(low, low_spread, high, high_spread, tolerance=tolerance)
    return f"the widest pair ({low_name}, {high_name}): {said}" if said else None


def is_impossible(warning: str) -> bool:
    """True for a warning whose kind is an impossible or contradictory figure (`[!]`)."""
    return kind_of(warning).impossible


def impossible(warnings) -> list[str]:
    """The warnings whose kind is impossible ([!]); `warnings`: a list of them, or one."""
    return [w for w in listed(warnings) if is_impossible(w)]


def notes(warnings) -> list[str]:
    """The notes among the warnings (neither impossible nor noise, which the table's noise line says), conditions
    included."""
    return [w for w in listed(warnings) if kind_of(w).severity is Severity.NOTE]


def listed(warnings) -> list[str]:
    """A list of warnings from a list (or tuple) of them, or one warning."""
    return [warnings] if isinstance(warnings, str) else [w for w in (warnings or []) if w]


FLAG = "[!]"  # what marks an impossible figure wherever the course prints one


def flag_text(*warnings: str) -> str:
    """How impossible figures are printed: `[!] ` and the warnings joined by '; '."""
    return f"{FLAG} {'; '.join(warnings)}"


AS_ABOVE = "flagged above"


def by_kind(per_row, names, what: str) -> list[tuple[Kind, list[str], str, str]]:
    """Per impossible Kind in the rows, in Kind's order: (the kind, its flags, the row whose flag it quotes, that
    flag and the other rows of that kind, named)."""
    found, per_row = [], [listed(warnings) for warnings in per_row]
    for kind in (k for k in Kind if k.impossible):
        rows = [(name, [w for w in warnings if kind_of(w) is kind]) for name, warnings in zip(names, per_row)]
        rows = [(name, said) for name, said in rows if said]
        if rows:  # the head names the row whose flag is quoted; the rows "like it" are named after it
            more = (f" (and {len(rows) - 1} more like it, marked * too: {', '.join(str(n) for n, _ in rows[1:])})"
                    if len(rows) > 1 else "")
            found.append((kind, [w for _, said in rows for w in said], f"{what} {rows[0][0]} (marked *)",
                          f"{rows[0][1][0]}{more}"))
    return found


def one_line(per_row, names, what: str = "rows") -> list[Flag]:
    """A table's flags, one per impossible Kind: its rows (of `names`), its first flag, as a flag of that kind."""
    return [Flag(kind, f"{head}: {flag}") for kind, _, head, flag in by_kind(per_row, names, what)]


def marked(flagged_row) -> str:
    """' *' for a table row that carries a detector flag (its `[!]` is said once, under the table), else ''."""
    return " *" if impossible(flagged_row) else ""


WIDE_SPREAD = 10.0  # a spread above 1000 %: one repeat over 10x the median; printed as a bound, not a number


def spread_text(spread: float) -> str:
    """A spread as tables print it: '25%', or '>1000%' above WIDE_SPREAD (the noise line says why)."""
    return f">{WIDE_SPREAD:.0%}" if spread > WIDE_SPREAD else f"{spread:.0%}"


NOISY_BASIS = 1.0  # a median whose repeats spread more than 100 % (a repeat took twice it or more): a shaky base


def noisy_basis(spread: float | None, what: str) -> list[Flag]:
    """A note for a ratio built on `what` (a median) whose repeats spread more than NOISY_BASIS: the ratio moves
    with the repeats the median ignored, so it reads as an order of magnitude; [] for a steadier median."""
    if spread is None or not math.isfinite(spread) or spread <= NOISY_BASIS:
        return []
    return [note(f"built on {what}, a median whose repeats spread {spread_text(spread).replace('%', ' %')} (above "
                 f"{NOISY_BASIS:.0%}: a repeat took twice the median or more): read this ratio as an order of magnitude")]


def spread_reading(spread: float | None) -> str:
    """How far a figure built on a median of this spread is read, in the course's two words, each with its threshold:
    'an order of magnitude (above 100 %)', 'rough (above 25 %)', or '' for a steadier median."""
    if spread is None or not math.isfinite(spread):
        return ""
    if spread > NOISY_BASIS:
        return f"an order of magnitude (above {NOISY_BASIS * 100:.0f} %)"
    return f"rough (above {NOISY_SPREAD * 100:.0f} %)" if noisy_as_printed(spread) else ""


def noisy_as_printed(spread: float) -> bool:
    """Whether a spread lies above NOISY_SPREAD as tables print it (whole percent): 25.4 % prints as '25%', which is
    not more than 25 % (learner s12r4e, lab 05 finding 1: '3 of 3 spread more than 25 %' beside a printed '25%')."""
    return spread > NOISY_SPREAD and f"{spread:.0%}" != f"{NOISY_SPREAD:.0%}"


def noise_line(spreads, what: str = "medians", *, paired: bool = False, over: str = "repeats") -> str:
    """One line for a table's noise; '' when it has nothing to say. Each of `spreads` is a row's spread (max - min
    over the median; None, NaN not counted) or its repeats (a sequence of times). Rows given by their repeats (4 or
    more) count as uncertain only when their middle half spans more than NOISY_SPREAD of the median (middle_spread):
    a few slow repeats widen the range, not the middle, and move no median. `paired`: the table also prints medians
    of paired ratios, which the line says may be read too; `over`: what scattered (a row's repeats, or its steps)."""
    rows = [_row_spreads(s) for s in spreads]
    middles = [m for _, m in rows if m is not None]
    if middles and len(middles) == len(rows):  # every row has its repeats: the line counts the middle halves
        return _uncertain_line(middles, what, paired=paired, over=over)
    spreads = [s for s, _ in rows]
    counted = [s for s in spreads if s is not None and math.isfinite(s)]
    noisy = sum(noisy_as_printed(s) for s in counted)  # counted as printed: a '25%' is not more than 25 %
    if not noisy:
        return ""
    # the widest named: a spread of 2262 % reads as impossible beside its row unless the line says it is noise too;
    # the ones without a spread named too (lab 10: '111 rows' above '77 of 110 rows' medians' read as a lost row)
    unspread = len(spreads) - len(counted)
    singular = what[:-1] if what.endswith("s") else what
    without = (f"; {unspread} more {singular if unspread == 1 else what} recorded no spread (not counted)"
               if unspread else "")
    from .measure import lines  # here: lab_utils.measure imports this module

    return Flag(Kind.NOISE, lines.wrap(  # at 100 columns, as a verdict (learners: noise lines of 150-200 characters)
        f"noise: {noisy} of {len(counted)} {what} spread more than {NOISY_SPREAD * 100:.0f} % "
        f"over their {over} (the widest {spread_text(max(counted)).replace('%', ' %')}: a few slow {over}, which a median "
        "ignores" + _held_up(max(counted), over[:-1] if over.endswith("s") else over) + "): read " + ("the medians and the speed-ups only (medians of per-round "
        "ratios, which a few slow repeats do not move either)" if paired else "the medians only") + without))


def medians_stand_line(what: str = "median") -> str:
    """The line for a table whose rows gave their repeats and none is uncertain (noise_line said nothing)."""
    return (f"noise: every {what} above stands: the middle half of each row's repeats lies within "
            f"{NOISY_SPREAD * 100:.0f} % of it")


def _row_spreads(row) -> tuple[float | None, float | None]:
    """A noise_line row as (its max - min spread, its middle-half spread): a number has no middle half (None); a
    sequence of repeats has both, its middle half None below 4 repeats."""
    if row is None or isinstance(row, numbers.Real):
        return (None if row is None else float(row)), None
    times = [float(t) for t in row]
    from .measure import timing  # here: lab_utils.measure imports this module

    middle = middle_spread(times)
    return timing.spread(times), (middle if math.isfinite(middle) else None)


def _uncertain_line(middles: list[float], what: str, *, paired: bool, over: str) -> str:
    """noise_line for rows given by their repeats: the rows whose middle half spans more than NOISY_SPREAD of the
    median, as one line; '' when none does (a few slow repeats at most: the medians stand)."""
    uncertain = sum(noisy_as_printed(m) for m in middles)
    if not uncertain:
        return ""
    from .measure import lines  # here: lab_utils.measure imports this module

    ratios = " and the speed-ups (medians of per-round ratios) are steadier" if paired else ""
    return Flag(Kind.NOISE, lines.wrap(
        f"noise: {uncertain} of {len(middles)} {what} are uncertain: the middle half of their {over} spans more "
        f"than {NOISY_SPREAD * 100:.0f} % of the median (the widest {spread_text(max(middles)).replace('%', ' %')}), "
        f"so the {over} vary throughout, not just a few slow ones: read those {what} as rough{ratios}"))


def middle_spread(values) -> float:
    """The middle half of `values` (upper minus lower quartile) over their median: the spread a few slow repeats do
    not move; NaN for fewer than 4 values or a median of 0."""
    import statistics
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < 4 or statistics.median(values) == 0:
        return math.nan
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    return (high - low) / statistics.median(values)


def middle_half_line(named: dict) -> str:
    """Under a noise line: why a quiet machine's medians spread, computed.
    named: each row's label -> its repeats. The line gives the widest middle-half spread (middle_spread) and says
    whether the medians stand (it is within NOISY_SPREAD: a few slow repeats made the spread) or are rough; ''
    where no row has 4 repeats."""
    spreads = {label: middle_spread(values) for label, values in named.items()}
    spreads = {label: s for label, s in spreads.items() if math.isfinite(s)}
    if not spreads:
        return ""
    label = max(spreads, key=lambda name: spreads[name])
    widest = spreads[label]
    head = f"the middle half of each row's repeats spans at most {widest * 100:.0f} % of its median ({label}'s)"
    if widest <= NOISY_SPREAD:
        return head + ": the spreads come from a few slow repeats, so the medians stand"
    return head + f": more than {NOISY_SPREAD * 100:.0f} %, so the repeats vary throughout: read the medians as rough"


def _held_up(widest: float, one: str = "repeat") -> str:
    """What a spread above NOISY_BASIS (100 %) means, for the noise line: the slowest repeat took over 1 + `widest`
    times the fastest (max - min = spread x median, and median >= min), so something held that repeat up; '' for a
    narrower spread. (Learner s12r4f: 'one repeat took over 1.09x its median' read as a 9 % slowdown, not a hold-up.)"""
    if widest <= NOISY_BASIS:
        return ""
    return (f"; above {NOISY_BASIS * 100:.0f} %, the slowest {one} took over {1 + min(widest, WIDE_SPREAD):.3g}x the "
            "fastest: something held it up: a burst of other work, the operating system's scheduling or a core waking "
            "from idle")


def count(text: str) -> int:
    """How many `[!]` lines a printed text holds (the course aims at no more than 3 per lab on a quiet machine)."""
    return sum(FLAG in line for line in str(text).splitlines())
