"""Lab 10's one-sentence answers, computed from the table's rows and the fits: which way of splitting a batch pays
here (under the main table), and how far the two projections lie apart and why (under the projections)."""
from __future__ import annotations

WORKLOAD = "CNN-3conv/synthetic28 step"  # the model all three ways split (labs 02 and 03), one batch, 2 ranks
SPLITS = (("dp", "DataParallel"), ("ddp", "DDP"), ("horovod-style", "Horovod-style"))


def _readable(c) -> bool:
    """A row with a speedup the table prints as a result: not a baseline, not refused, not n/m, not flagged."""
    return not (c.is_baseline or c.speedup is None or c.refused or c.not_measurable or getattr(c, "flags", ()))


def split_answer(compared, batch: int = 256, ranks: int = 2) -> str:
    """'answer: one batch of 256 over 2 ranks: DataParallel 1.67x (lab 02), ...' with one process's threads beside
    them and theory's reason Horovod-style trails DDP; '' where the table holds none of the three."""
    def ours(c, readable=True) -> bool:
        return (c.row.batch_size == batch and c.row.workload.startswith(WORKLOAD) and not c.is_baseline
                and _readable(c) == readable)

    picked: dict[str, list[str]] = {}
    for c in sorted((c for c in compared if ours(c) and c.row.world_size == ranks), key=lambda c: c.row.lab):
        name = dict(SPLITS).get(c.row.strategy)
        if name:
            picked.setdefault(name, []).append(f"{c.speedup:.2f}x (lab {c.row.lab})")
    unread = sorted({f"{dict(SPLITS)[c.row.strategy]} (lab {c.row.lab})" for c in compared
                     if ours(c, readable=False) and c.row.world_size == ranks and c.row.strategy in dict(SPLITS)})
    if not picked:
        return ""
    threads = [f"{c.speedup:.2f}x (lab {c.row.lab})" for c in compared
               if ours(c) and c.row.world_size == 1 and (c.row.threads or 1) == ranks]
    said = "; ".join(f"{name} {' and '.join(picked[name])}" for _, name in SPLITS if name in picked)
    best = max(((float(f.split('x')[0]), name) for name, figs in picked.items() for f in figs))[1]
    text = (f"answer: one batch of {batch} split over {ranks} ranks, speedup over its lab's one process: {said}; "
            f"highest here: {best}")
    if threads:
        text += f"; one process with {ranks} threads, no split: {' and '.join(threads)}"
    if unread:  # n/m, refused or flagged in the table: no figure of theirs is an answer
        text += f"; not read here (n/m or [!] in the table): {', '.join(unread)}"
    if "Horovod-style" in picked and "DDP" in picked:
        text += (". Theory for Horovod-style's place (lab 03): it all-reduces each gradient tensor in a call of its "
                 "own, each paying a call's fixed cost, where DDP sends them all in one bucket")
    return text


def implied_s(speedup: float, n: float) -> float:
    """The serial fraction Amdahl's law gives one speedup on n devices: (1/S - 1/n) / (1 - 1/n)."""
    return (1 / speedup - 1 / n) / (1 - 1 / n)


def projections_apart(n: int, amdahl: float, compute_ar: float, m: float, measured: float, model_m: float) -> str:
    """Why Amdahl's projection and compute+all-reduce's differ on n devices, computed: at the fitted device count m,
    each as a serial fraction (the measured row's s against the one compute+all-reduce's own figure implies); what
    the model leaves out, Amdahl carries to n devices."""
    s, s_model = implied_s(measured, m), implied_s(model_m, m)
    return (f"why the two differ on {n} devices ({amdahl:.2f}x vs {compute_ar:.2f}x): on {m:g} the row measured "
            f"{measured:.2f}x, compute+AR predicts {model_m:.2f}x; as serial fractions, s = {s:.3f} measured, "
            f"{s_model:.3f} in the model (one rank's compute and the all-reduce): the other {s - s_model:.3f} is time "
            "the measured step lost that the model leaves out, and Amdahl carries it to more devices")


def s_range(speedup: float, n: float, spread: float) -> tuple[float, float] | None:
    """The serial fraction's range where one row's speedup moves by `spread` with its repeats (half each way); None
    where the spread is unknown (inf)."""
    if spread == float("inf"):
        return None
    low, high = speedup * (1 - spread / 2), speedup * (1 + spread / 2)
    return implied_s(high, n), implied_s(max(low, 1e-9), n)


def s_range_line(s: float, speedup: float, n: float, spread: float) -> str:
    """'  s = 0.252 moves with its row's speedup: 0.02-0.61 ...' for a fit to one row (learner s11r2g: s read as
    precise beside speedups that spread ~50 %); '' where the spread is unknown."""
    span = s_range(speedup, n, spread)
    if span is None:
        return ""
    return (f"  how precise: the row's speedup moves {spread:.0%} with its repeats (its rate's spread plus its "
            f"baseline's), so s = {s:.3f} could lie anywhere in {span[0]:.2f}-{span[1]:.2f}: read it, and what it "
            "projects, as that rough")
