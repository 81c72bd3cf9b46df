"""Grade submitted notebooks. Each submission runs in a sandbox of its own (`sandboxed_run`): once whole (papermill,
for the executed notebook handed back and the run's status), then once per exercise in a fresh probe process that runs
the learner's definition as the kernel had it at the notebook's self-check, with the lab's set-up, on inputs drawn for
this run. Scores are computed here, in the grader's own process, against references computed here; the submission's
notebook and code are only ever read in a limited child (`submission_reader`); outputs are written at the end
(`gradebook`), where no submission can reach."""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import random
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ... import exercises as ex
from ...hardware import usable_cpu_count
from . import gradebook, submission_reader
from .gradebook import ExerciseScore, Graded
from .sandbox.bubblewrap import mounted_folders
from .sandbox.host import remove_tree
from .sandbox.isolation import Isolation, Limits
from .sandbox.machine import detect_isolation
from ..labs import declared as declared_by
from .probe import stub_error
from .sandboxed_run import PROBE_TIMEOUT_S, run_job
from .submission_reader import MAX_NOTEBOOK_BYTES, MAX_OUTPUT_CHARS  # noqa: F401  (the limits, where tests look)

ROOT = Path(__file__).resolve().parents[3]
STATUSES = ("completed", "error", "timeout", "kernel_died", "invalid", "lost")
# small, fast settings for every lab (only those a notebook declares are injected)
FAST_PARAMETERS = {"seed": 0, "epochs": 2, "lr_epochs": 2, "scaling_steps": 5, "rounds": 1, "small_micro_batches": [16],
                   "micro_batches": [2, 4], "repeats": 3, "curve_epochs": 1, "allreduce_repeats": 3,
                   "allreduce_max_bytes": 2**16, "speed_steps": 5, "speed_global_batch": 128, "world_size": 2,
                   "n_devices": 2, "n_workers": 2, "stages": 2, "train_steps": 2, "train_epochs": 2, "steps": 2,
                   "gradients": 80, "tf_steps": 40, "straggler_factors": [1, 4], "run_s": 0.25, "pool_requests": 600, "worker_rounds": 1,
                   "fresh_compile_cache": False, "batch_sweep": [1, 8, 64], "timing_steps": 3, "timing_repeats": 3,
                   "sweep_batches": [8, 16], "hotspot_devices": [1, 2], "hotspot_batch": 16, "compare_steps": 1, "compare_rounds": 3,
                   "timed_steps": 2, "warmup_steps": 1, "steps_per_repeat": 3}
SETTINGS_FILE = "grading-settings.json"  # in --out: what the class was graded with, for --regrade to compare
LOCK_FILE = ".grading.lock"  # in --out: held while a grading reads and writes the folder (flock)
_SCORING = threading.Lock()  # references are computed one at a time: identical whatever --jobs says


class SandboxUnavailable(RuntimeError):
    """No sandbox here, and the instructor did not accept grading without one."""


@dataclass(frozen=True)
class Item:
    """An exercise to grade, and where it came from (None: built in)."""

    exercise: ex.Exercise
    source: str | None = None
    blocked: str = ""  # why it cannot run on this machine ('' when it can)

    @property
    def label(self) -> str:
        return self.exercise.name + (" (instructor test)" if self.source else "")


def load_test_file(path) -> list[ex.Exercise]:
    """The EXERCISES list of an instructor test file, loaded once, in the grader."""
    import importlib.util

    import cloudpickle

    spec = importlib.util.spec_from_file_location(f"instructor_tests_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None  # a file path always gives both
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


# ---- what this machine can run ---------------------------------------------------------------------------------

_MACHINE: dict[str, str] = {}


def missing_here(need: str) -> str:
    """'' when this machine has `need` ("gpu", "slurm"), else why not (looked at once)."""
    if need not in _MACHINE:
        if need == "gpu":
            found = shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                                                   timeout=30).returncode == 0
            _MACHINE[need] = "" if found else "it needs a GPU, and this machine has none (nvidia-smi sees no device)"
        elif need == "slurm":
            from ...labs.lab11 import slurm

            _MACHINE[need] = "" if slurm.find_cluster() is not None else \
                "it needs a Slurm cluster, and none answers here"
        else:
            _MACHINE[need] = f"it needs {need!r}, which the grader does not know how to provide"
    return _MACHINE[need]


