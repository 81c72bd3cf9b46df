"""Plausibility: a number that cannot be right is said so, next to it ([!] flags and notes)."""
from __future__ import annotations

from .. import detectors
from . import lines
from .results_table import run_conditions
from .store import store

MAX_SPREAD = detectors.NOISY_SPREAD  # repeats spread more than this: the table's noise line counts the median
BASELINE_FACTOR = 2.0


def plausibility(*, speedup: float | None = None, devices: float | None = None,
                 baseline_rate: float | None = None, reference_rate: float | None = None,
                 other_framework: str | None = None, oversubscribed: bool = False,
                 threads: float | None = None, reference_cause: str | None = None,
                 refused: bool = False) -> list[str]:
    """Warnings for figures that cannot be right ([!]) or be read as speed (notes); [] when nothing is suspect.
    `threads`: the speedup is the same work on that many intra-op threads against one thread; `reference_cause`: how
    the reference rate was measured (measure.reference_conditions), named if the two clash; `refused`: the run
    refuses this speedup (measure.unreadable: its table prints n/m), so no warning reads it either (no [!] above the
    device count, no note on threads that waited): a refused ratio is not read."""
    # no spread here: noise is one line per table (detectors.noise_line), not a warning. No warning may contain "; ".
    warnings: list[str] = []
    # notes, not [!]: nothing is impossible, but they are recorded and lab 10 leaves such rows out of its fits
    if other_framework:
        warnings.append(detectors.note(f"measured in a process where {other_framework} also ran: its threads compete "
                                       "for the cores"))
    if oversubscribed:
        warnings.append(detectors.note("more ranks or threads than cores: oversubscribed, so this is no speed "
                                       "measurement"))
    speedup = None if refused else speedup
    if speedup is not None and devices and speedup > devices:  # name what slowed the runs when the window saw it
        warnings += detectors.above_device_count(speedup, devices, measured_cause(round(devices), "devices"))
    # reference_rate: this machine's lab 01 rate on the same workload
    if baseline_rate and reference_rate and not 1 / BASELINE_FACTOR <= baseline_rate / reference_rate <= BASELINE_FACTOR:
        warnings += detectors.contradicts_reference(baseline_rate, reference_rate, factor=BASELINE_FACTOR,
                                                    cause=measured_cause(), reference_cause=reference_cause)
    if threads and speedup is not None and speedup < 1 / threads:  # they waited: name for what, where it was measured
        warnings += detectors.more_threads_slower(speedup, threads, cause=measured_cause(round(threads), "threads"))
    return warnings


def measured_cause(workers: int | None = None, what: str = "ranks") -> str | None:
    """Why this run's speeds are not quiet speeds (a CPU quota, other programs, steal), as measured; None: quiet.
    `workers` (`what`: ranks, threads, devices) ran side by side: a quota smaller than them is named too."""
    load = run_conditions()
    return load.cause(workers, what) if load else None


def parts(warnings) -> list[str]:
    """A figure's warnings as printed parts: its notes as 'note: ...', '(flagged above)' where a flag was said
    before, its new flags as '[!] ...' (each said once per process: store().say)."""
    warnings = detectors.listed(warnings)
    bad, notes = detectors.impossible(warnings), list(dict.fromkeys(detectors.notes(warnings)))  # each note once
    new = store().say(bad)
    return ([f"({detectors.AS_ABOVE})"] if len(new) < len(set(bad)) else []) + \
        ([f"note: {'; '.join(notes)}"] if notes else []) + ([detectors.flag_text(*new)] if new else [])


def flagged(text: str, warnings) -> str:
    """`text`, its notes as `(note: ...)`, then new flags as `[!] ...`; flags said before: "(flagged above)". Where
    that is longer than lines.WIDTH (or `text` has lines of its own), each goes on lines of its own under `text`,
    wrapped with a hanging indent (lines.stacked)."""
    said = parts(warnings)
    above = [p for p in said if p.startswith("(")]
    notes = [p[len("note: "):] for p in said if p.startswith("note: ")]
    new = [p for p in said if p.startswith(detectors.FLAG)]
    one = text + (f"  (note: {notes[0]})" if notes else "") + (f"  {above[0]}" if above else "") + \
        (f"  {new[0]}" if new else "")
    if not said or ("\n" not in text and len(one) <= lines.WIDTH):
        return one  # a line without warnings is the lab's own (a table row): never broken here
    head = f"{text}  {above[0]}" if above and "\n" not in text else text
    return "\n".join([head] + [lines.wrap(lines.HANG + p) for p in said if p not in above or "\n" in text])


def table_row(text: str, warnings) -> str:
    """A table row: its text, its notes, and ' *' if it carries a detector flag (said once under the table); notes
    that would make the row longer than lines.WIDTH go on the lines under it, indented and wrapped."""
    notes = detectors.notes(warnings)
    one = text + (f"  (note: {'; '.join(notes)})" if notes else "") + detectors.marked(warnings)
    if len(one) <= lines.WIDTH or not notes:
        return one
    indent = text[:len(text) - len(text.lstrip())]
    return f"{text}{detectors.marked(warnings)}\n" + lines.wrap(f"{indent}{lines.HANG}note: {'; '.join(notes)}")

