"""Lab 08's plots: accuracy against samples and wall time, staleness histograms, throughput against the straggler."""
from __future__ import annotations

import numpy as np


def plot_accuracy(curves: dict, title: str = "", untimed: dict | None = None):
    """Accuracy against samples applied (left) and against wall time (right), one line per run; `untimed` (label ->
    why) names the curves whose clock is not the others': drawn against samples only, named on the time panel. Curves
    without seconds (a replay) give the left panel alone."""
    import matplotlib.pyplot as plt

    untimed = dict(untimed or {})
    timed = {label: c for label, c in curves.items() if label not in untimed and c.get("seconds")}
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(11 if timed else 5.5, 3.4), sharey=True, squeeze=False)
    axes = axes[0]
    for label, c in curves.items():
        axes[0].plot(c["samples"], c["accuracy"], marker=".", label=label)
    axes[0].set_xlabel("samples applied to the weights")  # the prose's word: the server's, or Hogwild's in place
    axes[0].set_ylabel("test accuracy")
    if timed:
        colours = {line.get_label(): line.get_color() for line in axes[0].get_lines()}
        for label, c in timed.items():
            axes[1].plot(c["seconds"], c["accuracy"], marker=".", label=label, color=colours[label])
        axes[1].set_xlabel("wall time (s)")
        for i, (label, why) in enumerate(untimed.items()):
            axes[1].text(0.02, 0.97 - 0.15 * i, f"{label} not drawn here:\n{why}", transform=axes[1].transAxes,
                         fontsize=8, va="top")
    axes[0].legend(fontsize=8, loc="lower right")  # every curve is on the samples panel
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_staleness(results: dict, title: str = "staleness of the applied gradients"):
    """Per run (label -> server result), a histogram of the applied gradients' staleness, stacked by worker."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(3.1 * len(results), 2.8), sharey=True, squeeze=False)
    tallest = 0
    for ax, (label, result) in zip(axes[0], results.items()):
        order, staleness = np.asarray(result["order"]), np.asarray(result["staleness"])
        values, bottom = np.arange(staleness.max() + 1), np.zeros(staleness.max() + 1)
        for worker in np.unique(order):
            counts = np.bincount(staleness[order == worker], minlength=len(values))
            ax.bar(values, counts, bottom=bottom, width=0.8, label=f"worker {worker}")
            bottom += counts
        tallest = max(tallest, bottom.max())
        ax.set_title(f"{label}\nmean {staleness.mean():.2f}", fontsize=9)
        ax.set_xlabel("staleness (versions)")
    axes[0][0].set_ylabel("gradients")
    axes[0][0].set_ylim(0, 1.35 * tallest)  # room above the tallest stack for the legend (shared y)
    axes[0][-1].legend(fontsize=8, loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_throughput(factors, rates: dict, ranges: dict | None = None, unit: str = "samples/s"):
    """Rates (`unit`) against the straggler factor, one line per mode; shaded: min..max of the repeats."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.3))
    for mode, values in rates.items():
        ax.plot(factors, values, marker="o", label=mode)
        if ranges and mode in ranges:
            lo, hi = zip(*ranges[mode])
            ax.fill_between(factors, lo, hi, alpha=0.2)
    ax.set_xlabel("straggler factor k (the slow worker's whole iteration takes k x as long)")
    ax.set_ylabel(f"{unit} applied by the server")
    ax.set_xticks(list(factors))
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    return fig
