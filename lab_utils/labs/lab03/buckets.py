"""Lab 03's bucket timeline: rank 0's rounds of the bucket test drawn (one panel per bucket setting, the round
whose backward() is the median) and read in lines (the split of backward() into computing and all-reduce, the overlap)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ... import measure
from . import speed


BARS_OVERLAP = ("bars overlap each other and the computing (to the dashed line); backward() returns at the solid "
                "line,\nso the bars' lengths do not add up to it")


def in_flight_s(buckets: list[dict], until: float | None = None) -> float:
    """Seconds during which at least one bucket was being all-reduced (before `until`, where given): buckets that
    overlap each other count once, so the figure never exceeds the time it spans."""
    spans = sorted((b["start"], b["end"] if until is None else min(b["end"], until)) for b in buckets)
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        start = max(start, reach)
        if end > start:
            total, reach = total + end - start, end
    return total


def overlap(step: dict) -> tuple[int, int, float]:
    """(buckets started before the last gradient was ready, all buckets, share of the time some bucket was being
    all-reduced that lay before it)."""
    early = sum(b["start"] < step["computed"] for b in step["buckets"])
    busy = in_flight_s(step["buckets"])
    return early, len(step["buckets"]), in_flight_s(step["buckets"], step["computed"]) / busy if busy else 0.0


def split_ms(step: dict) -> tuple[float, float]:
    """(ms computing until the last gradient was ready, ms of all-reduce after it) of one round."""
    return 1e3 * (step["computed"] - step["start"]), 1e3 * (step["end"] - step["computed"])


def printed_split(step: dict) -> tuple[float, float, float]:
    """(backward() total, computing, all-reduce after it) of one round in ms, at the 1 decimal they print with, the
    last the difference of the first two as printed (learner s13r7c: 9.0 = 4.5 + 4.5 beside a title's 4.4)."""
    whole, computing = round(1e3 * (step["end"] - step["start"]), 1), round(split_ms(step)[0], 1)
    return whole, computing, round(whole - computing, 1)


def hidden_ms(step: dict) -> float:
    """ms before one round's last gradient was ready during which some bucket was being all-reduced."""
    return 1e3 * in_flight_s(step["buckets"], step["computed"])


def slowdown_line(one: tuple[str, dict], many: tuple[str, dict]) -> str:
    """The backward pass's computing with one bucket against several (median rounds), beside the all-reduce time that
    ran during it: what overlap cost the computing (learner s13r7c: 4.5 -> 8.8 ms, said by no line)."""
    (one_name, one_step), (many_name, many_step) = one, many
    before, after, beside = printed_split(one_step)[1], printed_split(many_step)[1], round(hidden_ms(many_step), 1)
    if beside <= 0:
        return f"{many_name}: no all-reduce ran before the last gradient, so none could slow the computing"
    said = (f"computing until the last gradient: {before:.1f} ms with {one_name}, {after:.1f} ms with {many_name}, "
            f"with a bucket all-reducing during {beside:.1f} ms of it: ")
    if after > before * 1.25:  # the lab's one threshold: two timings of one quantity may differ by 25 %
        return measure.short_lines(said + f"the overlap slowed the computing by {after - before:.1f} ms (the "
                                   "next cell's theory says why)")
    return measure.short_lines(said + "the computing did not slow by more than the 25% two timings may differ by")


def median_round(steps: list[dict]) -> dict:
    """The round whose backward() total is the median over all rounds (the lower middle one for an even count): the
    one the plot shows and the lines split, so its parts add up to its total (learner s13r6c: 5.8 + 0.9 != 8.3)."""
    totals = [s["end"] - s["start"] for s in steps]
    return steps[sorted(range(len(steps)), key=totals.__getitem__)[(len(steps) - 1) // 2]]


def line(name: str, steps: list[dict]) -> str:
    """One setting's reading over its rounds: the median round's backward() total and its split, and the overlap."""
    step = median_round(steps)
    whole, computing, after = printed_split(step)
    shares = [overlap(s) for s in steps]
    early, count = float(np.median([s[0] for s in shares])), shares[-1][1]
    return measure.short_lines(  # learner s12r3c: '67% of buckets, 67% of all-reduce time' read as one figure twice
        f"{name}, the median of {len(steps)} rounds: backward() {whole:.1f} ms = computing {computing:.1f} ms "
        f"until the last gradient + {after:.1f} ms of all-reduce after it; "
        f"overlap: {early:g} of {count} bucket(s) handed over before the last gradient was ready, and "
        f"{float(np.median([s[2] for s in shares])):.0%} of the time a bucket was in flight lay before it")


def wait_ms(steps: list[dict], others: list[list[dict]]) -> float:
    """Median over rounds of the time this rank's buckets waited for the slowest other rank to hand over the same
    bucket (perf_counter is one clock for every process of one machine), in ms."""
    waits = []
    for r, step in enumerate(steps):
        latest: dict[int, float] = {}
        for rounds in others:
            for b in rounds[r]["buckets"]:
                latest[b["index"]] = max(latest.get(b["index"], b["start"]), b["start"])
        waits.append(sum(max(0.0, latest.get(b["index"], b["start"]) - b["start"]) for b in step["buckets"]))
    return 1e3 * float(np.median(waits))


def timeline(rounds: dict, *, comm_ms: float, table_batch: int, batch: int, others: list | None = None):
    """(figure, lines) of rank 0's rounds (`rounds`: setting name -> its rounds, the first a warm-up, left out): each
    setting's overlap first; a last line sets the default's all-reduce beside section 6's figure (comm_ms, at
    table_batch a rank), with the wait for the other ranks (`others`: their rounds, as `rounds`) where given."""
    fig, axes = plt.subplots(len(rounds), 1, figsize=(7, 1.6 + 0.9 * len(rounds)), sharex=True)
    said, aside = [], []  # aside: section 6's figure beside this one, after the overlap's lines (a learner walk)
    for ax, (name, all_rounds) in zip(np.atleast_1d(axes), rounds.items()):
        steps = all_rounds[1:]  # the first round warms up
        step = median_round(steps)  # the plot and the line under it: one round, one split
        for b in step["buckets"]:
            ax.barh(b["index"], (b["end"] - b["start"]) * 1e3, left=(b["start"] - step["start"]) * 1e3,
                    color="tab:orange")
        ax.axvline((step["computed"] - step["start"]) * 1e3, color="k", linestyle="--")
        ax.axvline((step["end"] - step["start"]) * 1e3, color="k")  # backward() returned: every bar ends by here
        ax.set_yticks(range(len(step["buckets"])))
        ax.set_ylabel("bucket")
        ax.set_title(f"{name}: the median round, {printed_split(step)[1]:.1f} ms computing + "
                     f"{printed_split(step)[2]:.1f} ms all-reduce after it", fontsize=9)  # as the lines print it
        ax.invert_yaxis()
        said.append(line(name, steps))
        if name == "default":  # section 6 timed the same gradients' all-reduce: why the two figures need not agree
            sums = [1e3 * sum(b["end"] - b["start"] for b in s["buckets"]) for s in steps]  # as section 6 times it
            aside.append(measure.short_lines(speed.allreduce_pair(table_ms=comm_ms, table_batch=table_batch,
                                                                 sum_ms=float(np.median(sums)),
                                                                 after_ms=printed_split(step)[2],
                                                                 batch=batch, wait_ms=wait_ms(
                                                                     steps, [o[name][1:] for o in others])
                                                                 if others else None)))
    medians = [(name, median_round(all_rounds[1:])) for name, all_rounds in rounds.items()]
    if len(medians) == 2:
        said.append(slowdown_line(medians[0], medians[1]))
    said += aside
    np.atleast_1d(axes)[-1].set_xlabel(f"ms since loss.backward() began\n{BARS_OVERLAP}")
    np.atleast_1d(axes)[-1].set_xlim(left=0)  # learner s13r7c: an axis from 0.8 ms hid whether a bar was clipped
    fig.tight_layout()
    return fig, said


def medians_line(v: measure.Verdict, rounds: dict, *, faster: str, slower: str) -> str:
    """Why the timeline's two backward() medians (rank 0's rounds, `rounds` as timeline's) give another ratio than the
    bucket verdict `v` (faster's advantage over slower), said once with both figures; "" where they print alike."""
    ms = {name: printed_split(median_round(rounds[name][1:]))[0] for name in (faster, slower)}
    beside = measure.medians_beside(v, ms[slower] / ms[faster])
    return measure.short_lines(f"backward() above, {ms[faster]:.1f} vs {ms[slower]:.1f} ms: {beside}") if beside else ""