def blocked_reason(exercise: ex.Exercise, isolation: Isolation) -> str:
    """Why this exercise cannot run on this machine (in its sandbox), or ''."""
    reasons = [missing_here(need) for need in exercise.requires]
    if "slurm" in exercise.requires and not reasons[exercise.requires.index("slurm")] and isolation.complete:
        reasons.append("it needs a Slurm cluster, which a sandboxed probe cannot reach (it has no network)")
    return "; ".join(filter(None, reasons))


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


def write_private(path: Path, data: bytes) -> None:
    """A new file readable by the grader alone (mode 0600 from its creation, whatever the umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def why_unreadable(path: Path) -> str:
    """Why a submission path is not a notebook file the grader reads ('' when it is one)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({type(exc).__name__})"
    if stat.S_ISLNK(info.st_mode):
        return (f"a symbolic link (to {os.readlink(path)}), not a file: the grader follows no links; "
                "hand in (or copy) the notebook itself")
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a folder, a FIFO or a device)"
    if info.st_size > MAX_NOTEBOOK_BYTES:
        return f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB"
    return ""


# ---- what a probe is asked --------------------------------------------------------------------------------------

def run_spec(exercise: ex.Exercise, source: str | None) -> dict:
    """How the probe finds the exercise's `run`, and nothing else of it: by name for a built-in exercise, pickled by
    value (the function and the globals it uses) for an instructor test."""
    if source is None:
        return {"module": exercise.run.__module__, "qualname": exercise.run.__qualname__}
    import cloudpickle

    return {"pickled": base64.b64encode(cloudpickle.dumps(exercise.run)).decode()}


def probe_request(item: Item, definition: str | None, inputs, stub: bool = False) -> dict:
    """What a probe receives for one exercise: plain data and the `run` spec, nothing of the reference or judge. A
    definition the reader found to be the stub needs no probe: the row says so as the probe would."""
    exercise = item.exercise
    if item.blocked:
        return {"name": exercise.name, "blocked": f"not graded on this machine: {item.blocked}"}
    if definition is None:
        return {"name": exercise.name, "missing": f"no cell defines {exercise.name}"}
    if stub:
        return {"name": exercise.name, "missing": stub_error(exercise.name)}
    return {"name": exercise.name, "definition": definition, "inputs": inputs, "setup": exercise.setup,
            "run": run_spec(exercise, item.source)}


def score(item: Item, record: dict, inputs) -> ExerciseScore:
    """Points for one probe's answer, judged here against the reference."""
    exercise = item.exercise
    if record.get("status") == "blocked":
        return ExerciseScore(item.label, 0.0, exercise.points, record.get("error", "not graded here"), "blocked")
    if record.get("status") != "ok":
        what = {"missing": record.get("error") or f"{exercise.name} is not defined",
                "invalid": f"the answer could not be used ({record.get('error', '')})"}.get(
                    str(record.get("status")), f"running your {exercise.name} failed: {record.get('error', 'an error')}")
        return ExerciseScore(item.label, 0.0, exercise.points, what)
    with _SCORING:
        fraction, message = exercise.score(record["value"], inputs)
    if fraction < 1.0:
        message += f". Hint: {exercise.hint}"
    return ExerciseScore(item.label, round(fraction * exercise.points, 3), exercise.points, message)


def _invalid(student: str, lab: str, chosen: list[Item], why: str) -> Graded:
    return Graded(student, lab, "invalid", 0.0, why, [ExerciseScore(c.label, 0.0, c.exercise.points, why) for c in chosen])


