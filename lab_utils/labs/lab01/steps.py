"""Lab 01's reading of one training run's step times (median against mean), of its reference rows' noise and
threads, and of which earlier rows its results table compared."""
from __future__ import annotations

import datetime as _dt
import math
import statistics

from ... import detectors, measure
from ...measure.plausible import BASELINE_FACTOR
from ...measure.results_table import SAME_RUN_S, same_quantity_before, store

EXPLAINS = 0.8  # mean/median explains this share of the rates' gap or more: it explains the gap
SLOW = 2.0  # a step over this many times the median step waited for something: the same work takes the same time


def gap_share(mean: float, median: float, training_rate: float, epoch_rate: float) -> float | None:
    """The share of the rates' gap (training rate / epoch rate) that mean step / median step explains, on a log
    scale; None where the epoch rate is not below the training rate (no gap to explain)."""
    if training_rate <= epoch_rate:
        return None
    return math.log(mean / median) / math.log(training_rate / epoch_rate)


def _close_reading(mean: float, median: float, rates: tuple[float, float] | None) -> str:
    """Steps within TWICE_TOLERANCE of each other: how much of the rates' gap the mean-vs-median gap explains."""
    mix = f"mean step {mean / median:.3f}x the median"
    if rates is None:
        return f"{mix}: no slow stretch of steps (within {detectors.TWICE_TOLERANCE:.0%})"
    training_rate, epoch_rate = rates
    share = gap_share(mean, median, training_rate, epoch_rate)
    gap = f"the training rate {training_rate / epoch_rate:.3f}x the epoch rate"
    if share is None:
        return (f"{mix}; the epoch rate is not below the training rate, so there is no gap for the mean step, "
                "the short batch or the epoch's start to explain")
    if share >= EXPLAINS:
        return (f"{mix}, {gap}: the mean step explains {min(share, 1):.0%} of that gap, so the epoch is slower "
                "because it follows the mean step; its short batch and its start cost about nothing more")
    return (f"{mix}, {gap}: the mean step explains {max(share, 0):.0%} of that gap (an epoch follows the mean "
            "step); the rest is the epoch's short batch and its start")


def step_mix(step_seconds: list[float], rates: tuple[float, float] | None = None) -> str:
    """What the timed steps' median and mean say about the two rates (training, epoch): close (within
    TWICE_TOLERANCE), how much of the rates' gap the mean-vs-median gap explains; the mean pulled up by slow steps
    (how many, how slow, whether every other one), and which rate later labs compare; or the mean below a slow
    median (the epoch rate then the higher)."""
    median, mean = statistics.median(step_seconds), statistics.mean(step_seconds)
    if mean < median * (1 - detectors.TWICE_TOLERANCE):  # many fast steps below a slow median: the epoch comes out faster
        return (f"mean step {mean / median:.2f}x the median: the median is one of the slow steps and many faster ones "
                "pull the mean below it, so here the epoch rate (the mean) comes out above the training rate (the "
                "median); steps this uneven waited for something: rerun on a quiet machine")
    if mean <= median * (1 + detectors.TWICE_TOLERANCE):
        return _close_reading(mean, median, rates)
    slow = [t > SLOW * median for t in step_seconds]
    count = sum(slow)
    # every other step: a slow step, a fast one, a slow one again, for most of the slow steps (a stretch of them)
    turns = sum(a and not b and c for a, b, c in zip(slow, slow[1:], slow[2:]))
    every_other = count >= 4 and turns >= 0.6 * count
    typical = statistics.median([t for t, s in zip(step_seconds, slow) if s]) if count else mean
    return (f"mean step {mean / median:.2f}x the median: {count} of {len(slow)} steps took over {SLOW:g}x it "
            f"(median of those {typical * 1e3:.1f} ms against {median * 1e3:.2f} ms)"
            + (", about every other step" if every_other else "")
            + ". The work of a step does not change, so a slow step waited: for a core another program held, or for "
              "this process's own pauses (the garbage collector, the loader). The training rate (the median) is the "
              "speed of a step that did not wait, the figure later labs compare; the epoch rate adds the waits")


