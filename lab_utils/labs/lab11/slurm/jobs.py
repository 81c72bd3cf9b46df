"""Submitting a job and waiting for it: sbatch, its scontrol record, cancel, waiting (saying each change of state)
for it to end, for submitit's results, for a state, for a node to finish cleaning up, for a file."""
from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from pathlib import Path

from .cluster import command, seconds

DONE_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
               "BOOT_FAIL", "DEADLINE")


def sbatch(script_path, *extra: str, cwd=None) -> int:
    """Submit a batch script; its job id."""
    out = command(["sbatch", "--parsable", *extra, str(script_path)] if cwd is None else
               ["sbatch", "--parsable", f"--chdir={cwd}", *extra, str(script_path)])
    return int(out.strip().split(";")[0])


def job_info(job_id) -> list[dict]:
    """`scontrol show job` of a job (one dict per array task), [] once Slurm has forgotten it."""
    try:
        out = command(["scontrol", "show", "job", "-o", str(job_id)])
    except RuntimeError as exc:
        if "Invalid job id" in str(exc):
            return []
        raise
    jobs = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields:
            jobs.append(fields)
    return jobs


def cancel(job_id) -> None:
    """Cancel a job (all its array tasks); no error when it has ended."""
    with contextlib.suppress(RuntimeError):
        command(["scancel", str(job_id)])


def _say_states(job_id, jobs: list[dict], seen: dict, say) -> None:
    """Say each task's state and nodes once per change (`seen`: what was said last, by task)."""
    for job in jobs:
        task = job.get("ArrayTaskId")
        key = f"{job_id}_{task}" if task and task != "(null)" else str(job_id)
        where = job.get("NodeList", "(null)")
        line = f"job {key}: {job.get('JobState', '?')}" + (f" on {where}" if where not in ("(null)", "") else "")
        if seen.get(key) != line:
            seen[key] = line
            say(line)


def _ended(jobs: list[dict]) -> bool:
    return bool(jobs) and all(j.get("JobState") in DONE_STATES for j in jobs)


# pending reasons that never resolve by themselves: what each means (wait() stops at once on them)
NEVER_STARTS = {
    "PartitionConfig": "it asks more than the partition is configured for: more CPUs or memory per node than "
                       "its nodes have (`sinfo -N -o '%N %c %m'`), or more time than its limit (`sinfo -o '%P %l'`; "
                       "--time=120 is 120 minutes)",
    "PartitionNodeLimit": "it asks more nodes than the partition allows or has",
    "PartitionTimeLimit": "it asks more time than the partition allows",
    "DependencyNeverSatisfied": "the job it depends on ended in a way its dependency excludes",
    "BadConstraints": "no node has what its constraints ask for",
}


class NeverStarts(RuntimeError):
    """A job that pends for a reason that never resolves by itself; wait() cancelled it."""


def partition_limit_min(partition: str) -> float | None:
    """The partition's time limit in minutes (`sinfo -o %l`), None where it has none or sinfo cannot say."""
    try:
        limit = command(["sinfo", "-h", "-p", partition, "-o", "%l"]).split()[0]
        return seconds(limit) / 60
    except (RuntimeError, ValueError, IndexError):
        return None


def over_time_limit(job: dict, limit_of: Callable[[str], float | None] = partition_limit_min) -> str | None:
    """Where a job asks more time than its partition allows: that, in minutes, with the fix; else None."""
    try:
        asked = seconds(job["TimeLimit"]) / 60  # a ValueError for UNLIMITED
    except (KeyError, ValueError):
        return None
    partition = str(job.get("Partition", ""))
    limit = limit_of(partition) if partition else None
    if limit is None or asked <= limit:
        return None
    return (f"its time limit, TimeLimit={job['TimeLimit']} ({asked:g} minutes), is over partition {partition}'s "
            f"MaxTime of {limit:g} minutes (`sinfo -o '%P %l'`); a bare --time number is minutes: "
            "write HH:MM:SS to say hours, minutes and seconds")


def never_starts(job_id, jobs: list[dict],
                 limit_of: Callable[[str], float | None] = partition_limit_min) -> str | None:
    """Why a pending job can never start (its reason, what that means: the time limit by name where the job asks
    more than its partition's), None while it may still start."""
    reasons = {str(j.get("Reason")) for j in jobs if j.get("JobState") == "PENDING"} & set(NEVER_STARTS)
    if not reasons:
        return None
    reason = sorted(reasons)[0]
    asked = ", ".join(f"{k}={jobs[0][k]}" for k in ("NumNodes", "NumCPUs", "NumTasks") if k in jobs[0])
    over = over_time_limit(jobs[0], limit_of) if reason in ("PartitionConfig", "PartitionTimeLimit") else None
    from ....measure import lines

    return lines.wrap(f"Slurm job {job_id} pends with reason {reason}" + (f" ({asked})" if asked else "")
                      + ", which never resolves by itself, so it was cancelled before it started (no output "
                      f"file): {over or NEVER_STARTS[reason]}.\nFix the request and submit again")


