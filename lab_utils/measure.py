"""Timers that warm up, synchronize and take medians; the one spread; verdicts on paired repeats; throughput;
plausibility flags; results records (CSV rows with the machine's fingerprint)."""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as _dt
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import conditions, detectors, hardware

def synchronize(device=None) -> None:
    """Wait for queued GPU work on `device` (no-op on CPU), so a timer measures work, not launches."""
    import torch

    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def intra_op_threads(n: int | None):
    """Run the block with `n` intra-op threads in this thread (None: leave as is), then restore."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---- spread: the one rule ----------------------------------------------------------------------------------------

def spread(values) -> float:
    """How far repeats scatter: (max - min) / median, a fraction (0.25 is 25 %); 0.0 for < 2 values or median 0."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    return (max(values) - min(values)) / abs(middle) if middle else 0.0


def alternating_rounds(items, rounds: int) -> list:
    """`rounds` rounds of `items`, every other one reversed (A B, B A, A B, ...) so slow drift hits all alike."""
    items = list(items)
    return [item for r in range(rounds) for item in (items if r % 2 == 0 else items[::-1])]


@dataclass(frozen=True)
class Timing:
    """Seconds of each timed repeat (warm-up runs excluded) and summary statistics."""

    times: tuple[float, ...]
    warmup: int

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """measure.spread of the repeats: how noisy they were."""
        return spread(self.times)

    def __str__(self) -> str:
        return (f"median {self.median * 1e3:.3f} ms over {len(self.times)} repeats "
                f"(min {min(self.times) * 1e3:.3f}, max {max(self.times) * 1e3:.3f}; {self.warmup} warm-up run(s) excluded)")


def time_it(fn, *, warmup: int = 2, repeats: int = 5, device=None) -> Timing:
    """Call fn() `warmup` times untimed, then `repeats` times timed, synchronizing `device` around each."""
    return time_interleaved({"fn": fn}, warmup=warmup, repeats=repeats, device=device)["fn"]


def time_interleaved(fns: dict, *, warmup: int = 1, repeats: int = 5, device=None, before: dict | None = None) -> dict:
    """{name: Timing} of `fns` run in alternating rounds; `before[name]()` runs untimed right before each run."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    before = before or {}
    names = list(fns)
    times: dict[str, list[float]]
    times = {name: [] for name in names}
    with conditions.measuring():
        _run_interleaved(fns, names, times, warmup, repeats, device, before)
    return {name: Timing(tuple(times[name]), warmup) for name in names}


def _run_interleaved(fns, names, times, warmup, repeats, device, before) -> None:
    for i, name in enumerate(alternating_rounds(names, warmup + repeats)):
        if name in before:
            before[name]()
        synchronize(device)
        start = time.perf_counter()
        fns[name]()
        synchronize(device)
        if i // len(names) >= warmup:
            times[name].append(time.perf_counter() - start)


# ---- verdicts: what the run decided, not what the prose assumed ----------------------------------------------------

HOLDS, REVERSED, UNDECIDED = "holds", "reversed", "not distinguishable here"
MIN_EFFECT = 0.05  # a median ratio within 5 % of 1 is no effect worth a verdict
MIN_PAIRS = 5  # fewer paired repeats cannot give a 90 % range (with 5, the range is their min..max at 93.75 %)
RESOLVE = 3.0  # a tolerance this many times the pairs' scatter (half their range, relative) can be told apart
MAX_RESTATED = 0.30  # a no-worse-than claim is restated up to this tolerance; pairs that cannot tell that decide nothing
CONFIDENCE = 0.90


def _binomial_tail(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def ratio_range(ratios, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): sign-test range for the median of paired ratios; too few pairs give min..max."""
    ordered = sorted(float(r) for r in ratios)
    n = len(ordered)
    if not n:
        raise ValueError("need at least one paired ratio")
    k = 1
    # k-th smallest..k-th largest, k the largest with 2 P(Binomial(n, 1/2) <= k - 1) <= 1 - confidence; coverage is
    # its true confidence. Distribution-free: assumes only that the rounds' ratios are independent
    while k < n // 2 and 2 * _binomial_tail(k, n) <= 1 - confidence:
        k += 1
    return ordered[k - 1], ordered[n - k], 1 - 2 * _binomial_tail(k - 1, n)


def scatter(ratios, confidence: float = CONFIDENCE) -> float:
    """How far paired ratios scatter: half their ratio_range over their median (0.08: +-8 %); an effect smaller than
    RESOLVE times this cannot be told apart from these pairs."""
    low, high, _ = ratio_range(ratios, confidence)
    return (high - low) / (2 * statistics.median(float(r) for r in ratios))