def epoch_lines(step_seconds: list[float], training_rate: float, epoch_rate: float, epochs: int | None = None) -> list[str]:
    """The epoch rate (the median of the epochs' rates, the first epoch excluded; `epochs`: how many ran) read against
    the training rate in one line: how much lower, and how much of that the mean step (an epoch follows it) explains,
    the rest named; steps too uneven for that add step_mix's line on the slow steps."""
    median, mean = statistics.median(step_seconds), statistics.mean(step_seconds)
    which = f"epochs 2-{epochs}" if epochs and epochs > 2 else "the epochs after the first"
    head = f"epoch rate:    {epoch_rate:8,.0f} samples/s (the median of the rates of {which})"
    mix = f"mean step {mean / median:.3f}x the median"
    if abs(mean / median - 1) > detectors.TWICE_TOLERANCE:  # uneven steps: the slow ones are the story
        return [head, step_mix(step_seconds, (training_rate, epoch_rate))]
    share = gap_share(mean, median, training_rate, epoch_rate)
    if share is None:
        return [f"{head}: not below the training rate ({mix})"]
    gap, longer = training_rate / epoch_rate - 1, mean / median - 1  # per image, per step: how much longer
    rest = (training_rate / epoch_rate) / (mean / median) - 1 if longer > 0 else gap
    said = f"{head}: an image took {_pct(gap)} longer than at the training rate"
    if share > 1 / EXPLAINS:  # the mean of every step is no cause: it exceeds the effect by more than noise
        return [f"{said}, less than the {_pct(longer)} by which the mean of all {len(step_seconds)} steps exceeds "
                "their median: that mean counts the slowest epochs' steps too, while the epoch rate is the median "
                "epoch's, which leaves them out"]
    tail = f"; the other {_pct(rest)} is each epoch's short batch and its start" if rest >= 0.0005 else ""
    if share >= EXPLAINS:
        return [f"{said}, because an epoch follows the mean step, {_pct(longer)} longer than the median step{tail}"]
    if longer <= 0:
        return [f"{said}; the mean step (an epoch follows it) is no longer than the median step: all of it is each "
                "epoch's short batch and its start"]
    return [f"{said}; the mean step (an epoch follows it) is only {_pct(longer)} longer than the median step{tail}"]


def epoch_pace_line(history) -> str | None:
    """Why the epochs after the first took different seconds, from the run: each did the same work (its steps
    counted), so the model did not get cheaper; their median steps' spread says whether every step or a few moved."""
    later = history.epochs[1:]
    if len(later) < 2:
        return None
    seconds = [e.seconds for e in later]
    fastest, slowest = min(later, key=lambda e: e.seconds), max(later, key=lambda e: e.seconds)
    steps = sorted(set(history.steps_per_epoch[1:]))
    work = (f"the same {steps[0]}" if len(steps) == 1 else f"{steps[0]}-{steps[-1]}") + \
        f" full steps of {history.batch_size} images"
    by_seconds, by_medians = measure.spread(seconds), history.spread  # the training rate's spread, as section 4 prints
    few = by_medians < by_seconds / 2
    cause = (f"only {by_medians:.0%}: " if few else f"{by_medians:.0%} too: ") + _spread_cause(history)
    return (f"epochs 2-{len(history.epochs)} took {min(seconds) * 1e3:.1f} to {max(seconds) * 1e3:.1f} ms (fastest: "
            f"epoch {fastest.epoch}, slowest: epoch {slowest.epoch}; their seconds spread by {by_seconds:.0%}): each "
            f"ran {work} on the same model, so no epoch was cheaper; their median steps spread by {cause}")


def _spread_cause(history) -> str:
    """Why the epochs after the first took different seconds, read from their median steps (computed once, said in
    section 3's line and in the results table's noise line): a few slow steps, or most steps of some epochs."""
    seconds = [e.seconds for e in history.epochs[1:]]
    if history.spread < measure.spread(seconds) / 2:
        return ("a few slow steps made the slower epochs (steps that waited for a core another program held, or for "
                "this process's own pauses)")
    return "most steps of the faster epochs were faster, so the machine ran faster then (fewer other programs, a higher clock)"


