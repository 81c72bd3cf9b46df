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


def gap_reading(sweep, small: int, large: int, how: str) -> str:
    """The closing line on one inverted pair: its gap against the spreads of the two medians it compares."""
    gap = inversion_gap(sweep, small, large, how)
    spreads = (sweep[small].spread, sweep[large].spread)
    said = f"  so: a gap of {gap:.0%} against the two medians' spreads of {spreads[0]:.0%} and {spreads[1]:.0%}:"
    if gap < max(spreads):
        return measure.lines.wrap(f"{said} noise alone can explain it; read the two sizes as equal")
    return measure.lines.wrap(f"{said} not noise alone; a cause this lab does not time")


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
