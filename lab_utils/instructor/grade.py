"""Grade submitted notebooks. Each submission runs in a sandbox of its own: once whole (papermill, for the executed
notebook handed back and the run's status), then once per exercise in a fresh probe process that runs only the
learner's definition and the lab's set-up, on inputs drawn for this run. Scores are computed here, in the grader's
own process, against references computed here; outputs are written at the end, where no submission can reach."""
from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import os
import random
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .. import exercises as ex
from . import extract, sandbox
from .probe import MAX_ANSWER_BYTES, parse_answer

ROOT = Path(__file__).resolve().parents[2]
GRADEBOOK_COLUMNS = ("student", "lab", "score", "max_score", "status", "seconds", "message", "sandbox")
STATUSES = ("completed", "error", "timeout", "kernel_died", "invalid", "lost")
MAX_OUTPUT_CHARS = 20_000  # per output, in the executed notebook handed back
MAX_NOTEBOOK_BYTES = 64 * 2**20
PROBE_TIMEOUT_S = 120.0
# small, fast settings for every lab (only those a notebook declares are injected)
FAST_PARAMETERS = {"seed": 0, "epochs": 2, "lr_epochs": 2, "scaling_steps": 5, "rounds": 1, "small_micro_batches": [16],
                   "micro_batches": [2, 4], "repeats": 3, "curve_epochs": 1, "allreduce_repeats": 3,
                   "allreduce_max_bytes": 2**16, "speed_steps": 5, "speed_global_batch": 128, "world_size": 2,
                   "n_devices": 2, "n_workers": 2, "stages": 2, "train_steps": 2, "train_epochs": 2, "steps": 2,
                   "gradients": 80, "tf_steps": 40, "straggler_factors": [1, 4], "run_s": 0.25, "pool_requests": 600,
                   "fresh_compile_cache": False, "batch_sweep": [1, 8, 64], "timing_steps": 3, "timing_repeats": 3,
                   "sweep_batches": [8, 16], "hotspot_devices": [1, 2], "hotspot_batch": 16, "compare_steps": 1,
                   "timed_steps": 2, "warmup_steps": 1, "steps_per_repeat": 3}
PAPERMILL = """
import json, sys
import papermill
from nbclient.exceptions import DeadKernelError
from papermill.exceptions import PapermillExecutionError
prepared, executed, params, cell_timeout, root = sys.argv[1:6]
sys.path.insert(0, root)
from lab_utils.instructor.course import QUIET_KERNEL
try:
    papermill.execute_notebook(prepared, executed, parameters=json.loads(params), kernel_name="python3",
                               execution_timeout=float(cell_timeout), interrupt_on_timeout=True, progress_bar=False,
                               log_output=False, request_save_on_cell_execute=True, extra_arguments=QUIET_KERNEL)
except PapermillExecutionError:
    pass  # a cell raised: expected with partial answers; every cell still ran
except DeadKernelError as exc:
    print("KERNEL DIED:", exc, file=sys.stderr)
    sys.exit(3)
"""
_SCORING = threading.Lock()


class SandboxUnavailable(RuntimeError):
    """No sandbox here, and the instructor did not accept grading without one."""
  # references are computed one at a time: identical whatever --jobs says


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
    executed: nbformat.NotebookNode | None = None
    sandbox: str = ""

    @property
    def score(self) -> float:
        return sum(s.points for s in self.scores)

    @property
    def max_score(self) -> float:
        return sum(s.max_points for s in self.scores)


@dataclass(frozen=True)
class Item:
    """An exercise to grade, and where it came from (None: built in)."""

    exercise: ex.Exercise
    source: str | None = None

    @property
    def label(self) -> str:
        return self.exercise.name + (" (instructor test)" if self.source else "")


