"""Grade submitted notebooks: execute each in a fresh directory with papermill under time limits, then score the
plain data it exported, in this process, against references computed here."""
from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import exercises as ex

ROOT = Path(__file__).resolve().parent.parent
GRADEBOOK_COLUMNS = ("student", "lab", "score", "max_score", "status", "seconds", "message")
STATUSES = ("completed", "error", "timeout", "kernel_died", "invalid")
EXPORT_TAG = "grader-export"
MAX_OUTPUT_CHARS = 20_000  # per output, in the executed notebook handed back
# small, fast settings for every lab (only those a notebook declares are injected)
FAST_PARAMETERS = {"seed": 0, "epochs": 2, "lr_epochs": 2, "scaling_steps": 5, "rounds": 1, "small_micro_batches": [16],
                   "micro_batches": [2, 4], "repeats": 3, "curve_epochs": 1, "allreduce_repeats": 3,
                   "allreduce_max_bytes": 2**16, "speed_steps": 5, "speed_global_batch": 128}


@dataclass
class ExerciseScore:
    name: str
    points: float
    max_points: float
    message: str


@dataclass
class Graded:
    student: str
    lab: str
    status: str
    seconds: float = 0.0
    message: str = ""
    scores: list[ExerciseScore] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(s.points for s in self.scores)

    @property
    def max_score(self) -> float:
        return sum(s.max_points for s in self.scores)


def exercises_for(lab: str, tests_dir=None) -> list[tuple[ex.Exercise, str | None]]:
    """Built-in exercises of the lab, then the instructor's (with the file each came from)."""
    chosen = [(e, None) for e in ex.for_lab(lab)]
    if tests_dir:
        for path in sorted(Path(tests_dir).glob("*.py")):
            chosen += [(e, str(path.resolve())) for e in ex.load_test_file(path) if e.lab == lab]
    return chosen


def _defines(source: str, name: str) -> bool:
    return re.search(rf"^(def {re.escape(name)}\(|{re.escape(name)}\s*=)", source, flags=re.M) is not None


def prepare(nb: nbformat.NotebookNode, lab: str, chosen, export_dir: Path, token: str) -> nbformat.NotebookNode:
    """The notebook to execute: every code cell may fail without stopping the run, and after the cell that defines
    each exercise (or at the end, when none does) a cell exports that exercise's probe data."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            tags = [t for t in cell.metadata.get("tags", []) if t != EXPORT_TAG]
            cell.metadata["tags"] = tags + ["raises-exception"]
    cells = list(nb.cells)
    for exercise, source in chosen:
        args = f"{lab!r}, {exercise.name!r}, globals(), {str(export_dir)!r}, {token!r}" + (
            f", {source!r}, {_tag(source)!r}" if source else "")
        export = nbformat.v4.new_code_cell(f"__import__('lab_utils.exercises').exercises.export_named({args})")
        export.metadata["tags"] = [EXPORT_TAG, "raises-exception"]
        where = max((i for i, c in enumerate(cells) if c.cell_type == "code" and _defines(c.source, exercise.name)),
                    default=None)
        cells.insert(len(cells) if where is None else where + 1, export)
    nb.cells = cells
    return nb


def clean_for_student(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The executed notebook without the grader's cells and with long outputs cut."""
    nb.cells = [c for c in nb.cells if EXPORT_TAG not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t != "raises-exception"]
        for output in cell.outputs:
            if output.get("output_type") == "stream" and len(output.get("text", "")) > MAX_OUTPUT_CHARS:
                output["text"] = output["text"][:MAX_OUTPUT_CHARS] + "\n[... output cut by the grader ...]\n"
    return nb


def _workdir(base: Path) -> Path:
    """A fresh directory holding the trusted lab_utils and datasets (whatever the student had is not there)."""
    work = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    shutil.copytree(ROOT / "lab_utils", work / "lab_utils", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "datasets", work / "datasets", ignore=shutil.ignore_patterns("__pycache__"))
    (work / "results").mkdir()
    return work


