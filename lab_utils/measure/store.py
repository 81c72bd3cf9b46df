"""The results store: one results folder holding the labs' rows (labNN.csv), the verdicts (verdicts.csv) and the
sweeps another lab reuses (allreduce.json), each added with `append` and read with `rows`; and which `[!]` flags
this process has printed in full (a flag is said once, then pointed back to)."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from pathlib import Path

from .. import detectors, hardware
from .results_csv import (VERDICT_COLUMNS, VERDICTS_CSV, Machine, Result, append_row, read_results, read_verdicts,
                          results_dir, write_result)

SWEEPS_JSON = "allreduce.json"  # lab 06's all-reduce sweep, which lab 10 reuses (one measurement, one fit)
TABLES = ("results", "verdicts", "sweeps")


@dataclasses.dataclass(frozen=True)
class AllReduceSweep:
    """An all-reduce sweep: median seconds (and spreads) per message size in bytes, on `devices` ranks."""

    lab: str
    backend: str
    devices: int
    sizes: tuple[int, ...]
    seconds: tuple[float, ...]
    spreads: tuple[float, ...]
    host: str = ""
    cpu_model: str = ""
    timestamp: str = ""
    others: float | None = None  # other programs' mean cores over the sweep (None: an older record, not measured)
    cores: int = 0               # the cores they were counted against


class Store:
    """One results folder (`directory`, else measure.results_dir()): append a Result, a verdict (anything with
    `verdict_cells()`) or a AllReduceSweep; read them back with rows('results' | 'verdicts' | 'sweeps')."""

    def __init__(self, directory=None) -> None:
        self.directory = results_dir(directory)
        self.said: set[str] = set()  # the [!] flags printed in full in this process (a notebook's kernel)

    def append(self, record, hw: hardware.HardwareReport | None = None) -> Path:
        """Add one record to its table; returns the file it went to. A AllReduceSweep replaces its lab's on this host."""
        if isinstance(record, Result):
            return write_result(record, self.directory, hw)
        if isinstance(record, AllReduceSweep):
            return self._append_sweep(record, hw)
        if hasattr(record, "verdict_cells"):
            values = {**record.verdict_cells(), **dataclasses.asdict(Machine.here(hw)), "timestamp": _now()}
            if not values["lab"]:
                raise ValueError(f"verdict {values['claim']!r} names no lab: pass lab='NN' to measure.verdict")
            if not values.get("workload"):
                raise ValueError(f"verdict {values['claim']!r} names no workload: pass workload= (a workload of "
                                 "lab_utils.workloads.REGISTRY, or the two its sides ran) to measure.verdict")
            return append_row(self.directory / VERDICTS_CSV, VERDICT_COLUMNS, values)
        raise TypeError(f"a results store holds Results, verdicts and Sweeps, got {type(record).__name__}")

    def rows(self, table: str = "results") -> list:
        """The records of one table: Results, verdicts (dicts of strings) or Sweeps; [] before any was added."""
        if table not in TABLES:
            raise ValueError(f"a results store has the tables {TABLES}, got {table!r}")
        if not self.directory.exists():
            return []
        if table == "results":
            return read_results(self.directory)
        if table == "verdicts":
            return read_verdicts(self.directory)
        path = self.directory / SWEEPS_JSON
        return [AllReduceSweep(**{**s, **{k: tuple(s[k]) for k in ("sizes", "seconds", "spreads")}})
                for s in (json.loads(path.read_text()) if path.exists() else [])]

    def say(self, warnings) -> list[str]:
        """The impossible flags in `warnings` not yet said in this process, now counted as said."""
        new = [w for w in dict.fromkeys(detectors.impossible(warnings)) if w not in self.said]
        self.said.update(new)
        return new

    def _append_sweep(self, sweep: AllReduceSweep, hw: hardware.HardwareReport | None) -> Path:
        machine = Machine.here(hw)
        sweep = dataclasses.replace(sweep, host=sweep.host or machine.host, cpu_model=sweep.cpu_model or machine.cpu_model,
                                    timestamp=sweep.timestamp or _now())
        kept = [s for s in self.rows("sweeps") if not (s.lab == sweep.lab and s.host == sweep.host)]
        path = self.directory / SWEEPS_JSON
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([dataclasses.asdict(s) for s in kept + [sweep]], indent=1))
        return path


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


_STORES: dict[Path, Store] = {}  # this process's store per results folder: what each has said lasts the process


def store(directory=None) -> Store:
    """This process's store of the results folder `directory` (default: measure.results_dir())."""
    path = results_dir(directory).resolve()
    return _STORES.setdefault(path, Store(path))


def forget() -> None:
    """Forget what every store has said (a new notebook run, or a test)."""
    for each in _STORES.values():
        each.said.clear()
