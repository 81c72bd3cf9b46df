"""Lab 10's comparison of results rows: each row against its baseline, with its speedup, efficiency and flags; the
table that prints them."""
from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import conditions, detectors, workloads
from .. import measure
from ..launch.environment import launched_not_kernel
from ..measure import Result, plausibility, read_results, table_lines


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
    refused: str = ""  # why this table reads no speedup against this baseline (two ways of timing): the row shows n/m

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
        return self.refused or measure.refusal_of(detectors.notes(self.row.flags))

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
        """This row's detector flags, each once: those its lab recorded, then its speedup's, recomputed here. Threads
        that waited are decided again on the table's figure; a recorded contradiction says it is its lab's (_as_row)."""
        recomputed = detectors.impossible(self._speedup_flags())
        own = [self._as_row(f) for f in detectors.impossible(self.row.flags)
               if not (self._thread_row and detectors.kind_of(f) is detectors.Kind.WAITED)]
        return own + [f for f in recomputed if f not in own]

    @property
    def _thread_row(self) -> bool:
        """A one-process row with more threads than its one-thread baseline: lab 10 decides 'threads that waited'."""
        return bool(self.baseline and not self.is_baseline and self.row.world_size == self.baseline.world_size == 1
                    and (self.row.threads or 1) > (self.baseline.threads or 1))

    def _as_row(self, flag: str) -> str:
        """A recorded contradiction, said to be its lab's: it quotes that lab's figures (its paired ratios, against
        neighbours of its own), which this table does not print; where its ratio for the row differs from this
        table's, the flag names both."""
        if detectors.kind_of(flag) is not detectors.Kind.CONTRADICT or self.speedup is None or self.is_baseline \
                or self.not_measurable:
            return flag
        quoted = RATIO.search(str(flag))
        lab = self.row.lab
        if quoted and quoted.group() == f"{self.speedup:.2f}x":
            return detectors.Flag(detectors.Kind.CONTRADICT, f"lab {lab}'s flag, on lab {lab}'s own figures: {flag}")
        which = (f"its {quoted.group()} is lab {lab}'s own figure, " if quoted else "")  # which number is whose
        return detectors.Flag(detectors.Kind.CONTRADICT, f"lab {lab}'s flag ({which}the table's {self.speedup:.2f}x "
                              f"a ratio of two medians): {flag}")

    def _load(self) -> str | None:
        """What the row's own busy note says others used while it was measured (its words), or None."""
        return next((n.removeprefix(BUSY_NOTE) for n in detectors.notes(self.row.flags) if n.startswith(BUSY_NOTE)),
                    None)

    @property
    def notes(self) -> list[str]:
        """This row's other warnings (oversubscribed cores, another framework, ...): plain notes, never `[!]`. Where
        its lab recorded its own figure for the pair (a paired ratio, a verdict), that one is the comparison's, and a
        note on this table's figure (a ratio of two medians) says it is not."""
        computed = detectors.notes(self._speedup_flags())
        own = [n for n in detectors.notes(self.row.flags)  # a wait its lab recorded on its own figure: replaced by
               if not (WAITED_NOTE in n and any(WAITED_NOTE in c for c in computed))]  # the one on this row's figure
        own = [n if n in computed else self._labs_figure(self._contradicted(n)) for n in own]  # shared: unlabelled
        computed = [f for f in computed if f not in own]  # the lab's figure and the table's are one: said once
        recorded = {m.group(1) for n in own if (m := TWICE_APART.search(n))}  # its lab compared the two already
        computed = [f for f in computed if not ((m := TWICE_APART.search(f)) and m.group(1) in recorded)]
        if any(COMPARISONS in n for n in own):  # the lab's figure is the comparison's: this table's is labelled
            computed = [f"this table's ratio of two medians, not {COMPARISONS}: {f}" for f in computed]
        return ([self.refused] if self.refused else []) + own + computed

    def _contradicted(self, note: str) -> str:
        """A recorded refusal that says the rates exceed what the free cores allow, on a row whose own speedup does not
        exceed its hardware (lab 13's notes from before it read N ranks against N apart): said to contradict the row."""
        if "the rates measured give" not in note or self.speedup is None or self.hardware_ratio is None \
                or self.is_baseline or self.speedup > self.hardware_ratio:
            return note
        return (f"{measure.NOT_MEASURABLE} by an older lab {self.row.lab} run's note ('{note.split('; ')[0].removeprefix(measure.NOT_MEASURABLE + ': ')}; the rates "
                f"exceed the free cores'), which this row's own {self.speedup:.2f}x on {self.hardware_ratio:g}x the "
                f"hardware contradicts: rerun lab {self.row.lab}")

    def _labs_figure(self, note: str) -> str:
        """A recorded note that quotes a speedup of this row over its baseline other than this table's (its lab's
        paired ratio, or its lab's verdict on this pair): said to be its lab's figure, the comparison's."""
        if self.is_baseline:
            return note
        if VERDICT_NOTE in note:
            return note.replace(VERDICT_NOTE, f"verdict on this pair ({COMPARISONS}): ", 1)
        return f"lab {self.row.lab}'s own figure ({COMPARISONS}): {note}" if detectors.ABOUT_100 in note else note

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
            twice = detectors.measured_twice(self.baseline.samples_per_s, self.baseline.spread,
                                             self.row.samples_per_s / self.hardware_ratio, self.row.spread,
                                             what="the rate per unit of hardware", unit=self.row.rate,
                                             first_name=f"lab {self.baseline.lab}'s one-thread row",
                                             second_name=f"lab {self.row.lab}'s {self.row.strategy} row",
                                             condition=" / ".join(  # what its lab says moved one of the two
                                                 f"lab {r.lab}: {c}" for r in (self.baseline, self.row)
                                                 for c in detectors.conditions_of(r.flags)))
            # within both spreads, yet more than the hardware can give beyond noise: super-linear, impossible here
            return [*twice] or [*detectors.above_device_count(self.speedup, self.hardware_ratio)]
        machine = self.row.machine
        cores = machine.cpu_count if machine else None
        oversubscribed = bool(machine and cores and not machine.gpu_names and self.row.resources > cores)
        waited = detectors.more_threads_slower(self.speedup, self.hardware_ratio, cause=self._load()) \
            if self._thread_row else []  # README's rule "more threads slower than 1/N of one", on the row's figure
        return plausibility(speedup=self.speedup, devices=self.hardware_ratio, oversubscribed=oversubscribed) + waited