def _other_lab(lab: str, info: dict, chosen: list[Item]) -> str:
    """Why the notebook is another lab's ('' when it is this lab's, or cannot be told)."""
    if info.get("title_lab") and info["title_lab"] != lab:
        return (f"this is a lab {info['title_lab']} notebook (its title says Lab {info['title_lab']}), not lab {lab}'s: "
                "hand in the right notebook")
    ours = {c.exercise.name for c in chosen}
    theirs = sorted(n for n in info.get("defines", []) if n not in ours)
    if theirs and not ours & set(info.get("defines", [])):
        labs = sorted({ex.REGISTRY[n].lab for n in theirs if n in ex.REGISTRY})
        return (f"it defines {', '.join(theirs[:4])} (lab {', '.join(labs)}) and none of lab {lab}'s exercises: "
                "hand in the right notebook")
    return ""


def prepare_submission(path: Path, lab: str, chosen: list[Item], rng: random.Random, *, timeout: float, cell_timeout: float,
            probe_timeout: float = PROBE_TIMEOUT_S, execute_notebook: bool = True,
            student: str | None = None) -> tuple[Graded | None, dict | None, list]:
    """Read one submission (in a limited child) and draw its inputs: (a row when it is not this lab's notebook, else
    None; the job a sandbox runs, as plain data; the inputs, which stay here for scoring)."""
    student = student or Path(path).stem
    why = why_unreadable(Path(path))
    raw = None if why else read_regular(Path(path), MAX_NOTEBOOK_BYTES)
    if raw is None:
        return _invalid(student, lab, chosen, why or "not a regular notebook file"), None, []
    info = submission_reader.read_in_child(raw, [c.exercise.name for c in chosen], sorted(ex.REGISTRY))
    why = info.get("invalid") or _other_lab(lab, info, chosen)
    if why:
        return _invalid(student, lab, chosen, why), None, []
    declared = set(info["declared"])
    inputs = [item.exercise.cases(random.Random(rng.randrange(2**63))) for item in chosen]
    requests = [probe_request(item, info["definitions"].get(item.exercise.name), x, item.exercise.name in info["stubs"])
                for item, x in zip(chosen, inputs)]
    job = {"student": student, "lab": lab, "notebook": info["notebook"], "execute": execute_notebook,
           "parameters": {k: v for k, v in FAST_PARAMETERS.items() if k in declared},
           "results_dir": "results_dir" in declared, "requests": requests, "timeout": timeout,
           "cell_timeout": cell_timeout, "probe_timeout": probe_timeout}
    return None, job, inputs


def finish(job: dict, result: dict, chosen: list[Item], inputs: list, seconds: float) -> Graded:
    """Score a job's answers here, in the grader, against references computed here."""
    scores = [score(item, record, x) for item, record, x in zip(chosen, result["records"], inputs)]
    return Graded(job["student"], job["lab"], result["status"], seconds, result["message"], scores,
                  result.get("executed"), result.get("sandbox", ""))


def grade_one(path: Path, lab: str, chosen: list[Item], isolation: Isolation, *, scratch: Path,
              timeout: float, cell_timeout: float, limits: Limits, rng: random.Random,
              execute_notebook: bool = True, probe_timeout: float = PROBE_TIMEOUT_S,
              student: str | None = None) -> Graded:
    """Execute and probe one submission in its own sandbox; whatever happens, return a Graded row."""
    start = time.monotonic()
    row, job, inputs = prepare_submission(path, lab, chosen, rng, timeout=timeout, cell_timeout=cell_timeout,
                               probe_timeout=probe_timeout, execute_notebook=execute_notebook, student=student)
    if row is not None:
        return row
    assert job is not None  # prepare gives a row or a job
    return finish(job, run_job(job, isolation, scratch, limits), chosen, inputs, time.monotonic() - start)


