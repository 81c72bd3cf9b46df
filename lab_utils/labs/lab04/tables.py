"""Lab 04's own table cells and lines: refused columns print n/m, and a bubble is shown with its ideal and theory."""
from __future__ import annotations

from ... import measure

WIDTHS = (9, 10, 10, 8, 15)  # 'vs naive', '= overlap', 'x compute', 'bubble', 'steps'


def speed_cells(vs_naive: float, overlap: float, compute: float, bubble: float, bubbles, refused: bool) -> str:
    """The GPipe table's load-dependent columns (vs naive, overlap, compute, bubble, steps), or n/m in each where the
    load refuses them: a refused figure is not printed, so that no eye reads it before the line that refuses it."""
    if refused:
        return "".join(f"{measure.N_M:>{w}}" for w in WIDTHS)
    steps = f"{min(bubbles):.3f}-{max(bubbles):.3f}"
    return (f"{vs_naive:>8.2f}x{overlap:>9.2f}x{compute:>9.2f}x{bubble:>8.3f}{steps:>15}")


def bubble_line(measured: float, ideal: float, theory: float, refused: bool) -> str:
    """One bubble three ways on one line: measured (n/m where the load refuses it), ideal (the schedule with this
    run's own stage times) and theory (equal stages, free transfers)."""
    shown = measure.N_M if refused else f"{measured:.3f}"
    return f"bubble measured {shown}, ideal {ideal:.3f} (these stage times), theory {theory:.3f} (equal stages)"


def pool_line(layer_types, times, batch: int) -> str:
    """Each max-pool's time over the convolution's before it, on one line ('' without a pool after a convolution)."""
    pairs = []
    for i, kind in enumerate(layer_types):
        conv = next((j for j in range(i - 1, -1, -1) if layer_types[j] == "conv2d"), None)
        if kind == "maxpool2d" and conv is not None and times[conv] > 0:
            pairs.append(f"layer {i} {times[i] / times[conv]:.2f}x layer {conv}")
    return f"max-pool over the convolution before it (batch {batch}): {', '.join(pairs)}" if pairs else ""
