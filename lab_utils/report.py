"""The scaling report (lab 10): every result with its speedup, plausibility flags, and simple models that project to
more devices."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import detectors, workloads
from .compare import max_abs_diff
from .measure import (NOT_MEASURABLE, Machine, Result, AllReduceSweep, plausibility, read_results, store,
                      table_lines)


def load(*sources) -> list[Result]:
    """Results of every results CSV in the given folders or files; missing sources are skipped, bad files raise."""
    rows = []
    for source in sources:
        if source is None or not Path(source).exists():
            continue
        rows += read_results(source)
    return rows


def _key(row: Result) -> tuple:
    """Rows compare only within one key: machine fingerprint, lab, framework, workload, rate and batch size."""
    machine = row.machine.fingerprint if row.machine else ("",)
    return (*machine, row.lab, row.framework, row.workload, row.rate, row.batch_size)


def latest(rows: list[Result]) -> list[Result]:
    """One row per configuration and machine: the newest (a lab run twice appends its rows twice)."""
    newest: dict
    newest = {}
    for row in rows:
        config = _key(row) + (row.strategy, row.variant, row.world_size, row.threads)
        if config not in newest or row.timestamp >= newest[config].timestamp:
            newest[config] = row
    return sorted(newest.values(), key=lambda r: _key(r) + (r.world_size, r.strategy, r.variant))


@dataclass(frozen=True)
class Compared:
    """A result beside its baseline: the same machine, lab, framework, workload and batch on one device."""

    row: Result
    baseline: Result | None
    note: str = ""

    @property
    def is_baseline(self) -> bool:
        """True for a row that is its own baseline (one device): its speedup of 1 says nothing."""
        return self.row is self.baseline

    @property
    def speedup(self) -> float | None:
        return self.row.samples_per_s / self.baseline.samples_per_s if self.baseline else None

    @property
    def hardware_ratio(self) -> float | None:
        """How much more hardware the row used than its baseline: ranks x threads over the baseline's."""
        return self.row.resources / self.baseline.resources if self.baseline else None

    @property
    def not_measurable(self) -> str:
        """The row's lab decided its comparison 'not measurable here' (a verdict's outcome kept in its notes): that
        note, else ''. Its speedup is then no result: the table shows 'n/m' and no efficiency."""
        return next((n for n in detectors.notes(self.row.flags) if n.startswith(NOT_MEASURABLE)), "")

    @property
    def efficiency(self) -> float | None:
        """Speedup per unit of extra hardware; None against a baseline that is not one device, or for a comparison
        its lab found not measurable."""
        if not self.baseline or self.note or self.not_measurable:
            return None
        speedup, ratio = self.speedup, self.hardware_ratio
        assert speedup is not None and ratio is not None  # both exist with a baseline
        return speedup / ratio

    @property
    def flags(self) -> list[str]:
        """This row's detector flags, each once: those its lab recorded, then its speedup's, recomputed here."""
        own = detectors.impossible(self.row.flags)
        return own + [f for f in detectors.impossible(self._speedup_flags()) if f not in own]

    @property
    def notes(self) -> list[str]:
        """This row's other warnings (oversubscribed cores, another framework, ...): plain notes, never `[!]`."""
        own = detectors.notes(self.row.flags)
        return own + [f for f in detectors.notes(self._speedup_flags()) if f not in own]

    @property
    def implausible(self) -> bool:
        """True for a row with a detector flag (an impossible figure): the best-result line and Amdahl fit skip it. A
        note (a busy machine, another framework, oversubscribed cores) is no implausibility: such rows stay, noted."""
        return bool(self.flags)

    def _speedup_flags(self) -> list[str]:
        if self.efficiency is None or self.is_baseline:
            return []
        assert self.baseline is not None and self.hardware_ratio is not None  # efficiency is None without a baseline
        if self.row.lab != self.baseline.lab:  # another lab's baseline (across_labs), minutes apart, not interleaved:
            #                                   faster than its baseline per unit of hardware beyond both spreads
            if self.efficiency <= 1:
                return []
            return [*detectors.measured_twice(self.baseline.samples_per_s, self.baseline.spread,
                                             self.row.samples_per_s / self.hardware_ratio, self.row.spread,
                                             what="the rate per unit of hardware", unit=self.row.rate,
                                             first_name=f"lab {self.baseline.lab}'s one-thread row",
                                             second_name=f"lab {self.row.lab}'s {self.row.strategy} row")]
        machine = self.row.machine
        cores = machine.cpu_count if machine else None
        oversubscribed = bool(machine and cores and not machine.gpu_names and self.row.resources > cores)
        return plausibility(speedup=self.speedup, devices=self.hardware_ratio, oversubscribed=oversubscribed)


