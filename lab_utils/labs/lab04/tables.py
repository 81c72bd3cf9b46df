"""Lab 04's own table cells and lines: refused columns print n/m, and a bubble is shown with its ideal and theory."""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

from ... import measure
from ...measure.verdicts import shown

WIDTHS = (9, 10, 10, 8, 15)  # 'vs naive', '= overlap', 'x compute', 'bubble', 'steps'


def speed_cells(vs_naive: float, overlap: float, compute: float | None, bubble: float, bubbles, refused: bool) -> str:
    """The GPipe table's load-dependent columns (vs naive, overlap, compute, bubble, steps), or n/m in each where the
    load refuses them: a refused figure is not printed, so that no eye reads it before the line that refuses it.
    compute None: 'note' (the row's note gives the figure to read; one figure per cell)."""
    if refused:
        return "".join(f"{measure.N_M:>{w}}" for w in WIDTHS)
    steps = f"{min(bubbles):.3f}-{max(bubbles):.3f}"
    said = "note" if compute is None else f"{compute:.2f}x"
    return (f"{vs_naive:>8.2f}x{overlap:>9.2f}x{said:>10}{bubble:>8.3f}{steps:>15}")


def bubble_line(measured: float, ideal: float, theory: float, refused: bool) -> str:
    """One bubble three ways on one line, each from the one before plus what it adds: theory (equal stages, free
    transfers), ideal (the schedule with this run's own stage times) and measured (n/m where the load refuses it)."""
    theory, ideal = round(theory, 3), round(ideal, 3)
    head = (f"bubble theory {theory:.3f} (equal stages, free transfers) {_signed_bubble(ideal - theory)} from the "
            f"unequal stages = ideal {ideal:.3f} (these stage times)")
    if refused:
        return f"{head}, measured {measure.N_M}"
    measured = round(measured, 3)
    return (f"{head} {_signed_bubble(measured - ideal)} from the hand-overs and the ops' own variation = measured "
            f"{measured:.3f}")


def _signed_bubble(difference: float) -> str:
    """'+ 0.097' or '- 0.004': a part added to a bubble, to three places."""
    return f"{'-' if difference < -0.0005 else '+'} {abs(difference):.3f}"


def below_floor_line(bubbles, makespans, ops_makespans, floor: float, median_bubble: float) -> str:
    """Why some naive steps' bubbles fall below (K-1)/K ('' when none does): their ops' recorded times overlap."""
    below = [m - o for b, m, o in zip(bubbles, makespans, ops_makespans) if b < floor]
    if not below:
        return ""
    overlap_ms = max(0.0, -min(below)) * 1e3
    return (f"{len(below)} of {len(bubbles)} steps below {floor:.3f}: a stage reads the clock for its op's end after "
            f"the op's send, so one that lost its core right then records the end late (ops overlapping by up to "
            f"{overlap_ms:.2f} ms); " + ("so is the run's bubble, from the medians (its flag says more)"
                                        if median_bubble < floor else "the run's bubble, from the medians, is not"))


def call_words(text: str) -> str:
    """Each numbered call as what it is: 'send #2' (the rank's 2nd call, a send) -> 'call #2 (a send)'."""
    return re.sub(r"\b([a-z_]+) #(\d+)",
                  lambda m: f"call #{m[2]} ({'an' if m[1][0] in 'aeiou' else 'a'} {m[1]})", text)


def deadlock_lines(where: str, timed_out: bool = False) -> list[str]:
    """The 'where was every rank' note as the lab prints it: one line per rank (its call numbered in the rank's
    sequence of calls), then the note's other lines, each joined with its continuation lines before wrapping.
    timed_out: a send or recv timed out, so the note's hedge 'or the work is only slow' gives way to what it was."""
    out: list[str] = []
    for row in where.splitlines()[2:]:  # after the note's title and the table's header; the state column left out
        if " | " in row:
            rank, _, waits_in, line, last = [cell.strip() for cell in row.split(" | ")]
            out.append(f"  rank {rank} waits in {call_words(waits_in)} at {line}; its last completed: "
                       f"{call_words(last)}")
        elif row.startswith("  ") and out and not out[-1].startswith("  rank"):  # a wrapped line's continuation
            out[-1] += " " + row.strip()
        elif row.strip():
            out.append("  " + call_words(row.strip()))
    if timed_out:
        out = [line.replace(", or the work is only slow", ": a deadlock") for line in out]
    return [measure.short_lines(line) for line in out]