def _status_from(result: dict, executed: Path) -> str:
    if result["status"] in ("timeout", "kernel_died"):
        return result["status"]
    if not executed.exists():
        return "kernel_died"
    nb = nbformat.read(executed, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" and EXPORT_TAG not in c.metadata.get("tags", [])
              for o in c.outputs if o.get("output_type") == "error"]
    if any(o.get("ename") == "KeyboardInterrupt" for o in errors) and result.get("cell_timeouts"):
        return "timeout"
    return "error" if errors else "completed"


def _tag(source: str) -> str:
    """A short id of an instructor test file, so its exports do not overwrite the built-in ones."""
    import hashlib

    return hashlib.sha1(source.encode()).hexdigest()[:10]


def _score(chosen, export_dir: Path, token: str) -> list[ExerciseScore]:
    scores = []
    for exercise, source in chosen:
        path = export_dir / f"{token}-{exercise.lab}-{exercise.name}{'-' + _tag(source) if source else ''}.json"
        label = exercise.name + (" (instructor test)" if source else "")
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            scores.append(ExerciseScore(label, 0.0, exercise.points, "no answer was exported: the cell that defines "
                                        f"{exercise.name} did not run to the end, or the notebook stopped before it"))
            continue
        if record.get("status") != "ok" or record.get("exercise") != exercise.name:
            what = {"missing": f"{exercise.name} is not defined in the notebook",
                    "invalid": f"the answer is not plain data ({record.get('error', '')})"}.get(
                        record.get("status"), f"running your {exercise.name} raised {record.get('error', 'an error')}")
            scores.append(ExerciseScore(label, 0.0, exercise.points, what))
            continue
        try:
            fraction, message = exercise.grade(record["value"])
            fraction = min(max(float(fraction), 0.0), 1.0)
        except Exception as exc:  # malformed data from the kernel: wrong shape, wrong types
            fraction, message = 0.0, f"the exported answer has an unexpected form ({type(exc).__name__})"
        if fraction < 1.0:
            message += f". Hint: {exercise.hint}"
        scores.append(ExerciseScore(label, round(fraction * exercise.points, 3), exercise.points, message))
    return scores