def _baseline_for(row: Result, group: list[Result]) -> tuple[Result | None, str]:
    singles = [r for r in group if r.world_size == 1]
    if row.world_size == 1:  # a one-device row is its own baseline, unless it used more threads than one
        one_thread = [r for r in singles if r.threads == 1]
        return (one_thread[0] if row.threads not in (None, 1) and one_thread else row), ""
    for candidates in ([r for r in singles if r.threads == row.threads], [r for r in singles if r.threads == 1], singles):
        if candidates:
            return candidates[0], ""
    naive = [r for r in group if r.strategy == "pipeline-naive"]
    if naive:
        return naive[0], "vs the naive split"
    return None, "no one-device row for this workload"


def compare(rows: list[Result]) -> list[Compared]:
    """Each row with its baseline row (one device; threads as the row's when there is a choice)."""
    groups: dict
    groups = {}
    for row in rows:
        groups.setdefault(_key(row), []).append(row)
    return [Compared(row, *_baseline_for(row, groups[_key(row)])) for row in rows]


def across_labs(rows: list[Result]) -> list[Compared]:
    """Rows of workloads several labs recorded on one machine, each against the first lab's one-rank, 1-thread row."""
    groups: dict
    groups = {}
    for row in rows:
        machine = row.machine.fingerprint if row.machine else ("",)
        groups.setdefault((*machine, row.framework, row.workload, row.rate, row.batch_size), []).append(row)
    shared = []
    for group in groups.values():
        if len({r.lab for r in group}) < 2:
            continue
        group = sorted(group, key=lambda r: (r.lab, r.world_size, r.threads or 1))
        base = next((r for r in group if r.world_size == 1 and (r.threads or 1) == 1), None)
        shared += [Compared(r, base, "" if base else "no one-device row for this workload") for r in group]
    return shared


def host_name(row: Result, this_host: str | None = None) -> str:
    """The machine a row was measured on; 'this machine' for `this_host` (no host name of yours in a table)."""
    host = row.machine.host if row.machine else ""
    return "this machine" if this_host and host == this_host else host


def table(compared: list[Compared], *, hosts: bool = False, this_host: str | None = None,
          figures: Callable[[Result, Result], tuple[float, float]] | None = None) -> str:
    """The summary table as text: a line per workload, a line per row with its notes below; baselines show '-'.
    `figures(row, baseline)` -> (speedup, efficiency) gives the two columns (lab 10's speedup_and_efficiency);
    without it, each Compared's own."""
    names = [c.row.strategy + (f" {c.row.variant}" if c.row.variant else "") for c in compared]
    name_w = max([len("strategy, variant")] + [len(n) for n in names]) + 2
    framework_w = max([len("framework")] + [len(c.row.framework) for c in compared]) + 2
    header = (f"{'machine':<13}" if hosts else "") + (f"{'lab':<4}{'framework':<{framework_w}}"
                                                     f"{'strategy, variant':<{name_w}}{'devices':>7}"
                                                     f"{'threads':>8}{'batch':>6}{'accuracy':>9}{'rate':>11}"
                                                     f"{'speedup':>8}{'effic.':>7}")
    lines, workload = [header], None
    for c, name in zip(compared, names):
        r = c.row
        if (host_name(r), r.lab, r.workload, r.rate) != workload:
            workload = (host_name(r), r.lab, r.workload, r.rate)
            lines.append((f"{host_name(r, this_host)[:12]:<13}" if hosts else "") + f"{r.lab:<4}workload: {r.workload}"
                         + (f"  (rate: {r.rate})" if r.rate else ""))
        acc = f"{r.accuracy:9.1%}" if r.accuracy is not None else f"{'-':>9}"
        threads = f"{r.threads:8d}" if r.threads is not None else f"{'-':>8}"
        speedup, efficiency = (figures(r, c.baseline) if figures and c.baseline and not c.is_baseline
                               else (c.speedup, c.efficiency))
        speed = (f"{'n/m':>8}" if c.not_measurable and not c.is_baseline else
                 f"{speedup:8.2f}" if c.baseline and not c.is_baseline else f"{'-':>8}")
        speed += f"{efficiency:7.0%}" if c.efficiency is not None and not c.is_baseline else f"{'-':>7}"
        lines.append((f"{host_name(r, this_host)[:12]:<13}" if hosts else "") +
                     f"{r.lab:<4}{r.framework:<{framework_w}}{name:<{name_w}}{r.world_size:7d}{threads}"
                     f"{r.batch_size:6d}{acc}{r.samples_per_s:11.0f}{speed}{detectors.marked(c.flags)}")
        lines += [f"      note: {note}" for note in c.notes]
    lines += table_lines([c.flags for c in compared],
                                   [f"{c.row.lab} {n} x{c.row.world_size}" for c, n in zip(compared, names)])
    noise = detectors.noise_line([c.row.spread for c in compared], "rows' medians")
    return "\n".join(lines + ([noise] if noise else []))


