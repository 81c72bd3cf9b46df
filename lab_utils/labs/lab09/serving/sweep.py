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