RATIO = re.compile(r"\d+\.\d\dx")
TWICE_APART = re.compile(r"was measured twice .*?, (\d+\.\d\dx apart)")  # detectors.measured_twice's words
COMPARISONS = "the comparison's figure"
VERDICT_NOTE = "verdict on this pair: "  # a lab's note naming its verdict on a row against its baseline (lab 09)
WAITED_NOTE = "threads ran the same work at "  # detectors.more_threads_slower's words
BUSY_NOTE = "measured while "  # conditions.Load.note(): "measured while other programs used 1.1 and steal ..."


def rate_text(rate: float) -> str:
    """A rate for the table: a decimal below 10 (1.8 and 2.2 images/s are two rates, not '2' twice)."""
    return f"{rate:.1f}" if rate < 9.95 else f"{rate:.0f}"


def flag_name(c: "Compared", name: str) -> str:
    """A row as a flag line names it: lab, strategy and variant, then its devices and batch in words."""
    devices = f"{c.row.world_size} device{'s' if c.row.world_size != 1 else ''}"
    return f"{c.row.lab} {name} ({devices}, batch {c.row.batch_size})"


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


LAUNCHED_RANKS = ("ddp", "horovod-style")  # strategies whose ranks are processes a launcher started


def timed_launched(rows: list[Result]) -> bool:
    """One lab's rows of one workload were timed in launched processes: one of them says so (its condition,
    launch.launched_not_kernel()) or runs ranks a launcher started; a lab times one workload one way."""
    said = launched_not_kernel()  # lab 03's note may add lab 01's figure after "; "
    return any(any(c == said or c.startswith(f"{said}; ") for c in detectors.conditions_of(r.flags)) or
               (r.world_size > 1 and r.strategy in LAUNCHED_RANKS) for r in rows)