def grade(paths, lab: str, out_dir, *, tests_dir=None, timeout: float = 600.0, cell_timeout: float = 120.0,
          jobs: int = 1, limits: Limits | None = None, seed: int | None = None, say=print,
          execute_notebooks: bool = True, unsandboxed: bool = False,
          isolation: Isolation | None = None, slurm: dict | None = None,
          probe_timeout: float | None = None, roster=None, lms: str | None = None, assignment: str | None = None,
          regrade: str | None = None, roster_column: str | None = None) -> list[Graded]:
    """Grade every submission (`jobs` at a time), then write the gradebook, the class summary, feedback and executed
    notebooks (and, with a roster, the LMS's import file).

    With execute_notebooks=False only the probes run (faster; no executed notebook and no run status). Where no
    sandbox can be made, grading is refused unless `unsandboxed` accepts the risk (then every row says so).
    With `slurm` (a dict: partition, retries, folder, on_submit) each submission runs as one task of a job array on the
    cluster's nodes, in its sandbox there, and is scored here exactly as locally. `probe_timeout`: seconds of its share
    of the CPUs one exercise's probe may use (default max(120, cell_timeout)). `regrade`: grade only that student's
    submission (one of `paths`) into an existing output folder, keeping every other row; refused where the folder was
    graded on other exercises or instructor tests (recorded in grading-settings.json). `roster_column`: the roster's
    column that names the submission files (default: Submission, else SIS Login ID). Writers of one output folder take
    turns (a lock file)."""
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
    check_private_folders(out_dir, tests_dir, roster)
    if lms is not None and lms not in gradebook.LMS:
        raise ValueError(f"--lms {lms}: known: {sorted(gradebook.LMS)}")
    if (roster is None) != (lms is None):
        raise ValueError("--roster and --lms go together: the roster names the LMS's students")
    say = _clean_lines(say)
    roster_rows = gradebook.read_roster(roster) if roster is not None else None
    column = gradebook.roster_column(roster_rows, roster_column) if roster_rows is not None else "SIS Login ID"
    chosen = exercises_for(lab, tests_dir)  # instructor tests are loaded once, here, before any submission runs
    settings = grading_settings(lab, chosen, execute_notebooks=execute_notebooks, timeout=timeout,
                                cell_timeout=cell_timeout, probe_timeout=probe_timeout, unsandboxed=unsandboxed)
    if regrade is not None:
        if regrade not in stems:
            raise ValueError(f"--regrade {regrade}: no submission {regrade}.ipynb among the files given")
        for line in check_regrade(out_dir, gradebook.read_rows(out_dir), settings):  # refuses what would not add up
            say(line)
        paths = [paths[stems.index(regrade)]]
    if roster_rows is not None:
        earlier_names = [r.student for r in gradebook.read_rows(out_dir)] if regrade is not None else []
        gradebook.check_roster(roster_rows, column, {*stems, *earlier_names}, declared=roster_column is not None)
    _import_references(chosen)
    isolation = isolation or detect_isolation()
    say(isolation.describe())
    if not isolation.complete and not unsandboxed:
        raise SandboxUnavailable("no sandbox can be made on this machine, so a submission could read the instructor "
                                 "tests and other submissions: install bubblewrap (Debian: apt-get install bubblewrap), "
                                 "or pass --unsandboxed to grade anyway with that risk written in every gradebook row")
    if isolation.one_at_a_time and jobs > 1 and slurm is None:
        say(f"grading one submission at a time, not {jobs}: {isolation.why_one_at_a_time}")
        jobs = 1
    limits = limits or Limits()
    if limits.cpus is None and isolation.cpu:
        limits = dataclasses.replace(limits, cpus=round(usable_cpu_count() / max(1, jobs), 3))
    chosen = [dataclasses.replace(item, blocked=blocked_reason(item.exercise, isolation)) for item in chosen]
    for item in chosen:
        if item.blocked:
            say(f"{item.label} is blocked on this machine: {item.blocked}")
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="lab-grader-"))
    scratch.chmod(0o711)  # without bubblewrap a sandbox reaches its own folder (random name) and lists no one else's
    private = scratch / "submissions"
    private.mkdir(mode=0o700)  # the copies: the grader's alone (neither classmates on the machine nor a sandbox)
    rng = random.Random(seed if seed is not None else secrets.randbits(64))
    seeds = [rng.randrange(2**63) for _ in paths]
    copies = []
    for i, p in enumerate(paths):  # each submission is read from a private copy; the originals are never run
        copy = private / f"submission-{i}.ipynb"
        why = why_unreadable(p)
        data = None if why else read_regular(p, MAX_NOTEBOOK_BYTES)
        if data is not None:
            write_private(copy, data)
        copies.append((p.stem, copy, why or ("" if data is not None else "not a regular notebook file")))

    def one(index: int) -> Graded:
        stem, copy, why = copies[index]
        try:
            if why:
                return _invalid(stem, lab, chosen, why)
            return grade_one(copy, lab, chosen, isolation, scratch=scratch, timeout=timeout,
                             cell_timeout=cell_timeout, limits=limits, rng=random.Random(seeds[index]),
                             execute_notebook=execute_notebooks, student=stem,
                             probe_timeout=probe_timeout or max(PROBE_TIMEOUT_S, cell_timeout))
        except Exception as exc:  # a grader bug must not cost the rest of the batch
            import traceback

            traceback.print_exc()
            return Graded(stem, lab, "error", 0.0, f"the grader failed on this submission: {exc!r}",
                          [ExerciseScore(c.label, 0.0, c.exercise.points, "not graded") for c in chosen])

    try:
        if slurm is not None:
            rows = _on_slurm(copies, lab, chosen, seeds, slurm, timeout=timeout, cell_timeout=cell_timeout,
                             execute_notebooks=execute_notebooks, unsandboxed=unsandboxed, say=say,
                             probe_timeout=probe_timeout)
        else:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                rows = list(pool.map(one, range(len(paths))))
    finally:
        remove_tree(scratch)
    for row in rows:
        row.sandbox = row.sandbox or isolation.row_note
    with locked(out_dir):  # a regrade beside another reads the rows the other wrote, never a copy from before it
        everyone = rows
        if regrade is not None:
            earlier = gradebook.read_rows(out_dir)
            check_regrade(out_dir, earlier, settings)  # the folder may have been graded again meanwhile
            everyone = gradebook.merge(earlier, rows)
        written = gradebook.write_outputs(everyone, out_dir, [c.label for c in chosen], lab, fresh=rows,
                                          roster=roster_rows, lms=lms, assignment=assignment, roster_column=column)
        if regrade is None:
            gradebook.write_fresh(out_dir / SETTINGS_FILE, json.dumps(settings, indent=1) + "\n")
    for line in written:
        say(line)
    for row in rows:
        if gradebook.file_name(row.student) != row.student:
            say(f"{row.student}: its name cannot be a file name, so its files are {gradebook.file_name(row.student)}.*")
    return rows


