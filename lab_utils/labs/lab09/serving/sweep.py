"""The batch sweep's reading of the sizes whose medians invert theory's order: for each, the largest dense layer
timed alone at both sizes, then one closing line that sets the gap against the two medians' spreads (noise or not)."""
from __future__ import annotations

from .... import measure
from .figures import inversions
from .model import layer_line, layer_times_by_batch


def inversion_gap(sweep, small: int, large: int, how: str) -> float:
    """How far the pair inverts theory's order, as a share: the time the larger batch saved ('less time') or the
    samples/s it lost ('fewer samples/s')."""
    small_s, large_s = sweep[small].median, sweep[large].median
    if how == "less time":
        return 1 - large_s / small_s
    return 1 - (large / large_s) / (small / small_s)


def inverted_rounds(sweep, small: int, large: int, how: str) -> tuple[int, int]:
    """In how many of the interleaved rounds the pair inverts theory's order, each round judged on its own: (those
    rounds, all rounds)."""
    work = large / small
    pairs = list(zip(sweep[small].times, sweep[large].times))
    if how == "less time":
        return sum(lg < sm for sm, lg in pairs), len(pairs)
    return sum(lg > work * sm for sm, lg in pairs), len(pairs)


THEORY_ORDER = {"less time": "a larger batch cannot take less time",
                "fewer samples/s": "samples/s grows with the batch"}  # what each inversion contradicts (cell 5)


def inversion_flags(sweep, small: int, large: int, how: str) -> list:
    """[!] where a pair inverts theory's order in every paired round (learner s13r7h: 'batch 2 gives 7 % fewer
    samples/s in all 5 rounds' carried no [!] though the legend says [!] marks what contradicts theory); [] where
    some round does not (noise can explain it)."""
    from .... import detectors

    inverted, rounds = inverted_rounds(sweep, small, large, how)
    if rounds < 2 or inverted < rounds:
        return []
    return [detectors.Flag(detectors.Kind.REVERSED, f"against theory ({THEORY_ORDER[how]}): batch {large} vs {small} "
                           "in every round, so it is this machine's, not noise")]


def gap_reading(sweep, small: int, large: int, how: str) -> str:
    """The first line on one inverted pair, judged round by round (the sizes ran side by side in each round): its gap,
    in how many rounds; [!] where every round shows it, else noise, the two sizes read as equal."""
    gap = inversion_gap(sweep, small, large, how)
    inverted, rounds = inverted_rounds(sweep, small, large, how)
    head = f"batch {large} vs {small}: {gap:.0%} {how} at the larger batch"
    flags = inversion_flags(sweep, small, large, how)
    if flags:
        return measure.flagged(measure.lines.wrap(f"{head}, in all {rounds} paired rounds"), flags)
    return measure.lines.wrap(f"{head}, in {inverted} of {rounds} paired rounds only: noise can explain it, so read the "
                              "two sizes as equal")


def inversion_lines(model, batch_sweep, sweep, knee: int, *, images, repeats: int, device: str,
                    flags_of: list | None = None) -> list[str]:
    """Every pair that inverts theory's order (up to the knee for samples/s): one line on its gap round by round;
    where every round shows it, a [!] and a line with every layer timed alone at both sizes (images: the sweep's
    inputs). flags_of: sweep_table's flags per size; an unflagged 'less time' pair that not every round shows has
    its line under the table already (no second)."""
    out = []
    for small, large, how in inversions(batch_sweep, sweep, knee=knee):
        line = gap_reading(sweep, small, large, how)
        repeatable = bool(inversion_flags(sweep, small, large, how))
        unflagged = flags_of is not None and not flags_of[batch_sweep.index(large)]
        if not repeatable and how == "less time" and unflagged:
            continue  # 'within the 10% ..., so not flagged' under the table says it
        if repeatable:
            layers = layer_times_by_batch(model, images, (small, large), repeats=repeats, device=device)
            per_sample = how == "fewer samples/s"  # the whole pass's gap, in seconds of the larger batch's pass
            gap_s = (sweep[large].median - large / small * sweep[small].median if per_sample else
                     sweep[small].median - sweep[large].median)
            line += "\n" + measure.lines.wrap(measure.lines.HANG + layer_line(
                layers, small, large, gap_s, per_sample=per_sample))
        out.append(line)
    return out


