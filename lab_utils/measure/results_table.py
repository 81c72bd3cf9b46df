"""Recording a lab's rows: each compared with the same quantity measured earlier in the run, written to the results
CSVs and shown as the labs print them; the reference rate another lab recorded."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import re
import textwrap

from .. import conditions, detectors, hardware, workloads
from .lines import WIDTH, wrap
from . import lines as printed
from .results_csv import FORWARD, TRAINING, Result, read_results, results_dir, write_result
from .store import store


def reference_row(workload: str, variant: str, *, lab: str = "01", directory=None) -> Result | None:
    """The newest row `lab` recorded on this machine for this workload and variant; None if it has not run."""
    host = hardware.detect().host
    rows = [r for r in store(directory).rows("results") if r.lab == lab
            and r.workload == workload and r.variant == variant and r.machine and r.machine.host == host]
    return max(rows, key=lambda r: r.timestamp) if rows else None


def reference_rate(workload: str, variant: str, *, lab: str = "01", directory=None) -> float | None:
    """The newest samples/s `lab` recorded on this machine for this workload and variant; None if it has not run."""
    row = reference_row(workload, variant, lab=lab, directory=directory)
    return row.samples_per_s if row else None


def reference_conditions(workload: str, variant: str, *, lab: str = "01", threads: int | None = None,
                         directory=None) -> str | None:
    """How `lab`'s reference row was measured, as its row recorded it: its intra-op threads where they differ from
    `threads` (this figure's), and the busy machine or throttling quota it was measured under; None: no such row.
    A reference clash names this beside its [!] (two figures of one workload, and what made them differ)."""
    row = reference_row(workload, variant, lab=lab, directory=directory)
    if row is None:
        return None
    parts = []
    if threads is not None and row.threads is not None and row.threads != threads:
        parts.append(f"lab {lab} ran it with {row.threads} intra-op thread(s) (fitted to the CPUs free then), this "
                     f"with {threads}")
    loaded = [n for n in detectors.notes(row.flags) if n.startswith("measured while") or "throttled" in n]
    parts += [f"lab {lab}'s figure was {loaded[0]}" if loaded[0].startswith("measured") else f"lab {lab}: {loaded[0]}"] \
        if loaded else []
    if not parts:
        now = run_conditions()
        parts.append(f"lab {lab} recorded no busy machine and the same thread count, so the load now is the likelier "
                     "cause" if now is None or now.busy else
                     f"lab {lab} recorded no busy machine and the same thread count, and this run measured none either: "
                     "not the load, so the two do not measure quite the same thing")  # learner s10a: lab 05, quiet
    return ", and ".join(p.replace("; ", ", ") for p in parts)


SAME_RUN_S = 6 * 3600  # rows of another lab this recent, on this machine, count as measured in the same run


# labels of rows written before the registry (older results CSVs): their model, data and image side read from the text
_MODEL = re.compile(r"cnn2d\w+|course CNN|digits CNN|wide CNN")
_ALIASES = {"course CNN": "cnn2d_3layer_fullconnected_3layer", "digits CNN": "cnn2d_2layer_fullconnected_2layer",
            "wide CNN": "wide_cnn", "procedural": "synthetic"}
_DATA = re.compile(r"digits|synthetic|procedural")
_SIDE = re.compile(r"\d+x\d+")


def measured_what(row: Result) -> tuple:
    """What a row measured, whatever its labels say: machine, framework, what a figure of its registered workload is
    (workloads.Workload.measures: model, data, image size, what one repeat computes, batch fetch or not; read from the
    label of a row written before the registry, or the whole label), batch, ranks, threads, rate kind, and the parallel
    strategy (one device has none: `single-device`, `single-worker` and `single-process` name the same thing)."""
    machine = row.machine.fingerprint if row.machine else ()
    registered = workloads.find(row.workload)
    model = None if registered else _MODEL.search(row.workload)
    if registered:
        what: tuple = registered.measures
    elif model:
        data, side = _DATA.search(row.workload), _SIDE.search(row.workload)
        side_px = int(side.group().partition("x")[0]) if side else None
        computes = {TRAINING: "step", FORWARD: "forward"}.get(row.rate, "")
        what = (_ALIASES.get(model.group(), model.group()), _ALIASES.get(data.group(), data.group()) if data else "",
                side_px, computes, "training run" in row.workload, "")  # a training run fetched each batch
    else:
        what = (row.workload,)
    return (*machine, row.framework, *what, row.batch_size, row.world_size, row.threads, row.rate,
            row.strategy if row.world_size > 1 else "")


def _deliberate(a: Result, b: Result) -> bool:
    """Two rows of one lab and one workload label with different variants: the lab's own comparison, not a repeat."""
    return a.lab == b.lab and a.workload == b.workload and (a.strategy, a.variant) != (b.strategy, b.variant)


def _one_of_several(row: Result, siblings) -> bool:
    """True when `row`'s lab recorded other variants of its very configuration and label (lab 07's checkpoint
    choices, float32 and bfloat16): its variant is then a change the lab made, which only the same variant repeats."""
    def config(r: Result) -> tuple:
        return r.lab, r.workload, measured_what(r)

    return any(config(s) == config(row) and (s.strategy, s.variant) != (row.strategy, row.variant) for s in siblings)


def _named(row: Result, other: Result) -> str:
    """How a flag names `row` beside `other`: its lab, and its variant when the labs are one."""
    label = f"{row.strategy} {row.variant}".strip()
    return f"lab {row.lab}" + (f" ({label})" if row.lab != other.lab or label else "")


def _when(other: Result, row: Result, now: _dt.datetime) -> str:
    """When `other` and `row` were measured: in one lab's run, or by two labs' runs so far apart (their timestamps)."""
    if other.lab == row.lab:
        return "in this lab's run"
    try:
        seconds = abs((now - _dt.datetime.fromisoformat(other.timestamp)).total_seconds())
    except (TypeError, ValueError):
        return "by two labs' runs"
    apart = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"
    return f"by two labs' runs {apart} apart"


_LOAD = re.compile(r"other programs used [0-9.]+ of [0-9]+ cores")


def _noted(note: str) -> str:
    """A row's note as a measured-twice flag quotes it: a refusal for the load ('not measurable here: ...', the row's
    or its verdict's) as its load alone (learner s10e: one 14-line flag quoted two refusals in full)."""
    load = _LOAD.search(note) if NOT_MEASURABLE in note else None
    return f"refused for the load ({load.group(0)})" if load else note


def same_quantity_before(row: Result, directory=None, earlier=(), siblings=None) -> list[Result]:
    """The rows measured_before compares `row` with: the same quantity (measured_what) recorded by another lab within
    SAME_RUN_S, or among `earlier` rows of the same lab; `siblings` as in measured_before."""
    row = row.stamped()
    now = _dt.datetime.fromisoformat(row.timestamp)
    recorded = [o for o in store(directory).rows("results") if o.lab != row.lab]
    siblings = list(earlier) if siblings is None else list(siblings)
    several = _one_of_several(row, siblings)
    same = []
    for other in recorded + list(earlier):
        if measured_what(other) != measured_what(row) or _deliberate(other, row):
            continue
        if (several or _one_of_several(other, recorded + siblings)) and \
                (other.strategy, other.variant) != (row.strategy, row.variant):
            continue
        with contextlib.suppress(ValueError):
            if abs((now - _dt.datetime.fromisoformat(other.timestamp)).total_seconds()) > SAME_RUN_S:
                continue
        same.append(other)
    return same


def measured_before(row: Result, directory=None, earlier=(), siblings=None, brief: bool = False) -> list[str]:
    """Flags for `row` against the same quantity (measured_what, not its labels) recorded by another lab of this run,
    or among `earlier` rows of the same lab (detectors.measured_twice); a row with a note is compared too, and the
    flag shows its note; a row with a condition note (detectors.condition) is compared by the condition rule.
    `siblings`: every row the lab records with `row` (default `earlier`); `brief`: a condition note that only the
    row's own notes explain is one short line under the row (its notes, printed above it, name the condition)."""
    row = row.stamped()
    now = _dt.datetime.fromisoformat(row.timestamp)
    said = []
    for other in same_quantity_before(row, directory, earlier, siblings):
        noted = list(dict.fromkeys(f"{_named(r, o)}: {_noted(n)}" for r, o in ((other, row), (row, other))
                                   for n in detectors.notes(r.flags)))
        labels = (row.workload if other.workload == row.workload else  # the registry says both labels measure one thing
                  f"one quantity under two workload labels ('{other.workload}' and '{row.workload}': the same model, "
                  "data and computation)")
        differed = [f"{_named(r, o)}: {c}" for r, o in ((other, row), (row, other))
                    for c in detectors.conditions_of(r.flags)]  # what its lab says moved one of the two
        noted = [n for n in noted if n not in differed]
        carry = [_named(r, o) for r, o in ((other, row), (row, other))
                 if any(n.startswith(f"{_named(r, o)}: ") for n in noted)]
        own = brief and bool(differed) and all(d.startswith(f"{_named(row, other)}: ") for d in differed)
        said += detectors.measured_twice(other.samples_per_s, other.spread, row.samples_per_s, row.spread,
                                         what=f"{labels}, batch {row.batch_size}, {row.world_size} rank(s)",
                                         first_name=f"lab {other.lab}" if own and other.lab != row.lab else
                                         _named(other, row), second_name=_named(row, other), under_row=own,
                                         unit=row.rate, notes=noted, condition=" / ".join(differed),
                                         when=_when(other, row, now), suspect=carry[0] if len(carry) == 1 else "")
    return list(dict.fromkeys(said))


_RECORDED: list = []  # the Load the last record() read (at most one): summaries printed after it still see it


def last_recorded_load() -> "conditions.Load | None":
    """The machine's Load over the measurements the last record() wrote (None: none yet, or no /proc)."""
    return _RECORDED[-1] if _RECORDED else None


def forget_recorded() -> None:
    """Forget the last record()'s load (a new notebook run, or a test)."""
    _RECORDED.clear()


def run_conditions() -> "conditions.Load | None":
    """The measuring windows since the lab last recorded its rows, else those its last record() read (a summary
    printed after the record still names the conditions its figures were measured under)."""
    return conditions.taken() or last_recorded_load()


def record(results, directory=None, hw: hardware.HardwareReport | None = None, *, noise_above: bool = False,
           brief_notes: bool = False) -> str:
    """Append results (one or many) to the results store; returns their table by workload, as the labs print it. A
    row that another lab of this run measured too is compared with it (measured_before); every flag reaches the CSV.
    `noise_above`: the cell that timed these rows printed their noise line already, so the table does not repeat it;
    `brief_notes`: measured_before's brief notes (lab 03, learner s11r2c: a six-line note under one row)."""
    results = [results] if isinstance(results, Result) else list(results)
    load = conditions.taken(reset=True)  # what else used the machine while these rows were measured
    _RECORDED[:] = [load] if load else []
    noted = tuple(detectors.note(n) for n in load.note()) if load else ()  # a busy machine or a throttling quota
    # a row its lab refused ('not measurable here: <its own load>') or noted with its own load (a verdict's) keeps that
    # one load: the record's mean over every window beside it would name a second load for one measurement
    results = [dataclasses.replace(r, flags=r.flags + (() if _own_load(r) else noted)).stamped(hw) for r in results]
    results = [dataclasses.replace(r, flags=r.flags + tuple(measured_before(r, directory, results[:i], results, brief_notes)))
               for i, r in enumerate(results)]
    files = {store(directory).append(r, hw).name for r in results}
    return recorded_table(results, load, sorted(files), noise_above=noise_above)


NOT_MEASURABLE = "not measurable here"  # a summary's word for a CANNOT_SEE verdict or a figure unreadable() rules out


def _own_load(result: Result) -> bool:
    """True for a row recorded with its lab's refusal (measure.refusal) or a note naming the load it was measured
    under (a verdict's outcome, conditions.Load.note): it keeps that one load."""
    return any(str(f).startswith(NOT_MEASURABLE) or "measured while other programs used" in str(f)
               for f in result.flags)


def recorded_table(results: list[Result], load: "conditions.Load | None", files, *, noise_above: bool = False) -> str:
    """The table record() prints: rows by workload, their notes, one `[!]` line per kind, noise (unless `noise_above`:
    printed where the rows were timed), load, the files."""
    strategy_w = max([len("strategy")] + [len(r.strategy) for r in results]) + 2
    variant_w = max([len("variant")] + [len(r.variant) for r in results]) + 2
    lines = [f"{'lab':<4}{'strategy':<{strategy_w}}{'variant':<{variant_w}}{'ranks':>6}{'threads':>8}{'batch':>7}"
             f"{'rate':>12}"]
    workloads = list(dict.fromkeys((r.workload, r.rate) for r in results))
    loaded = load.note() if load else []
    for workload, rate in workloads:
        head = f"    workload: {workload}  (rate: {rate})"  # past WIDTH the rate goes on a line of its own
        lines.append(head if len(head) <= WIDTH else f"    workload: {workload}  (rate:\n        {rate})")
        for r in (r for r in results if (r.workload, r.rate) == (workload, rate)):
            threads = "-" if r.threads is None else str(r.threads)
            # this row format is fixed: the course's consistency test reads it back
            lines.append(f"{r.lab:<4}{r.strategy:<{strategy_w}}{r.variant:<{variant_w}}{r.world_size:>6}{threads:>8}"
                         f"{r.batch_size:>7}{r.samples_per_s:>12.1f}{detectors.marked(r.flags)}")
            lines += [wrap(f"    note: {note}") for note in detectors.notes(r.flags)
                      if note not in loaded and not note.startswith(NOT_MEASURABLE)]
    names = [f"{r.strategy} {r.variant}".strip() for r in results]
    lines += refusal_lines([r.flags for r in results], names, [r.workload for r in results])
    lines += table_lines([r.flags for r in results], names)
    noise = "" if noise_above else detectors.noise_line([r.spread for r in results])
    lines += [noise] if noise else []
    lines += [wrap(load.line())] if load and load.note() else []
    lines.append(f"wrote {len(results)} row(s) of {len(workloads)} workload(s) to {', '.join(files)} in the "
                 "results folder")
    return "\n".join(lines)


def refusal_lines(per_row, names, workloads=None) -> list[str]:
    """The refusals rows carry ('not measurable here: why', measure.refusal), each said once under the table with the
    rows it refuses (named once each, however many batches, "; " between two names), not once per row. `workloads`
    (one per row, optional): a name that also has rows the note does not refuse is named with the refused rows'
    workload, so the line does not seem to refuse rows that were read (lab 13: 'rows spatial' under three workloads)."""
    refused: dict[str, list[str]] = {}
    workloads = list(workloads) if workloads is not None else [None] * len(names)
    for flags, name, workload in zip(per_row, names, workloads):
        for note in detectors.notes(flags):
            if note.startswith(NOT_MEASURABLE):
                unrefused = any(n == name and note not in detectors.notes(f) for f, n in zip(per_row, names))
                name_here = f"{name} ({workload})" if unrefused and workload else name
                refused.setdefault(note, [])
                refused[note] += [] if name_here in refused[note] else [name_here]
    return [short_lines(f"{NOT_MEASURABLE}, rows {'; '.join(rows)}{note[len(NOT_MEASURABLE):]}")
            for note, rows in refused.items()]


def short_lines(text: str, width: int = WIDTH, indent: str = "    ") -> str:
    """A long printed line as lines of at most `width` characters, the later ones indented: one line of 300 or more
    characters is hard to read in a notebook; a text already broken (measure.flagged's notes) keeps its breaks. A line
    that refuses a figure for the load says it for the cell: a verdict refused for it later in the same cell points
    to it (measure.lines.said_before)."""
    if printed.busy_refusal(text) and NOT_MEASURABLE in text:
        printed.mark_said("load")
    return "\n".join(textwrap.fill(printed.unbroken_units(line), width=width, subsequent_indent=indent,
                                   break_on_hyphens=False, break_long_words=False).replace(printed.NO_BREAK, " ")
                      for line in text.split("\n"))  # flagged's breaks stay; a figure keeps its unit


def table_lines(per_row, names, what: str = "rows") -> list[str]:
    """A table's `[!]` lines, one per impossible kind (detectors.one_line); a kind whose flags this process's store
    has all said before points back instead."""
    return [wrap(detectors.flag_text(f"{head}: {flag}")) if store().say(said) else wrap(f"{head}: {detectors.AS_ABOVE}")
            for _, said, head, flag in detectors.by_kind(per_row, names, what)]
