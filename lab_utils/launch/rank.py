"""What each rank process runs: it sets itself up, runs each job in turn, reports the values or the traceback, and
ends itself if the process that launched it dies."""
from __future__ import annotations

import os
import pickle
import threading
import time
import traceback

from .environment import OWN_SESSION, job_port
from .stderr import send_stderr_to_capture
from . import record
from .group import destroy_process_group, hold_process_groups


def tensors_as_numpy(value):
    """Tensors become numpy arrays, recursively through lists, tuples and dicts; other values pass unchanged."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: tensors_as_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(tensors_as_numpy(v) for v in value)
    return value


def started_at(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), so that a reused pid is not taken for it."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def alive(pid: int, started: str | None) -> bool:
    """True while process `pid` (started at `started`, where /proc tells) exists."""
    if started is not None:
        return started_at(pid) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _exit_when_orphaned(launcher_pid: int, started: str | None) -> None:
    """End this rank if the process that launched it dies (a restarted kernel must not leave ranks behind); the
    launcher is not the rank's parent when the rank was forked by the fork server."""
    while True:
        if not alive(launcher_pid, started):
            os._exit(1)
        time.sleep(1.0)


def _report(exc: BaseException) -> dict:
    """The rank's record, with the learner's line where `exc` was raised."""
    report = record.snapshot()
    frame = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost frame of the learner's code the exception passed through
        if not record.library_file(tb.tb_frame.f_code.co_filename):
            frame = (tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    report["line"] = frame
    return report


TABLE_WAIT_S = 6.0  # how long a rank whose call timed out waits for the launcher's table (it asks for 3 s at most)


def _table_from_launcher(rank: int, results, inbox):
    """ask(snapshot) for record.ask_on_timeout: send this rank's snapshot to the launcher, wait for its table."""
    def ask(report):
        while inbox.poll(0):  # an answer that came after an earlier question gave up waiting
            inbox.recv()
        results.put(("timed out", rank, report))
        return inbox.recv() if inbox.poll(TABLE_WAIT_S) else None

    return ask


def rank_main(prepare, payload: bytes, ports, rank: int, world_size: int, env: dict, threads, cores, results,
              started, launcher: tuple, inbox=None) -> None:
    """Entry point of every rank: set up, run each job in turn, report the values or the traceback."""
    if env.get(OWN_SESSION):  # a session of its own, as slurmstepd starts a Slurm task (lab 11 measures the difference)
        os.setsid()
    else:
        os.setpgid(0, 0)  # own process group: the launcher can end this rank together with its children
    os.environ.clear()  # the launcher's environment as it is now (a forked rank inherits the fork server's)
    os.environ.update(env)
    send_stderr_to_capture(env)  # gloo's abort and c10d's C++ log lines go to fd 2
    if cores:
        os.sched_setaffinity(0, cores)  # a CPU rank owns its cores, as a GPU rank owns its GPU
    record.answer_when_asked(lambda report: results.put(("where", rank, report)))  # before any other thread starts
    threading.Thread(target=_exit_when_orphaned, args=launcher, daemon=True).start()
    started[rank] = 1  # shared memory, visible at once (a queued message could die with an os._exit)
    job = 0
    try:
        import torch

        if threads:
            torch.set_num_threads(threads)
        hold_process_groups()
        if record.start_recording():  # every collective this rank makes is recorded: a hang's table says where it waits
            if inbox is not None:  # a call that times out gets the table of every rank before it raises
                record.ask_on_timeout(_table_from_launcher(rank, results, inbox))
        if prepare is not None:
            prepare()  # e.g. quiet TensorFlow's start-up, before unpickling a worker imports it
        jobs = pickle.loads(payload)
        values = []
        for job, (worker, args) in enumerate(jobs):
            record.clear()  # each job's process group counts its calls from 1
            os.environ["MASTER_PORT"] = str(job_port(ports, job, rank))  # a fresh rendezvous for each job's group
            with record.step_marks(os.environ.get(record.STEP_MARKS), rank, job):  # an instrument, when asked
                values.append(tensors_as_numpy(worker(rank, world_size, *args)))
            destroy_process_group(wait_for_peers=True)  # a worker that did not leave its group must not block the next
            # the held groups stay until the launcher ends this rank: destroying one here joins gloo's threads while
            # holding the GIL, the very hang hold_process_groups avoids (a rank stuck here never joins the next job)
        results.put(("ok", rank, pickle.dumps(values)))
    except BaseException as exc:  # report everything, SystemExit and KeyboardInterrupt included
        record.without_table_note(exc)  # the launcher's error prints the table once, beside this traceback
        results.put(("error", rank, f"{type(exc).__name__}: {exc}", traceback.format_exc(), job, _report(exc)))
    finally:
        results.close()
        results.join_thread()  # flush the result to the pipe
    while True:  # stay, so that whatever this rank started is still its descendant when the launcher ends them all
        time.sleep(60)