def repeatable_pairs(batch_sweep, sweep) -> set[tuple[int, int]]:
    """The neighbouring sizes whose larger batch took less time in every paired round (inversion_lines says those)."""
    pairs = set()
    for small, large in zip(batch_sweep, batch_sweep[1:]):
        inverted, rounds = inverted_rounds(sweep, small, large, "less time")
        if sweep[large].median < sweep[small].median and rounds >= 2 and inverted == rounds:
            pairs.add((small, large))
    return pairs


def gain_line(batch_sweep, sweep, knee: int) -> str:
    """Theory's claim read on the sweep: what batch `knee` cost against batch 1, in time and in samples/s."""
    t1, tk = sweep[batch_sweep[0]].median, sweep[knee].median
    first = batch_sweep[0]
    return measure.lines.wrap(
        f"theory says a batch of b costs much less than b batches of one; measured: batch {knee} took {tk / t1:.1f}x batch "
        f"{first}'s time for {knee // first}x the samples, so {(knee / tk) / (first / t1):.1f}x the samples/s")


def flat_line(batch_sweep, rates, knee: int) -> str | None:
    """Where samples/s grew by less than 5 % from one size to the next below the knee (theory predicts growth)."""
    flat = [(batch_sweep[i - 1], b) for i, b in enumerate(batch_sweep)
            if i and b <= knee and rates[i - 1] <= rates[i] < 1.05 * rates[i - 1]]  # inverted pairs: their own line
    if not flat:
        return None
    pairs = ", ".join(f"{a} to {b} ({rates[batch_sweep.index(a)]:.0f} -> {rates[batch_sweep.index(b)]:.0f}/s)"
                      for a, b in flat)
    return measure.lines.wrap(f"below theory's prediction: samples/s grew by less than 5 % from batch {pairs}, before "
                              "throughput reached 90 % of its maximum")


def sweep_table(batch_sweep, sweep) -> tuple[list[str], list[list]]:
    """The batch sweep's table (ms per batch, samples/s, spread; a flag where a larger batch breaks theory's order),
    its flags' lines, the noise line and the unflagged smaller leads; (lines, each size's flags for its results row)."""
    from .... import detectors
    from .figures import sweep_flags, unflagged_less_time

    lines = [f"{'batch':>6} {'ms per batch':>13} {'forward samples/s':>18} {'spread':>7}"]
    flags_of: list[list] = []
    for i, b in enumerate(batch_sweep):
        t = sweep[b]
        flags = sweep_flags(batch_sweep[i - 1], sweep[batch_sweep[i - 1]], b, t) if i else []
        flags_of.append(flags)  # a batch k times larger: at most about k times longer, and not less time
        lines.append(measure.table_row(f"{b:>6} {t.median * 1e3:>13.2f} {b / t.median:>18.0f} {t.spread:>7.0%}", flags))
    lines += measure.table_lines(flags_of, [f"batch {b}" for b in batch_sweep])
    lines.append(measure.lines.wrap(detectors.noise_line(sweep[b].times for b in batch_sweep)
                                    or detectors.medians_stand_line()))
    repeatable = repeatable_pairs(batch_sweep, sweep)  # one sentence each, with its dense layer, from inversion_lines
    lines += [measure.lines.wrap(line) for line in unflagged_less_time(batch_sweep, sweep, flags_of, skip=repeatable)]
    return lines, flags_of


def forward_twice_line(in_modes, in_sweep, max_batch: int) -> str | None:
    """The batch-max_batch inference_mode forward, timed beside the other modes and beside the other sizes: a line
    only where the two disagree (a flag or a note); else None."""
    from .... import detectors

    twice = detectors.measured_twice(in_modes.median * 1e3, in_modes.spread, in_sweep.median * 1e3, in_sweep.spread,
                                     what=f"the batch-{max_batch} forward", first_name="the modes' run",
                                     second_name="the sweep", unit="ms")
    if not twice:
        return None
    return measure.flagged(measure.lines.wrap(
        f"batch {max_batch} forward, two runs: {in_modes.median * 1e3:.2f} ms (beside the other modes), "
        f"{in_sweep.median * 1e3:.2f} ms (beside the other sizes)"), twice)


