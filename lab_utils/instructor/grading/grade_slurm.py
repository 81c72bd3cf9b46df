"""Grading a class on a Slurm cluster: each submission's sandboxed run (the whole notebook, then its probes) is one
task of a job array on the nodes; the answers come back as plain data and are scored in the grader's own process,
exactly as locally (`sandboxed_run.run_job` is the same code). A task lost with its node is retried once; a task lost
twice gets a row with status `lost`, never a missing row.

What a task receives (`job-N.json` in a folder the nodes share): the notebook, the parameters, and per exercise the
probe request (the learner's definition, the drawn inputs, the exercise's `run`) — never a reference, a judge, the
instructor test files or the output folder.

    python -m lab_utils.instructor.grading.grade_slurm FOLDER INDEX     (what each array task runs)
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from ...labs.lab11 import slurm
from .sandbox.host import remove_tree
from .sandbox.isolation import Limits
from .sandbox.machine import detect_isolation
from .sandboxed_run import run_job

ROOT = Path(__file__).resolve().parents[3]
LOST = "lost"


def write_json(path: Path, data) -> None:
    """Write `path` whole or not at all (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)  # a submission: the grader's alone
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(data))
    os.replace(tmp, path)


def array_script(folder: Path, indices: list[int], *, partition: str | None, time_limit_min: int,
                 cpus_per_task: int) -> str:
    """The batch script of one job array over `indices` (one submission each)."""
    lines = ["#!/bin/bash", "#SBATCH --job-name=lab-grade", f"#SBATCH --array={','.join(map(str, indices))}",
             "#SBATCH --ntasks=1", f"#SBATCH --cpus-per-task={cpus_per_task}", f"#SBATCH --time={time_limit_min}",
             f"#SBATCH --output={folder}/task-%a.log"]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines.append(f"exec {shlex.quote(sys.executable)} -I -c 'import sys; sys.path.insert(0, sys.argv[1]); "
                 "from lab_utils.instructor.grading.grade_slurm import main; sys.exit(main(sys.argv[2:]))' "
                 f"{shlex.quote(str(ROOT))} {shlex.quote(str(folder))} \"$SLURM_ARRAY_TASK_ID\"")
    return "\n".join(lines) + "\n"


def run_on_slurm(jobs: list[dict], folder: Path, *, partition: str | None = None, timeout: float = 3600.0,
                 retries: int = 1, unsandboxed: bool = False, say=print, on_submit=None) -> list[dict | None]:
    """Run every job as one array task; the results in order (None: lost, after `retries` more tries)."""
    if slurm.find_cluster() is None:
        raise RuntimeError(slurm.SKIPPED.replace("skipped: ", "grade --slurm: "))
    folder.mkdir(parents=True, exist_ok=True)
    for i, job in enumerate(jobs):
        write_json(folder / f"job-{i}.json", {**job, "unsandboxed": unsandboxed})
    per_task_min = max(1, int(max((j["timeout"] for j in jobs), default=60) * 2 // 60) + 2)
    pending = list(range(len(jobs)))
    for attempt in range(retries + 1):
        if not pending:
            break
        script = folder / f"array-{attempt}.sh"
        script.write_text(array_script(folder, pending, partition=partition, time_limit_min=per_task_min,
                                       cpus_per_task=1))
        job_id = slurm.sbatch(script, cwd=folder)
        say(f"grade --slurm: job array {job_id} ({len(pending)} submission(s){', a retry' if attempt else ''})")
        if on_submit:
            on_submit(job_id, attempt)
        try:
            slurm.wait(job_id, timeout, say=lambda line: None, poll=1.0)
        except TimeoutError as exc:
            say(f"grade --slurm: {exc}")
        pending = [i for i in pending if not (folder / f"result-{i}.json").exists()]
        if pending:
            say(f"grade --slurm: {len(pending)} task(s) came back without a result"
                + ("; trying them once more" if attempt < retries else ""))
    results = []
    for i in range(len(jobs)):
        path = folder / f"result-{i}.json"
        results.append(json.loads(path.read_text()) if path.exists() else None)
    return results


def main(argv: list[str]) -> int:
    """One array task: run job INDEX in a sandbox on this node, write its result beside it."""
    folder, index = Path(argv[0]), int(argv[1])
    job = json.loads((folder / f"job-{index}.json").read_text())
    isolation = detect_isolation()
    if not isolation.complete and not job.get("unsandboxed"):
        print("grade --slurm: no sandbox can be made on this node:", isolation.describe(), file=sys.stderr)
        return 3
    scratch = Path(tempfile.mkdtemp(prefix="lab-grader-"))
    try:
        scratch.chmod(0o711)
        result = run_job(job, isolation, scratch, Limits())
    finally:
        remove_tree(scratch)
    write_json(folder / f"result-{index}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