def summary(results_dir) -> str:
    """The scaling report's table of the newest rows of one results folder (what `make course` prints at the end)."""
    return table(compare(latest(load(results_dir))))


RECORDING_LABS = tuple(f"{n:02d}" for n in range(10))  # labs 00-09 each record results rows; lab 10 reads them


def labs_without_rows(rows: list[Result]) -> list[str]:
    """The labs that record results but have no row here yet (not run, or run with another results folder)."""
    have = {r.lab for r in rows}
    return [lab for lab in RECORDING_LABS if lab not in have]


DATA_PARALLEL_LABS = ("02", "03", "05")  # the labs that record data-parallel rows (Amdahl's fit reads them)
TWO_LABS = ("01", "03")  # the labs that time workloads.STEP_3CONV: one workload, two labs


def lab_names(labs) -> str:
    """'lab 02', 'labs 02 and 03', 'labs 01, 02 and 03'."""
    labs = list(labs)
    if len(labs) < 2:
        return f"lab {''.join(labs)}"
    return f"labs {', '.join(labs[:-1])} and {labs[-1]}"


def lacking(rows: list[Result], labs, what: str) -> str:
    """'' when each of `labs` has rows here; else a sentence naming exactly those without rows, which `what` lacks."""
    have = {r.lab for r in rows}
    missing = [lab for lab in labs if lab not in have]
    if not missing:
        return ""
    return (f"{what} lacks the rows of {lab_names(missing)} (none in the results folder): run "
            f"{'it' if len(missing) == 1 else 'them'} from this folder, or name their folder in extra_results, then "
            "this notebook again")


def two_labs(shared: list[Compared]) -> list[Compared]:
    """The rows of across_labs of workloads.STEP_3CONV (labs 01 and 03), the comparison lab 10 describes."""
    return [c for c in shared if c.row.workload == workloads.STEP_3CONV.name]


def ranks_vs_threads(shared: list[Compared]) -> list[str]:
    """Lab 10's prediction checked on the speed test's rows: on a CPU, DDP ranks of one thread each no faster than one
    process with as many threads (the same cores, plus an all-reduce). One line per DDP row against each lab's
    process of as many threads; 'beats it' only beyond both rows' spreads (each rate +- half its spread)."""
    lines = []
    for ddp in (c.row for c in shared if c.row.strategy == "ddp" and c.row.world_size > 1):
        if ddp.machine and ddp.machine.gpu_names:
            lines.append(f"lab {ddp.lab}'s DDP ran on GPUs: its ranks add devices, so no such prediction")
            continue
        rivals = [c.row for c in shared if c.row.world_size == 1 and (c.row.threads or 1) == ddp.resources]
        for rival in rivals:
            ratio = ddp.samples_per_s / rival.samples_per_s
            low = ddp.samples_per_s * (1 - (ddp.spread or 0.0) / 2)
            high = rival.samples_per_s * (1 + (rival.spread or 0.0) / 2)
            said = ("reversed: DDP faster beyond both rows' spreads" if low > high else
                    "holds: DDP no faster" if ratio <= 1 else "not distinguishable: within the rows' spreads")
            lines.append(f"prediction, {ddp.world_size} DDP ranks (lab {ddp.lab}) no faster than 1 process x "
                         f"{ddp.resources:g} threads (lab {rival.lab}): {ddp.samples_per_s:,.0f} vs "
                         f"{rival.samples_per_s:,.0f} samples/s, {ratio:.2f}x -> {said}")
    return lines