def timed_apart(lab: str, base: Result, launched_here: bool, own_baseline: bool) -> str:
    """Why a row of `lab` gets no speedup against another lab's baseline timed the other way (`launched_here`: the
    row in launched processes, the baseline in a notebook's kernel; else the reverse): the two ways run the same
    allocator (lab_utils.allocator) but are two processes timed at different moments, a condition that can move a
    step (detectors.CONDITION_FACTOR)."""
    ways = ("launched processes", "the notebook's kernel")
    row_way, base_way = ways if launched_here else ways[::-1]
    return (f"{measure.N_M} against lab {base.lab}'s row: lab {lab} timed these in {row_way}, lab {base.lab} in "
            f"{base_way}" + (f"; their speedups: against lab {lab}'s own one-process row, in the table above"
                             if own_baseline else ""))


def across_labs(rows: list[Result]) -> list[Compared]:
    """Rows of workloads several labs recorded on one machine, each against the first lab's one-rank, 1-thread row;
    n/m (`refused`) for a lab whose rows were timed another way than that row (timed_launched(): processes, not a kernel)."""
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
        way = {lab: timed_launched([r for r in group if r.lab == lab]) for lab in {r.lab for r in group}}
        own_one = {r.lab for r in group if r.world_size == 1 and (r.threads or 1) == 1}
        shared += [Compared(r, base, "" if base else "no one-device row for this workload",
                            timed_apart(r.lab, base, way[r.lab], r.lab in own_one) if base and way[r.lab] != way[base.lab] else "")
                   for r in group]
    return shared


def baselines_named(shared: list[Compared], compared: list[Compared]) -> list[str]:
    """Under an across_labs table: which row its speedups are against, and, for a lab whose rows the main table
    (`compared`) reads against that lab's own one-device row, that the main table's figure is their comparison's
    and why the two differ (two baselines, measured minutes apart). One line per baseline."""
    own = {id(c.row): c.baseline for c in compared}
    lines = []
    for base in {id(c.baseline): c.baseline for c in shared if c.baseline is not None}.values():
        text = (f"speedup here: against lab {base.lab}'s {base.strategy} {base.variant}".rstrip() +
                f" row ({rate_text(base.samples_per_s)} {base.rate or 'samples/s'})")
        for lab in sorted({c.row.lab for c in shared if c.baseline is base and c.row.lab != base.lab}):
            rows = [c for c in shared if c.baseline is base and c.row.lab == lab and not c.is_baseline
                    and own.get(id(c.row)) not in (None, base) and not c.refused]  # n/m here: no second figure
            if not rows:
                continue
            example = max(rows, key=lambda c: (c.row.world_size, c.row.resources))  # the most ranks: what the section is about
            theirs = own[id(example.row)]
            assert theirs is not None  # rows keeps only those with a baseline of their own
            there = example.row.samples_per_s / theirs.samples_per_s
            text += (f"; the table of every lab's results reads lab {lab}'s rows against lab {lab}'s own one-device row "
                     f"({rate_text(theirs.samples_per_s)}, measured beside them), and that is their comparison's "
                     f"figure (lab {lab} {example.row.strategy}: {there:.2f}x there, {example.speedup:.2f}x here): "
                     f"the two baselines, one configuration measured minutes apart, lie "
                     f"{max(base.samples_per_s, theirs.samples_per_s) / min(base.samples_per_s, theirs.samples_per_s):.2f}x "
                     "apart")
        lines.append(text)
    return lines


def host_name(row: Result, this_host: str | None = None) -> str:
    """The machine a row was measured on; 'this machine' for `this_host` (no host name of yours in a table)."""
    host = row.machine.host if row.machine else ""
    return "this machine" if this_host and host == this_host else host


NOTE_WIDTH = 200  # a note longer than this prints as a short tag with a footnote under the table (table(short=True))
TAG_WIDTH = 90  # the most of a long note its tag keeps


def tag(note: str) -> str:
    """A long note's first clause, cut after a colon or comma before TAG_WIDTH characters (else at a word): its tag."""
    cut = max((note.rfind(mark, 30, TAG_WIDTH) for mark in (": ", ", ", "; ")), default=-1)
    if cut < 0:
        cut = note.rfind(" ", 0, TAG_WIDTH)
    return note[:cut if cut > 0 else TAG_WIDTH].rstrip(" ,;:") + " ..."


def _workload_of(c: Compared) -> tuple:
    return (host_name(c.row), c.row.lab, c.row.workload, c.row.rate)