def first_epoch_line(history) -> str | None:
    """Theory's prediction that epoch 1 is the slowest (it pays the warm-up steps), checked against the table."""
    if len(history.epochs) < 2:
        return None
    first, slowest = history.epochs[0], max(history.epochs[1:], key=lambda e: e.seconds)
    said = (f"epoch 1 took {first.seconds * 1e3:.1f} ms; theory predicts it the slowest, as it pays the "
            f"{history.warmup_steps} warm-up steps: ")
    if first.seconds > slowest.seconds:
        return said + f"holds (the slowest later epoch, epoch {slowest.epoch}, took {slowest.seconds * 1e3:.1f} ms)"
    return said + f"not here: epoch {slowest.epoch} took longer, {slowest.seconds * 1e3:.1f} ms"


def training_noise_line(history) -> str | None:
    """The results table's noise line for the training run row: its spread is section 4's, and its cause the one
    section 3's line gave; None where the spread is within NOISY_SPREAD."""
    if not detectors.noisy_as_printed(history.spread):
        return None
    cause = f"as the line under section 3's table says, {_spread_cause(history)}: " if len(history.epochs) > 2 else ""
    return (f"noise: the training run's spread, {history.spread:.0%} over its epochs' median steps, is section 4's; "
            f"{cause}read its median only")


def _pct(fraction: float) -> str:
    """A small fraction as a percentage with one decimal: 0.044 -> '4.4 %'."""
    return f"{fraction * 100:.1f} %"


def reference_noise(spreads: dict, steps: int) -> str | None:
    """One line for the reference rows whose steps spread more than NOISY_SPREAD (`spreads`: row name -> spread): read
    their medians only; later labs flag their own rate only more than 2x away from them, so the rows still serve;
    None when every row's steps agree."""
    noisy = {name: s for name, s in spreads.items() if detectors.noisy_as_printed(s)}
    if not noisy:
        return None
    widest = max(noisy.values())
    if len(spreads) == 1:
        head, which = f"the row's {steps} steps spread {widest:.0%}, above {detectors.NOISY_SPREAD:.0%}", "its median"
    else:
        head = (f"{len(noisy)} of {len(spreads)} rows spread more than {detectors.NOISY_SPREAD:.0%} over their {steps} "
                f"steps (the widest {widest:.0%})")
        which = "their medians" if len(noisy) > 1 else "the medians"
    return (f"noise: {head}: read {which} only. A noisy row still serves: later labs flag a rate of theirs only when "
            f"it is more than {BASELINE_FACTOR:g}x away from it")


def _before(other, now: _dt.datetime) -> str:
    """How long before `now` the row `other` was recorded, in words."""
    try:
        seconds = (now - _dt.datetime.fromisoformat(other.timestamp)).total_seconds()
    except (TypeError, ValueError):
        return "earlier"
    return f"{seconds:.0f} s before" if seconds < 120 else f"{seconds / 60:.0f} min before"


def compared_rows(results, directory=None, hw=None) -> str:
    """Which earlier rows the results table compared each of `results` with (measure.record's rule: the same quantity,
    on this machine, recorded by another lab within SAME_RUN_S), or that there were none."""
    rows = [r.stamped(hw) for r in results]
    window = f"{SAME_RUN_S / 3600:g} hours"
    found = {r.variant or r.strategy: same_quantity_before(r, directory, rows[:i], rows)
             for i, r in enumerate(rows)}
    if not any(found.values()):
        return (f"compared with: none: no other lab recorded these quantities on this machine in the last {window}, "
                "so no row above was checked against another" + _other_workloads(rows, directory))
    now = _dt.datetime.fromisoformat(rows[0].timestamp)
    said = [f"compared with the same quantity recorded on this machine in the last {window}:"]
    for name, others in found.items():
        said.append(f"    {name}: " + ("; ".join(f"lab {o.lab} ({o.variant or o.strategy}, rate {o.samples_per_s:,.0f}), "
                                                 f"{_before(o, now)}" for o in others) if others else "none"))
    return "\n".join(said)


