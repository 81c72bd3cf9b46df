"""The committed outputs: one run of every lab in place, in course order, and the run times it measured written into
the README's course map and each notebook's header (`python -m lab_utils outputs`, `run-times`)."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..labs import ROOT, solution_notebooks
from .assign import assign
from .headless import failures_message, run_notebook, select

RUN_TIME = re.compile(r"\*\*Run time:\*\*\s+about\s+(\S+\s+(?:s|min))\s+on\s+a\s+(?:quiet\s+)?2-core\s+CPU")  # may wrap lines
MAP_ROW = re.compile(r"^\| (\d\d) [^|]*\|[^|]*\| ([^|]*) \| ([^|]*) \|$", re.M)
COURSE_MAP = re.compile(r"^## Course map\n.*?(?=^## |\Z)", re.M | re.S)  # the only table whose rows get times


def run_times(folder=None) -> dict[str, float]:
    """Seconds each executed notebook of `folder` took (papermill's record, kernel start included), by lab number."""
    import nbformat

    times = {}
    for path in solution_notebooks(folder):
        duration = nbformat.read(path, as_version=4).metadata.get("papermill", {}).get("duration")
        if duration is not None:
            times[path.name[:2]] = float(duration)
    return times


AGREES_WITHIN = 2.0  # `run-times --check` accepts a stated time within this factor: a machine's speed moves by 2x


def _about(seconds: float) -> str:
    return f"{round(seconds)} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _seconds(stated: str) -> float | None:
    """Seconds of a stated time ('28 s', '2.2 min'), or None when it states none ('not measured')."""
    found = re.fullmatch(r"(?:about\s+)?([\d.]+)\s+(s|min)", stated.strip())
    if not found:
        return None
    return float(found.group(1)) * (60 if found.group(2) == "min" else 1)


def _disagrees(stated: str, measured: float, check: bool) -> bool:
    """Writing: any difference; checking: a stated time off by more than AGREES_WITHIN (times are "about": one run's)."""
    if not check:
        return stated.strip() != _about(measured)
    seconds = _seconds(stated)
    return seconds is None or not 1 / AGREES_WITHIN <= seconds / max(measured, 1e-9) <= AGREES_WITHIN


def update_run_times(times: dict[str, float], *, column: str = "cpu", check: bool = False, readme=None,
                     notebooks=None) -> list[str]:
    """Write the measured times into the README's course map (`column` cpu or gpu) and, for cpu, the header of each
    of `notebooks` (default: the solutions); with check, only list where they disagree by more than AGREES_WITHIN."""
    import nbformat

    readme = Path(readme or ROOT / "README.md")
    notebooks = solution_notebooks() if notebooks is None else notebooks
    problems, text = [], readme.read_text()

    def row(match):
        lab, cpu, gpu = match.group(1), match.group(2), match.group(3)
        if lab not in times:
            return match.group(0)
        want = _about(times[lab])
        have = cpu if column == "cpu" else gpu
        if _disagrees(have, times[lab], check):
            problems.append(f"README course map, lab {lab}: {column} time says {have.strip()!r}, the run took {want}")
        cells = match.group(0).split(" | ")
        cells[-2 if column == "cpu" else -1] = want + ("" if column == "cpu" else " |")
        return " | ".join(cells)

    course_map = COURSE_MAP.search(text)
    if not course_map:
        return [f"{readme.name} has no '## Course map' section"]
    section = course_map.group(0)
    new_text = text.replace(section, MAP_ROW.sub(row, section), 1)
    rows = {m[0] for m in MAP_ROW.findall(section)}
    problems += [f"README course map has no row for lab {lab}" for lab in sorted(set(times) - rows)]
    if column == "cpu":
        for path in notebooks:
            lab = path.name[:2]
            if lab not in times:
                continue
            nb = nbformat.read(path, as_version=4)
            want = f"**Run time:** about {_about(times[lab])} on a quiet 2-core CPU"
            found = RUN_TIME.search(nb.cells[0].source)
            if not found:
                problems.append(f"{path.name}: the first cell has no '**Run time:** about ... on a quiet 2-core CPU'")
            elif _disagrees(" ".join(found.group(1).split()), times[lab], check):
                problems.append(f"{path.name}: header says {found.group(0)!r}, the run took {_about(times[lab])}")
                if not check:
                    source = nb.cells[0].source  # only the time changes: the cell's line breaks stay where they were
                    said = source[found.start(1):found.end(0)].replace(found.group(1), _about(times[lab]), 1)
                    said = said if "quiet" in said else re.sub(r"(\s)2-core", r"\1quiet 2-core", said)
                    nb.cells[0].source = source[:found.start(1)] + said + source[found.end(0):]
                    nbformat.write(nb, path)
    if not check and new_text != text:
        readme.write_text(new_text)
    return problems


def relative_papermill_paths(path: Path) -> None:
    """Papermill's record of a notebook run names its input and output by absolute path: make them relative to the
    repository, so a committed notebook names no build machine's folders."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    record = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if record.get(key) and Path(record[key]).is_absolute():
            record[key] = os.path.relpath(record[key], ROOT)
    nbformat.write(nb, path)


def outputs(labs: str | None = None, cell_timeout: float | None = None) -> int:
    """Re-execute the solutions in place, in course order, as one run (results in build/outputs/results, which the
    scaling report reads), write the measured times into the README and headers, and regenerate notebooks/."""
    import shutil

    out = ROOT / "build" / "outputs"
    shutil.rmtree(out, ignore_errors=True)
    (out / "results").mkdir(parents=True)
    os.environ["LAB_RESULTS_DIR"] = str(out / "results")
    failed = []
    for src in select(labs, solution_notebooks()):
        print(f"running {src.name} ...", flush=True)
        run = run_notebook(src, out, {}, cell_timeout, output=src)
        relative_papermill_paths(src)
        print(f"  {src.name}: {run.seconds:.1f} s, {'ok' if run.error is None else 'FAILED at ' + run.error}", flush=True)
        if run.error:
            failed.append(run)
    if failed:
        print("\n" + failures_message(failed), file=sys.stderr)
        return 1
    update_run_times(run_times())
    problems = update_run_times(run_times(), check=True)  # what writing could not mend (a header without the line)
    problems += assign()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0
