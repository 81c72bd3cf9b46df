"""Where every task of a job waits: lab 12's table per Slurm task. Inside a task, the record of its collectives and
its answers when asked (USR1); in the notebook, asking, the table, and a wait that names a hung or failed job."""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from .cluster import command
from .jobs import _ended, _say_states, cancel, job_info

ASK_S = 5.0  # how long the tasks have to say where they are once asked


class JobHung(TimeoutError):
    """A job whose tasks stopped making progress (or ran past its time): `table` says where each task was."""

    def __init__(self, message: str, table: str):
        super().__init__(f"{message}\n\n{table}")
        self.table = table


class TaskFailed(RuntimeError):
    """A job one of whose tasks raised: `table` says where each task was, the failed one's traceback beside it."""

    def __init__(self, message: str, table: str, tracebacks: dict):
        super().__init__(f"{message}\n\n{table}")
        self.table, self.tracebacks = table, tracebacks


def where_file(folder, job_id, task) -> Path:
    """The file task `task` of job `job_id` writes where it is into (a folder every node sees)."""
    return Path(folder) / f"where-{job_id}-{task}.json"


def _write_json(path: Path, value) -> None:
    path.with_suffix(".tmp").write_text(json.dumps(value))
    os.replace(path.with_suffix(".tmp"), path)  # renamed: the notebook never reads half an answer


def threads_not_blocking(signum: int) -> list[int]:
    """The ids of this process's threads, other than the calling one, that do not block `signum` (from /proc)."""
    import threading

    found = []
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        with contextlib.suppress(OSError, StopIteration, ValueError):
            status = Path(f"/proc/self/task/{tid}/status").read_text().splitlines()
            blocked = int(next(line for line in status if line.startswith("SigBlk:")).split()[1], 16)
            if int(tid) != threading.get_native_id() and not blocked >> (signum - 1) & 1:
                found.append(int(tid))
    return found


def answer_where_asked(folder) -> Path:
    """Inside a Slurm task: record this task's collectives (as `launch` does for a rank) and answer USR1 —
    `scancel --signal=USR1 JOB` sends it to every task — by writing where it is to `where_file`. Call it first thing,
    after blocking USR1 (the script's first lines: numpy and torch start threads when imported, and USR1 must reach
    none of them); until it has run, USR1 ends the process (its default), so the notebook asks only once every task
    has written its first record."""
    from ....launch import record

    unblocked = threads_not_blocking(record.ASK)
    if unblocked:  # USR1 would reach one of them and end the process (or be lost) instead of reaching the answer
        raise RuntimeError(f"{len(unblocked)} thread(s) of this task started before USR1 was blocked (numpy's or "
                           "torch's, started when imported): make `import signal; signal.pthread_sigmask("
                           "signal.SIG_BLOCK, {signal.SIGUSR1})` the script's first lines, before any import")
    path = where_file(folder, os.environ["SLURM_JOB_ID"], os.environ["SLURM_PROCID"])
    answers = [0]

    def reply(report: dict) -> None:
        answers[0] += 1
        _write_json(path, {**report, "answers": answers[0]})

    record.answer_when_asked(reply)  # blocks USR1 in this thread and every thread started later: a thread sigwaits
    record.start_recording()
    reply(record.snapshot())  # answer 1: ready to be asked
    return path


@contextlib.contextmanager
def telling_where(folder):
    """answer_where_asked(folder) for the block; an exception in it is written beside the record (its traceback and
    the learner's line), then raised on."""
    import traceback

    from ....launch.rank import _report as report_at  # the launcher's own report of a rank that raised

    path = answer_where_asked(folder)
    try:
        yield path
    except BaseException as exc:
        if isinstance(exc, SystemExit) and not exc.code:
            raise  # sys.exit(0): a task that ends well
        _write_json(path, {**report_at(exc), "answers": -1, "raised": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()})
        raise


def where_reports(folder, job_id, tasks: int) -> dict[int, dict]:
    """Each task's last record (first record, an answer, or what it raised), task -> record; missing tasks left out."""
    reports = {}
    for task in range(tasks):
        with contextlib.suppress(OSError, ValueError):
            reports[task] = json.loads(where_file(folder, job_id, task).read_text())
    return reports