def wait(job_id, timeout: float, *, say=print, poll: float = 0.2) -> list[dict]:
    """Wait for every task of the job to end, saying each change of state; returns the final `scontrol` records.
    A job pending for a reason that never resolves (NEVER_STARTS) is cancelled at once: NeverStarts says why."""
    deadline = time.monotonic() + timeout
    seen: dict
    seen = {}
    while True:
        jobs = job_info(job_id)
        _say_states(job_id, jobs, seen, say)
        if _ended(jobs):
            return jobs
        never = never_starts(job_id, jobs)
        if never:
            cancel(job_id)
            raise NeverStarts(never)
        if time.monotonic() > deadline:
            cancel(job_id)
            raise TimeoutError(f"Slurm job {job_id} did not end within {timeout:g} s, so it was cancelled "
                               f"(last state: {', '.join(seen.values()) or 'unknown'}). A pending job waits for free "
                               "nodes (`squeue`); a running one may be stuck in a rendezvous (see its log).")
        time.sleep(poll)


def wait_for_results(job, timeout: float, *, check_every: float = 10.0, poll: float = 0.2) -> None:
    """Wait until every task of a submitit `job` wrote its result file or the job ended; cancel it on timeout."""
    deadline, asked = time.monotonic() + timeout, time.monotonic()
    results = [job.task(i).paths.result_pickle for i in range(job.num_tasks)] if job.num_tasks > 1 else \
        [job.paths.result_pickle]
    while not all(path.exists() for path in results):
        now = time.monotonic()
        if now > deadline:
            cancel(job.job_id)
            raise TimeoutError(f"Slurm job {job.job_id} wrote no results within {timeout:g} s, so it was cancelled "
                               "(see its log; a pending job waits for free nodes: `squeue`)")
        # `scontrol` only every `check_every` s: the job's steps are timed, and it costs CPU that its ranks share
        if now - asked > check_every:
            asked = now
            jobs = job_info(job.job_id)
            if jobs and all(j.get("JobState") in DONE_STATES for j in jobs):
                return  # ended without (all) results: job.results() raises the task's error
        time.sleep(poll)


def wait_for_state(job_id, states, timeout: float, poll: float = 0.2) -> dict:
    """Wait until the job's scontrol record is in one of `states` (e.g. PENDING after a requeue); the record."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = job_info(job_id)
        if jobs and jobs[0].get("JobState") in states:
            return jobs[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not reach {'/'.join(states)} within {timeout:g} s "
                               f"(state: {jobs[0].get('JobState') if jobs else 'gone'})")
        time.sleep(poll)


def node_done(node: str, job_id, timeout: float, poll: float = 0.2) -> None:
    """Wait until `node` no longer cleans up after job `job_id` (not COMPLETING, the job's epilog and kills done), and
    the job's reason is set: a requeued job released before that can start while its last run is still being killed,
    and fail at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = re.search(r"\bState=(\S+)", command(["scontrol", "show", "node", "-o", node]))
        record = job_info(job_id)
        if state and "COMPLETING" not in state.group(1) and record and record[0].get("Reason") not in (None, "None"):
            time.sleep(1.0)  # slurmd's own bookkeeping of the killed step, which scontrol does not show
            return
        time.sleep(poll)
    raise TimeoutError(f"node {node} still cleaning up after job {job_id} after {timeout:g} s")


def wait_for_file(path, timeout: float, *, at_least: int | None = None, poll: float = 0.1) -> str:
    """Wait until a file holds text (and, with `at_least`, a number >= it); its text."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            text = Path(path).read_text()
            # an empty file is one its writer has created and not yet written
            if text.strip() and (at_least is None or int(text.strip()) >= at_least):
                return text
        if time.monotonic() > deadline:
            raise TimeoutError(f"{Path(path).name} did not appear{'' if at_least is None else ' (or not reach ' + str(at_least) + ')'} "
                               f"within {timeout:g} s: read the job's log")
        time.sleep(poll)


def job_variables(pid: int) -> dict[str, str]:
    """The SLURM_JOB_ID and SLURM_ARRAY_JOB_ID in a process's environment (/proc/<pid>/environ), {} if none."""
    with open(f"/proc/{pid}/environ", "rb") as handle:
        pairs = (item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item)
        return {k.decode(): v.decode() for k, v in pairs if k in (b"SLURM_JOB_ID", b"SLURM_ARRAY_JOB_ID")}


def job_processes(job_ids) -> Callable[[int], bool]:
    """A predicate for conditions.counting_as_own: True for a process of one of `job_ids` (a set the caller may add
    to later; an array's id covers its tasks), read from the SLURM_JOB_ID in its environment, which slurmstepd sets."""
    known: dict[int, dict[str, str]] = {}  # pid -> its variables: read once, as a poll every 0.2 s asks again

    def picked(pid: int) -> bool:
        if pid not in known:
            try:
                known[pid] = job_variables(pid)
            except OSError:  # ended, or another user's
                known[pid] = {}
        found = known[pid]
        ids = {str(j) for j in job_ids}
        return bool(ids) and any(found.get(k) in ids for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID"))

    return picked