def capacity_report(capacity_runs, in_sweep, n_burst: int, earlier=()) -> tuple[list[str], list, float, float]:
    """Batch-1 serving's bursts, the lab's one figure for its capacity, against its forward pass alone (the sweep's
    median, the lab's one figure for the pass): (lines, flags, the bound in requests/s, the load basis in requests/s).
    `earlier`: the lab's other timings of the same pass (measure.Timing); the bound is 'about': up to the fastest pass
    of any of them, and only a capacity above that is flagged. Learner s13r6h: four figures (498, 553, 600, 654/s)
    for one capacity; a second line only where the bursts beat the sweep's pass or were flagged."""
    import statistics

    from .... import detectors
    from .figures import load_basis

    capacity = statistics.median(r.achieved_rps for r in capacity_runs)
    spread = measure.spread([r.achieved_rps for r in capacity_runs])
    bound = 1 / in_sweep.median
    fastest = max(1 / min(t.times) for t in [in_sweep, *earlier])  # no server beats the fastest pass the lab timed
    flags = detectors.above_bound(capacity, bound, what="batch-1 serving answered",
                                  bound_name="what its forward pass alone allows (the sweep's median),",
                                  tolerance=fastest / bound - 1)
    base, base_name = load_basis(capacity, flags, bound)  # never a multiple of a flagged figure
    head = (f"batch-1 serving's capacity: {capacity:.0f} requests/s (median of {len(capacity_runs)} bursts of "
            f"{n_burst}, spread {spread:.0%})")
    pass_ms = in_sweep.median * 1e3
    if flags:
        return [measure.flagged(measure.lines.wrap(
            f"{head}; its forward pass alone allows about {bound:.0f}/s (the sweep's {pass_ms:.2f} ms), at most "
            f"{fastest:.0f}/s (the fastest batch-1 pass the lab timed)"), flags),
            measure.lines.wrap(f"the loads of section Measure are multiples of {base:.0f} requests/s: {base_name}")], \
            flags, bound, base
    lines = [measure.lines.wrap(f"{head}: the lab's figure; section Measure's loads are multiples of it")]
    if capacity <= bound:
        lines.append(measure.lines.wrap(
            f"  its forward pass alone, the sweep's {pass_ms:.2f} ms, allows {bound:.0f}/s: the server's own work "
            f"per request (queue, checks, stacking, answer) takes the other {1 - capacity / bound:.0%}"))
    else:  # above the sweep's median pass, within the passes' own range: said once, no flag
        lines.append(measure.lines.wrap(  # one sentence, the two rates it rests on and no third figure
            f"  above the {bound:.0f}/s its forward pass alone allows at the sweep's median ({pass_ms:.2f} ms), "
            f"within its fastest batch-1 pass's {fastest:.0f}/s: the passes scatter that much, so no flag"))
    return lines, flags, bound, base


def forward_1_note(in_sweep, in_modes) -> str | None:
    """The batch-1 forward has one figure, the sweep's; the modes' table timed it too: a line only where that figure
    lies beyond the widest spread of the two (learner s13r6h: '1.67, 2.52, 2.01 ms ... one figure' was heavy)."""
    gap = max(in_modes.median, in_sweep.median) / min(in_modes.median, in_sweep.median) - 1
    widest = max(in_modes.spread, in_sweep.spread)
    if gap <= widest:
        return None
    return measure.lines.wrap(
        f"  the modes' table above timed the same pass at {in_modes.median * 1e3:.2f} ms, {gap:.0%} from the sweep's, "
        f"beyond the widest spread of their repeats ({widest:.0%}): read that table's times only against each other "
        "(its speed-ups), and the sweep's as the lab's figure")