def percent(fraction: float) -> str:
    """A fraction as a percentage, with a decimal below 10 % (0.4 %, not 0 %)."""
    return f"{fraction * 100:.1f} %" if abs(fraction) < 0.095 else f"{fraction * 100:.0f} %"


def row_label(c: Compared) -> str:
    """A row's name on a chart: lab, strategy, variant and batch, never cut; ' [!]' when flagged."""
    name = f"{c.row.strategy} {c.row.variant}".strip()
    return f"{c.row.lab} {name} b{c.row.batch_size}" + (" [!]" if c.flags else "")


# --- models of scaling ----------------------------------------------------------------------------------------

def amdahl_speedup(serial_fraction: float, devices) -> np.ndarray | float:
    """Amdahl's law: 1 / (s + (1 - s) / N)."""
    n = np.asarray(devices, dtype=float)
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / n)


def fit_serial_fraction(points) -> float:
    """The serial fraction s that best fits measured (devices, speedup) pairs (least squares on 1/speedup); noisy
    rows, or rows slower than one device, can give s outside 0..1, which no machine has (serial_fit says so)."""
    pairs = [(float(n), float(s)) for n, s in points if n > 1]
    if not pairs:
        raise ValueError("need at least one measurement with more than one device to fit a serial fraction")
    # 1/S = s + (1 - s)/N = 1/N + s (1 - 1/N): linear in s
    a = np.array([1 - 1 / n for n, _ in pairs])
    b = np.array([1 / s - 1 / n for n, s in pairs])
    return float(a @ b / (a @ a))


@dataclass(frozen=True)
class SerialFit:
    """Amdahl's serial fraction fitted to rows (least squares), and each row's own: the spread of the per-row values
    gives the projections their range; a fit outside 0..1 hit a bound that no machine has and projects nothing."""

    serial_fraction: float
    per_row: tuple[float, ...]

    @property
    def at_bound(self) -> bool:
        """True when the fit fell outside 0..1: the rows contradict Amdahl's law, so it projects nothing."""
        return not 0.0 <= self.serial_fraction <= 1.0

    def projection(self, devices: int) -> tuple[float, float, float] | None:
        """(low, fitted, high) speedup on `devices`, the range from the rows' own serial fractions; None at a bound."""
        if self.at_bound:
            return None
        low_s, high_s = (min(max(v, 0.0), 1.0) for v in (max(self.per_row), min(self.per_row)))
        return (float(amdahl_speedup(low_s, devices)), float(amdahl_speedup(self.serial_fraction, devices)),
                float(amdahl_speedup(high_s, devices)))

    def describe(self) -> str:
        """The fitted value with the rows' range, or why no projection follows from it."""
        rows = f"rows' own {min(self.per_row):.3f} to {max(self.per_row):.3f}"
        if self.at_bound:
            side = "above 1: slower than one device" if self.serial_fraction > 1 else "below 0: faster than linear"
            return (f"s = {self.serial_fraction:.3f} ({rows}) is outside 0..1 ({side}), the bound no machine "
                    "passes: these rows contradict Amdahl's law, so nothing is projected from them")
        return f"s = {self.serial_fraction:.3f} ({rows})"


def serial_fit(points) -> SerialFit:
    """fit_serial_fraction over (devices, speedup) pairs, with each pair's own serial fraction beside it."""
    pairs = [(float(n), float(s)) for n, s in points if n > 1]
    return SerialFit(fit_serial_fraction(pairs), tuple((1 / s - 1 / n) / (1 - 1 / n) for n, s in pairs))


