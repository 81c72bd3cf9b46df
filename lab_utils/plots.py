"""Timeline (Gantt) and stacked-bar charts drawn from measured intervals."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """One measured piece of work: on which row, which kind, when (seconds), and an optional bar label."""

    row: str
    kind: str
    start_s: float
    end_s: float
    label: str = ""

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


def kind_colors(kinds) -> dict:
    """One tab10 colour per kind, in order."""
    import matplotlib.pyplot as plt

    palette = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]  # tab10 is a ListedColormap, which has them
    return {kind: palette[i % len(palette)] for i, kind in enumerate(kinds)}


THIN = 0.01  # a bar narrower than this share of the axis cannot be seen: it gets an outline and a label


def thin_groups(bars, span: float, *, thin: float = THIN) -> list[tuple[float, float, str]]:
    """(start, end, label) for each run of bars too thin to see on an axis `span` wide; `bars`: (start, width, kind)
    of one row. Neighbouring thin bars (closer than `thin` of the span) share one label: their kinds and total time."""
    groups: list[list[tuple[float, float, str]]] = []
    for start, width, kind in sorted(b for b in bars if 0 < b[1] < thin * span):
        if groups and start - groups[-1][-1][0] - groups[-1][-1][1] < thin * span:
            groups[-1].append((start, width, kind))
        else:
            groups.append([(start, width, kind)])
    return [(g[0][0], g[-1][0] + g[-1][1], f"{'+'.join(dict.fromkeys(k for _, _, k in g))} {sum(w for _, w, _ in g):.2g}")
            for g in groups]


def _label_thin(ax, y: float, bars, span: float, unit: str) -> None:
    """Labels the bars of row `y` too thin to see (their kinds and time), beside them at the row's middle."""
    right = max((start + width for start, width, _ in bars), default=0.0)
    for start, end, text in thin_groups(bars, span):
        late = end > right - 0.2 * span  # near the row's end: the label goes to the bar's left, inside the axis
        ax.annotate(f"{text} {unit}", xy=((start + end) / 2, y), xytext=(-2 if late else 2, 0),
                    textcoords="offset points", ha="right" if late else "left", va="center", fontsize=6, bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none",
                                                                   alpha=0.8))


def gantt(intervals, ax=None, *, rows=None, title: str = "", unit: str = "ms", colors: dict | None = None,
          xlabel: str | None = None):
    """One row per `row`, one coloured bar per interval (colour by kind), labels on the bars; returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    intervals = list(intervals)
    if not intervals:
        raise ValueError("nothing to draw: the timeline has no intervals")
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    rows = list(rows or dict.fromkeys(i.row for i in intervals))
    kinds = list(dict.fromkeys(i.kind for i in intervals))
    colors = colors or kind_colors(kinds)
    ax = ax or plt.subplots(figsize=(9, 0.6 + 0.5 * len(rows)))[1]
    low, high = min(i.start_s for i in intervals) * scale, max(i.end_s for i in intervals) * scale
    span = (high - low) or 1.0
    for i in intervals:
        y = rows.index(i.row)
        thin = i.seconds * scale < THIN * span  # outlined in its own colour, so that it shows at all
        ax.broken_barh([(i.start_s * scale, i.seconds * scale)], (y - 0.4, 0.8), facecolors=colors[i.kind],
                       edgecolor=colors[i.kind] if thin else "white", linewidth=1.0 if thin else 0.5)
        if i.label:
            ax.text((i.start_s + i.seconds / 2) * scale, y, i.label, ha="center", va="center", fontsize=7)
    for y, row in enumerate(rows):  # a bar with a label of its own (a micro-batch's number) keeps that one
        _label_thin(ax, y, [(i.start_s * scale, i.seconds * scale, i.kind) for i in intervals
                            if i.row == row and not i.label], span, unit)
    ax.gantt_xlim = (low - 0.01 * span, high + 0.01 * span)  # from the data: no bar runs off the axis
    drawn: list[tuple[float, float]] = [lim for a in ax.get_shared_x_axes().get_siblings(ax)
                                        if (lim := getattr(a, "gantt_xlim", None))]  # charts sharing this x-axis: the range covers every one's ops
    ax.set_xlim(min(lim[0] for lim in drawn), max(lim[1] for lim in drawn))
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel or f"time ({unit})")
    ax.legend(handles=[Patch(color=colors[k], label=k) for k in kinds], loc="upper left", bbox_to_anchor=(1.0, 1.0),
              fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def stacked_bars(seconds: dict, ax=None, *, title: str = "", unit: str = "ms"):
    """seconds[row][kind] -> one horizontal stacked bar per row; returns the axes."""
    import matplotlib.pyplot as plt

    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    rows = list(seconds)
    kinds = list(dict.fromkeys(k for parts in seconds.values() for k in parts))
    colors = kind_colors(kinds)
    ax = ax or plt.subplots(figsize=(8, 0.6 + 0.5 * len(rows)))[1]
    left = [0.0] * len(rows)
    drawn: list[list[tuple[float, float, str]]] = [[] for _ in rows]
    for kind in kinds:
        widths = [seconds[r].get(kind, 0.0) * scale for r in rows]
        ax.barh(range(len(rows)), widths, left=left, color=colors[kind], label=kind)
        for y, (start, width) in enumerate(zip(left, widths)):
            drawn[y].append((start, width, kind))
        left = [a + b for a, b in zip(left, widths)]
    span = max(left, default=0.0) or 1.0
    for y, bars in enumerate(drawn):
        _label_thin(ax, y, bars, span, unit)
    ax.set_xlim(0, span * 1.02)  # from the data: no bar runs off the axis
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def rank_tensors(before, after, *, title: str = "", ax=None):
    """What each rank holds before and after a collective: one row per rank, each tensor drawn as numbered cells."""
    import matplotlib.pyplot as plt

    before, after = [list(map(float, t)) for t in before], [list(map(float, t)) for t in after]
    ranks, width = len(before), max(len(t) for t in before + after)
    ax = ax or plt.subplots(figsize=(1.2 + 0.9 * 2 * width, 0.5 + 0.6 * ranks))[1]
    values = [v for t in before + after for v in t]
    low, high = min(values), max(values)
    cmap = plt.get_cmap("Blues")
    for column, tensors in enumerate((before, after)):
        left = column * (width + 1.5)
        for rank, tensor in enumerate(tensors):
            for i, v in enumerate(tensor):
                shade = 0.15 + 0.6 * ((v - low) / (high - low) if high > low else 0.5)
                ax.add_patch(plt.Rectangle((left + i, -rank - 0.4), 0.95, 0.8, color=cmap(shade)))
                ax.text(left + i + 0.47, -rank, f"{v:g}", ha="center", va="center", fontsize=8)
        ax.text(left + width / 2, 0.75, ("before" if column == 0 else "after"), ha="center", fontsize=9)
    ax.set_yticks([-r for r in range(ranks)], [f"rank {r}" for r in range(ranks)])
    ax.set_xticks([])
    ax.set_xlim(-0.2, 2 * width + 1.7)
    ax.set_ylim(-ranks + 0.4, 1.1)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
