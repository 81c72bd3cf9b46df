"""Generate student notebooks from the solutions, and run the course headless."""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import nbformat

from .labs import DECLARED, declared, solution_notebooks

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: write your solution here, then run the self-check below.")'
ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lab_utils" / "lessons"  # generated lesson modules, one per lab with cells tagged `lesson`
DEFAULT_CELL_TIMEOUT_S = 300


# What `make test` (nbval) and `course --size test` append to each lab's parameters cell: fewer repeats, steps and
# sizes where they change no checked output (the compared cells give the same text at either size). Each lab declares
# its own in labs.DECLARED; this is the same, by lab number
TEST_PARAMETERS: dict[str, dict[str, Any]] = {lab: d.test_size for lab, d in sorted(DECLARED.items()) if d.test_size}


def parameter_lines(parameters: dict, comment: str) -> str:
    """Python assignments of `parameters` under a comment line, as papermill injects them."""
    return "".join([f"# {comment}\n"] + [f"{name} = {value!r}\n" for name, value in parameters.items()])


def strip_solutions(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region of a code cell by an indented stub."""
    out, inside, indent = [], False, ""
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"{where}, line {number}: '{BEGIN}' inside another solution region; close it with '{END}' first")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f"{indent}{STUB}")
        elif marker == END:
            if not inside:
                raise ValueError(f"{where}, line {number}: '{END}' without a matching '{BEGIN}'")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: '{BEGIN}' is never closed; add '{END}' after the solution")
    return "\n".join(out)


def student_version(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """A copy of a solution notebook with solutions stubbed and every output removed."""
    import nbformat

    nb = nbformat.from_dict(nb)
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source, f"{name}, cell {index}")
            cell.outputs = []
            cell.execution_count = None
        elif BEGIN in cell.source:
            raise ValueError(f"{name}, cell {index}: solution markers belong in code cells, not {cell.cell_type} cells")
    return nb


def assign(solutions_dir=None, notebooks_dir=None, *, check: bool = False, lessons_dir=None) -> list[str]:
    """Write notebooks/ from solutions/ and the lesson modules lab_utils/lessons/labNN.py from the solutions' cells
    tagged `lesson` (or, with check, list the files that differ); returns the problems. With a solutions_dir of its
    own, lesson modules are written only where lessons_dir says."""
    import nbformat

    from .export import export_lessons

    sources = solution_notebooks(solutions_dir)
    target = Path(notebooks_dir) if notebooks_dir else ROOT / "notebooks"
    problems = []
    if not sources:
        return [f"no solution notebooks (NN_name.ipynb) found in {solutions_dir or ROOT / 'solutions'}"]
    for src in sources:
        text = nbformat.writes(student_version(nbformat.read(src, as_version=4), src.name)) + "\n"
        dest = target / src.name
        if check:
            if not dest.exists():
                problems.append(f"{dest} is missing")
            elif dest.read_text() != text:
                problems.append(f"{dest} differs from what {src} generates")
        else:
            target.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    extra = {p.name for p in target.glob("*.ipynb")} - {s.name for s in sources} if target.exists() else set()
    problems += [f"{target / name} has no source in solutions/" for name in sorted(extra)]
    if lessons_dir is None and solutions_dir is None:
        lessons_dir = LESSONS
    if lessons_dir is not None:
        problems += export_lessons(sources, Path(lessons_dir), check=check, root=ROOT)
    return problems


@dataclass
class NotebookRun:
    """Outcome of executing one notebook."""

    name: str
    seconds: float
    error: str | None = None


def _describe_failure(exc: Exception) -> str:
    """Which cell failed and with what, from a papermill error."""
    cell = getattr(exc, "exec_count", None) or getattr(exc, "cell_index", None)
    ename, evalue = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
    where = f"cell {cell}" if cell is not None else "before any cell ran"
    return f"{where}: {ename}: {evalue}".strip()


# ipykernel warns on every start that its TCP traffic is unencrypted (it is local), and asyncio may log "Task was
# destroyed but it is pending!" when a kernel that ran TensorFlow shuts down; the cells' own errors still show
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR",
                "--IPKernelApp.exec_lines=import logging as _logging; _logging.getLogger('asyncio').setLevel(50)"]


def run_notebook(src: Path, out_dir: Path, parameters: dict, cell_timeout: float = DEFAULT_CELL_TIMEOUT_S,
                 output: Path | None = None) -> NotebookRun:
    """Execute one notebook with papermill (working directory out_dir) into `output` (default: out_dir/src.name)."""
    import papermill

    start = time.perf_counter()
    try:
        papermill.execute_notebook(str(src), str(output or out_dir / src.name), parameters=parameters, cwd=str(out_dir),
                                   kernel_name="python3", execution_timeout=cell_timeout, progress_bar=False,
                                   log_output=False, request_save_on_cell_execute=False, extra_arguments=QUIET_KERNEL)
    except Exception as exc:  # papermill raises its own error types for failing cells and kernels
        return NotebookRun(src.stem, time.perf_counter() - start, _describe_failure(exc))
    return NotebookRun(src.stem, time.perf_counter() - start)


def select(labs: str | None, sources: list[Path]) -> list[Path]:
    """Filter notebooks by a comma-separated list of lab numbers ('00,01')."""
    if not labs:
        return sources
    wanted = [s.strip().zfill(2) for s in labs.split(",") if s.strip()]
    known = {p.name[:2]: p for p in sources}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(f"unknown lab(s) {unknown}; this course has {sorted(known)}")
    return [known[w] for w in wanted]


def run_course(labs: str | None = None, out_dir=None, cell_timeout: float = DEFAULT_CELL_TIMEOUT_S,
               size: str = "full") -> list[NotebookRun]:
    """Execute the chosen solution notebooks headless (size "test": with TEST_PARAMETERS); results CSVs go to
    <out_dir>/results."""
    out = Path(out_dir or ROOT / "build" / "course").resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results"
    runs = []
    for src in select(labs, solution_notebooks()):
        (results / f"lab{src.name[:2]}.csv").unlink(missing_ok=True)  # a course run starts its rows afresh
        print(f"running {src.name} ...", flush=True)
        sized = declared(src.name[:2]).test_size if size == "test" else {}
        run = run_notebook(src, out, {**sized, "results_dir": str(results)}, cell_timeout)
        status = "ok" if run.error is None else f"FAILED at {run.error}"
        print(f"  {src.name}: {run.seconds:.1f} s, {status}", flush=True)
        runs.append(run)
    return runs


def summary(runs: list[NotebookRun], results: Path) -> str:
    """Per-notebook times and the measured results rows, as text."""
    lines = ["", "notebook                          seconds  status"]
    lines += [f"{r.name:<32} {r.seconds:8.1f}  {'ok' if r.error is None else 'FAILED: ' + r.error}" for r in runs]
    lines.append(f"{'total':<32} {sum(r.seconds for r in runs):8.1f}")
    if results.exists() and any(results.glob("*.csv")):
        from ..report import summary as report_summary

        lines += ["", f"the scaling report (lab 10's table) of {results}:", report_summary(results)]
    return "\n".join(lines)


def failures_message(runs: list[NotebookRun]) -> str:
    """One line per failed notebook, naming it and the failing cell."""
    return "\n".join(f"{r.name}.ipynb failed at {r.error}" for r in runs if r.error)


def main_course(labs, out_dir, cell_timeout, size: str = "full") -> int:
    """CLI body of `course`: run, summarise, exit non-zero on any failure."""
    out = Path(out_dir or ROOT / "build" / "course").resolve()
    runs = run_course(labs, out, cell_timeout, size)
    print(summary(runs, out / "results"))
    failed = failures_message(runs)
    if failed:
        print("\n" + failed, file=sys.stderr)
        return 1
    return 0


# ---- committed outputs: one run of every lab, in course order --------------------------------------------------------

RUN_TIME = re.compile(r"\*\*Run time:\*\*\s+about\s+\S+\s+(?:s|min)\s+on\s+a\s+2-core\s+CPU")  # may wrap lines
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


def _about(seconds: float) -> str:
    return f"{round(seconds)} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def update_run_times(times: dict[str, float], *, column: str = "cpu", check: bool = False, readme=None,
                     notebooks=None) -> list[str]:
    """Write the measured times into the README's course map (`column` cpu or gpu) and, for cpu, the header of each
    of `notebooks` (default: the solutions); with check, only list where they disagree."""
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
        if have.strip() != want:
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
            want = f"**Run time:** about {_about(times[lab])} on a 2-core CPU"
            found = RUN_TIME.search(nb.cells[0].source)
            if not found:
                problems.append(f"{path.name}: the first cell has no '**Run time:** about ... on a 2-core CPU'")
            elif found.group(0) != want:
                problems.append(f"{path.name}: header says {found.group(0)!r}, the run took {_about(times[lab])}")
                if not check:
                    nb.cells[0].source = RUN_TIME.sub(want, nb.cells[0].source)
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


def outputs(labs: str | None = None, cell_timeout: float = DEFAULT_CELL_TIMEOUT_S) -> int:
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
