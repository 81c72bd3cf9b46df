"""Run a command, and afterwards kill every process it started, daemonised ones included (this process is a Linux
child subreaper, so orphans are handed to it). The grader wraps commands in it where no sandbox kills them.

Usage: python -m lab_utils.instructor.grading.subreaper TIMEOUT_S -- COMMAND...   (exit status: the command's, or 124 on timeout)
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

from ...process_tree import descendants

PR_SET_CHILD_SUBREAPER = 36
PR_SET_DUMPABLE = 4
TIMED_OUT = 124


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
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    timeout = float(argv[0])
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # it holds the probe's answer pipe: no /proc/PID/fd for the learner
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: descendants that leave the tree cannot be found, the rest still are
    child = subprocess.Popen(argv[2:])
    try:
        code = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = TIMED_OUT
    kill_descendants()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