def _one_device_scaling(c: Compared) -> bool:
    """A row of more than one device or rank with a speedup over a one-device baseline (not a pipeline's naive split)."""
    return (c.row.world_size > 1 and c.baseline is not None and not c.is_baseline and c.baseline.world_size == 1
            and c.speedup is not None)


def _setup(c: Compared) -> tuple:
    """One row per (strategy, workload, devices) in the main table: a lab's sweep of the batch shares this key."""
    return (_workload_of(c), c.row.strategy, c.row.variant, c.row.world_size, c.row.threads)


def _left_because(c: Compared, scales: set) -> str:
    """Why the main table leaves out a row: a smaller batch of a row it shows, one device, a pipeline, no baseline."""
    if _workload_of(c) in scales:
        return "the smaller batches of its rows above (its own sweep, in its notebook)"
    if c.row.world_size == 1:
        return "one device each (its own comparisons, in its notebook)"
    if c.note == "vs the naive split" or c.row.strategy == "pipeline-naive":
        return "pipelines, compared with the naive split, not one device (in its notebook)"
    return "no one-device row to read a speedup against"


def scaling(compared: list[Compared]) -> tuple[list[Compared], list[str]]:
    """(the main table: every workload in which a row of more than one device or rank has a speedup over one device,
    one row per strategy, workload and devices there (the largest batch: the one Amdahl's fit reads), with the
    baselines they read; one line per lab for its other rows: how many, why not shown, and its CSV)."""
    scales = {_workload_of(c) for c in compared if _one_device_scaling(c)}
    largest: dict[tuple, Compared] = {}
    for c in compared:
        if _workload_of(c) in scales and c.row.batch_size >= largest.get(_setup(c), c).row.batch_size:
            largest[_setup(c)] = c
    kept = {id(c) for c in largest.values()}
    kept |= {id(b) for c in largest.values() for b in compared if c.baseline is not None and b.row is c.baseline}
    shown = [c for c in compared if id(c) in kept]
    left: dict[str, list[Compared]] = {}
    for c in compared:
        if id(c) not in kept:
            left.setdefault(c.row.lab, []).append(c)
    lines = []
    for lab, rows in sorted(left.items()):
        why: dict[str, int] = {}
        for c in rows:  # one line per lab and reason
            reason = _left_because(c, scales)
            why[reason] = why.get(reason, 0) + 1
        lines += [f"lab {lab}: {n} row(s) not shown, {reason}: lab{lab}.csv" for reason, n in why.items()]
    return shown, lines


FLAG_WIDTH = 118  # a table's [!] line wraps at this width (a flag naming two labs' rows ran to 589 characters)


