"""Inside a Slurm task: the task's threads and cores, when its process started, and leaving at once; the SLURM_* variables a task reads."""
from __future__ import annotations

import atexit
import os
import sys
import time


def place_task() -> str:
    """Set intra-op threads to SLURM_CPUS_PER_TASK, pin to own cores on the local cluster; returns what it did."""
    import torch

    threads = int(os.environ.get("SLURM_CPUS_PER_TASK", "1"))
    torch.set_num_threads(threads)
    # on the course's local cluster (LAB_ONE_HOST) every node is this machine and Slurm cannot bind: pin each task
    # to cores of its own, as lab_utils.launch pins ranks
    if not os.environ.get("LAB_ONE_HOST") or not hasattr(os, "sched_setaffinity"):
        return f"{threads} thread(s)"
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("SLURM_NTASKS_PER_NODE", "1").split("(")[0])
    local_rank = int(os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID", "0"))
    index = int(os.environ.get("SLURM_NODEID", "0")) * local_world + local_rank
    cores = sorted(os.sched_getaffinity(0))
    mine = cores[index * threads:(index + 1) * threads]
    if len(mine) == threads:
        os.sched_setaffinity(0, set(mine))
        return f"{threads} thread(s) on core(s) {mine}"
    return f"{threads} thread(s), not pinned ({len(cores)} cores for more tasks)"


def exit_now(code: int = 0) -> None:
    """Leave the process at once with `code`, output and log handlers flushed, skipping the interpreter's clean-up."""
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()  # flushes and closes the log handlers: logging's own exit handler, run here
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # with a DDP process group held (launch.hold_process_groups), gloo's teardown can hang


_LEAVING: list[bool] = []  # [True] once exit_at_interpreter_exit registered its handler in this process


def _exit_code(code) -> int:
    """The process exit code of sys.exit(code), as Python computes it: None is 0, an int itself, else 1 (Python prints
    that message before the exit handlers run)."""
    return (code or 0) if code is None or isinstance(code, int) else 1


def exit_at_interpreter_exit() -> None:
    """When the interpreter exits, leave at once (exit_now): with sys.exit(n)'s code, 1 after an uncaught exception,
    else 0, so Slurm reads a failing task as FAILED."""
    # A process group still alive at exit (held by launch.hold_process_groups or by DDP's reducer) is torn down by
    # C++'s exit handlers while gloo's threads still run: "terminate called without an active exception", SIGABRT,
    # at random (lab 11's submitit job read FAILED 6:0 after its results were saved). Skipping the teardown avoids it.
    # The last handler registered runs first, so this one also skips every Python exit handler registered before it:
    # logging's (run in exit_now instead), multiprocessing's (it would join or end child processes: a task's child
    # left running ends with the Slurm step, which kills every process of the step), and submitit's and torch's
    # (submitit has written the task's result file before the interpreter exits; torch's are the teardown above).
    # The exit code: an uncaught exception is seen by sys.excepthook, sys.exit(n) by the wrapper below;
    # `raise SystemExit(n)` written out is not seen (it leaves with 0): call sys.exit.
    if _LEAVING:
        return
    _LEAVING.append(True)
    code: list[int] = []
    hook, leave = sys.excepthook, sys.exit

    def noted(kind, value, trace):
        code.append(1)
        hook(kind, value, trace)

    def exit(status=None):
        code.append(_exit_code(status))
        leave(status)

    sys.excepthook = noted  # Python calls it for an uncaught exception before it runs the exit handlers
    sys.exit = exit
    atexit.register(lambda: exit_now(code[-1] if code else 0))


SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_PROCID",
                   "SLURM_LOCALID", "SLURM_NODEID", "SLURMD_NODENAME", "SLURM_CPUS_PER_TASK")


def process_started_at() -> float | None:
    """The time.time() at which this process started (Linux's /proc, to 0.01 s), or None where there is no /proc."""
    try:
        ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])  # field 22: start, in ticks since boot
        uptime = float(open("/proc/uptime").read().split()[0])                      # seconds since boot, now
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