def load_test_file(path) -> list[ex.Exercise]:
    """The EXERCISES list of an instructor test file, loaded once, in the grader."""
    import importlib.util

    import cloudpickle

    spec = importlib.util.spec_from_file_location(f"instructor_tests_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)  # its run functions travel to the probes by value
    exercises = getattr(module, "EXERCISES", None)
    if not isinstance(exercises, list) or not all(isinstance(e, ex.Exercise) for e in exercises):
        raise ValueError(f"{path}: an instructor test file must define EXERCISES = [Exercise(...), ...]")
    return exercises


def exercises_for(lab: str, tests_dir=None) -> list[Item]:
    """Built-in exercises of the lab, then the instructor's (with the file each came from)."""
    chosen = [Item(e) for e in ex.for_lab(lab)]
    if tests_dir:
        for path in sorted(Path(tests_dir).glob("*.py")):
            chosen += [Item(e, str(path.resolve())) for e in load_test_file(path) if e.lab == lab]
    return chosen


# ---- reading what a submission left, safely -----------------------------------------------------------------------

def read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file (no symlink, FIFO or device), at most `limit`; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def _cut(text, limit: int = MAX_OUTPUT_CHARS):
    text = "".join(text) if isinstance(text, list) else str(text)
    return text if len(text) <= limit else text[:limit] + "\n[... output cut by the grader ...]\n"


def clean_for_student(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The executed notebook with every output cut to the limit (images too large are dropped)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                output["text"] = _cut(output.get("text", ""))
            elif kind == "error":
                output["evalue"] = _cut(output.get("evalue", ""), 2000)
                output["traceback"] = [_cut(line, 2000) for line in output.get("traceback", [])[:50]]
            elif kind in ("display_data", "execute_result"):
                data = output.get("data", {})
                for mime in list(data):
                    if mime.startswith("text/") or mime.endswith("json"):
                        data[mime] = _cut(data[mime] if isinstance(data[mime], (str, list)) else json.dumps(data[mime]))
                    elif len(str(data[mime])) > 4 * MAX_OUTPUT_CHARS:
                        del data[mime]
            kept.append(output)
        cell["outputs"] = kept
    return nb


# ---- running a submission --------------------------------------------------------------------------------------

def _declared_parameters(nb) -> set[str]:
    cell = next(c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", []))
    return set(re.findall(r"^([A-Za-z_]\w*)\s*=", cell.source, flags=re.M))


def _python(box: sandbox.Sandbox, code: str, args: list[str], timeout: float) -> list[str]:
    """`python -I -c code args`: isolated (neither the working directory nor PYTHON* variables are on its path, so a
    module planted beside it is never imported); where no sandbox kills the whole tree, a subreaper runner wraps it."""
    command = [sys.executable, "-I", "-c", code, *args]
    if box.isolation.bubblewrap:
        return command
    runner = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from lab_utils.instructor.runner import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-I", "-c", runner, str(timeout), "--", *command]


def execute(nb, box: sandbox.Sandbox, params: dict, *, cell_timeout: float, timeout: float) -> tuple[str, str, nbformat.NotebookNode | None]:
    """Run the whole notebook in the sandbox; returns (status, message, executed notebook or None)."""
    work, home = box.scratch / "run", box.scratch / "home"
    work.mkdir()
    home.mkdir()
    prepared, executed = work / "submission.ipynb", work / "executed.ipynb"
    for cell in nb.cells:  # every cell may fail without stopping the run
        if cell.cell_type == "code":
            cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t != "raises-exception"] + ["raises-exception"]
    nbformat.write(nb, prepared)
    with open(box.scratch / "papermill.stderr", "wb") as stderr_file:
        process = box.popen(_python(box, PAPERMILL, [str(prepared), str(executed), json.dumps(params), str(cell_timeout),
                                                     str(ROOT)], timeout),
                            cwd=work, home=home, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr_file)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        box.kill_all()
    tail = (read_regular(box.scratch / "papermill.stderr", 2**30) or b"")[-4000:].decode(errors="replace")
    tail = "\n".join(line for line in tail.splitlines() if "WARNING" not in line)
    raw = read_regular(executed, MAX_NOTEBOOK_BYTES)
    try:
        result = nbformat.reads(raw.decode(), as_version=4) if raw else None
    except Exception:  # a notebook the kernel left half-written, or one the submission replaced
        result = None
    if code is None or code == 124:
        return "timeout", f"the notebook ran longer than {timeout:g} s and was stopped", result
    if code == 3 or "KERNEL DIED" in tail:
        return "kernel_died", "the kernel died (os._exit, a crash or out of memory)", result
    if code != 0 or result is None:
        last = tail.strip().splitlines()[-1][:200] if tail.strip() else f"exit code {code}"
        return "kernel_died", f"execution stopped: {last}", result
    errors = [o for c in result.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    timeouts = tail.count("Timeout waiting for execute reply") + sum(o.get("ename") == "KeyboardInterrupt" for o in errors)
    if timeouts:
        return "timeout", f"{timeouts} cell(s) ran longer than {cell_timeout:g} s and were interrupted", result
    return ("error" if errors else "completed"), "", result


def run_spec(exercise: ex.Exercise, source: str | None) -> dict:
    """How the probe finds the exercise's `run`, and nothing else of it: by name for a built-in exercise, pickled by
    value (the function and the globals it uses) for an instructor test."""
    if source is None:
        return {"module": exercise.run.__module__, "qualname": exercise.run.__qualname__}
    import cloudpickle

    return {"pickled": base64.b64encode(cloudpickle.dumps(exercise.run)).decode()}


PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from lab_utils.instructor.probe import main; main()")


def probe_request(item: Item, definition: str | None, inputs) -> dict:
    """What a probe receives for one exercise: plain data and the `run` spec, nothing of the reference or judge."""
    exercise = item.exercise
    if definition is None:
        return {"name": exercise.name, "missing": f"no cell defines {exercise.name}"}
    return {"name": exercise.name, "definition": definition, "inputs": inputs, "setup": exercise.setup,
            "run": run_spec(exercise, item.source)}


def probe(request: dict, box: sandbox.Sandbox, timeout: float) -> dict:
    """Run one exercise on the learner's definition in a fresh process in the sandbox; exactly one answer, or why not."""
    if "missing" in request:
        return {"status": "missing", "error": request["missing"]}
    home = Path(tempfile.mkdtemp(prefix="probe-", dir=box.scratch))  # made now: nothing the notebook left is in it
    process = box.popen(_python(box, PROBE, [str(ROOT)], timeout), cwd=home, home=home,
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(process.stdout, chunks), daemon=True)
    reader.start()
    try:
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.close()
    except OSError:
        pass  # the process died before reading its request: no answer will come
    try:
        process.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    box.kill_all()
    reader.join(timeout=5)
    if timed_out:
        return {"status": "error", "error": f"it ran longer than {timeout:g} s"}
    if box.exceeded:
        return {"status": "error", "error": box.exceeded}
    return parse_answer(b"".join(chunks))


def _drain(stream, chunks: list) -> None:
    total = 0
    try:
        while total <= MAX_ANSWER_BYTES:
            chunk = stream.read1(65536)
            if not chunk:
                break
            total += len(chunk)
            chunks.append(chunk)
    finally:
        stream.close()


def score(item: Item, record: dict, inputs) -> ExerciseScore:
    """Points for one probe's answer, judged here against the reference."""
    exercise = item.exercise
    if record.get("status") != "ok":
        what = {"missing": record.get("error") or f"{exercise.name} is not defined",
                "invalid": f"the answer could not be used ({record.get('error', '')})"}.get(
                    record.get("status"), f"running your {exercise.name} failed: {record.get('error', 'an error')}")
        return ExerciseScore(item.label, 0.0, exercise.points, what)
    with _SCORING:
        fraction, message = exercise.score(record["value"], inputs)
    if fraction < 1.0:
        message += f". Hint: {exercise.hint}"
    return ExerciseScore(item.label, round(fraction * exercise.points, 3), exercise.points, message)


def prepare(path: Path, lab: str, chosen: list[Item], rng: random.Random, *, timeout: float, cell_timeout: float,
            execute_notebook: bool = True) -> tuple[Graded | None, dict | None, list]:
    """Read one submission and draw its inputs: (a row when it is not a lab notebook, else None; the job a sandbox
    runs, as plain data; the inputs, which stay here for scoring)."""
    student = Path(path).stem

    def invalid(why: str) -> tuple:
        return Graded(student, lab, "invalid", 0.0, why,
                      [ExerciseScore(c.label, 0.0, c.exercise.points, why) for c in chosen]), None, []

    raw = read_regular(Path(path), MAX_NOTEBOOK_BYTES)
    if raw is None:
        return invalid(f"not a regular file of at most {MAX_NOTEBOOK_BYTES // 2**20} MiB")
    try:
        nb = nbformat.reads(raw.decode(), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # not JSON, not a notebook
        return invalid(f"not a readable notebook: {type(exc).__name__}: {str(exc)[:200]}")
    if not any(c.cell_type == "code" and "parameters" in c.metadata.get("tags", []) for c in nb.cells):
        return invalid("the notebook has no cell tagged 'parameters': submit the lab's notebook, not another file")
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    declared = _declared_parameters(nb)
    inputs = [item.exercise.cases(random.Random(rng.randrange(2**63))) for item in chosen]
    requests = [probe_request(item, extract.definition(cells, item.exercise.name), x) for item, x in zip(chosen, inputs)]
    job = {"student": student, "lab": lab, "notebook": nbformat.writes(nb), "execute": execute_notebook,
           "parameters": {k: v for k, v in FAST_PARAMETERS.items() if k in declared},
           "results_dir": "results_dir" in declared, "requests": requests, "timeout": timeout,
           "cell_timeout": cell_timeout}
    return None, job, inputs


def run_job(job: dict, isolation: sandbox.Isolation, scratch: Path, limits: sandbox.Limits) -> dict:
    """The part of grading that runs the submission, in its own sandbox (here, or on a cluster node): the whole
    notebook, then one probe per exercise. Returns plain data: status, message, executed notebook, answer records."""
    home = Path(tempfile.mkdtemp(prefix=f"{re.sub(r'[^A-Za-z0-9_-]', '_', job['student'])[:40]}-", dir=scratch))
    params = dict(job["parameters"])
    if job["results_dir"]:
        params["results_dir"] = str(home / "run" / "results")
    nb = nbformat.reads(job["notebook"], as_version=4)
    try:
        with sandbox.Sandbox(isolation, home, limits, {"PYTHONPATH": str(ROOT)}) as box:
            status, message, executed = (execute(nb, box, params, cell_timeout=job["cell_timeout"], timeout=job["timeout"])
                                         if job["execute"] else ("completed", "probes only: the notebook was not run", None))
            if box.exceeded:
                status, message = "error", f"stopped: {box.exceeded}"
            records = [probe(request, box, max(PROBE_TIMEOUT_S, job["cell_timeout"])) for request in job["requests"]]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {"status": status, "message": message, "records": records, "sandbox": isolation.row_note,
            "executed": nbformat.writes(clean_for_student(executed)) if executed is not None else None}


def finish(job: dict, result: dict, chosen: list[Item], inputs: list, seconds: float) -> Graded:
    """Score a job's answers here, in the grader, against references computed here."""
    scores = [score(item, record, x) for item, record, x in zip(chosen, result["records"], inputs)]
    executed = nbformat.reads(result["executed"], as_version=4) if result.get("executed") else None
    return Graded(job["student"], job["lab"], result["status"], seconds, result["message"], scores, executed,
                  result.get("sandbox", ""))


def grade_one(path: Path, lab: str, chosen: list[Item], isolation: sandbox.Isolation, *, scratch: Path,
              timeout: float, cell_timeout: float, limits: sandbox.Limits, rng: random.Random,
              execute_notebook: bool = True) -> Graded:
    """Execute and probe one submission in its own sandbox; whatever happens, return a Graded row."""
    start = time.monotonic()
    row, job, inputs = prepare(path, lab, chosen, rng, timeout=timeout, cell_timeout=cell_timeout,
                               execute_notebook=execute_notebook)
    if row is not None:
        return row
    return finish(job, run_job(job, isolation, scratch, limits), chosen, inputs, time.monotonic() - start)


def grade(paths, lab: str, out_dir, *, tests_dir=None, timeout: float = 600.0, cell_timeout: float = 120.0,
          jobs: int = 1, limits: sandbox.Limits | None = None, seed: int | None = None, say=print,
          execute_notebooks: bool = True, unsandboxed: bool = False,
          isolation: sandbox.Isolation | None = None, slurm: dict | None = None) -> list[Graded]:
    """Grade every submission (`jobs` at a time), then write the gradebook, feedback and executed notebooks.

    With execute_notebooks=False only the probes run (faster; no executed notebook and no run status). Where no
    sandbox can be made, grading is refused unless `unsandboxed` accepts the risk (then every row says so).
    With `slurm` (a dict: partition, retries, folder, on_submit) each submission runs as one task of a job array on the
    cluster's nodes, in its sandbox there, and is scored here exactly as locally."""
    lab = str(lab).zfill(2)
    if not ex.for_lab(lab) and not tests_dir:
        raise ValueError(f"lab {lab} has no graded exercises; labs with exercises: "
                         f"{sorted({e.lab for e in ex.REGISTRY.values()})}")
    paths = [Path(p) for p in paths]
    stems = [p.stem for p in paths]
    repeated = sorted({s for s in stems if stems.count(s) > 1})
    if repeated:
        raise ValueError(f"two submissions would be graded as the same student {repeated}: the file name (without "
                         ".ipynb) names the student, so rename them")
    out_dir = Path(out_dir).resolve()
    for folder, what in ((out_dir, "--out"), (Path(tests_dir).resolve() if tests_dir else None, "--tests")):
        if folder is not None and (folder == ROOT or folder in ROOT.parents):
            raise ValueError(f"{what} {folder} contains the course: choose a folder of its own (it is hidden from submissions)")
    chosen = exercises_for(lab, tests_dir)  # instructor tests are loaded once, here, before any submission runs
    _import_references(chosen)
    isolation = isolation or sandbox.detect()
    say(isolation.describe())
    if not isolation.complete and not unsandboxed:
        raise SandboxUnavailable("no sandbox can be made on this machine, so a submission could read the instructor "
                                 "tests and other submissions: install bubblewrap (Debian: apt-get install bubblewrap), "
                                 "or pass --unsandboxed to grade anyway with that risk written in every gradebook row")
    if isolation.one_at_a_time and jobs > 1:
        say(f"grading one submission at a time, not {jobs}: this machine has no per-submission process limit "
            "(no writable cgroups), so a fork bomb would starve a classmate graded beside it")
        jobs = 1
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="lab-grader-"))
    scratch.chmod(0o711)  # a sandbox reaches its own folder (random name) and lists no one else's
    rng = random.Random(seed if seed is not None else secrets.randbits(64))
    seeds = [rng.randrange(2**63) for _ in paths]
    copies = []
    for i, p in enumerate(paths):  # each submission runs from a private copy; the originals stay hidden
        copy = scratch / f"submission-{i}.ipynb"
        data = read_regular(p, MAX_NOTEBOOK_BYTES)
        copy.write_bytes(data if data is not None else b"")
        if data is None:
            copy.unlink()
        copies.append((p.stem, copy))

    def one(index: int) -> Graded:
        stem, copy = copies[index]
        try:
            if not copy.exists():
                return Graded(stem, lab, "invalid", 0.0, "not a regular notebook file",
                              [ExerciseScore(c.label, 0.0, c.exercise.points, "not a regular notebook file") for c in chosen])
            row = grade_one(copy, lab, chosen, isolation, scratch=scratch, timeout=timeout,
                            cell_timeout=cell_timeout, limits=limits or sandbox.Limits(), rng=random.Random(seeds[index]),
                            execute_notebook=execute_notebooks)
            row.student = stem
            return row
        except Exception as exc:  # a grader bug must not cost the rest of the batch
            import traceback

            traceback.print_exc()
            return Graded(stem, lab, "error", 0.0, f"the grader failed on this submission: {exc!r}",
                          [ExerciseScore(c.label, 0.0, c.exercise.points, "not graded") for c in chosen])

    try:
        if slurm is not None:
            rows = _on_slurm(copies, lab, chosen, seeds, slurm, timeout=timeout, cell_timeout=cell_timeout,
                             execute_notebooks=execute_notebooks, unsandboxed=unsandboxed, say=say)
        else:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                rows = list(pool.map(one, range(len(paths))))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for row in rows:
        row.sandbox = row.sandbox or isolation.row_note
    write_outputs(rows, out_dir)
    return rows


def _on_slurm(copies, lab, chosen, seeds, options: dict, *, timeout, cell_timeout, execute_notebooks, unsandboxed,
              say) -> list[Graded]:
    """Every submission's sandboxed run as a task of a job array; scored here; a lost task gets a row."""
    from . import grade_slurm

    start = time.monotonic()
    prepared = []
    for (stem, copy), seed in zip(copies, seeds):
        if not copy.exists():
            prepared.append((Graded(stem, lab, "invalid", 0.0, "not a regular notebook file",
                                    [ExerciseScore(c.label, 0.0, c.exercise.points, "not a regular notebook file")
                                     for c in chosen]), None, None))
            continue
        row, job, inputs = prepare(copy, lab, chosen, random.Random(seed), timeout=timeout, cell_timeout=cell_timeout,
                                   execute_notebook=execute_notebooks)
        if job is not None:
            job["student"] = stem
        if row is not None:
            row.student = stem
        prepared.append((row, job, inputs))
    jobs = [job for _, job, _ in prepared if job is not None]
    folder = Path(options.get("folder") or tempfile.mkdtemp(prefix="lab-grader-slurm-", dir=Path.cwd()))
    try:
        results = iter(grade_slurm.run_on_slurm(jobs, folder, partition=options.get("partition"),
                                                retries=options.get("retries", 1), unsandboxed=unsandboxed,
                                                timeout=options.get("timeout", max(600.0, 3 * timeout)), say=say,
                                                on_submit=options.get("on_submit")))
        rows = []
        for row, job, inputs in prepared:
            if job is None:
                rows.append(row)
                continue
            result = next(results)
            if result is None:
                why = "its Slurm task was lost twice (node failure or cancelled): grade it again"
                rows.append(Graded(job["student"], lab, grade_slurm.LOST, 0.0, why,
                                   [ExerciseScore(c.label, 0.0, c.exercise.points, why) for c in chosen]))
            else:
                rows.append(finish(job, result, chosen, inputs, time.monotonic() - start))
    finally:
        if not options.get("folder"):
            shutil.rmtree(folder, ignore_errors=True)
    return rows


def _import_references(chosen) -> None:
    """Import, before any submission runs, every course module a reference may need (never lazily afterwards)."""
    from .. import data, data_parallel, pipeline, report, spec, train  # noqa: F401
    if any(c.exercise.lab == "05" for c in chosen):
        from .. import tf_distribute

        tf_distribute.import_tensorflow()


# ---- outputs: written once, at the end, as fresh files -----------------------------------------------------------

def write_fresh(path: Path, text: str) -> None:
    """Write a new file at `path`, replacing whatever is there (a symlink is replaced, never followed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_outputs(rows: list[Graded], out_dir: Path) -> None:
    """gradebook.csv, STUDENT.feedback.md and STUDENT.executed.ipynb, each created fresh."""
    book = io.StringIO()
    writer = csv.writer(book, lineterminator="\n")
    writer.writerow(GRADEBOOK_COLUMNS)
    for r in rows:
        writer.writerow([r.student, r.lab, f"{r.score:g}", f"{r.max_score:g}", r.status, f"{r.seconds:.1f}", r.message,
                         r.sandbox])
    write_fresh(out_dir / "gradebook.csv", book.getvalue())
    for row in rows:
        write_fresh(out_dir / f"{row.student}.feedback.md", feedback(row))
        if row.executed is not None:
            write_fresh(out_dir / f"{row.student}.executed.ipynb", nbformat.writes(row.executed))


def feedback(row: Graded) -> str:
    """What the student reads: per exercise, points and a message."""
    lines = [f"# Lab {row.lab}: {row.student}", "", f"Score: {row.score:g} / {row.max_score:g}",
             f"Run: {row.status}" + (f" ({row.message})" if row.message else ""), ""]
    lines += [f"- **{s.name}**: {s.points:g} / {s.max_points:g} — {s.message}" for s in row.scores]
    return "\n".join(lines) + "\n"
