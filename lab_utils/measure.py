"""Timers that warm up, synchronize and take medians; throughput; results CSV rows with hardware metadata."""
from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from . import hardware

RESULT_COLUMNS = (
    "timestamp", "lab", "framework", "strategy", "world_size", "device", "batch_size", "epochs",
    "accuracy", "samples_per_s", "wall_s", "threads", "host", "cpu_count", "gpu_names",
    "torch_version", "tf_version", "python_version", "notes",
)
NUMERIC_COLUMNS = ("world_size", "batch_size", "epochs", "accuracy", "samples_per_s", "wall_s", "threads", "cpu_count")
OPTIONAL_NUMERIC = ("accuracy", "epochs", "threads")  # may be left empty when not measured


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
        """(max - min) / median: how noisy the repeats were."""
        return (max(self.times) - min(self.times)) / self.median if self.median else 0.0

    def __str__(self) -> str:
        return (f"median {self.median * 1e3:.3f} ms over {len(self.times)} repeats "
                f"(min {min(self.times) * 1e3:.3f}, max {max(self.times) * 1e3:.3f}; {self.warmup} warm-up run(s) excluded)")


def time_it(fn, *, warmup: int = 2, repeats: int = 5, device=None) -> Timing:
    """Call fn() `warmup` times untimed, then `repeats` times timed, synchronizing `device` around each."""
    return time_interleaved({"fn": fn}, warmup=warmup, repeats=repeats, device=device)["fn"]


def time_interleaved(fns: dict, *, warmup: int = 1, repeats: int = 5, device=None, before: dict | None = None) -> dict:
    """Time several candidates round-robin (order alternating each round) so drift hits all alike.

    `before` maps a candidate to an untimed setup call made right before each of its runs.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    before = before or {}
    names = list(fns)
    times = {name: [] for name in names}
    for round_ in range(warmup + repeats):
        for name in names if round_ % 2 == 0 else reversed(names):
            if name in before:
                before[name]()
            synchronize(device)
            start = time.perf_counter()
            fns[name]()
            synchronize(device)
            if round_ >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: Timing(tuple(times[name]), warmup) for name in names}


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


def results_dir(path=None) -> Path:
    """Where results CSVs go: `path`, else $LAB_RESULTS_DIR, else results/ at the course root."""
    if path:
        return Path(path)
    override = os.environ.get("LAB_RESULTS_DIR")
    return Path(override) if override else Path(__file__).resolve().parent.parent / "results"


def hardware_metadata(hw: hardware.HardwareReport | None = None) -> dict:
    """The columns of a results row that describe this machine."""
    hw = hw or hardware.detect()
    return {"host": hw.host, "cpu_count": hw.cpu_count, "gpu_names": hw.gpu_names, "torch_version": hw.torch_version,
            "tf_version": hw.tf_version, "python_version": hw.python_version}


def result_row(*, lab: str, framework: str, strategy: str, world_size: int, device: str, batch_size: int,
               samples_per_s: float, wall_s: float, accuracy: float | None = None, epochs: int | None = None,
               threads: int | None = None, notes: str = "", hw: hardware.HardwareReport | None = None) -> dict:
    """One results row: what ran, what was measured, and on which machine."""
    row = {"timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "lab": lab,
           "framework": framework, "strategy": strategy, "world_size": world_size, "device": device,
           "batch_size": batch_size, "epochs": "" if epochs is None else epochs,
           "accuracy": "" if accuracy is None else round(float(accuracy), 6),
           "samples_per_s": round(float(samples_per_s), 3), "wall_s": round(float(wall_s), 4),
           "threads": "" if threads is None else threads, "notes": notes}
    row.update(hardware_metadata(hw))
    return {c: row[c] for c in RESULT_COLUMNS}


def write_result(row: dict, directory=None) -> Path:
    """Append a row to <results dir>/lab<lab>.csv, writing the header when the file is new."""
    missing = [c for c in RESULT_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"results row lacks column(s) {missing}; build it with result_row(...)")
    path = results_dir(directory) / f"lab{row['lab']}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=RESULT_COLUMNS, extrasaction="raise", lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerow({c: row[c] for c in RESULT_COLUMNS})
    return path


def read_results(source) -> list[dict]:
    """Rows of one results CSV, or of every *.csv in a folder, validated; numbers come back as floats."""
    source = Path(source)
    paths = sorted(source.glob("*.csv")) if source.is_dir() else [source]
    rows = []
    for path in paths:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [c for c in RESULT_COLUMNS if c not in header]
            if missing:
                raise ValueError(f"{path}, line 1: not a results CSV, header lacks column(s) {missing}")
            for record in reader:
                line = reader.line_num
                if None in record or any(v is None for v in record.values()):
                    raise ValueError(f"{path}, line {line}: ragged row, expected {len(header)} columns")
                for col in NUMERIC_COLUMNS:
                    text = record[col].strip()
                    if not text and col in OPTIONAL_NUMERIC:
                        record[col] = None
                        continue
                    try:
                        record[col] = float(text)
                    except ValueError:
                        raise ValueError(f"{path}, line {line}: column {col!r} must be a number, got {text!r}") from None
                rows.append(record)
    return rows