# ---- the folders the instructor names, and what a regrade must match ------------------------------------------------

def check_private_folders(out_dir: Path, tests_dir, roster) -> None:
    """Refuse an output folder, a tests folder or a roster that a submission could see: inside a folder every sandbox
    mounts (the course's lab_utils, datasets and notebooks, the Python, /usr, /etc, ...), or holding the course."""
    mounted = mounted_folders()
    for given, what in ((out_dir, "--out"), (tests_dir, "--tests"), (roster, "--roster")):
        if given is None:
            continue
        folder = Path(given).resolve()
        if folder == ROOT or folder in ROOT.parents:
            raise ValueError(f"{what} {folder} contains the course: choose a folder of its own (it is hidden from "
                             "submissions)")
        inside = next((m for m in mounted if folder == m or folder.is_relative_to(m)), None)
        if inside is not None:
            raise ValueError(f"{what} {folder} lies in {inside}, which every sandbox mounts, so a submission could "
                             f"read it: put it in a folder of its own outside the course and the system folders "
                             f"(e.g. {ROOT.parent / ('grading' if what != '--tests' else 'hidden_tests')})")


def grading_settings(lab: str, chosen: list[Item], **options) -> dict:
    """What a class was graded with: the lab, the exercises with their maxima, the instructor test files (name and
    content digest), and the run's options."""
    tests = {}
    for item in chosen:
        if item.source:
            tests[Path(item.source).name] = hashlib.sha256(Path(item.source).read_bytes()).hexdigest()[:16]
    return {"lab": lab, "exercises": {c.label: c.exercise.points for c in chosen}, "tests": tests,
            **options}