@dataclass(frozen=True)
class AllReduceFit:
    """Fitted ring all-reduce time t(bytes, N) = 2 (N - 1) latency + 2 (N - 1) / N x bytes / bus_bandwidth."""

    latency_s: float
    bus_bandwidth: float  # bytes/s; inf when the fitted time per byte is not a positive number (`flags` says why)
    flags: tuple[str, ...] = ()

    def describe(self, devices: int | None = None) -> str:
        """'alpha = ... us, B = ... GB/s' (and, given the ranks, the size where each term dominates), or the refusal
        when the fit is degenerate."""
        alpha = f"alpha = {self.latency_s * 1e6:8.1f} us"
        if self.flags:
            return f"{alpha}, B = not measurable here  {detectors.flag_text(*self.flags)}"
        text = f"{alpha}, B = {self.bus_bandwidth / 1e9:6.2f} GB/s"
        if devices and devices > 1 and self.latency_s > 0:
            text += (f"; latency dominates below {self.crossover_bytes(devices) / 1024:,.0f} KiB, bandwidth above "
                     f"(N alpha B, N = {devices})")
        return text

    def crossover_bytes(self, devices: int) -> float:
        """The message size at which the two terms are equal: 2 (N - 1) alpha = 2 (N - 1) / N x bytes / B."""
        return devices * self.latency_s * self.bus_bandwidth

    def contradictions(self, sizes, seconds, devices: int) -> list[str]:
        """A fit whose latency term alone exceeds a measured all-reduce (by 10 %) contradicts the data it came from."""
        floor = 2 * (devices - 1) * self.latency_s
        fastest = min(float(t) for t in seconds)
        if floor <= 1.1 * fastest:
            return []
        return [detectors.Flag(detectors.Kind.CONTRADICT,
                               f"the fitted latency alone, 2 (N - 1) alpha = {floor * 1e3:.3g} ms, is longer than a "
                               f"measured all-reduce ({fastest * 1e3:.3g} ms): {detectors.CONTRADICT} (a few slow "
                               "medians pulled the fit, so read it as an order of magnitude)")]

    def seconds(self, nbytes: float, devices: int) -> float:
        if devices < 2:
            return 0.0
        return 2 * (devices - 1) * self.latency_s + 2 * (devices - 1) / devices * nbytes / self.bus_bandwidth


def bus_bandwidth(nbytes: float, seconds: float, devices: int) -> float:
    """The bus bandwidth of one all-reduce: 2 (N - 1) / N x bytes / time (what each link carries, per second)."""
    return 2 * (devices - 1) / devices * nbytes / seconds


def fit_allreduce(sizes, seconds, devices: int) -> AllReduceFit:
    """Latency and bus bandwidth fitted to all-reduce times of message `sizes` on `devices` ranks."""
    sizes, seconds = np.asarray(sizes, float), np.asarray(seconds, float)
    if len(sizes) < 2:
        raise ValueError("need all-reduce times for at least two message sizes")
    if np.any(seconds <= 0):
        raise ValueError(f"all-reduce times must be positive, got {seconds.tolist()}")
    steps = 2 * (devices - 1)
    # least squares on relative errors (w=1/time): small sizes set alpha, large ones the bandwidth; unweighted, the
    # largest sizes' noise would decide alpha
    slope, intercept = np.polyfit(sizes * steps / devices, seconds, 1, w=1 / seconds)
    warnings = tuple(detectors.degenerate_fit(float(slope)))
    return AllReduceFit(max(intercept / steps, 0.0), math.inf if warnings else 1.0 / slope, warnings)


SWEEP_MAX_AGE_S = 6 * 3600


def save_allreduce(lab: str, sizes, seconds, spreads, devices: int, backend: str, directory=None) -> Path:
    """Keep an all-reduce sweep (message bytes, median seconds, spreads) in the results store for another lab."""
    return store(directory).append(AllReduceSweep(lab, backend, devices, tuple(int(n) for n in sizes),
                                         tuple(float(t) for t in seconds), tuple(float(v) for v in spreads)))


def recent_allreduce(devices: int, backend: str, directory=None, max_age_s: float = SWEEP_MAX_AGE_S) -> dict | None:
    """The newest all-reduce sweep of this machine with these ranks and backend, if it is recent enough; else None."""
    import datetime as _dt

    machine, now = Machine.here(), _dt.datetime.now(_dt.timezone.utc)
    fits = [s for s in store(directory).rows("sweeps") if s.host == machine.host and s.cpu_model == machine.cpu_model
            and s.devices == devices and s.backend == backend
            and (now - _dt.datetime.fromisoformat(s.timestamp)).total_seconds() <= max_age_s]
    newest = max(fits, key=lambda s: s.timestamp) if fits else None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(newest).items()} if newest else None


HALF_THE_TIME = 0.5  # a larger message whose median took less than this share of a smaller one's: flagged, whatever
#                      the spreads (a median of all-reduces on a busy machine scatters, but not by 2x)