def grade_one(path: Path, lab: str, out_dir: Path, *, tests_dir=None, timeout: float = 600.0,
              cell_timeout: float = 120.0, scratch: Path | None = None) -> Graded:
    """Execute and score one submission; whatever happens, return a Graded row."""
    student = Path(path).stem
    start = time.monotonic()
    chosen = exercises_for(lab, tests_dir)
    invalid = lambda why: Graded(student, lab, "invalid", time.monotonic() - start, why,
                                 [ExerciseScore(e.name + (" (instructor test)" if src else ""), 0.0, e.points, why)
                                  for e, src in chosen])
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # not JSON, not a notebook
        return invalid(f"not a readable notebook: {type(exc).__name__}: {str(exc)[:200]}")
    if not any(c.cell_type == "code" and "parameters" in c.metadata.get("tags", []) for c in nb.cells):
        return invalid("the notebook has no cell tagged 'parameters': submit the lab's notebook, not another file")
    base = Path(tempfile.mkdtemp(prefix=f"grade-{student}-", dir=scratch))
    try:
        work, export_dir, token = _workdir(base), base / "exports", secrets.token_hex(8)
        export_dir.mkdir()
        prepared = base / "prepared.ipynb"
        nbformat.write(prepare(nb, lab, chosen, export_dir, token), prepared)
        declared = _declared_parameters(nb)
        params = {k: v for k, v in FAST_PARAMETERS.items() if k in declared}
        params.update({k: v for k, v in {"results_dir": str(work / "results"), "world_size": 2, "n_devices": 2,
                                           "n_workers": 2, "stages": 2}.items() if k in declared})
        executed = base / "executed.ipynb"
        result = run_isolated(prepared, executed, work, params, cell_timeout=cell_timeout, timeout=timeout)
        status = _status_from(result, executed)
        scores = _score(chosen, export_dir, token)
        if executed.exists():
            out_dir.mkdir(parents=True, exist_ok=True)
            nbformat.write(clean_for_student(nbformat.read(executed, as_version=4)), out_dir / f"{student}.executed.ipynb")
        return Graded(student, lab, status, time.monotonic() - start, result.get("message", ""), scores)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _declared_parameters(nb) -> set[str]:
    cell = next(c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", []))
    return set(re.findall(r"^([A-Za-z_]\w*)\s*=", cell.source, flags=re.M))


def run_isolated(prepared: Path, executed: Path, work: Path, params: dict, *, cell_timeout: float, timeout: float) -> dict:
    """Run papermill in a child that reaps and kills everything the notebook started; returns how it ended."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "MASTER_", "RANK", "WORLD_SIZE", "TF_CONFIG"))}
    # the runner imports the grader's lab_utils; it gives the notebook PYTHONPATH=work (the trusted copy)
    env.update(PYTHONPATH=str(ROOT), LAB_RESULTS_DIR=str(work / "results"), MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    status_file = work.parent / "status.json"
    command = [sys.executable, "-m", "lab_utils.grade_runner", str(prepared), str(executed), str(work),
               json.dumps(params), str(cell_timeout), str(timeout), str(status_file)]
    try:
        subprocess.run(command, cwd=work.parent, env=env, timeout=timeout + 60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"the grader stopped the run after {timeout + 60:.0f} s"}
    try:
        return json.loads(status_file.read_text())
    except (OSError, ValueError):
        return {"status": "kernel_died", "message": "the run ended without reporting how"}


def grade(paths, lab: str, out_dir, *, tests_dir=None, timeout: float = 600.0, cell_timeout: float = 120.0,
          jobs: int = 1) -> list[Graded]:
    """Grade every submission (`jobs` at a time), write the gradebook and one feedback file each; returns the rows."""
    lab = str(lab).zfill(2)
    if not ex.for_lab(lab) and not tests_dir:
        raise ValueError(f"lab {lab} has no graded exercises; labs with exercises: "
                         f"{sorted({e.lab for e in ex.BUILT_IN})}")
    stems = [Path(p).stem for p in paths]
    repeated = sorted({s for s in stems if stems.count(s) > 1})
    if repeated:
        raise ValueError(f"two submissions would be graded as the same student {repeated}: the file name (without "
                         ".ipynb) names the student, so rename them")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="lab-grader-"))
    try:
        work = lambda p: grade_one(Path(p), lab, out_dir, tests_dir=tests_dir, timeout=timeout,
                                   cell_timeout=cell_timeout, scratch=scratch)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            rows = list(pool.map(_never_raises(work, lab), paths))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_gradebook(rows, out_dir / "gradebook.csv")
    for row in rows:
        (out_dir / f"{row.student}.feedback.md").write_text(feedback(row))
    return rows


def _never_raises(work, lab):
    def run(path):
        try:
            return work(path)
        except Exception as exc:  # a grader bug must not cost the rest of the batch
            return Graded(Path(path).stem, lab, "error", 0.0, f"the grader failed on this submission: {exc!r}")
    return run


def write_gradebook(rows: list[Graded], path: Path) -> None:
    """The gradebook, written in one go at the end (anything a notebook wrote there is replaced)."""
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(GRADEBOOK_COLUMNS)
        for r in rows:
            writer.writerow([r.student, r.lab, f"{r.score:g}", f"{r.max_score:g}", r.status, f"{r.seconds:.1f}", r.message])
    tmp.replace(path)


def feedback(row: Graded) -> str:
    """What the student reads: per exercise, points and a message."""
    lines = [f"# Lab {row.lab}: {row.student}", "", f"Score: {row.score:g} / {row.max_score:g}",
             f"Run: {row.status}" + (f" ({row.message})" if row.message else ""), ""]
    lines += [f"- **{s.name}**: {s.points:g} / {s.max_points:g} — {s.message}" for s in row.scores]
    return "\n".join(lines) + "\n"
