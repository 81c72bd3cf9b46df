"""Runs one submission for the grader: papermill in a child process, a wall-clock limit, and afterwards every process
the notebook started is killed — this process is a child subreaper, so even daemonised descendants stay findable.

Usage (by lab_utils.grade): python -m lab_utils.grade_runner PREPARED EXECUTED WORKDIR PARAMS_JSON CELL_TIMEOUT TIMEOUT STATUS
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PAPERMILL = """
import json, sys
import papermill
from nbclient.exceptions import DeadKernelError
from papermill.exceptions import PapermillExecutionError
prepared, executed, work, params, cell_timeout = sys.argv[1:6]
try:
    papermill.execute_notebook(prepared, executed, parameters=json.loads(params), cwd=work, kernel_name="python3",
                               execution_timeout=float(cell_timeout), interrupt_on_timeout=True, progress_bar=False,
                               log_output=False, request_save_on_cell_execute=True)
except PapermillExecutionError:
    pass  # a cell raised: expected with partial answers; every cell still ran
except DeadKernelError as exc:
    print("KERNEL DIED:", exc, file=sys.stderr)
    sys.exit(3)
"""


def descendants(root: int) -> list[int]:
    """Every live process below `root` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants() -> int:
    """SIGKILL everything below this process until nothing is left (reaping as we go); returns how many were killed."""
    killed = 0
    for _ in range(50):
        pids = descendants(os.getpid())
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        while True:  # reap orphans handed to us as subreaper
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
    return killed


def main(argv: list[str]) -> int:
    prepared, executed, work, params, cell_timeout, timeout, status_file = argv
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: descendants that leave the tree cannot be found, the rest still are
    env = dict(os.environ, PYTHONPATH=work)
    start = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", PAPERMILL, prepared, executed, work, params, cell_timeout],
                             cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    status, message = "completed", ""
    try:
        _, stderr = child.communicate(timeout=float(timeout))
        if child.returncode == 3 or "KERNEL DIED" in stderr:
            status, message = "kernel_died", "the kernel died (os._exit, a crash or out of memory)"
        elif child.returncode != 0:
            status, message = "kernel_died", f"execution stopped: {stderr.strip().splitlines()[-1][:200] if stderr.strip() else child.returncode}"
        timeouts = stderr.count("Timeout waiting for execute reply")
    except subprocess.TimeoutExpired:
        status, message, timeouts = "timeout", f"the notebook ran longer than {float(timeout):g} s and was stopped", 0
    killed = kill_descendants()
    if timeouts:
        message = f"{timeouts} cell(s) ran longer than {float(cell_timeout):g} s and were interrupted"
    Path(status_file).write_text(json.dumps({"status": status, "message": message, "cell_timeouts": timeouts,
                                             "killed_processes": killed, "seconds": time.monotonic() - start}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