def allreduce_flags(sizes, seconds, spreads=None) -> list[list[detectors.Flag]]:
    """Per message size, its flags (detectors.more_work_less_time, the one rule every lab applies to more work in
    less time): a larger message took more than 10 % less time beyond the spreads of both medians' repeats, or less
    than HALF_THE_TIME of it whatever the spreads (repeats this scattered would otherwise excuse any median)."""
    spreads = list(spreads) if spreads is not None else [None] * len(sizes)
    result = []
    for i, (nbytes, s, spread) in enumerate(zip(sizes, seconds, spreads)):
        said = []
        for m, t, sp in zip(sizes[i + 1:], seconds[i + 1:], spreads[i + 1:]):
            said = (detectors.more_work_less_time(nbytes, s, m, t, what="bytes", small_spread=spread, large_spread=sp)
                    or detectors.more_work_less_time(nbytes, s, m, t, what="bytes", tolerance=1 - HALF_THE_TIME))
            if said:
                break
        result.append(said)
    return result


SUPERLINEAR_MARGIN = 1.2  # a batch k times larger may take up to 1.2 k times longer before it is flagged


def batch_time_flags(small_batch: int, small_s: float, large_batch: int, large_s: float) -> list[detectors.Flag]:
    """A warning when a larger batch took far more than proportionally longer than a smaller one, or less time."""
    ratio, work = large_s / small_s, large_batch / small_batch
    if ratio > SUPERLINEAR_MARGIN * work:
        return [detectors.note(f"batch {large_batch} took {ratio:.1f}x the time of batch {small_batch} for {work:g}x the "
                               "images: more than proportional, so one of the two medians is off (a busy machine, or "
                               "the larger batch spilled out of the cache) and ratios built on them are suspect")]
    return detectors.more_work_less_time(small_batch, small_s, large_batch, large_s, what="images")


WAITED_FACTOR = 10.0  # the all-reduce in the step may take this many times its time alone (it waits for the slower
#                       rank) before the step's figure is that rank's lateness, not communication


def allreduce_disagreement(alone_s: float, in_step_s: float, factor: float = 2.0,
                           waited_factor: float = WAITED_FACTOR) -> list[detectors.Flag]:
    """A warning when the same all-reduce was faster inside a DDP step than alone, by more than `factor` (in the step
    it also waits for the slower rank, so it can take longer than alone, never much less); or slower in the step by
    more than `waited_factor`: then the step's figure measures how late the other rank was, not the communication."""
    if in_step_s <= 0 or alone_s <= 0:
        return []
    if alone_s / in_step_s > factor:
        return detectors.disagree(alone_s, in_step_s, factor=factor, what="the same gradients' all-reduce",
                                  second="in the DDP step",
                                  why=" (in the step it also waits for the slower rank, so it cannot be faster than "
                                      "alone: one of the two was disturbed, rerun on a quiet machine)")
    if in_step_s / alone_s > waited_factor:
        return detectors.disagree(alone_s, in_step_s, factor=waited_factor, what="the same gradients' all-reduce",
                                  second="in the DDP step",
                                  why=f" (more than {waited_factor:g}x: in the step it waited for a rank that was "
                                      "descheduled, so that figure is the other rank's lateness on a busy machine, "
                                      "not communication, and a communication / compute ratio built on it says "
                                      "nothing)")
    return []


def data_parallel_speedup(compute_s: float, grad_bytes: float, fit: AllReduceFit, devices: int) -> float:
    """Compute + all-reduce model: one device takes compute_s; N devices take compute_s / N + the all-reduce."""
    return compute_s / (compute_s / devices + fit.seconds(grad_bytes, devices))


def gpipe_speedup(stages: int, micro_batches: int) -> float:
    """Ideal GPipe speedup over one device for K balanced stages: K x (1 - bubble), bubble = (K-1)/(M+K-1)."""
    return stages * (1 - (stages - 1) / (micro_batches + stages - 1))


def parameter_bytes(model) -> int:
    """Bytes of the gradients DDP all-reduces each step (one per trainable parameter)."""
    from .tensors import tensor_bytes  # torch only when a model is measured

    return tensor_bytes(p for p in model.parameters() if p.requires_grad)


def noise_or_bug(reference, other, tolerance: float) -> str:
    """'identical', 'floating-point noise' (max difference within tolerance) or 'a real difference'."""
    diff = max_abs_diff(reference, other)
    if diff == 0.0:
        return "identical"
    return "floating-point noise" if diff <= tolerance else "a real difference"


def log2_sizes(smallest: int, largest: int) -> list[int]:
    """Powers of two from smallest to largest bytes."""
    return [2 ** k for k in range(int(math.log2(smallest)), int(math.log2(largest)) + 1)]
