"""Results records: the CSV rows of measured configurations (results/labNN.csv) and of verdicts (verdicts.csv), each
with the machine's fingerprint; written, upgraded to the current header, read back validated."""
from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any

from .. import allocator, detectors, hardware, workloads


def results_dir(path=None) -> Path:
    """Where results CSVs go: `path`, else $LAB_RESULTS_DIR, else results/ in the working directory."""
    if path:
        return Path(path)
    override = os.environ.get("LAB_RESULTS_DIR")
    return Path(override) if override else Path.cwd() / "results"


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
    allocator: str = ""  # allocator.setting(): the malloc thresholds the run's processes had ("": not recorded)

    @classmethod
    def here(cls, hw: hardware.HardwareReport | None = None) -> "Machine":
        hw = hw or hardware.detect()
        return cls(hw.host, hw.cpu_count, hw.gpu_names, hw.torch_version, hw.tf_version, hw.python_version,
                   hw.cpu_model, hw.cpu_features, allocator.setting())

    @property
    def fingerprint(self) -> tuple:
        """What makes two machines' rows comparable: host, CPU model and instruction-set features, GPUs, and the
        allocator's setting (a step with glibc's default thresholds can run 1.2-1.5x slower: see lab_utils.allocator)."""
        return (self.host, self.cpu_model, self.cpu_features, self.gpu_names, self.allocator)


TRAINING = "training samples/s"  # samples through a whole optimizer step (forward, backward, update)
FORWARD = "forward samples/s"  # samples through a forward pass only (inference)
APPLIED = "samples/s in gradients applied"  # a parameter server: gradients it applied per second x their batch
ANSWERED = "requests answered/s"  # a server: requests answered per second (each one sample)
ALLREDUCES = "gradient all-reduces/s"  # one model's gradients all-reduced over the ranks, per second (1 / the time)
RATES = (TRAINING, FORWARD, APPLIED, ANSWERED, ALLREDUCES)


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
    flags: tuple[str, ...] = ()  # detectors.Flags (a plain string is a note); one string is one flag
    rate: str = "training samples/s"  # which samples samples_per_s counts (RATES)
    machine: Machine | None = None
    timestamp: str = ""

    def __post_init__(self) -> None:
        flags = self.flags
        object.__setattr__(self, "flags", ((flags,) if flags else ()) if isinstance(flags, str) or flags is None
                           else tuple(f for f in flags if f))

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
                  "flags", "flag_kinds", "host", "cpu_count", "gpu_names", "torch_version", "tf_version", "python_version", "cpu_model",
                  "cpu_features", "allocator")
_OPTIONAL = ("cpu_model", "cpu_features", "rate", "flag_kinds", "allocator")  # absent from rows written before them: read as ""
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
VERDICT_COLUMNS = ("timestamp", "lab", "claim", "workload", "expected", "direction", "ratio", "low", "high", "verdict", "repeats", "notes",
                   "host", "cpu_model", "cpu_features", "cpu_count", "gpu_names", "torch_version", "tf_version",
                   "python_version")


def append_row(path: Path, columns, values: dict) -> Path:
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


def read_verdicts(source) -> list[dict]:
    """The rows of a verdicts.csv (or of the one in a results folder), as dicts of strings; a column an older file
    lacks (its verdicts named no workload) reads as ""."""
    source = Path(source)
    path = source / VERDICTS_CSV if source.is_dir() else source
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return [{**dict.fromkeys(VERDICT_COLUMNS, ""), **row} for row in csv.DictReader(handle)]


def write_result(result: Result, directory=None, hw: hardware.HardwareReport | None = None) -> Path:
    """Append one result to <results dir>/lab<lab>.csv (header written when the file is new); returns the path."""
    if not isinstance(result, Result):
        raise TypeError(f"write_result takes a measure.Result, got {type(result).__name__}")
    if result.rate not in RATES:
        raise ValueError(f"rate must be one of {RATES} (what samples_per_s counts), got {result.rate!r}")
    if not math.isfinite(result.samples_per_s) or result.samples_per_s <= 0:
        raise ValueError(f"samples_per_s must be a positive number, got {result.samples_per_s!r}")
    workloads.check_batch(result.workload, result.batch_size)
    result = result.stamped(hw)
    assert result.machine is not None  # stamped() fills it in
    values = {**{f.name: getattr(result, f.name) for f in dataclasses.fields(Result) if f.name != "machine"},
              **dataclasses.asdict(result.machine), **flag_cells(result.flags)}
    return append_row(results_dir(directory) / f"lab{result.lab}.csv", RESULT_COLUMNS, values)


def flag_cells(flags) -> dict[str, str]:
    """A row's flags as two CSV cells: their texts and, beside them, their kinds (JSON lists, in the same order)."""
    flags = list(flags)
    return {"flags": json.dumps([str(f) for f in flags]),
            "flag_kinds": json.dumps([detectors.kind_of(f).name for f in flags])}


# Rows written before flags had kinds hold their texts joined by "; ", each kind told by the phrase it carries: read
# so, and only for those rows (a row with a flag_kinds cell is read by its kinds).
_PHRASES = {detectors.ABOVE_100: detectors.Kind.ABOVE_100, detectors.NO_FIT: detectors.Kind.NO_FIT,
            detectors.LESS_TIME: detectors.Kind.LESS_TIME, detectors.SATURATED: detectors.Kind.SATURATED,
            detectors.REVERSED: detectors.Kind.REVERSED, detectors.FLIPPED: detectors.Kind.FLIPPED,
            detectors.CONTRADICT: detectors.Kind.CONTRADICT, detectors.WAITED: detectors.Kind.WAITED,
            detectors.ABOVE_BOUND: detectors.Kind.ABOVE_BOUND, detectors.SAME_WORK: detectors.Kind.SAME_WORK,
            "repeats spread by": detectors.Kind.NOISE}


def _old_flag(text: str) -> detectors.Flag:
    kind = next((k for phrase, k in _PHRASES.items() if phrase in text), detectors.Kind.NOTE)
    return detectors.Flag(kind, text)


def read_flags(texts: str, kinds: str) -> tuple[detectors.Flag, ...]:
    """A row's flags from its two cells (flag_cells); a row written before kinds: its "; "-joined texts."""
    if not kinds:
        return tuple(_old_flag(t) for t in texts.split("; ") if t)
    texts_list, kinds_list = json.loads(texts or "[]"), json.loads(kinds)
    if len(texts_list) != len(kinds_list):
        raise ValueError(f"{len(texts_list)} flag texts beside {len(kinds_list)} kinds")
    return tuple(detectors.Flag(detectors.Kind[k], t) for t, k in zip(texts_list, kinds_list))


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
    try:
        parsed["flags"] = read_flags(parsed["flags"], parsed.pop("flag_kinds"))
    except (ValueError, KeyError) as error:
        raise ValueError(f"{path}, line {line}: columns 'flags' and 'flag_kinds' do not read as flags: {error}") from None
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