_SETTING_NAMES = {"execute_notebooks": "--probes-only", "timeout": "--timeout", "cell_timeout": "--cell-timeout",
                  "probe_timeout": "--probe-timeout", "unsandboxed": "--unsandboxed"}


def check_regrade(out_dir: Path, earlier: list[Graded], settings: dict) -> list[str]:
    """Refuse a regrade whose rows would not add up with the folder's (another lab, other exercises or maxima, other
    instructor tests); lines saying which of the run's other options differ (the regraded row is scored alike)."""
    labs = {r.lab for r in earlier}
    if labs - {settings["lab"]}:
        raise ValueError(f"--regrade: {out_dir} holds the grading of lab {sorted(labs)[0]}, not lab {settings['lab']}")
    path = out_dir / SETTINGS_FILE
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        recorded = {"lab": settings["lab"], "exercises": gradebook.exercise_maxima(earlier), "tests": None}
    differ = []
    if recorded.get("exercises") != settings["exercises"]:
        had, has = recorded.get("exercises") or {}, settings["exercises"]
        differ.append(f"the exercises: the folder has {_listed(had)}, this run {_listed(has)}")
    if recorded.get("tests") is not None and recorded.get("tests") != settings["tests"]:
        differ.append(f"--tests: the folder was graded with {_listed(recorded['tests']) or 'no instructor tests'}, "
                      f"this run with {_listed(settings['tests']) or 'none'}")
    if differ:
        raise ValueError(f"--regrade into {out_dir}: its gradebook would no longer add up, because "
                         + "; ".join(differ) + ". Regrade with the settings the class was graded with (see "
                         f"{SETTINGS_FILE} there), or grade the whole class again into a new folder")
    return [f"--regrade: {name} differs from the folder's grading ({key} {recorded[key]!r} there, "
            f"{settings.get(key)!r} now); "
            "the regraded row is scored on the same exercises"
            for key, name in _SETTING_NAMES.items() if key in recorded and recorded[key] != settings.get(key)]


def _listed(mapping: dict) -> str:
    return ", ".join(f"{k} ({v})" for k, v in sorted(mapping.items()))


@contextlib.contextmanager
def locked(out_dir: Path):
    """Hold the output folder's lock (fcntl.flock): one grading at a time reads and writes it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _clean_lines(say):
    """`say`, for lines that may hold learner-controlled text (any string prints)."""
    return lambda line: say(gradebook.clean(line))


def _on_slurm(copies, lab, chosen, seeds, options: dict, *, timeout, cell_timeout, execute_notebooks, unsandboxed,
              say, probe_timeout=None) -> list[Graded]:
    """Every submission's sandboxed run as a task of a job array; scored here; a lost task gets a row."""
    from . import grade_slurm

    start = time.monotonic()
    prepared: list[tuple] = []  # (row, job, inputs): a row, or a job to run
    for (stem, copy, why), seed in zip(copies, seeds):
        if why:
            prepared.append((_invalid(stem, lab, chosen, why), None, None))
            continue
        row, job, inputs = prepare_submission(copy, lab, chosen, random.Random(seed), timeout=timeout, cell_timeout=cell_timeout,
                                   execute_notebook=execute_notebooks, student=stem,
                                   probe_timeout=probe_timeout or max(PROBE_TIMEOUT_S, cell_timeout))
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
    from ... import data, report, spec, train  # noqa: F401
    from ...labs.lab04 import pipeline
    from ...labs.lab02 import data_parallel
    if any(declared_by(c.exercise.lab).tensorflow for c in chosen):  # TensorFlow starts before any submission runs
        from ... import tf_distribute

        tf_distribute.import_tensorflow()