def _other_workloads(rows, directory=None) -> str:
    """Which other labs' rows of the last SAME_RUN_S are another workload than `rows` (so never compared), as a
    clause: '; lab 00's rows are another workload (...)'; '' if none."""
    ours = {r.workload for r in rows}
    now = _dt.datetime.fromisoformat(rows[0].timestamp)
    others: dict[str, set[str]] = {}
    for other in store(directory).rows("results"):
        if other.lab in {r.lab for r in rows} or other.workload in ours or \
                (other.machine and rows[0].machine and other.machine.fingerprint != rows[0].machine.fingerprint):
            continue
        try:
            if abs((now - _dt.datetime.fromisoformat(other.timestamp)).total_seconds()) > SAME_RUN_S:
                continue
        except (TypeError, ValueError):
            continue
        others.setdefault(other.lab, set()).add(other.workload)
    return "".join(f"; lab {lab}'s rows are another workload ({', '.join(sorted(names))})"
                   for lab, names in sorted(others.items()))


def threads_reading(ratio: float, threads: int) -> str:
    """The reference workload's `threads` intra-op threads against one (a ratio of two medians), read against theory's
    prediction: faster than one, at most `threads` times; beyond that by more than noise, its flag above says why."""
    if ratio > threads * (1 + detectors.ABOVE_100_NOISE):
        return (f"{ratio:.2f}x is above the at most {threads}x that {threads} threads can give: "
                "see its flag above")
    noise = detectors.ABOVE_100_NOISE
    if ratio > threads:  # efficiency above 100 %, by less than noise: the unclamped figure, read as about 100 %
        return (f"{ratio:.2f}x, above the at most {threads}x by less than the {noise:.0%} that noise moves a ratio "
                f"(efficiency {ratio / threads:.0%}): about the predicted {threads}x")
    if 1 / (1 + noise) <= ratio <= 1 + noise:
        return (f"{ratio:.2f}x, within the {noise:.0%} that noise moves a ratio of 1x: too close to one thread to "
                f"tell a gain (predicted: faster, at most {threads}x); rerun on a quiet machine")
    if ratio > 1:
        return (f"{ratio:.2f}x, within the predicted at most {threads}x (efficiency "
                f"{ratio / threads:.0%}): the rest is the part of each step that does not split (small "
                "operators, the threads' wait for each other at each operator's end)")
    return (f"{ratio:.2f}x, no faster than one thread, against the prediction: an operator ends when its "
            "last thread ends, so a thread that waited for a core (another program's) stalls every operator; "
            "rerun on a quiet machine")


def backward_arithmetic(conv_macs: list[int]) -> float:
    """Theory's backward/forward arithmetic of convolutions whose forwards cost `conv_macs` multiply-adds, in order:
    each computes a weight gradient and an input gradient (2x its forward), the first only the weight gradient
    (its input, the images, needs none)."""
    return (conv_macs[0] + 2 * sum(conv_macs[1:])) / sum(conv_macs)


def backward_reading(forward_ms: float, backward_ms: float, arithmetic: float) -> str:
    """The convolutions' backward/forward time read against theory's range: from 1x (each call's fixed cost rules)
    to `arithmetic` (the arithmetic rules), each end widened by the ABOVE_100_NOISE that noise moves a ratio."""
    ratio = backward_ms / forward_ms
    noise = detectors.ABOVE_100_NOISE
    said = f"backward/forward {ratio:.2f}x; predicted 1x to {arithmetic:.2f}x: "
    if ratio > arithmetic * (1 + noise):
        return said + ("above the range, against the prediction: a few slow backward calls (another program on the "
                       "core) are enough over 10 steps: run the cell again")
    if ratio < 1 / (1 + noise):
        return said + ("below 1x, against the prediction: a few slow forward calls (another program on the core) "
                       "are enough over 10 steps: run the cell again")
    if ratio >= arithmetic / (1 + noise):
        return said + "within the range, at its arithmetic end: the arithmetic rules these convolutions' time"
    return said + ("within the range, below the arithmetic's figure: each call also pays a fixed cost (dispatch, "
                   "kernel choice, memory) that does not grow with the arithmetic and pulls the ratio toward 1x")