def table(compared: list[Compared], *, hosts: bool = False, this_host: str | None = None,
          figures: Callable[[Result, Result], tuple[float, float]] | None = None, short: bool = False) -> str:
    """The summary table as text: a line per workload, a line per row with its notes below; baselines show '-'.
    `figures(row, baseline)` -> (speedup, efficiency) gives the two columns (lab 10's speedup_and_efficiency);
    without it, each Compared's own. `short`: a note over NOTE_WIDTH characters prints as its tag and a footnote
    number, the whole note once in the footnotes under the table; and the lines fit measure.lines.WIDTH (100)
    columns: no accuracy column where no row has one, the rate column as wide as its figures, notes wrapped."""
    footnotes: dict[str, int] = {}
    fit = measure.lines.wrap if short else (lambda line: line)  # a short table's lines wrap at 100 columns
    acc_w = 9 if not short or any(c.row.accuracy is not None for c in compared) else 0
    rate_w = max([len("rate")] + [len(rate_text(c.row.samples_per_s)) for c in compared]) + 2 if short else 11

    def said(note: str) -> str:
        if not short or len(note) <= NOTE_WIDTH:
            return note
        footnotes.setdefault(note, len(footnotes) + 1)
        return f"{tag(note)} [{footnotes[note]}]"

    names = [c.row.strategy + (f" {c.row.variant}" if c.row.variant else "") for c in compared]
    gap = 1 if short else 2  # the columns' gap: one space in a short table (100 columns)
    name_w = max([len("strategy, variant")] + [len(n) for n in names]) + gap
    framework_w = max([len("framework")] + [len(c.row.framework) for c in compared]) + gap
    header = (f"{'machine':<13}" if hosts else "") + (f"{'lab':<4}{'framework':<{framework_w}}"
                                                     f"{'strategy, variant':<{name_w}}{'devices':>7}"
                                                     f"{'threads':>8}{'batch':>6}{'accuracy'[:acc_w]:>{acc_w}}"
                                                     f"{'rate':>{rate_w}}"
                                                     f"{'speedup':>8}{'effic.':>7}")
    lines, workload = [header], None
    shared = _shared_notes(compared)
    for c, name in zip(compared, names):
        r = c.row
        if (host_name(r), r.lab, r.workload, r.rate) != workload:
            workload = (host_name(r), r.lab, r.workload, r.rate)
            lines.append(fit((f"{host_name(r, this_host)[:12]:<13}" if hosts else "") + f"{r.lab:<4}workload: "
                             f"{r.workload}" + (f"  (rate: {r.rate})" if r.rate else "")))
            lines += [fit(f"      note, every row below: {said(note)}") for note in shared.get(workload, [])]
        acc = ("" if not acc_w else f"{r.accuracy:9.1%}" if r.accuracy is not None else f"{'-':>9}")
        threads = f"{r.threads:8d}" if r.threads is not None else f"{'-':>8}"
        speedup, efficiency = (figures(r, c.baseline) if figures and c.baseline and not c.is_baseline
                               else (c.speedup, c.efficiency))
        speed = (f"{'n/m':>8}" if c.not_measurable and not c.is_baseline else
                 f"{speedup:8.2f}" if c.baseline and not c.is_baseline else f"{'-':>8}")
        same_hardware = c.hardware_ratio is not None and c.hardware_ratio <= 1  # more devices, the same cores (lab 05)
        speed += (f"{efficiency:7.0%}" if c.efficiency is not None and not c.is_baseline and not same_hardware
                  else f"{'-':>7}")  # an efficiency on the same hardware is its speedup again
        line = ((f"{host_name(r, this_host)[:12]:<13}" if hosts else "") +
                f"{r.lab:<4}{r.framework:<{framework_w}}{name:<{name_w}}{r.world_size:7d}{threads}"
                f"{r.batch_size:6d}{acc}{rate_text(r.samples_per_s):>{rate_w}}{speed}")
        mark = detectors.marked(c.flags)  # a short table's row keeps 100 columns: its '*' without the space if need be
        lines.append(line + (mark.strip() if short and len(line + mark) > measure.lines.WIDTH else mark))
        lines += [fit(f"      note: {said(note)}") for note in c.notes
                  if workload is None or note not in shared.get(workload, [])]
    lines += [textwrap.fill(f"[{k}] {note}", measure.lines.WIDTH if short else FLAG_WIDTH, subsequent_indent="    ",
                            break_on_hyphens=False, break_long_words=False)
              for note, k in footnotes.items()]  # a footnote wraps as the flags do
    flags = table_lines([c.flags for c in compared], [flag_name(c, n) for c, n in zip(compared, names)])
    lines += flags  # measure.table_lines wraps each at measure.lines.WIDTH (under FLAG_WIDTH)
    noise = detectors.noise_line([c.row.spread for c in compared], "rows' medians")
    noisy = [f"lab {flag_name(c, n)}: {detectors.spread_text(c.row.spread)}" for c, n in zip(compared, names)
             if c.row.spread is not None and detectors.noisy_as_printed(c.row.spread)]  # the noise line's rows, named
    named = [measure.lines.wrap(f"  the rows that spread so: {'; '.join(noisy)}")] if noise else []
    return "\n".join(lines + ([measure.lines.wrap(noise)] if noise else []) + named)  # at 100 columns, as the flags


def _shared_notes(compared: list[Compared]) -> dict[tuple, list[str]]:
    """Per workload of the table (host, lab, workload, rate) with more than one row: the notes every row of it carries,
    said once under its header (a busy run's load note on every row made lab 10's table three times as long)."""
    groups: dict[tuple, list[Compared]] = {}
    for c in compared:
        groups.setdefault((host_name(c.row), c.row.lab, c.row.workload, c.row.rate), []).append(c)
    return {key: [n for n in rows[0].notes if all(n in c.notes for c in rows[1:])]
            for key, rows in groups.items() if len(rows) > 1}


