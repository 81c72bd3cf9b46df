"""The batch sweep's reading of the sizes whose medians invert theory's order: for each, the largest dense layer
timed alone at both sizes, then one closing line that sets the gap against the two medians' spreads (noise or not)."""
from __future__ import annotations

from .... import measure
from .figures import inversions
from .model import dense_line, largest_dense_times


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


def gap_reading(sweep, small: int, large: int, how: str) -> str:
    """The first line on one inverted pair, judged round by round (the sizes ran side by side in each round): its gap,
    in how many rounds; repeatable where every round shows it, else noise, the two sizes read as equal."""
    gap = inversion_gap(sweep, small, large, how)
    inverted, rounds = inverted_rounds(sweep, small, large, how)
    head = f"batch {large} vs {small}: {gap:.0%} {how} at the larger batch"
    if rounds >= 2 and inverted == rounds:
        return measure.lines.wrap(f"{head}, in all {rounds} paired rounds: repeatable, not noise")
    return measure.lines.wrap(f"{head}, in {inverted} of {rounds} paired rounds only: noise can explain it, so read the "
                              "two sizes as equal")


def inversion_lines(model, batch_sweep, sweep, knee: int, *, repeats: int, device: str,
                    flags_of: list | None = None) -> list[str]:
    """Every pair that inverts theory's order (up to the knee for samples/s): one sentence on its gap round by round;
    where every round shows it, the same sentence goes on with the largest dense layer timed alone at both sizes
    (learner s13r5h: 'not flagged', 'repeatable, not noise' and 'unexplained' in three lines for one pair). flags_of:
    sweep_table's flags per size; an unflagged 'less time' pair that not every round shows has its line under the
    table already (no second)."""
    out = []
    for small, large, how in inversions(batch_sweep, sweep, knee=knee):
        line = gap_reading(sweep, small, large, how)
        unflagged = flags_of is not None and not flags_of[batch_sweep.index(large)]
        if "repeatable" not in line and how == "less time" and unflagged:
            continue  # 'within the 10% ..., so not flagged' under the table says it
        if "repeatable" in line:
            shape, dense = largest_dense_times(model, (small, large), repeats=repeats, device=device)
            line = measure.lines.wrap(" ".join(line.split()) + "; " + dense_line(
                shape, small, dense[small], large, dense[large], per_sample=how == "fewer samples/s"))
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
        f"against theory (a batch of b costs much less than b batches of one): batch {knee} took {tk / t1:.1f}x batch "
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
    lines.append(measure.lines.wrap(detectors.noise_line(sweep[b].spread for b in batch_sweep)
                                    or "noise: every median above came from repeats within 25 %"))
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


def capacity_report(capacity_runs, bound_runs, n_burst: int, earlier=()) -> tuple[list[str], list, float, float]:
    """Batch-1 serving's bursts against the forward pass's bound, each round's bound timed right before its burst
    (one machine state for both): (lines, flags, the bound in requests/s, the load basis in requests/s). `earlier`:
    the lab's other timings of the same batch-1 forward (measure.Timing); the bound's top end is the fastest pass of
    any of them (learner s12r4h: a quiet run's bursts beat a slow back-to-back bound, 'a busy machine' was blamed)."""
    import statistics

    from .... import detectors
    from .figures import load_basis, within_bound_line

    capacity = statistics.median(r.achieved_rps for r in capacity_runs)
    spread = measure.spread([r.achieved_rps for r in capacity_runs])
    bound = 1 / statistics.median(t.median for t in bound_runs)  # one figure: forward_1_figures prints 1e3 / bound ms
    fastest = statistics.median(1 / min(t.times) for t in bound_runs)  # the bound is 'about': up to the fastest pass
    fastest_anywhere = max([fastest] + [1 / min(t.times) for t in earlier])  # no server beats the fastest pass seen
    where = "" if fastest_anywhere == fastest else ", of every batch-1 timing in this lab"
    fastest = fastest_anywhere
    flags = detectors.above_bound(capacity, bound, what="batch-1 serving answered",
                                  bound_name="what its median forward pass allows,", tolerance=fastest / bound - 1)
    n_passes = len(bound_runs[0].times)
    lines = [measure.flagged(measure.lines.wrap(
        f"batch-1 serving answered {capacity:.0f} requests/s (median of {len(capacity_runs)} bursts of {n_burst}, "
        f"spread {spread:.0%}); the forward pass alone allows about {bound:.0f}/s (1 / the median of {n_passes} "
        f"passes timed back to back right before each burst; its fastest pass{where}: {fastest:.0f}/s)"), flags)]
    within = within_bound_line(capacity, bound, fastest)
    if within:  # above the median pass's bound, inside the forward pass's own range: said
        lines.append(measure.lines.wrap(within))
    base, base_name = load_basis(capacity, flags, bound)  # never a multiple of a flagged figure
    lines.append(measure.lines.wrap(f"the loads of section Measure are multiples of {base:.0f} requests/s: {base_name}"))
    return lines, flags, bound, base


def forward_1_figures(in_sweep, in_modes, bound_runs) -> tuple[list[str], str]:
    """The batch-1 forward, timed three times (beside the other sizes: the lab's figure; beside the other modes; back
    to back before the bursts): one line with the three, one that sets their largest gap against the widest spread of
    their repeats; (lines, the short reading). Learners s12r4h (five figures, no word on why), s13r5h (one row)."""
    import statistics

    bound_ms = statistics.median(t.median for t in bound_runs) * 1e3  # capacity_report's bound is 1e3 / this
    # the bound's scatter: how far its rounds' medians lie apart (one pass of 20 can be preempted: a 300 % spread)
    bound_spread = measure.spread(t.median for t in bound_runs) if len(bound_runs) > 1 else bound_runs[0].spread
    figures = {"in the sweep (the lab's figure)": (in_sweep.median * 1e3, in_sweep.spread),
               "beside the other modes": (in_modes.median * 1e3, in_modes.spread),
               "back to back before the bursts": (bound_ms, bound_spread)}
    values = [ms for ms, _ in figures.values()]
    gap = max(values) / min(values) - 1
    widest_at, (_, widest) = max(figures.items(), key=lambda item: item[1][1])
    whose = widest_at.split(" (")[0]
    said = ", ".join(f"{ms:.2f} {where}" for where, (ms, _) in figures.items())
    digits = 1 if f"{gap:.0%}" == f"{widest:.0%}" else 0  # '10% apart, more than ... (10%)': one decimal each
    if gap <= widest:
        short = f"{gap:.{digits}%} apart at most, within their repeats' scatter"
        reading = (f"  {gap:.{digits}%} apart at most, within the widest spread of their repeats "
                   f"({widest:.{digits}%}, {whose}): one figure, read within its noise")
    else:
        short = f"{gap:.{digits}%} apart, beyond their repeats' scatter"
        reading = (f"  {gap:.{digits}%} apart, more than the widest spread of their repeats ({widest:.{digits}%}, "
                   f"{whose}): each ran at another moment beside other work, so each comparison uses the figure "
                   "timed beside it")
    return [measure.lines.wrap(f"the batch-1 forward, timed three times (ms): {said}"),
            measure.lines.wrap(reading)], short