def layer_spread_line(spreads, movers) -> str:
    """Where a layer's repeats spread widely but no layer's range moves the split: said, so a wide spread beside the
    times is read ('' where no spread exceeds measure.MAX_SPREAD or where the split's own flag names the movers)."""
    wide = max(range(len(spreads)), key=lambda i: spreads[i]) if spreads else None
    if movers or wide is None or spreads[wide] <= measure.MAX_SPREAD:
        return ""
    return (f"the widest spread, layer {wide}'s {spreads[wide]:.0%}, is its repeats' range (the split reads the "
            "median): no layer's range of repeats moves the split")


def pool_line(layer_types, times, batch: int, spreads=None) -> str:
    """Each max-pool's time over the convolution's before it, on one line ('' without a pool after a convolution);
    with `spreads`, a ratio read off a layer whose repeats spread over measure.MAX_SPREAD says so (learner s13r7d,
    lab 04 finding 9: 2.65x off a 125 % spread, unmarked)."""
    pairs = []
    for i, kind in enumerate(layer_types):
        conv = next((j for j in range(i - 1, -1, -1) if layer_types[j] == "conv2d"), None)
        if kind == "maxpool2d" and conv is not None and times[conv] > 0:
            wide = [j for j in (i, conv) if spreads is not None and spreads[j] > measure.MAX_SPREAD]
            rough = "".join(f" (rough: layer {j}'s repeats spread {spreads[j]:.0%})" for j in wide)
            pairs.append(f"layer {i} {times[i] / times[conv]:.2f}x layer {conv}{rough}")
    return f"max-pool over the convolution before it (batch {batch}): {', '.join(pairs)}" if pairs else ""


