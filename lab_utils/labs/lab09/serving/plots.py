"""Lab 09's plots: a batch-size sweep, and latency against throughput per server."""
from __future__ import annotations


def plot_batch_sweep(batch_sizes, seconds, axes=None, title: str = ""):
    """Latency per batch and samples/s against the batch size (two panels); returns the axes."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    axes = axes if axes is not None else plt.subplots(1, 2, figsize=(10, 3.4))[1]
    axes[0].plot(batch_sizes, [s * 1e3 for s in seconds], "o-")
    axes[0].set_ylabel("latency of one batch (ms)")
    axes[1].plot(batch_sizes, [b / s for b, s in zip(batch_sizes, seconds)], "o-", color="tab:green")
    axes[1].set_ylabel("throughput (samples/s)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
    axes[0].set_yscale("log")
    axes[0].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    if title:
        axes[0].figure.suptitle(title)
    return axes


def plot_latency_throughput(stats: dict, ax=None, percentile: str = "p99"):
    """One curve per server: the chosen latency percentile against achieved throughput, one point per offered load."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ax = ax or plt.subplots(figsize=(6.5, 4))[1]
    servers = list(dict.fromkeys(label for label, _ in stats))
    for label in servers:
        points = sorted((s for (b, _), s in stats.items() if b == label), key=lambda s: s.offered_rps or 0)
        ax.plot([s.achieved_rps for s in points], [getattr(s, f"{percentile}_ms") for s in points], "o-", label=label)
        for s in points:
            if s.saturated:
                ax.plot(s.achieved_rps, getattr(s, f"{percentile}_ms"), "x", color="black", ms=10)
    for offered in sorted({round(s.offered_rps) for s in stats.values() if s.offered_rps}):
        ax.axvline(offered, color="grey", lw=0.8, ls=":")
        ax.annotate(f"offered {offered}/s", (offered, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    rotation=90, ha="right", va="top", color="grey")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("achieved throughput (requests/s)")
    ax.set_ylabel(f"{percentile} latency (ms)")
    ax.set_title(f"{percentile} latency against throughput (x: saturated)")
    ax.legend(fontsize=8)
    return ax
