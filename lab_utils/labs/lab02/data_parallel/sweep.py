"""The comparison lab 02 and `bench dp` run: DataParallel and threads against one device, over batch sizes."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from .... import conditions, data, hardware, measure, spec, workloads
from .... import detectors
from .devices import DevicePlan, plan_devices
from .phases import COORDINATOR_PHASES, median_phase_seconds, unaccounted_seconds
from .threads import settle, single_device_step

SWEEP_WORKLOAD = workloads.SWEEP_3CONV.name
STEPS_IN_A_ROW = 4  # steps a sweep round times per candidate, as the launched run of lab 02 does (compare_steps)
ONE_DEVICE = "1 device"


def threaded_name(n_devices: int) -> str:
    """The sweep's candidate that gives one device's step `n_devices` intra-op threads."""
    return f"1 device x {n_devices} threads"


def dp_name(n_devices: int) -> str:
    """The sweep's DataParallel candidate."""
    return f"DataParallel, {n_devices} devices"


@dataclass(frozen=True)
class Sweep:
    """What `sweep` measured: one result per candidate and batch size, and each device's median phases."""

    plan: DevicePlan
    repeats: int
    results: tuple[measure.Result, ...]
    phase_ms: dict  # batch size -> device row -> phase -> median ms
    timings: dict = field(default_factory=dict)  # batch size -> candidate -> measure.Timing (its interleaved repeats)
    load: conditions.Load | None = None  # the machine over the sweep's own windows: every line on its speedups reads it
    step_ms: dict = field(default_factory=dict)  # batch size -> median traced DataParallel step, ms
    unaccounted_ms: dict = field(default_factory=dict)  # batch size -> median over steps of each step's unaccounted ms
    unaccounted_steps_ms: dict = field(default_factory=dict)  # batch size -> each timed step's unaccounted ms
    steps: int = 1  # steps timed in a row per candidate per round (each repeat is their mean)

    @property
    def n_devices(self) -> int:
        return len(self.plan.devices)

    @property
    def batch_sizes(self) -> list[int]:
        return list(dict.fromkeys(r.batch_size for r in self.results))

    def result(self, batch_size: int, variant: str) -> measure.Result:
        """The row of one candidate (ONE_DEVICE, threaded_name(n) or dp_name(n)) at one batch size."""
        for r in self.results:
            if r.batch_size == batch_size and r.variant == variant:
                return r
        raise KeyError(f"no result {variant!r} at batch {batch_size}")

    def speedup(self, batch_size: int, variant: str) -> float:
        """A candidate's advantage over one device (one thread on a CPU) at the same batch: the median of their paired
        ratios over the interleaved rounds, the figure a verdict on the two prints (measure.paired_median)."""
        timings = self.timings[batch_size]
        return measure.paired_median(timings[variant], timings[ONE_DEVICE])

    def speedup_range(self, batch_size: int, variant: str) -> tuple[float, float]:
        """The range that holds `speedup` with the verdicts' confidence (measure.ratio_range of the paired ratios):
        how far this comparison moves from round to round."""
        timings = self.timings[batch_size]
        low, high, _ = measure.ratio_range(measure.paired_ratios(timings[variant], timings[ONE_DEVICE]))
        return low, high


def _sweep_result(variant, strategy, world_size, threads, batch, timing, baseline, device, hw,
                  refused: bool = False) -> measure.Result:
    """One candidate's row, flagged when its figures cannot be right; `refused`: the run refuses its speedup
    (refused()), so no flag reads it (the table prints none)."""
    resources = world_size * (threads or 1)
    speedup = measure.paired_median(timing, baseline) if resources > 1 else None
    flags = measure.plausibility(speedup=speedup, devices=resources, refused=refused,
                                 oversubscribed=not hw.gpus and resources > hw.cpu_count,
                                 threads=threads if world_size == 1 and (threads or 1) > 1 else None)
    return measure.Result(lab="02", framework="torch", strategy=strategy, variant=variant, workload=SWEEP_WORKLOAD,
                          world_size=world_size, device=str(device), batch_size=batch,
                          samples_per_s=measure.samples_per_second(batch, timing.median), wall_s=timing.median,
                          threads=threads, repeats=len(timing.times), spread=timing.spread, flags=tuple(flags))