def geometric_mean(values) -> float:
    """The geometric mean: ratios of geometric means over the same rounds multiply exactly, unlike medians."""
    values = [float(v) for v in values]
    if not values or min(values) <= 0:
        raise ValueError(f"need positive values, got {values}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class StepParts:
    """One schedule's steps over the rounds, as geometric means in seconds: the step (makespan), its ops in the
    schedule's order (the step simulated with its own op times, free hand-overs) and the busy time (all op times)."""

    step: float
    ops: float
    busy: float

    @classmethod
    def of(cls, steps, ops, busy) -> "StepParts":
        """The geometric means of per-round lists of makespans, ops-in-order makespans and busy times."""
        return cls(geometric_mean(steps), geometric_mean(ops), geometric_mean(busy))

    @property
    def handovers(self) -> float:
        """What the step took beyond its ops in order, in seconds (a difference of the printed figures)."""
        return self.step - self.ops


def factors(slow: StepParts, fast: StepParts) -> dict[str, float]:
    """slow's step over fast's, and the three factors it splits into exactly: the ops (busy over busy), the schedule
    (ops in order per busy second), the hand-overs (step per ops-in-order second)."""
    return {"total": slow.step / fast.step, "the ops": slow.busy / fast.busy,
            "the schedule": (slow.ops / slow.busy) / (fast.ops / fast.busy),
            "the hand-overs": (slow.step / slow.ops) / (fast.step / fast.ops)}


def largest_factor(parts: dict[str, float]) -> str:
    """The name of the factor farthest from 1x (either way)."""
    return max((k for k in parts if k != "total"), key=lambda k: abs(math.log(parts[k])))


def middle_rounds(slow_steps, fast_steps) -> list[int]:
    """The rounds whose paired ratio (slow's step over fast's) ranks in the middle half: the verdict's median sits among
    them, and the slowest rounds, which a median ignores, are left out as it leaves them out."""
    ratios = [s / f for s, f in zip(slow_steps, fast_steps)]
    ranked = sorted(range(len(ratios)), key=lambda i: ratios[i])
    cut = len(ranked) // 4
    return sorted(ranked[cut:len(ranked) - cut])


def decomposition_lines(slow_name: str, slow: StepParts, fast_name: str, fast: StepParts) -> list[str]:
    """The figures each factor is a ratio of (ms, one row per schedule), then the factors as those ratios."""
    ms = 1e3
    f = factors(slow, fast)
    rows = [f"{'':<7}{'step':>7} = {'ops in order':>12} + {'hand-overs':>10}{'busy':>8}   (ms)"]
    for name, p in ((slow_name, slow), (fast_name, fast)):
        rows.append(f"{name:<7}{p.step * ms:>7.1f} = {p.ops * ms:>12.1f} + {p.handovers * ms:>10.1f}{p.busy * ms:>8.1f}")
    rows.append(f"{slow_name}'s step over {fast_name}'s, in parts from the columns: the ops {f['the ops']:.2f}x "
                f"(busy) x the schedule {f['the schedule']:.2f}x (ops in order / busy) x the hand-overs "
                f"{f['the hand-overs']:.2f}x (step / ops in order); the largest part: {largest_factor(f)}")
    return rows


def verdict_figures_line(step: float) -> str:
    """Under the decomposition: its parts are ratios of geometric means; the comparison's one figure stays the
    verdict's (`step`, the median of the paired ratios), said as from above."""
    return (f"(the parts are ratios of geometric means, which multiply exactly; the comparison's figure stays the "
            f"verdict's {step:.2f}x, from above)")


ONE_F_ONE_B_FASTER = ("theory's 'equal' counts the bubble only: 1F1B runs each backward soon after its forward, "
                      "while the activations may still be in cache, and its alternation fills waits between unequal "
                      "stages")


def pair_conclusion(v, a: str, b: str, why_faster: str = "") -> str:
    """One plain sentence for a verdict where theory predicts A and B equal and the claim tests one side ('A no
    slower'): what the paired rounds showed, and which half of 'equal' held (learner s13r6d, lab 04 finding 3:
    'holds' beside "the other half does not hold"), with why_faster, theory's reason A can win, where it did; ''
    where the load refused the verdict."""
    if v.verdict == measure.CANNOT_SEE:
        return ""
    head = f"{a} vs {b}: {a} ran {v.ratio:.2f}x as fast as {b} (range {v.range_text()} over {v.repeats} paired rounds)"
    if v.low > 1:
        return (f"{head}: faster, where theory expects them equal: '{a} no slower' holds, 'equal' does not"
                + (f" ({why_faster})" if why_faster else ""))
    if v.high < 1:
        return f"{head}: slower, where theory expects them equal (the verdict says whether beyond its margin)"
    return f"{head}: no difference this run can tell (theory expects none; the verdict says what it could test)"


def library_conclusion(v, schedule: str) -> str:
    """The plain sentence before a library verdict (v.ratio: your ops' step over the library's): which was faster,
    with the paired range, and, where the pairs were too noisy to test a cost, what the course's 30 % limit is."""
    if v.verdict == measure.CANNOT_SEE:
        return ""
    head = (f"the library's {schedule} ran {v.ratio:.2f}x as fast as your ops (range {v.range_text()} over "
            f"{v.repeats} paired rounds)")
    said = ("faster: the library beats your ops" if v.low > 1 else "slower than your ops" if v.high < 1 else
            "no difference this run can tell" + (f", and not {1 / v.holds_from - 1:.0%} slower: the 'holds' below"
                                                 if v.verdict == "holds" and v.holds_from else ""))
    noisy = (f"; the verdict's {measure.MAX_RESTATED:.0%} is the largest cost the course widens a 'no slower' claim "
             "to, for pairs this noisy: past it a claim says nothing, so only a win could decide"
             if "only a win could decide" in v.notes else "")
    return f"{head}: {said}{noisy}"


def library_reading(v, what: str) -> str:
    """What a library verdict's 'holds' means where the library was the slower one at the median: no cost beyond the
    threshold this run's scatter can test stood out, which neither shows nor refutes 'no slower' ('' otherwise)."""
    if v.verdict != "holds" or v.ratio >= 1 or not v.holds_from:
        return ""
    said = ("'no slower' does not hold: the whole range lies below 1" if v.high < 1 else
             "'no slower' is neither shown nor refuted here (more `rounds` narrow the range)")
    return (f"read as: {what} was {1 / v.ratio - 1:.0%} slower at the median; 'holds' says only that no cost above "
            f"{1 / v.holds_from - 1:.0%} stood out of these pairs' scatter; {said}")


def handover_line(labels, steps, ops, tolerance_s: float, ideals=None) -> str:
    """Each row's median step's hand-overs in ms: its makespan minus what its own ops in order need. With `ideals`
    ('ideal's makespans), each row's step split into the three parts of its gap to 'ideal': ideal + this step's ops
    over the typical ones + hand-overs, in ms that add up as printed. Below 0 by more than `tolerance_s` (what the
    timestamps resolve: detectors.shorter_than_its_ops' rule) its row carries a note or [!]; below 0 by less, the
    line says it is within that resolution."""
    late = [label for label, m, s in zip(labels, steps, ops) if m < s - tolerance_s]  # marked beside their rows
    close = [label for label, m, s in zip(labels, steps, ops) if s - tolerance_s <= m < s]
    said = ([f"{', '.join(late)}: the mark beside its row"] if late else []) + \
        ([f"{', '.join(close)}: within the timestamps' resolution ({tolerance_s * 1e3:.2f} ms), so about 0"]
         if close else [])
    below = f" (hand-overs below 0: {'; '.join(said)})" if said else ""
    if ideals is None:
        return ("hand-overs in each median step (its makespan minus its own ops in order; idle time the 'bubble' "
                "column counts and 'ideal' leaves out): "
                + ", ".join(f"{label} {(m - s) * 1e3:.1f} ms" for label, m, s in zip(labels, steps, ops)) + below)
    parts = []
    for label, m, s, i in zip(labels, steps, ops, ideals):
        step, ideal, hand = (round(v * 1e3, 1) for v in (m, i, m - s))
        parts.append(f"{label} {step:.1f} = {ideal:.1f} {_signed(step - ideal - hand)} {_signed(hand)}")
    return ("each median step's gap to 'ideal', in ms: step = ideal (the typical op times, free hand-overs) + "
            "this step's ops over the typical ones (its own ops in order minus ideal) + hand-overs (its makespan "
            "minus its own ops in order): " + "; ".join(parts) + below)


def _signed(ms: float) -> str:
    """'+ 3.8' or '- 1.2': a part of a sum in ms, its sign as the operator."""
    return f"{'-' if ms < -0.05 else '+'} {abs(ms):.1f}"


def pays_line(m: int, vs_naive: float, overlap: float, compute: float, refused: str | None = None,
              paired: tuple[float, float] | None = None) -> str:
    """The summary's first line: whether GPipe at M pays over the naive split here, and why, in its two factors, all
    three the table's (medians over the steps), so that vs naive = overlap x compute holds as printed (learner
    s13r7d, lab 04 finding 3: 1.02x paired beside overlap 1.06x x compute 0.84x from two other sources). paired:
    (low, high) of the paired rounds' ratios (naive's step over GPipe's), which decide 'pays' (the whole range
    above 1)."""
    if refused:
        return f"whether GPipe M={m} pays here: {measure.NOT_MEASURABLE}: {refused}"
    busier = ("the schedule kept the stages busier" if overlap > 1 else
              "the schedule kept the stages no busier than the naive split")
    ops = ("its smaller ops ran no slower per image" if compute >= 1 else
           f"its ops ran slower per image: each op's fixed cost is paid {m} times, on tensors {m}x smaller")
    if paired is not None:  # the table's row, whose factors multiply; the paired range decides 'pays'
        low, high = paired
        pays = ("so it pays" if low > 1 else "so it loses" if high < 1 else
                "so this run cannot tell whether it pays (it does where the whole range lies above 1)")
        return (f"GPipe M={m} ran {vs_naive:.2f}x as fast as the naive split (the table's medians) = overlap "
                f"{overlap:.2f}x x compute {compute:.2f}x: {busier}, {'but' if compute < 1 < overlap else 'and'} "
                f"{ops}. Round by round, naive's step over GPipe's ranged {_range(low, high)}, {pays}")
    head = f"GPipe M={m} {'pays' if vs_naive > 1 else 'does not pay'} on this machine: {vs_naive:.2f}x the naive split"
    return f"{head} = overlap {overlap:.2f}x x compute {compute:.2f}x: {busier}, and {ops}"


def below_ideal_line(rows) -> str:
    """The table's line for rows whose bubble is below 'ideal' ((label, bubble, ideal, least) each, least the
    bubble the median step's own op times allow with free transfers): 'ideal' is no bound, 'least' is."""
    said = []
    for label, bubble, ideal, least in rows:
        beyond = ("below it: a wait counted as work, the [!] beside its row" if bubble < least - 0.005 else
                  "not below it")
        said.append(f"{label} {bubble:.3f} (ideal {ideal:.3f}; least {least:.3f}, {beyond})")
    return ("bubble below 'ideal': " + "; ".join(said) + ". 'ideal' gives every op its stage's typical time, so a "
            "step whose ops vary can beat it; 'least' is the bound: each step's own op times in order (their "
            "median), transfers free")


def _range(low: float, high: float) -> str:
    """'low-high' with the decimals that show on which side of 1 each end lies (0.93-0.998, not 0.93-1.00)."""
    return f"{shown(low, (1.0,))}-{shown(high, (1.0,))}"


def paired_compute_line(busy_ranges: dict) -> str:
    """The one figure to carry away for the compute factor: per GPipe row, the naive split's busy time over the
    row's, the median of the paired rounds (busy_ranges: label -> (low, median, high)), and whether a range holds
    1. The column keeps each median step's own figure, so that its row multiplies."""
    within = [label for label, (low, _, high) in busy_ranges.items() if low <= 1 <= high]
    figures = ", ".join(f"{label} {_range(low, high)}" for label, (low, _, high) in busy_ranges.items())
    if not within:
        said = "no range holds 1: the ops' speed per image differs from the naive split's in every row"
    else:
        said = (f"the range holds 1 for {', '.join(within)}: those rows' ops ran as fast per image as the naive "
                "split's, as far as this run can tell")
    return (f"compute round by round (the naive split's busy time over the row's, paired rounds): {figures}; {said}")


def fastest_other_m(makespans: dict[int, float], shown: int) -> list[int]:
    """The M whose median step was the shortest as printed (0.1 ms), every M tied with it included, where the `shown`
    one (the summary's) is not among them; [] where it is."""
    def ms(m):
        return round(makespans[m] * 1e3, 1)
    best = min(ms(m) for m in makespans)
    fastest = sorted(m for m in makespans if ms(m) == best)
    return [] if shown in fastest else fastest


def fastest_line(words: str, ratios) -> str:
    """The summary's line for GPipe's fastest M (words: fastest_words), with the comparison's one figure: the median
    of the paired rounds' ratios (naive's step over its) and their range."""
    low, high, _ = measure.ratio_range(ratios)
    pays = ("it pays" if low > 1 else "it loses" if high < 1 else "this run cannot tell whether it pays")
    return (f"GPipe's fastest M here: {words} (the table's medians), {statistics.median(ratios):.2f}x as fast as the "
            f"naive split (range {_range(low, high)} over {len(ratios)} paired rounds): {pays}")


def fastest_words(ms: list[int]) -> str:
    """'M=4', or 'M=2 and M=4 (a tie)' for the summary's fastest-M line."""
    return " and ".join(f"M={m}" for m in ms) + (" (a tie)" if len(ms) > 1 else "")


def handover_table(labels, steps, ops, ideals, tolerance_s: float, every_step: dict | None = None) -> list[str]:
    """handover_line's split as a table, one row per configuration, in ms that add up as printed: each median step
    = ideal + its own ops over the typical ones + hand-overs; a row below 0 says why beside it. every_step: per
    label, every step's hand-overs in seconds; a row whose median step's hand-overs are over twice their median (and
    1 ms more) says so beside it (learner s13r5d, finding 4: 8.8 ms in one step where the others had ~1 ms)."""
    lines = ["each row's gap to 'ideal', in ms (medians over its steps; parts that add up as printed):",
             f"{'':<12}{'step':>6} = {'ideal':>6} + {'its ops over typical':>20} + {'hand-overs':>10}"]
    for label, m, s, i in zip(labels, steps, ops, ideals):
        step, ideal, hand = (round(v * 1e3, 1) for v in (m, i, m - s))
        mark = ("  (below 0: its mark above)" if m < s - tolerance_s else
                f"  (below 0 within the timestamps' {tolerance_s * 1e3:.2f} ms: about 0)" if m < s else
                _slow_handovers(m - s, (every_step or {}).get(label, [])))
        lines.append(f"{label:<12}{step:>6.1f} = {ideal:>6.1f} + {step - ideal - hand:>20.1f} + {hand:>10.1f}{mark}")
    lines.append("ideal: the typical op times in the schedule; its ops over typical: each step's own ops in order, "
                 "their median, minus ideal (below 0: faster); hand-overs: the rest (messages, Python between ops, "
                 "waits for a core)"
                 + ("; a row marked 'its steps' median': this step's hand-overs were over twice that median, one slow "
                    "step's, not the configuration's" if any("steps' median" in line for line in lines) else ""))
    return lines


def _slow_handovers(seconds: float, every: list) -> str:
    """'  (its 30 steps' median: 1.2)' beside a row whose step's hand-overs are atypically slow; '' otherwise."""
    import statistics
    if len(every) < 2:
        return ""
    usual = statistics.median(every)
    if seconds <= 2 * usual or seconds - usual <= 1e-3:
        return ""
    return f"  (its {len(every)} steps' median: {usual * 1e3:.1f})"


def under_table_lines(measured: dict, rows: list[str], own: dict, busy_ranges: dict, stages: int, largest: int,
                      tolerance_s: float) -> list[str]:
    """The lines under the GPipe table where the load allows reading it: bubbles below 'ideal' and their bound, the
    compute column's noise, each step's gap to 'ideal' (a table) and why the largest M's steps spread."""
    from . import pipeline as pl
    out = []
    below = [(label, measured[label].bubble, pl.ideal_bubble(measured[label]),
              1 - measured[label].busy / (stages * own[label])) for label in rows
             if measured[label].bubble < pl.ideal_bubble(measured[label]) - 0.005]
    if below:  # 'ideal' is no bound: the bound is the step's own op times
        out.append(measure.short_lines(below_ideal_line(below)))
    out.append(measure.short_lines(paired_compute_line(busy_ranges)))
    gap = handover_table(rows, [measured[label].makespan for label in rows], [own[label] for label in rows],
                         [pl.ideal_makespan(measured[label]) for label in rows], tolerance_s)  # medians: no slow step
    return out + gap[:-1] + [measure.short_lines(gap[-1])]  # learner s13r6d, 9: the notes halved, no spread line


def gpipe_table(measured: dict, rows: list[str], hand_built: list[str], *, stages: int, largest: int, factors,
                speedup_flags, refused: str | None, load_cause, tolerance_s: float):
    """The GPipe speed table as the lab prints it: (lines, step_flags, busy_ranges). step_flags: per hand-built run,
    the flag of a step shorter than its own ops; busy_ranges: per GPipe row, the naive split's busy time over the
    row's, paired by round (low, median, high). factors(m) -> (overlap, compute) and speedup_flags(m) are the
    notebook's; refused: the load's reason where it rules the columns out (they print n/m)."""
    import statistics

    from ... import detectors
    from . import pipeline as pl
    naive = measured[rows[0]]
    own = {label: pl.own_ops_makespan(measured[label]) for label in hand_built}
    step_flags = {label: detectors.shorter_than_its_ops(measured[label].makespan, needed, what=label, cause=load_cause,
                                                        tolerance_s=tolerance_s) for label, needed in own.items()}
    busy_ranges = {}
    for label in rows[1:]:
        ratios = measure.paired_ratios([pl.busy_seconds(t) for t in measured[label].timelines],
                                       [pl.busy_seconds(t) for t in naive.timelines])
        low, high, _ = measure.ratio_range(ratios)
        busy_ranges[label] = (low, statistics.median(ratios), high)
    lines = [measure.short_lines("each row: medians over its steps (makespan, busy time; the bubble from those two); "
                                 "'steps': the range of every step's own bubble"),
             f"{'':<12}{'makespan':>9}{'spread':>8}{'vs naive':>9}{'= overlap':>10}{'x compute':>10}{'bubble':>8}"
             f"{'steps':>15}{'theory':>8}{'ideal':>7}"]
    for label in rows:
        m = measured[label]
        theory = pl.make_schedule(m.run.schedule, stages, m.run.micro_batches).theoretical_bubble
        overlap, compute = factors(m)
        cells = speed_cells(naive.makespan / m.makespan, overlap, compute, m.bubble, m.bubbles,
                            refused=refused is not None)  # n/m where the load line below refuses them
        lines.append(measure.flagged(f"{label:<12}{m.makespan * 1e3:>7.1f}ms{m.spread:>8.0%}{cells}{theory:>8.3f}"
                                     f"{pl.ideal_bubble(m):>7.3f}",
                                     (speedup_flags(m) if m is not naive else []) + step_flags[label]))
    if refused is None:  # each line reads the rounds' waits, which a refusing load would fill
        lines += under_table_lines(measured, rows, own, busy_ranges, stages, largest, tolerance_s)
    noise = detectors.noise_line(measured[label].makespans for label in rows)  # its steps
    if noise:
        lines.append(measure.short_lines(str(noise)))
    if refused is not None:
        lines.append(measure.short_lines(
            f"{measure.N_M}: {measure.NOT_MEASURABLE}: {refused}. GPipe keeps {stages} stages computing at once, the "
            "naive split one at a time: a stage waiting for a core counts as idle, so these columns would show the "
            "load as well as the schedule. 'theory' is the schedule's own bubble, which no load changes; 'ideal' "
            "simulates it with this run's op times, not its waits: on a busy machine, read the lesson in 'theory' and "
            "'ideal'"))
    return lines, step_flags, busy_ranges


def fixed_costs_line(m: int, stages: int, naive: tuple[float, float, float], gpipe: tuple[float, float, float],
                     cap: float, smallest_op: tuple[str, float] | None = None) -> str:
    """Why GPipe at M gains little on this machine, in ms a call: what its extra messages added to the hand-overs
    and its extra op calls to the busy time, over the naive split's. naive, gpipe: (step, own ops in order, busy),
    each the median over the steps, in seconds (the table's figures); cap: the most any schedule could overlap; smallest_op:
    (name, seconds) of the cheapest op at M, against which an op call's fixed cost is set."""
    messages = 2 * (stages - 1) * (m - 1)  # one activation forward and one gradient back per boundary, M times
    calls = 2 * stages * (m - 1)  # one forward and one backward op per stage, M times
    handed = (gpipe[0] - gpipe[1]) - (naive[0] - naive[1])
    busier = gpipe[2] - naive[2]

    def said(seconds: float, n: int, what: str, to: str, net: str = "") -> str:
        """'its 14 extra messages added 6.4 ms (0.46 ms each) to the hand-overs', or 'took ... off' them."""
        ms = round(seconds * 1e3, 1)
        verb, prep = ("added", "to") if ms >= 0 else ("took", "off")
        return f"its {n} extra {what} {verb} {abs(ms):.1f} ms ({abs(seconds) / n * 1e3:.2f} ms each{net}) {prep} {to}"
    return (f"why GPipe M={m} ran {naive[0] / gpipe[0]:.2f}x as fast as the naive split, not the split's cap of "
            f"{cap:.2f}x: over the naive step ({naive[0] * 1e3:.1f} ms), "
            + said(handed, messages, "messages", "the hand-overs") + ", and "
            + said(busier, calls, "op calls", "the busy time")
            + _fixed_against(busier / calls, m, smallest_op))


def _fixed_against(per_call: float, m: int, smallest_op: tuple[str, float] | None) -> str:
    """The fixed cost of one op call beside the cheapest op at M: where it is a large share of that op, the
    per-call costs (Python, the per-layer dispatch) weigh as much as the compute; '' without an op to compare."""
    if smallest_op is None or per_call <= 0:
        return ""
    name, seconds = smallest_op
    share = per_call / seconds
    weight = ("fixed costs rival the compute here, as a GPU's large layers would not" if share >= 0.5
              else "less than the op, but not small: it takes back part of the bubble's gain" if share >= 0.25
              else "small against it (under a quarter), so the bubble's gain can show")
    return f", {share:.0%} of the cheapest op ({name}, {seconds * 1e3:.2f} ms): {weight}"


def library_schedules_line(ratios, yours: float) -> str:
    """The library's GPipe step over its 1F1B step, round by round (ratios), beside the verdict's figure for your
    ops' (yours): whether the library's two schedules differ as yours do."""
    import statistics
    low, high, _ = measure.ratio_range(ratios)
    median = statistics.median(ratios)
    faster = ("the whole range above 1: its 1F1B the faster" if low > 1 else
              "the whole range below 1: its GPipe the faster" if high < 1 else
              "the range holds 1: no difference this run can tell")
    return (f"the library's two schedules, as yours: its GPipe step over its 1F1B step {median:.2f}x (range "
            f"{_range(low, high)} over {len(ratios)} paired rounds; {faster}); yours {yours:.2f}x (the 1F1B "
            "verdict above)" + ("; theory's reason its 1F1B gains more: it posts each forward's send with a "
                                "backward's receive in one batch, as the text above says" if low > yours else ""))


def busy_fit_line(ms, busy, stages: int, largest: int, fits: float = 0.10) -> str:
    """Whether one fixed cost per op call explains the busy time's rise with M: the cost per call the why-line
    under the speed table measured (M=largest's busy time over the naive split's, over its extra calls) predicts
    every other M's busy time (each M's median, seconds); one figure for that cost, the why-line's."""
    i1, ib = ms.index(1), ms.index(largest)
    calls = 2 * stages * (largest - 1)  # one forward and one backward op per stage, M - 1 more times
    per_call = (busy[ib] - busy[i1]) / calls
    if per_call <= 0:
        return f"busy time did not rise from M=1 to M={largest}: no fixed cost per op call shows here"
    predicted = [busy[i1] + per_call * 2 * stages * (m - 1) for m in ms]
    worst = max(range(len(ms)), key=lambda i: abs(busy[i] - predicted[i]) / busy[i])
    miss = round(abs(busy[worst] - predicted[worst]) / busy[worst], 2)  # decided as printed
    head = (f"the {per_call * 1e3:.2f} ms per op call above (M={largest} against the naive split), applied to every "
            f"M: the largest miss is M={ms[worst]}, {predicted[worst] * 1e3:.1f} ms predicted against "
            f"{busy[worst] * 1e3:.1f} ms measured ({miss:.0%})")
    if miss > fits:
        return f"{head}: a fixed cost per call is not the only cause of the rise"
    return f"{head}: one fixed cost per call explains the rise with M"


def no_overlap_line(ms, bubbles, naive_bubble: float, stages: int) -> str:
    """The M whose bubble (from the medians) is at least the naive split's: there the stages no longer overlap, one
    line ('' where every M still overlaps; learner s13r7d, lab 04 finding 5: M=32's makespan = its busy time, unsaid)."""
    serial = [m for m, b in zip(ms, bubbles) if m > 1 and b >= naive_bubble]
    if not serial:
        return ""
    return (f"at M={', M='.join(map(str, serial))} the stages no longer overlap: the bubble is at least the naive "
            f"split's {naive_bubble:.3f} (busy / ({stages} x makespan)): all that the schedule saved was taken back")
