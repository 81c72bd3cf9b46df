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
    """The closing line on one inverted pair, judged round by round (the sizes ran side by side in each round): in
    every round, a repeatable effect whose cause this run leaves unexplained; else noise, the sizes read as equal
    (learner s12r3h: 'repeatable, not noise' stood above 'noise alone can explain it' for the same pair)."""
    gap = inversion_gap(sweep, small, large, how)
    inverted, rounds = inverted_rounds(sweep, small, large, how)
    if rounds >= 2 and inverted == rounds:
        return measure.lines.wrap(f"  so: a gap of {gap:.0%}, in all {rounds} paired rounds: repeatable, not noise; "
                                  "its cause is not this layer and this lab times nothing else: unexplained on "
                                  "this run")
    spreads = (sweep[small].spread, sweep[large].spread)
    return measure.lines.wrap(f"  so: a gap of {gap:.0%}, in {inverted} of {rounds} paired rounds only (the two "
                              f"medians spread {spreads[0]:.0%} and {spreads[1]:.0%}): noise alone can explain it; "
                              "read the two sizes as equal")


def inversion_lines(model, batch_sweep, sweep, knee: int, *, repeats: int, device: str) -> list[str]:
    """Every pair that inverts theory's order (up to the knee for samples/s): the dense-layer test, then, where that
    layer does not explain it, the gap against the spreads."""
    out = []
    for small, large, how in inversions(batch_sweep, sweep, knee=knee):
        shape, dense = largest_dense_times(model, (small, large), repeats=repeats, device=device)
        tested = dense_line(shape, small, dense[small], large, dense[large], per_sample=how == "fewer samples/s")
        out.append(measure.lines.wrap(f"batch {large}: {how} than batch {small}; {tested}"))
        if "does not explain it" in tested:  # the layer inverted in every round: a repeatable effect, not noise
            out.append(gap_reading(sweep, small, large, how))
    return out


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
    lines += [measure.lines.wrap(line) for line in unflagged_less_time(batch_sweep, sweep, flags_of)]  # seen: said
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


def capacity_report(capacity_runs, bound_runs, n_burst: int) -> tuple[list[str], list, float, float]:
    """Batch-1 serving's bursts against the forward pass's bound, each round's bound timed right before its burst
    (one machine state for both): (lines, flags, the bound in requests/s, the load basis in requests/s)."""
    import statistics

    from .... import detectors
    from .figures import load_basis, within_bound_line

    capacity = statistics.median(r.achieved_rps for r in capacity_runs)
    spread = measure.spread([r.achieved_rps for r in capacity_runs])
    bound = statistics.median(1 / t.median for t in bound_runs)  # 1 / the median pass, per round
    fastest = statistics.median(1 / min(t.times) for t in bound_runs)  # the bound is 'about': up to the fastest pass
    flags = detectors.above_bound(capacity, bound, what="batch-1 serving answered",
                                  bound_name="what its median forward pass allows,", tolerance=fastest / bound - 1)
    n_passes = len(bound_runs[0].times)
    lines = [measure.flagged(measure.lines.wrap(
        f"batch-1 serving answered {capacity:.0f} requests/s (median of {len(capacity_runs)} bursts of {n_burst}, "
        f"spread {spread:.0%}); the forward pass alone allows about {bound:.0f}/s (1 / the median of {n_passes} "
        f"passes timed back to back right before each burst; its fastest pass: {fastest:.0f}/s)"), flags)]
    within = within_bound_line(capacity, bound, fastest)
    if within:  # above the median pass's bound, inside the forward pass's own range: said
        lines.append(measure.lines.wrap(within))
    base, base_name = load_basis(capacity, flags, bound)  # never a multiple of a flagged figure
    lines.append(measure.lines.wrap(f"the loads of section Measure are multiples of {base:.0f} requests/s: {base_name}"))
    return lines, flags, bound, base