def summary(results_dir) -> str:
    """The scaling report's table of the newest rows of one results folder (what `make course` prints at the end)."""
    return table(compare(latest(load(results_dir))))


def percent(fraction: float) -> str:
    """A fraction as a percentage, with a decimal below 10 % (0.4 %, not 0 %)."""
    return f"{fraction * 100:.1f} %" if abs(fraction) < 0.095 else f"{fraction * 100:.0f} %"


def row_label(c: Compared) -> str:
    """A row's name on a chart: lab, strategy, variant and batch, never cut; ' [!]' when flagged."""
    name = f"{c.row.strategy} {c.row.variant}".strip()
    # the workload's own words after its comma ("one large image"): lab 13's rows differ only there
    qualifier = c.row.workload.split(", ", 1)[1] if ", " in c.row.workload else ""
    return f"{c.row.lab} {name} b{c.row.batch_size}" + (f" ({qualifier})" if qualifier else "") \
        + (" [!]" if c.flags else "")




def best_speedup(candidates: list[Compared]) -> Compared | None:
    """The highest speedup among rows that are plausible: no flag, and an efficiency of at most 100 % (a row above it,
    even within noise, is super-linear, which CPU cores cannot give: no 'best' to quote); None if there is none."""
    plausible = [c for c in candidates if c.speedup is not None and not c.flags and c.efficiency is not None
                 and c.efficiency <= 1]
    return max(plausible, key=lambda c: c.speedup or 0.0, default=None)


def same_setup(chosen: Compared, candidates: list[Compared]) -> list[Compared]:
    """The rows of other labs that ran `chosen`'s setup (its model, strategy, devices and batch), each against its own
    lab's baseline: a figure quoted from one lab is quoted with these beside it."""
    model = chosen.row.workload.split(" ")[0]
    return [c for c in candidates if c.row.lab != chosen.row.lab and c.speedup is not None
            and (c.row.workload.split(" ")[0], c.row.strategy, c.row.batch_size, c.hardware_ratio)
            == (model, chosen.row.strategy, chosen.row.batch_size, chosen.hardware_ratio)]


def against(c: Compared) -> str:
    """'against lab 02's one process (4,835 samples/s)': the baseline a row's speedup divides by, named."""
    unit = "requests/s" if "serving" in c.row.workload else "samples/s"
    assert c.baseline is not None, "a row without a baseline has no speedup to name one for"
    return f"against lab {c.baseline.lab}'s one process ({c.baseline.samples_per_s:,.0f} {unit})"


def refusal_cause(notes: str) -> str:
    """A refused verdict's cause in one clause, from its recorded notes: the load it names, and where that load left
    the cores free, why it still refused (the rates measured exceed what the free cores allow: the load was unsteady)."""
    first, *rest = notes.removeprefix(f"{measure.CANNOT_SEE}: ").split("; ")
    if rest and rest[0].startswith("the rates measured give"):
        return f"{first}, yet the rates exceed what the free cores allow: that load was not steady"
    return first.removesuffix(f" ({measure.verdicts.RULE})")


ONE_SIDE = ("one device", "one process", "one worker", "1 worker", "1 device", "single")  # a claim's N-vs-one side


def stale_refusal(claim: str, notes: str) -> bool:
    """True for a refusal recorded before a lab read N ranks against N this way (lab 13 before today's fix): its notes
    refuse a speedup over one, through the rates-beyond-the-free-cores rule, on a claim with no one-device side."""
    sides = claim.split(",")[0].split(" vs ")
    return (f"{conditions.UNREAD_OVER_ONE} can be read" in notes and "the rates measured give" in notes
            and len(sides) == 2 and not any(one in side for side in sides for one in ONE_SIDE))


def age(timestamp: str, now=None) -> str:
    """How long ago an ISO timestamp was: '40 min ago', '2.1 h ago', '3 days ago'."""
    import datetime
    then = datetime.datetime.fromisoformat(timestamp)
    now = now or datetime.datetime.now(then.tzinfo)
    minutes = max(0.0, (now - then).total_seconds() / 60)
    return (f"{minutes:.0f} min ago" if minutes < 90 else f"{minutes / 60:.1f} h ago" if minutes < 48 * 60
            else f"{minutes / 1440:.0f} days ago")