def ask_where(job_id, folder, tasks: int, timeout: float = ASK_S, poll: float = 0.1) -> dict[int, dict | None]:
    """Ask every task of the job where it is (USR1 to the tasks of its steps) and wait for the answers of all that
    can still answer; task -> its record, None for a task that did not answer (exited, or killed)."""
    before = where_reports(folder, job_id, tasks)
    with contextlib.suppress(RuntimeError):  # the job ended meanwhile: no task answers, the wait below says so
        command(["scancel", "--signal=USR1", str(job_id)])  # the job steps' tasks; the batch script is not signalled
    deadline = time.monotonic() + timeout
    while True:
        now = where_reports(folder, job_id, tasks)
        fresh = {t: r for t, r in now.items()
                 if r.get("raised") or r.get("answers", 0) > before.get(t, {}).get("answers", 0)}
        if len(fresh) == tasks or time.monotonic() > deadline:
            return {t: fresh.get(t) for t in range(tasks)}
        time.sleep(poll)


def task_states(reports: dict) -> dict[int, str]:
    """task -> "raised ..." / "running" (it answered) / "no answer", for the table."""
    return {t: (f"raised {r['raised'].split(':')[0]}" if r.get("raised") else "running") if r else "no answer"
            for t, r in reports.items()}


def where_table(reports: dict) -> str:
    """Lab 12's table, one row per task (task n is rank n: SLURM_PROCID), and the first call where tasks differ."""
    from ....launch.where import rank_table

    return ("where each task was (task n = rank n; its record of collectives, kept by lab_utils):\n"
            + rank_table(reports, task_states(reports)).replace("rank |", "task |", 1))


def _stuck(before: dict, now: dict) -> bool:
    """True when every task answered twice, in progress in the same collective call both times."""
    def waits(report):
        calls = report.get("calls", []) if report else []
        return (report["count"], calls[-1]["seq"]) if calls and calls[-1]["state"] == "in progress" else None
    return bool(now) and all(waits(now[t]) is not None and waits(now[t]) == waits(before.get(t)) for t in now)


def wait_or_explain(job_id, timeout: float, folder, tasks: int, *, stalled_s: float = 3.0, say=print,
                    poll: float = 0.2) -> list[dict]:
    """wait() for a job whose `tasks` tasks answer where they are (answer_where_asked / telling_where). Every
    `stalled_s` s they are asked; when every task waited in the same collective call at two asks in a row, or at
    `timeout`: JobHung; when a task raised: TaskFailed. Both carry the table of where every task was, and the job is
    cancelled."""
    deadline, asked_at = time.monotonic() + timeout, time.monotonic()
    seen: dict = {}
    last: dict = {}
    while True:
        jobs = job_info(job_id)
        _say_states(job_id, jobs, seen, say)
        reports: dict = where_reports(folder, job_id, tasks)
        failed = {t: r for t, r in reports.items() if r.get("raised")}
        if failed:
            time.sleep(1.0)  # the others' own errors arrive first, if they have any
            if not _ended(job_info(job_id)):
                reports = dict(ask_where(job_id, folder, tasks))
            reports.update({t: r for t, r in where_reports(folder, job_id, tasks).items() if r.get("raised")})
            cancel(job_id)
            from ....launch.record import PEER_GONE
            failed = {t: r for t, r in reports.items() if r and r.get("raised")}
            # the cause first: a task whose peer went away only reports the other's failure (and the peer's address)
            first = min(failed, key=lambda t: (any(gone in failed[t]["raised"] for gone in PEER_GONE), t))
            raise TaskFailed(f"task {first} of job {job_id} raised {failed[first]['raised'].splitlines()[0]}; "
                             "the job was cancelled", where_table({t: reports.get(t) for t in range(tasks)}),
                             {t: r["traceback"] for t, r in reports.items() if r and r.get("raised")})
        if _ended(jobs):
            return jobs
        now = time.monotonic()
        if now > deadline or (len(reports) == tasks and now - asked_at >= stalled_s):
            answers = ask_where(job_id, folder, tasks)
            asked_at = time.monotonic()
            if now > deadline or _stuck(last, answers):
                cancel(job_id)
                why = (f"did not end within {timeout:g} s" if now > deadline else
                       f"made no progress for {stalled_s:g} s: every task waited in the same collective call")
                raise JobHung(f"Slurm job {job_id} {why}, so it was cancelled", where_table(answers))
            last = {t: r for t, r in answers.items() if r is not None}
        time.sleep(poll)
