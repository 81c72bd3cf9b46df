"""Run the course headless: each chosen solution notebook executed by papermill, at full or test size, with a summary
of times and results (`python -m lab_utils course`)."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..labs import DECLARED, ROOT, declared, solution_notebooks

DEFAULT_CELL_TIMEOUT_S = 300  # seconds one cell may take on the course's reference machine; scaled by slowness()


# What `make test` (nbval) and `course --size test` append to each lab's parameters cell: fewer repeats, steps and
# sizes where they change no checked output (the compared cells give the same text at either size). Each lab declares
# its own in labs.DECLARED; this is the same, by lab number
TEST_PARAMETERS: dict[str, dict[str, Any]] = {lab: d.test_size for lab, d in sorted(DECLARED.items()) if d.test_size}


def parameter_lines(parameters: dict, comment: str) -> str:
    """Python assignments of `parameters` under a comment line, as papermill injects them."""
    return "".join([f"# {comment}\n"] + [f"{name} = {value!r}\n" for name, value in parameters.items()])


@dataclass
class NotebookRun:
    """Outcome of executing one notebook."""

    name: str
    seconds: float
    error: str | None = None


def cell_limit(cell_timeout: float | None) -> float:
    """Seconds one cell may run: `cell_timeout` as given, or (None) DEFAULT_CELL_TIMEOUT_S scaled like the launches'
    timeouts by how fast this machine computes now, so a busy machine does not fail a lab a quiet one finishes."""
    if cell_timeout is not None:
        return cell_timeout
    from ... import hardware

    return hardware.launch_timeout(DEFAULT_CELL_TIMEOUT_S)


def _running_cell(executed: Path) -> str:
    """'cell N (code cell K, starting `first line`)' for the last cell papermill started in `executed`, or ''."""
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
    except Exception:  # not written (papermill failed before its first save) or unreadable: nothing to name
        return ""
    started = [(index, cell) for index, cell in enumerate(nb.cells) if cell.metadata.get("papermill", {}).get("start_time")]
    if not started:
        return ""
    index, cell = started[-1]  # the last cell that started: the one interrupted at the timeout
    code = sum(c.cell_type == "code" for c in nb.cells[:index + 1])
    first = next((line for line in cell.source.splitlines() if line.strip()), "")[:60]
    return f"cell {index} (code cell {code}, starting `{first}`)"


def _describe_failure(exc: Exception, executed: Path, cell_timeout: float) -> str:
    """Which cell failed and with what, from a papermill error (a timeout: the cell left running in `executed`)."""
    if isinstance(exc, TimeoutError):  # nbclient's CellTimeoutError carries no cell number
        where = _running_cell(executed) or "a cell"
        return (f"{where}: CellTimeoutError: it ran past the cell timeout of {cell_timeout:g} s; the notebook as far as "
                f"it ran is {executed.name}; give more with --cell-timeout")
    cell = getattr(exc, "exec_count", None) or getattr(exc, "cell_index", None)
    ename, evalue = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
    where = f"cell {cell}" if cell is not None else "before any cell ran"
    return f"{where}: {ename}: {evalue}".strip()


# ipykernel warns on every start that its TCP traffic is unencrypted (it is local), and asyncio may log "Task was
# destroyed but it is pending!" when a kernel that ran TensorFlow shuts down; the cells' own errors still show
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR",
                "--IPKernelApp.exec_lines=import logging as _logging; _logging.getLogger('asyncio').setLevel(50)"]


def run_notebook(src: Path, out_dir: Path, parameters: dict, cell_timeout: float | None = None,
                 output: Path | None = None) -> NotebookRun:
    """Execute one notebook with papermill (working directory out_dir) into `output` (default: out_dir/src.name);
    `cell_timeout` None: cell_limit()'s scaled default. The notebook is saved as each cell runs, so a cell that times
    out leaves the notebook as far as it ran."""
    import papermill

    limit = cell_limit(cell_timeout)
    executed = Path(output or out_dir / src.name)
    start = time.perf_counter()
    try:
        papermill.execute_notebook(str(src), str(executed), parameters=parameters, cwd=str(out_dir),
                                   kernel_name="python3", execution_timeout=limit, progress_bar=False,
                                   log_output=False, request_save_on_cell_execute=True, extra_arguments=QUIET_KERNEL)
    except Exception as exc:  # papermill raises its own error types for failing cells and kernels
        return NotebookRun(src.stem, time.perf_counter() - start, _describe_failure(exc, executed, limit))
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


def run_course(labs: str | None = None, out_dir=None, cell_timeout: float | None = None,
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


def course_summary(runs: list[NotebookRun], results: Path) -> str:
    """Per-notebook times and the measured results rows, as text."""
    lines = ["", "notebook                          seconds  status"]
    lines += [f"{r.name:<32} {r.seconds:8.1f}  {'ok' if r.error is None else 'FAILED: ' + r.error}" for r in runs]
    lines.append(f"{'total':<32} {sum(r.seconds for r in runs):8.1f}")
    if results.exists() and any(results.glob("*.csv")):
        from ...report import summary as report_summary

        lines += ["", f"the scaling report (lab 10's table) of {results}:", report_summary(results)]
    return "\n".join(lines)


def failures_message(runs: list[NotebookRun]) -> str:
    """One line per failed notebook, naming it and the failing cell."""
    return "\n".join(f"{r.name}.ipynb failed at {r.error}" for r in runs if r.error)


def main_course(labs, out_dir, cell_timeout, size: str = "full") -> int:
    """CLI body of `course`: run, summarise, exit non-zero on any failure."""
    out = Path(out_dir or ROOT / "build" / "course").resolve()
    runs = run_course(labs, out, cell_timeout, size)
    print(course_summary(runs, out / "results"))
    failed = failures_message(runs)
    if failed:
        print("\n" + failed, file=sys.stderr)
        return 1
    return 0