def time_in_rounds(fns: dict, *, steps: int, warmup: int, repeats: int, device=None) -> dict:
    """{name: Timing per step} of `fns` (one step each) in `warmup` + `repeats` interleaved rounds of `steps` calls in a
    row, a repeat being its round's time per step. Each round starts once the last one's OpenMP threads stopped
    spinning (settle: a threads candidate's spin took the next one's cores); its steps then run in a row, as lab 02's
    launched run times them: a step timed alone after that idle wait also pays to wake the sleeping threads
    (learner s13r6b's quiet run: the sweep 1.23x, launched 1.65x; probed near quiet in fresh processes, batch 256:
    DataParallel's step 0-8 % slower timed alone, its spread 20-41 % against 13-16 % in rounds of 4)."""
    if steps < 1:
        raise ValueError(f"need steps >= 1, got {steps}")
    rounds = measure.time_interleaved({n: (lambda f=f: [f() for _ in range(steps)]) for n, f in fns.items()},
                                      warmup=warmup, repeats=repeats, device=device, before={n: settle for n in fns})
    return {n: measure.Timing(tuple(t / steps for t in r.times), r.warmup) for n, r in rounds.items()}


def sweep(parallel_class, *, n_devices: int = 2, batch_sizes=(16, 256), repeats: int = 15, warmup: int = 3, seed: int = 0,
          hw: hardware.HardwareReport | None = None, progress: bool = True, steps: int = STEPS_IN_A_ROW) -> Sweep:
    """Time one device vs DataParallel over `n_devices`, for each batch size, in `repeats` interleaved rounds of
    `steps` steps in a row per candidate (each repeat: the round's time per step), after `warmup` steps (whole
    rounds); returns a Sweep. `progress`: a line as each batch size is done (a busy machine can take minutes)."""
    if steps < 1:
        raise ValueError(f"need steps >= 1, got {steps}")
    warmup_rounds = -(-warmup // steps)  # whole rounds: every candidate's warm-up ends as its timed rounds begin
    hw = hw or hardware.detect()
    plan, single_plan = plan_devices(n_devices, hw), plan_devices(1, hw)
    model_spec = spec.cnn2d_3layer_fullconnected_3layer()
    singles = {ONE_DEVICE: single_plan.threads_per_device}  # threads: 1 on a CPU, None (torch's choice) on a GPU
    # on a CPU also one device with `n_devices` intra-op threads: what torch does without data parallelism
    if single_plan.threads_per_device:
        singles[threaded_name(n_devices)] = n_devices
    many = dp_name(n_devices)
    rows, phases, all_timings, windows, step_ms, unaccounted_ms = [], {}, {}, [], {}, {}
    unaccounted_steps: dict[int, tuple[float, ...]] = {}
    started = time.perf_counter()
    for i, batch in enumerate(batch_sizes):
        x, y = (torch.from_numpy(a) for a in data.synthetic_images(batch, image_shape=(1, 28, 28), seed=seed))
        models = {n: spec.build_torch(model_spec, (1, 28, 28), seed=seed).to(single_plan.devices[0]) for n in singles}
        optimizers = {n: torch.optim.SGD(m.parameters(), lr=0.01) for n, m in models.items()}
        with parallel_class(spec.build_torch(model_spec, (1, 28, 28), seed=seed), plan) as parallel:
            parallel_opt = torch.optim.SGD(parallel.model.parameters(), lr=0.01)
            reports = []
            one_step: dict[str, Callable[..., Any]] = {
                n: (lambda n=n: single_device_step(models[n], x, y, optimizers[n], threads=singles[n])) for n in singles}
            one_step[many] = lambda: reports.append(parallel.step(x, y, parallel_opt))
            timings = time_in_rounds(one_step, steps=steps, warmup=warmup_rounds, repeats=repeats,
                                     device=plan.devices[0])
            windows.append(conditions.last_window())  # this batch's measuring window: the sweep's load is theirs
        base = timings[ONE_DEVICE]
        all_timings[batch] = timings
        rows += [(n, "single", 1, threads, batch, timings[n], base, single_plan.devices[0], hw)
                 for n, threads in singles.items()]
        rows.append((many, "dp", n_devices, plan.threads_per_device, batch, timings[many], base, plan.devices[0], hw))
        timed = reports[warmup_rounds * steps:]
        phases[batch] = {r: {k: round(v * 1e3, 3) for k, v in parts.items()}
                         for r, parts in median_phase_seconds(timed).items()}
        step_ms[batch] = round(statistics.median(r.seconds for r in timed) * 1e3, 3)
        unaccounted_steps[batch] = tuple(round(unaccounted_seconds(r) * 1e3, 3) for r in timed)
        unaccounted_ms[batch] = round(statistics.median(unaccounted_steps[batch]), 3)
        if progress:
            print(f"sweep: batch {batch} timed, {i + 1} of {len(batch_sizes)} batch sizes done "
                  f"({elapsed_text(time.perf_counter() - started)} so far)", flush=True)
    # flagged once every batch is timed, under the conditions print_sweep reads: a refused speedup raises no flag
    load = conditions.mean_load(windows)
    refused_now = _refused_over_one(n_devices, load) is not None
    results = [_sweep_result(*row, refused=refused_now) for row in rows]
    return Sweep(plan, repeats, tuple(results), phases, all_timings, load, step_ms, unaccounted_ms, unaccounted_steps,
                 steps)


RUN_BY = {"threads": "one thread per device", "torch": "torch.nn.parallel"}  # a plan's backend, in words (lab 02
#                                                       defines 'backend' only later, for DDP's process groups)


def elapsed_text(seconds: float) -> str:
    """Seconds for a progress line: one decimal below 10 s, so that a short sweep never reads '0 s so far'."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def figures_explained(result: Sweep, *, gap: float = 0.05, decided=None) -> list[str]:
    """Why the ratio of a row's two ms/step medians, which a reader can form from the table, is not the speedup
    column: on the row where the two differ most (nothing where every row's are within `gap`). `decided`: the
    (batch, variant) a verdict decides, whose figure only the verdict prints (left out here)."""
    rows = [(r, result.speedup(r.batch_size, r.variant), result.result(r.batch_size, ONE_DEVICE).wall_s / r.wall_s)
            for r in result.results
            if r.variant != ONE_DEVICE and r.wall_s > 0 and (r.batch_size, r.variant) != decided]
    if not rows:
        return []
    r, paired, medians = max(rows, key=lambda row: abs(math.log(row[2] / row[1])))
    if abs(medians / paired - 1) <= gap:
        return []
    off = sum(abs(m / p - 1) > gap for _, p, m in rows)  # learner s13r5b finding 5: not only the row named
    way = ": opposite sides of 1" if (medians - 1) * (paired - 1) < 0 else ""
    return [measure.short_lines(f"  the ratio of two rows' ms/step is not the speedup: on {off} of {len(rows)} rows "
                                f"they differ by more than {gap:.0%}, most at batch {r.batch_size}, {r.variant} "
                                f"(medians {medians:.2f}x, speedup {paired:.2f}x{way}); {measure.OTHER_ROUNDS}")]


def bound_text(x: float) -> str:
    """A range's bound with two decimals, more (up to 5) where fewer would print 1.00 for a bound off 1."""
    digits = 2
    while x != 1 and digits < 5 and float(f"{x:.{digits}f}") == 1:
        digits += 1
    return f"{x:.{digits}f}"


def range_text(low: float, high: float) -> str:
    """A range as "low-high", each bound by bound_text: "1.00" never prints for a bound above or below 1."""
    return f"{bound_text(low)}-{bound_text(high)}"


def wins_line(result: Sweep, batch: int, variant: str) -> str:
    """Whether `variant` beats one device at `batch` here, from the sweep's paired rounds (the hot spot's step column
    compares nothing with a plain step): above 1 over the whole range it wins, below 1 it loses, else neither."""
    if refused(result) is not None:
        return f"  whether {variant} beats one device at batch {batch}: {measure.NOT_MEASURABLE} (the table says why)"
    low, high = result.speedup_range(batch, variant)
    said = ("it wins here (the whole range above 1)" if low > 1 else
            "one device wins here (the whole range below 1)" if high < 1 else
            "the range includes 1: neither wins by more than these rounds scatter")
    return (f"  does {variant} beat one device at batch {batch}? The sweep's paired rounds decide (the hot spot has "
            f"no plain one-device step): {result.speedup(batch, variant):.2f}x (range {range_text(low, high)}x): {said}")


def refused(result: Sweep) -> str | None:
    """Why no speedup of this sweep reads as a result (the summary's rule, measure.unreadable for its N devices or
    threads against one), or None: the table, the plot and the summary refuse the same figures, under the sweep's own
    load (result.load, not a later run's)."""
    return _refused_over_one(result.n_devices, result.load)


def _refused_over_one(n_devices: int, load: conditions.Load | None = None) -> str | None:
    """measure.unreadable for `n_devices` devices or threads against one under `load` (refused()'s rule)."""
    return (measure.unreadable(n_devices, load=load, what="devices")
            or measure.unreadable(n_devices, load=load, what="threads"))


def refusal_line(why: str | None, workers: int | None = None, what: str = "devices") -> str | None:
    """The line that refuses a speedup for `why` (refused(), or measure.unreadable for devices), as print_sweep and the
    recorded rows say it; `what` names the `workers` of the row it is recorded with (threads, ranks)."""
    if why is None:
        return None
    why = why.replace(f"{workers} devices", f"{workers} {what}") if workers else why  # one refusal, the row's words
    return f"{measure.NOT_MEASURABLE}: {why} ({measure.UNREAD})"


def recorded(result: Sweep, why: str | None) -> list[measure.Result]:
    """The sweep's rows for the results CSV: where `why` (refused()) rules the speedups out, each row over one device
    carries the refusal (measure.refusal), in its own words (devices or threads), so that lab 10 shows its speedup as
    n/m and fits nothing to it."""
    n = max(r.world_size for r in result.results)  # the devices DataParallel ran on: the refusal's workers
    return [r if why is None or r.variant == ONE_DEVICE else
            replace(r, flags=tuple(r.flags) + tuple(measure.refusal(refusal_line(
                why, n, "devices" if r.world_size > 1 else "threads") or "")))
            for r in result.results]


def print_sweep(result: Sweep, decided=None) -> None:
    """The sweep's table, each figure with its spread and each speedup with its range, and the warnings under it.
    `decided`: the (batch, variant) a verdict decides: its row prints the verdict's figure, marked so. Where
    `refused` rules the speedups out, no row prints one: each says so, and the reason is printed once."""
    why = refused(result)
    rounds = (f"{result.repeats} interleaved rounds of {result.steps} steps in a row" if result.steps > 1 else
              f"{result.repeats} interleaved steps")
    print(measure.short_lines(f"(cnn2d_3layer_fullconnected_3layer, one training step, median of {rounds}; "
                              f"replicas run by {RUN_BY.get(result.plan.backend, result.plan.backend)}, "
                              f"devices {[str(d) for d in result.plan.devices]})"))
    print(f"{'batch':>6}  {'candidate':<26}{'ms/step':>9}{'spread':>8}{'speedup':>9}  {'range':<11}")
    for batch in result.batch_sizes:
        for r in (x for x in result.results if x.batch_size == batch):
            if r.variant == ONE_DEVICE:
                figure = f"{1.0:8.2f}x  {'':<11}"
            elif why is not None:
                figure = f"{'-':>9}  {'not measurable here':<11}"
            else:
                low, high = result.speedup_range(batch, r.variant)
                figure = f"{result.speedup(batch, r.variant):8.2f}x  {low:.2f}-{high:.2f}x"
                figure += "  (verdict below)" if (batch, r.variant) == decided else ""
            print(f"{batch:>6}  {r.variant:<26}{r.wall_s * 1e3:9.2f}{r.spread:8.0%}{figure}"
                  f"{detectors.marked(r.flags)}")
            for note in detectors.notes(r.flags):
                print(measure.short_lines(f"{'':>8}note: {note}", indent=" " * 12))  # 100 columns, as the rest
    print(measure.short_lines(f"speedup: the median of the {result.repeats} paired ratios, one device's step over the "
                              f"candidate's in the same round: the comparison's one figure; range: where it lies with "
                              f"{measure.CONFIDENCE:.0%} confidence (how far it moves from round to round)"))
    for line in min_max_lines(result.repeats):
        print(line)
    for line in above_bound_lines(result) if why is None else []:
        print(line)
    if why is not None:
        print(measure.short_lines(f"  {refusal_line(why)}; the summary refuses the same speedups"))
    # the decided row says "(verdict below)" and the verdict prints the same figure: no third line
    # each row's repeats: the line speaks only where a median itself is uncertain (not a few slow repeats)
    noise = detectors.noise_line(result.timings[r.batch_size][r.variant].times for r in result.results)
    if noise:
        print(measure.short_lines(str(noise)))
    for line in figures_explained(result) if why is None else []:
        print(line)
    names = [f"batch {r.batch_size} {r.variant}" for r in result.results]
    for line in measure.table_lines([r.flags for r in result.results], names):
        print(line)


def above_bound_lines(result: Sweep) -> list[str]:
    """A line for each row whose range reaches above the most its devices (or threads) allow: the range is of the
    rounds' own ratios, and a round whose one-device step ran slow gives a ratio above the bound (learner s13r7b
    finding 2: 1.66x, range 1.61-2.06x, beside a plot line '2x: the most 2 devices allow')."""
    lines = []
    for r in result.results:
        workers = r.world_size * (r.threads or 1)
        high = result.speedup_range(r.batch_size, r.variant)[1] if r.variant != ONE_DEVICE else 0.0
        if workers < 2 or high <= workers:
            continue
        timings = result.timings[r.batch_size]
        ratios = measure.paired_ratios(timings[r.variant], timings[ONE_DEVICE])
        over = sum(x > workers for x in ratios)
        one, what = result.result(r.batch_size, ONE_DEVICE), "devices" if r.world_size > 1 else "threads"
        lines.append(measure.short_lines(
            f"  batch {r.batch_size}, {r.variant}: the range reaches {high:.2f}x, above the {workers}x that {workers} "
            f"{what} allow, because it is a range of rounds: in {over} of {len(ratios)} rounds one device's step took "
            f"over {workers}x the candidate's, which {workers} {what} "
            f"cannot give, so that step ran slow (one device's spread {one.spread:.0%}); the figure is the median, "
            f"{result.speedup(r.batch_size, r.variant):.2f}x"))
    return lines


PER_ROW_SLOWER = 1.10  # a step whose time per row grew by more than this from one batch to a larger one: it slowed


def replica_work_ms(result: Sweep, batch: int) -> float:
    """A DataParallel step's compute at `batch`: the slowest device's forward plus the slowest device's backward
    (median ms, the sweep's phases)."""
    phases = result.phase_ms[batch].values()
    return max(p.get("forward", 0.0) for p in phases) + max(p.get("backward", 0.0) for p in phases)


def device0_alone_ms(result: Sweep, batch: int) -> float:
    """Device 0's serial phases in the sweep's DataParallel step at `batch` (the sum of their medians, ms)."""
    row0 = next(iter(result.phase_ms[batch].values()))
    return sum(v for k, v in row0.items() if k in COORDINATOR_PHASES)


def phase_table(result: Sweep) -> list[str]:
    """Where a DataParallel step went at each batch (median ms): the sweep's step (the table's ms/step, one figure
    per quantity), its slowest forward and backward, device 0 alone, and the unaccounted time (the median of each
    step's own residual), then the answer line."""
    lines = [f"{'batch':>5}{'step':>9}{'slowest':>10}{'slowest':>10}{'device 0':>10}{'unaccounted':>13}"
             f"{'outside':>9}",
             f"{'':>5}{'ms':>9}{'forward':>10}{'backward':>10}{'alone':>10}{'ms':>13}{'phases':>9}"]
    share: dict[int, float] = {}
    outside_ms: dict[int, float] = {}
    for batch in result.batch_sizes:
        phases = result.phase_ms[batch]
        forward = max(p.get("forward", 0.0) for p in phases.values())
        backward = max(p.get("backward", 0.0) for p in phases.values())
        device0 = device0_alone_ms(result, batch)
        step, left = result.result(batch, dp_name(result.n_devices)).wall_s * 1e3, result.unaccounted_ms[batch]
        share[batch] = left / step
        outside = step - result.step_ms.get(batch, step)  # the step beyond its phases' span
        outside_ms[batch] = outside
        lines.append(f"{batch:>5}{step:9.2f}{forward:10.2f}{backward:10.2f}{device0:10.2f}{left:13.2f}"
                     f"{outside:9.2f}")
    lines.append(measure.short_lines(
        "step: the sweep's ms/step above (the same steps); "
        "unaccounted: the median over steps of each step's span (first phase to last) minus its own slowest "
        "forward, slowest backward and device 0's phases; outside phases: the step minus that span's median, "
        "the step's own bookkeeping before its first phase and after its last (medians of other steps: the columns "
        "add up only roughly)"))
    lines.append(measure.short_lines(
        "so: the time no phase accounts for took " + ", ".join(f"{s:.0%} of the step at batch {b}"
                                                             for b, s in share.items())
        + f": the largest share at batch {max(share, key=lambda b: share[b])}, the smallest at batch "
        f"{min(share, key=lambda b: share[b])}" + _outside_jump_clause(result, outside_ms)))
    odd = odd_unaccounted_line(result)
    return lines + ([measure.short_lines(odd)] if odd else [])


def _outside_jump_clause(result: Sweep, outside_ms: dict[int, float]) -> str:
    """A clause on the largest change of "outside phases" between neighbouring batches, set against the larger
    batch's step spread: a difference of two medians of other steps moves with that spread."""
    batches = list(outside_ms)
    if len(batches) < 2:
        return ""
    small, large = max(zip(batches, batches[1:]), key=lambda p: abs(outside_ms[p[1]] - outside_ms[p[0]]))
    jump = outside_ms[large] - outside_ms[small]
    row = result.result(large, dp_name(result.n_devices))
    if row.spread is None:  # too few rounds to say how far they spread
        return ""
    scatter_ms = row.spread * row.wall_s * 1e3  # how far that batch's rounds spread, in ms
    said = (f"; outside phases moved most from batch {small} to {large} ({outside_ms[small]:.2f} to "
            f"{outside_ms[large]:.2f} ms)")
    return (said + f", within the {scatter_ms:.2f} ms its step's rounds spread: a difference of two medians, "
            "not a cost seen to grow" if abs(jump) <= scatter_ms else
            said + f", beyond the {scatter_ms:.2f} ms its step's rounds spread: bookkeeping outside the phases "
            "grew there")


ODD_UNACCOUNTED = 2.0  # a batch whose unaccounted median is this many times the other batches' median stands out


def odd_unaccounted_line(result: Sweep) -> str | None:
    """A line on the batch whose unaccounted time stands out (ODD_UNACCOUNTED times the others' median), with its
    steps' own lowest and highest: theory's costs (wake-ups, hand-offs, GIL waits) do not jump at one batch only."""
    left = result.unaccounted_ms
    if len(left) < 3 or refused(result) is not None:  # under a refusing load every batch's time is the load's
        return None
    batch = max(left, key=lambda b: left[b])
    others = statistics.median(v for b, v in left.items() if b != batch)
    if others <= 0 or left[batch] < ODD_UNACCOUNTED * others:
        return None
    steps = result.unaccounted_steps_ms.get(batch, ())
    high = sum(v > ODD_UNACCOUNTED * others for v in steps)
    which = ("" if not steps else
             f"every one of its {len(steps)} steps paid it; " if high == len(steps) else
             f"{high} of its {len(steps)} steps paid it (from {min(steps):.2f} to {max(steps):.2f} ms); ")
    return (f"batch {batch} stands out: its unaccounted time is {left[batch] / others:.1f}x the other batches' "
            f"median ({others:.2f} ms); {which}no phase times it, so this run cannot say what it was; theory's "
            "fixed costs would not jump at one batch only: read it as this run's, not a trend")


def per_row_line(result: Sweep, small: int, large: int) -> str:
    """The shared-cache prediction (the replicas slow per row more than one device as the batch grows) checked from
    batch `small` to `large`, in one sentence: what the run found first, then the figures, and whether DataParallel's
    speedup moved beyond its ranges."""
    rows = large / small
    one = result.result(large, ONE_DEVICE).wall_s / result.result(small, ONE_DEVICE).wall_s / rows
    replicas = replica_work_ms(result, large) / replica_work_ms(result, small) / rows
    many = dp_name(result.n_devices)  # the sweep's name for DataParallel's row
    found = ("seen: the replicas slowed per row more than one device did" if replicas > one * PER_ROW_SLOWER else
             "not seen: one device's step slowed per row more than the replicas' work did" if one > replicas * PER_ROW_SLOWER
             else f"not seen: neither slowed per row by more than {PER_ROW_SLOWER - 1:.0%} beyond the other")
    (lo_s, hi_s), (lo_l, hi_l) = result.speedup_range(small, many), result.speedup_range(large, many)
    before, after = result.speedup(small, many), result.speedup(large, many)
    moved = ("its ranges overlap: not distinguishable here" if lo_s <= hi_l and lo_l <= hi_s else
             "beyond its ranges" + ("" if replicas > one * PER_ROW_SLOWER else
                                    ": the change is in the rest of its step (the columns beside the replicas')"))
    return (f"the shared-cache prediction, batch {small} to {large} ({rows:.1f}x the rows): {found} (time per row "
            f"{replicas:.2f}x for the replicas' forward + backward, {one:.2f}x for one device's step); DataParallel's "
            f"speedup over one device went from {before:.2f}x to {after:.2f}x, {moved}")


def min_max_lines(pairs: int) -> list[str]:
    """A line where `pairs` paired ratios are so few that their range (measure.ratio_range) is their lowest to their
    highest (none where it is narrower): a wide range then says only that one round fell far from the others."""
    if pairs < 2:
        return []
    low, high, coverage = measure.ratio_range(range(pairs))
    if (low, high) != (0, pairs - 1):
        return []
    return [measure.short_lines(f"  with {pairs} pairs the range is simply the lowest to the highest of them (the "
                                f"min-max, {coverage:.0%} confidence): one round far off widens it")]