@dataclass(frozen=True)
class Verdict:
    """A decided claim: median paired `ratio`, its ratio_range [low, high], `verdict` HOLDS, REVERSED or UNDECIDED."""

    claim: str  # short id of what is compared, e.g. "DDP vs DataParallel"
    expected: str  # what theory predicts, in words, e.g. "DDP faster"
    ratio: float  # > 1 is the expected direction
    low: float
    high: float
    verdict: str
    repeats: int
    unit: str = "x"
    lab: str = ""
    notes: str = ""  # e.g. that the machine was busy while the repeats ran
    holds_from: float | None = None  # a no-worse-than claim: it holds while the whole range lies above this ratio

    def __str__(self) -> str:
        meaning = (f"{self.expected}: it holds while the whole range lies above {self.holds_from:.2f}"
                   if self.holds_from is not None else f"above 1 means {self.expected}")
        text = (f"verdict, {self.claim}: {self.ratio:.2f}{self.unit} ({meaning}; range "
                f"{self.low:.2f}-{self.high:.2f} over {self.repeats} paired repeats) -> {self.verdict}")
        return flagged(text, detectors.reverses_theory(self) + [n for n in self.notes.split("; ") if n])

    def record(self, directory=None, hw: hardware.HardwareReport | None = None) -> "Verdict":
        """Append to <results dir>/verdicts.csv; returns self, so `print(measure.verdict(...).record())` does both."""
        write_verdict(self, directory, hw)
        return self


def decide(ratios, *, claim: str, expected: str, lab: str = "", min_effect: float = MIN_EFFECT,
           confidence: float = CONFIDENCE, unit: str = "x", no_worse_than: float | None = None) -> Verdict:
    """The Verdict on paired ratios oriented so that > 1 is what theory predicts (`expected` says it in words)."""
    ratios = [float(r) for r in ratios]
    if any(not math.isfinite(r) or r <= 0 for r in ratios):
        raise ValueError(f"paired ratios must be positive numbers, got {ratios}")
    low, high, _ = ratio_range(ratios, confidence)
    middle = statistics.median(ratios)
    verdict, notes, holds_from = UNDECIDED, [], None
    # no_worse_than (a fraction): the claim is that A costs at most that much more than B (same work, e.g. two
    # orders of it), not that A wins; a win counts as holding. A tolerance smaller than RESOLVE x the pairs' own
    # scatter cannot be told apart here: the claim is restated as the tolerance these pairs can resolve, and says so
    if len(ratios) >= MIN_PAIRS and no_worse_than is not None:
        spread_of_pairs = scatter(ratios, confidence)
        tolerance = max(no_worse_than, RESOLVE * spread_of_pairs)
        if f"{tolerance:.0%}" == f"{no_worse_than:.0%}":  # a restatement that reads "10 %, not 10 %" restates nothing
            tolerance = no_worse_than
        if tolerance > no_worse_than:
            notes.append(f"restated: these pairs scatter by {spread_of_pairs:.0%}, so this machine can tell a cost of "
                         f"{tolerance:.0%} and more, not {no_worse_than:.0%}: the claim tested is 'no worse by more than "
                         f"{tolerance:.0%}'")
        floor = 1 / (1 + tolerance)
        holds_from = 1.0 if tolerance > MAX_RESTATED else floor
        if tolerance > MAX_RESTATED and low > 1:  # too noisy to test the tolerance, but A won outright
            notes[-1] = (f"these pairs scatter by {spread_of_pairs:.0%}, too much to test a cost of {no_worse_than:.0%}, "
                         f"but the whole range lies above 1: no cost at all")
            verdict = HOLDS
        elif tolerance > MAX_RESTATED:  # a claim this weak says nothing: the pairs cannot decide
            notes[-1] = (f"these pairs scatter by {spread_of_pairs:.0%}: this machine cannot tell a cost below "
                         f"{tolerance:.0%} here, so no verdict")
        elif low > floor:
            verdict = HOLDS
        elif high < 1 and middle <= floor:
            verdict = REVERSED
    elif len(ratios) >= MIN_PAIRS:
        if low > 1 and middle >= 1 + min_effect:
            verdict = HOLDS
        elif high < 1 and middle <= 1 / (1 + min_effect):
            verdict = REVERSED
    load = conditions.taken()  # the measurements since the lab last recorded its rows
    notes += load.note() if load else []
    return Verdict(claim, expected, middle, low, high, verdict, len(ratios), unit, lab, "; ".join(notes), holds_from)


