"""Section Measure's report on the grid of servers x loads (medians of interleaved rounds, LoadStats each): its table,
the pairs whose latencies the queueing model orders, and whether every server kept up at the low load."""
from __future__ import annotations

from .... import measure
from .figures import TERMS, LoadStats, behind_at_low


def grid_table(grid: dict) -> list[str]:
    """The legend, the header, then per load its line (offered and arrived) and one row per server."""
    out = [TERMS, LoadStats.HEADER]
    for load in dict.fromkeys(at for _, at in grid):
        rows = [stats for (_, at), stats in grid.items() if at == load]
        out.append(rows[0].load_line())
        out += [stats.text() for stats in rows]
    return out


def against_model(grid: dict, max_waits_ms) -> list[str]:
    """Where the grid's medians order two servers against the model (at one load, a longer max_wait with a lower p50;
    with no wait, a lower p99 at the higher load, both kept up), and whether every round orders them so."""
    pairs = []
    for load in dict.fromkeys(at for _, at in grid):
        waits = [f"max_wait={w}ms" for w in sorted(max_waits_ms) if not grid[(f"max_wait={w}ms", load)].saturated]
        pairs += [("p50_ms", (short, load), (long, load)) for short, long in zip(waits, waits[1:])]
    for server in ("batch-1", "max_wait=0ms"):
        if not any(grid[(server, load)].saturated for load in ("low", "high")):
            pairs.append(("p99_ms", (server, "low"), (server, "high")))
    lines = []
    for what, lower, higher in pairs:  # the model: `higher` has the larger latency
        a, b = grid[lower], grid[higher]
        if getattr(b, what) >= getattr(a, what):
            continue
        every = all(getattr(rb, what) < getattr(ra, what) for ra, rb in zip(a.runs, b.runs))
        lines.append(measure.lines.wrap(
            f"against the model: {what[:3]} of {higher[0]} at the {higher[1]} load {getattr(b, what):.1f} ms, "
            f"below {lower[0]} at the {lower[1]} load {getattr(a, what):.1f} ms; "
            + ("every round orders them so: an effect the model leaves out, not noise" if every
               else "the rounds disagree, so this order is the rounds' noise, not an effect")))
    return lines or [measure.lines.wrap("the medians above order every pair the model orders (a longer wait, or more "
                                        "load with no wait: more latency)")]


def low_load_line(grid: dict, load=None) -> str:
    """Whether every server kept up at the low load (sized below the loads' rate: one that saturated there
    contradicts that rate, flagged with the machine's `load` while the grid ran)."""
    behind = {label: s for (label, at), s in grid.items() if at == "low" and s.saturated}
    return measure.flagged(f"at the low load every server kept up: {not behind}",
                           [behind_at_low(label, s, load) for label, s in behind.items()][:1])


def p99_depth_line(grid: dict, run_s: float) -> str:
    """How few requests each load's p99 rests on: a round's request count (the median over its rounds and servers)
    and its slowest 1 % (learner s12r3h: a p99 of ~100 requests is its one or two slowest, never said)."""
    import math
    import statistics

    counts: dict[str, list[int]] = {}
    for (_, load), stats in grid.items():
        counts.setdefault(load, []).extend(r.requests for r in stats.runs)
    parts = [f"about {n:.0f} requests per round at the {load} load (its {max(1, math.ceil(n / 100))} slowest)"
             for load, n in ((load, statistics.median(c)) for load, c in counts.items() if c)]
    return measure.lines.wrap(f"each p99 rests on a round's slowest 1 %: {'; '.join(parts)}. A p99 moves with those "
                              f"few requests (its p99 spread column); a run_s longer than {run_s:g} s gives it more")


def batch1_high_lines(capacity_rps: float, capacity_spread: float, b1, offered_rps: float,
                      run_s: float) -> tuple[list[str], list]:
    """Batch-1 serving at the high load: what it answered beside its bursts' capacity, its backlog where it saturated,
    and its capacity measured a second time (saturated, it answers as fast as it can); (lines, the flags of that)."""
    from .figures import capacity_agreement

    backlog = ((b1.arrived_rps or b1.offered_rps) - b1.achieved_rps) * run_s  # requests waiting when the run ended
    lines = [measure.lines.wrap(
        f"batch-1 serving answered about {capacity_rps:.0f} requests/s in its bursts; offered {offered_rps:.0f}/s it "
        f"answered {b1.achieved_rps:.0f}/s (saturated: {b1.saturated}), p99 {b1.p99_ms:.0f} ms"
        + (f":\n  its queue grew by about {backlog:.0f} requests over the {run_s:g} s run, so its latency grows with "
           "the run's length" if b1.saturated else ""))]
    if not b1.saturated:
        return lines, []
    said, twice = capacity_agreement(capacity_rps, capacity_spread, b1.achieved_rps, b1.spread_rps)
    return lines + [measure.flagged(measure.lines.wrap(f"  {said}"), twice)], twice