def verdict(a, b, *, claim: str, expected: str, higher_is_better: bool = False, lab: str = "",
            min_effect: float = MIN_EFFECT, confidence: float = CONFIDENCE,
            no_worse_than: float | None = None) -> Verdict:
    """decide() on A's advantage over B in paired repeats a, b: times, or rates with higher_is_better (> 1: A won)."""
    a, b = list(getattr(a, "times", a)), list(getattr(b, "times", b))
    if len(a) != len(b):
        raise ValueError(f"paired repeats need as many of A as of B, got {len(a)} and {len(b)}")
    # pair i is round i of A beside round i of B, run interleaved (time_interleaved, alternating_rounds)
    ratios = [x / y for x, y in zip(a, b)] if higher_is_better else [y / x for x, y in zip(a, b)]
    return decide(ratios, claim=claim, expected=expected, lab=lab, min_effect=min_effect, confidence=confidence,
                  no_worse_than=no_worse_than)


@contextlib.contextmanager
def collective_calls(names, record):
    """In the block, each torch.distributed function in `names` calls record(name, bound args) before its work."""
    import functools
    import inspect

    import torch.distributed as dist

    originals = {name: getattr(dist, name) for name in names}

    def watched(name, fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            record(name, signature.bind(*args, **kwargs).arguments)
            return fn(*args, **kwargs)

        return call

    for name, fn in originals.items():
        setattr(dist, name, watched(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def samples_per_second(samples: int, seconds: float) -> float:
    """Throughput; refuses a non-positive duration instead of dividing by it."""
    if seconds <= 0:
        raise ValueError(f"duration must be positive to compute a throughput, got {seconds!r} s")
    return samples / seconds


def throughput_from_step_times(batch_size: int, step_times, warmup: int) -> float:
    """Samples/s from per-step durations: drop the first `warmup` steps, use the median of the rest."""
    kept = list(step_times)[warmup:]
    if not kept:
        raise ValueError(f"all {len(list(step_times))} step times are warm-up (warmup={warmup}); time more steps")
    return samples_per_second(batch_size, statistics.median(kept))


class StepTimer:
    """Times a loop's steps: call tick() at the end of each; the median step, warm-up excluded, gives samples/s."""

    def __init__(self, device=None, warmup: int = 3):
        self.seconds: list[float]
        self.device, self.warmup, self.seconds = device, warmup, []
        self._last = time.perf_counter()

    def tick(self) -> None:
        synchronize(self.device)
        now = time.perf_counter()
        self.seconds.append(now - self._last)
        self._last = now

    def _kept(self) -> list[float]:
        return self.seconds[self.warmup:] or self.seconds

    def samples_per_s(self, batch_size: int) -> float | None:
        """batch_size over the median step time (the first `warmup` steps are not counted); None before any step."""
        kept = self._kept()
        return samples_per_second(batch_size, statistics.median(kept)) if kept else None

    def spread(self) -> float | None:
        """measure.spread of the counted steps."""
        kept = self._kept()
        return spread(kept) if kept else None


def results_dir(path=None) -> Path:
    """Where results CSVs go: `path`, else $LAB_RESULTS_DIR, else results/ in the working directory."""
    if path:
        return Path(path)
    override = os.environ.get("LAB_RESULTS_DIR")
    return Path(override) if override else Path.cwd() / "results"


# ---- plausibility: a number that cannot be right is said so, next to it --------------------------------------------

MAX_SPREAD = detectors.NOISY_SPREAD  # repeats spread more than this: the table's noise line counts the median
BASELINE_FACTOR = 2.0


def plausibility(*, speedup: float | None = None, devices: float | None = None,
                 baseline_rate: float | None = None, reference_rate: float | None = None,
                 other_framework: str | None = None, oversubscribed: bool = False) -> list[str]:
    """Warnings for figures that cannot be right ([!]) or be read as speed (notes); [] when nothing is suspect."""
    # no spread here: noise is one line per table (detectors.noise_line), not a warning. No warning may contain "; ".
    warnings = []
    # notes, not [!]: nothing is impossible, but they are recorded and lab 10 leaves such rows out of its fits
    if other_framework:
        warnings.append(f"measured in a process where {other_framework} also ran: its threads compete for the cores")
    if oversubscribed:
        warnings.append("more ranks or threads than cores: oversubscribed, so this is no speed measurement")
    warnings += detectors.above_device_count(speedup, devices)
    # reference_rate: this machine's lab 01 rate on the same workload
    warnings += detectors.contradicts_reference(baseline_rate, reference_rate, factor=BASELINE_FACTOR)
    return warnings


def flagged(text: str, warnings) -> str:
    """`text`, its notes as `(note: ...)`, then new flags as `[!] ...`; flags said before: "(flagged above)"."""
    warnings = list(warnings)
    bad, notes = detectors.impossible(warnings), detectors.notes(warnings)
    text += f"  (note: {'; '.join(notes)})" if notes else ""
    new = detectors.first_time(bad)
    text += f"  ({detectors.AS_ABOVE})" if len(new) < len(set(bad)) else ""
    return f"{text}  [!] {'; '.join(new)}" if new else text


def table_row(text: str, warnings) -> str:
    """A table row: its text, its notes, and ' *' if it carries a detector flag (said once under the table)."""
    notes = detectors.notes(warnings)
    return text + (f"  (note: {'; '.join(notes)})" if notes else "") + detectors.marked(warnings)


# ---- results: one record per measured configuration ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Machine:
    """Where a result was measured."""

    host: str
    cpu_count: int
    gpu_names: str
    torch_version: str
    tf_version: str
    python_version: str
    cpu_model: str = ""
    cpu_features: str = ""  # space-separated (hardware.FEATURES this CPU has)

    @classmethod
    def here(cls, hw: hardware.HardwareReport | None = None) -> "Machine":
        hw = hw or hardware.detect()
        return cls(hw.host, hw.cpu_count, hw.gpu_names, hw.torch_version, hw.tf_version, hw.python_version,
                   hw.cpu_model, hw.cpu_features)

    @property
    def fingerprint(self) -> tuple:
        """What makes two machines' rows comparable: host, CPU model and instruction-set features, GPUs."""
        return (self.host, self.cpu_model, self.cpu_features, self.gpu_names)


TRAINING = "training samples/s"  # samples through a whole optimizer step (forward, backward, update)
FORWARD = "forward samples/s"  # samples through a forward pass only (inference)
APPLIED = "samples/s in gradients applied"  # a parameter server: gradients it applied per second x their batch
ANSWERED = "requests answered/s"  # a server: requests answered per second (each one sample)
RATES = (TRAINING, FORWARD, APPLIED, ANSWERED)


@dataclasses.dataclass(frozen=True)
class Result:
    """One measured configuration and its machine (a row of results/labNN.csv); rows compare within one `workload`."""

    lab: str
    framework: str
    strategy: str
    world_size: int
    device: str
    batch_size: int
    samples_per_s: float  # of the median optimizer step, warm-up excluded (or of whole epochs, if `workload` says so)
    wall_s: float
    workload: str
    variant: str = ""  # what differs between the rows of one workload
    accuracy: float | None = None
    epochs: int | None = None
    threads: int | None = None
    repeats: int | None = None
    spread: float | None = None
    flags: str = ""
    rate: str = "training samples/s"  # which samples samples_per_s counts (RATES)
    machine: Machine | None = None
    timestamp: str = ""

    def stamped(self, hw: hardware.HardwareReport | None = None) -> "Result":
        """This result with the machine and the time filled in."""
        return dataclasses.replace(self, machine=self.machine or Machine.here(hw),
                                   timestamp=self.timestamp or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    @property
    def resources(self) -> float:
        """Devices used, in units of one single-thread device: ranks x threads per rank (threads unknown: 1)."""
        return self.world_size * (self.threads or 1)


RESULT_COLUMNS = ("timestamp", "lab", "framework", "strategy", "variant", "workload", "world_size", "device",
                  "batch_size", "epochs", "accuracy", "samples_per_s", "rate", "wall_s", "threads", "repeats", "spread",
                  "flags", "host", "cpu_count", "gpu_names", "torch_version", "tf_version", "python_version", "cpu_model",
                  "cpu_features")
_OPTIONAL = ("cpu_model", "cpu_features", "rate")  # absent from rows written before them: read as ""
_INTS = ("world_size", "batch_size", "epochs", "threads", "repeats", "cpu_count")
_FLOATS = ("accuracy", "samples_per_s", "wall_s", "spread")
_REQUIRED = ("world_size", "batch_size", "samples_per_s", "wall_s", "cpu_count")
_MACHINE = tuple(f.name for f in dataclasses.fields(Machine))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.1f}"
    return str(value)


VERDICTS_CSV = "verdicts.csv"
VERDICT_COLUMNS = ("timestamp", "lab", "claim", "expected", "ratio", "low", "high", "verdict", "repeats", "notes",
                   "host", "cpu_model", "cpu_features", "cpu_count", "gpu_names", "torch_version", "tf_version",
                   "python_version")


def _append(path: Path, columns, values: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        _upgrade_header(path, columns)
    with path.open("a", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        if new:
            writer.writerow(columns)
        writer.writerow([_cell(values.get(c)) for c in columns])
    return path


def _upgrade_header(path: Path, columns) -> None:
    """Rewrite a CSV with an older header under `columns` (columns it lacked left empty), so appended rows line up."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) == tuple(columns):
            return
        rows = list(reader)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[row.get(c) or "" for c in columns] for row in rows])


def write_verdict(verdict: "Verdict", directory=None, hw: hardware.HardwareReport | None = None) -> Path:
    """Append one verdict to <results dir>/verdicts.csv with the machine's fingerprint; returns the path."""
    values = {**dataclasses.asdict(verdict), **dataclasses.asdict(Machine.here(hw)),
              "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if not values["lab"]:
        raise ValueError(f"verdict {verdict.claim!r} names no lab: pass lab='NN' to measure.verdict")
    return _append(results_dir(directory) / VERDICTS_CSV, VERDICT_COLUMNS, values)


def read_verdicts(source) -> list[dict]:
    """The rows of a verdicts.csv (or of the one in a results folder), as dicts of strings."""
    source = Path(source)
    path = source / VERDICTS_CSV if source.is_dir() else source
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_result(result: Result, directory=None, hw: hardware.HardwareReport | None = None) -> Path:
    """Append one result to <results dir>/lab<lab>.csv (header written when the file is new); returns the path."""
    if not isinstance(result, Result):
        raise TypeError(f"write_result takes a measure.Result, got {type(result).__name__}")
    if result.rate not in RATES:
        raise ValueError(f"rate must be one of {RATES} (what samples_per_s counts), got {result.rate!r}")
    if not math.isfinite(result.samples_per_s) or result.samples_per_s <= 0:
        raise ValueError(f"samples_per_s must be a positive number, got {result.samples_per_s!r}")
    result = result.stamped(hw)
    assert result.machine is not None  # stamped() fills it in
    values = {**{f.name: getattr(result, f.name) for f in dataclasses.fields(Result) if f.name != "machine"},
              **dataclasses.asdict(result.machine)}
    return _append(results_dir(directory) / f"lab{result.lab}.csv", RESULT_COLUMNS, values)


def _parse_row(path: Path, line: int, record: dict) -> Result:
    parsed: dict[str, Any] = {}
    for column in RESULT_COLUMNS:
        text = (record.get(column) or "").strip()
        if column in _INTS + _FLOATS:
            if not text:
                if column in _REQUIRED:
                    raise ValueError(f"{path}, line {line}: column {column!r} is empty; it must be a number")
                parsed[column] = None
                continue
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"{path}, line {line}: column {column!r} must be a number, got {text!r}") from None
            parsed[column] = int(number) if column in _INTS else number
        else:
            parsed[column] = text
    machine = Machine(**{k: parsed.pop(k) for k in _MACHINE})
    return Result(**parsed, machine=machine)


def read_results(source) -> list[Result]:
    """The results in one CSV, or in every *.csv of a folder, validated; a bad file is named with its line."""
    source = Path(source)
    paths = sorted(p for p in source.glob("*.csv") if p.name != VERDICTS_CSV) if source.is_dir() else [source]
    results = []
    for path in paths:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [c for c in RESULT_COLUMNS if c not in header and c not in _OPTIONAL]
            if missing:
                raise ValueError(f"{path}, line 1: not a results CSV of this course, header lacks column(s) {missing}")
            for record in reader:
                if None in record or any(v is None for v in record.values()):
                    raise ValueError(f"{path}, line {reader.line_num}: ragged row, expected {len(header)} columns")
                results.append(_parse_row(path, reader.line_num, record))
    return results


SPEED_TEST = "speed test: cnn2d_3layer_fullconnected_3layer, synthetic 28x28, median step"  # labs 01 and 03 share it


def reference_rate(workload: str, variant: str, *, lab: str = "01", directory=None) -> float | None:
    """The newest samples/s `lab` recorded on this machine for this workload and variant; None if it has not run."""
    path = results_dir(directory) / f"lab{lab}.csv"
    if not path.exists():
        return None
    host = hardware.detect().host
    rows = [r for r in read_results(path)
            if r.workload == workload and r.variant == variant and r.machine and r.machine.host == host]
    return max(rows, key=lambda r: r.timestamp).samples_per_s if rows else None


SAME_RUN_S = 6 * 3600  # rows of another lab this recent, on this machine, count as measured in the same run


def _same_quantity(row: Result) -> tuple:
    """What two rows must share to be one quantity measured twice: machine, workload, rate and configuration."""
    machine = row.machine.fingerprint if row.machine else ()
    return (*machine, row.workload, row.rate, row.framework, row.strategy, row.variant, row.world_size, row.threads,
            row.batch_size)


def measured_before(row: Result, directory=None, earlier=()) -> list[str]:
    """Flags for `row` against the same quantity recorded by another lab of this run, or among `earlier` rows of
    the same lab (detectors.measured_twice); rows with notes (another framework in the process, oversubscribed cores, a
    busy machine) are not compared."""
    row = row.stamped()
    folder = results_dir(directory)
    if detectors.notes(row.flags):
        return []
    now = _dt.datetime.fromisoformat(row.timestamp)
    others = [o for o in (read_results(folder) if folder.exists() else []) if o.lab != row.lab] + list(earlier)
    said = []
    for other in others:
        if _same_quantity(other) != _same_quantity(row) or detectors.notes(other.flags):
            continue
        with contextlib.suppress(ValueError):
            if abs((now - _dt.datetime.fromisoformat(other.timestamp)).total_seconds()) > SAME_RUN_S:
                continue
        first = f"lab {other.lab}" if other.lab != row.lab else f"its {other.variant or other.strategy} row"
        said += detectors.measured_twice(other.samples_per_s, other.spread, row.samples_per_s, row.spread,
                                         what=f"{row.strategy} {row.variant}".strip(), first_name=first,
                                         second_name=f"lab {row.lab}" if other.lab != row.lab else "this one",
                                         unit=row.rate)
    return list(dict.fromkeys(said))


def record(results, directory=None, hw: hardware.HardwareReport | None = None) -> str:
    """Write results (one or many) to the results CSVs; returns their table by workload, as the labs print it. A row
    that another lab of this run measured too is compared with it (measured_before); every flag reaches the CSV."""
    results = [results] if isinstance(results, Result) else list(results)
    load = conditions.taken(reset=True)  # what else used the machine while these rows were measured
    if load and load.busy:
        results = [dataclasses.replace(r, flags="; ".join([f for f in (r.flags, *load.note()) if f])) for r in results]
    results = [r.stamped(hw) for r in results]
    results = [dataclasses.replace(r, flags="; ".join([f for f in (r.flags, *measured_before(r, directory, results[:i]))
                                                      if f])) for i, r in enumerate(results)]
    paths = {write_result(r, directory, hw).name for r in results}
    strategy_w = max([len("strategy")] + [len(r.strategy) for r in results]) + 2
    variant_w = max([len("variant")] + [len(r.variant) for r in results]) + 2
    lines = [f"{'lab':<4}{'strategy':<{strategy_w}}{'variant':<{variant_w}}{'ranks':>6}{'threads':>8}{'batch':>7}"
             f"{'rate':>12}"]
    workloads = list(dict.fromkeys((r.workload, r.rate) for r in results))
    for workload, rate in workloads:
        lines.append(f"    workload: {workload}  (rate: {rate})")
        for r in (r for r in results if (r.workload, r.rate) == (workload, rate)):
            threads = "-" if r.threads is None else str(r.threads)
            # this row format is fixed: the course's consistency test reads it back
            lines.append(f"{r.lab:<4}{r.strategy:<{strategy_w}}{r.variant:<{variant_w}}{r.world_size:>6}{threads:>8}"
                         f"{r.batch_size:>7}{r.samples_per_s:>12.1f}{detectors.marked(r.flags)}")
            lines += [f"    note: {note}" for note in detectors.notes(r.flags) if not (load and note in load.note())]
    names = [f"{r.strategy} {r.variant}".strip() for r in results]
    lines += detectors.table_lines([r.flags for r in results], names)
    noise = detectors.noise_line([r.spread for r in results])
    lines += [noise] if noise else []
    lines += [load.line()] if load and load.busy else []
    lines.append(f"wrote {len(results)} row(s) of {len(workloads)} workload(s) to {', '.join(sorted(paths))} in the "
                 "results folder")
    return "\n".join(lines)
