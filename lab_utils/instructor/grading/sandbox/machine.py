"""What this machine allows a sandbox (`detect_isolation`): bubblewrap that works here, writable cgroups, a dedicated uid, tmpfs
mounts; and what is not promised where something lacks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import cgroups, seccomp
from .host import mount_tmpfs, unmount
from .isolation import Isolation
from .jail import Sandbox


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory(prefix="lab-grader-mount-") as folder:
        if not mount_tmpfs(Path(folder), 2**20, 0, 64):
            return False
        unmount(Path(folder))
        return True


def _reachable_by_others(path: Path) -> bool:
    """True when a user with no special rights can reach and run `path` (every folder above it searchable)."""
    path = path.resolve()
    try:
        return all(os.stat(p).st_mode & 0o001 for p in path.parents) and bool(os.stat(path).st_mode & 0o005)
    except OSError:
        return False


def _bubblewrap_works(isolation: Isolation) -> str:
    """'' when a trivial command runs in a full sandbox here, else why not."""
    with tempfile.TemporaryDirectory(prefix="lab-grader-check-") as folder:
        try:
            with Sandbox(isolation, Path(folder)) as box:
                process = box.popen([sys.executable, "-I", "-c", "print('ok')"], workdir="check",
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
                out, err = process.communicate(timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
        if out.strip() == b"ok":
            return ""
        return (err.decode(errors="replace").strip().splitlines() or [f"exit code {process.returncode}"])[-1]


def detect_isolation(use_bubblewrap: bool = True) -> Isolation:
    """Look once at what this machine allows (use_bubblewrap=False: as if bubblewrap were absent)."""
    as_root = os.geteuid() == 0
    cgroups_version, cpu = cgroups.writable()
    drops = as_root and _reachable_by_others(Path(sys.executable))
    bwrap = shutil.which("bwrap") if use_bubblewrap else None
    why = "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    if bwrap and seccomp.supported():
        candidate = Isolation(bwrap, cgroups_version, as_root, False, cpu=cpu)
        failure = _bubblewrap_works(candidate)
        if failure:  # once more: a machine under load can be slow to start the first Python
            failure = _bubblewrap_works(candidate)
        if not failure:
            return candidate
        why = f"bubblewrap is installed but cannot make a sandbox here ({failure[:200]})"
    elif bwrap:
        why = "bubblewrap is installed but this processor's system calls are not in the seccomp filter"
    who = ("a dedicated unprivileged uid" if drops else "ROOT: a submission can change any file on this machine") \
        if as_root else "your user"
    mounts = as_root and drops and _can_mount_tmpfs()
    missing = [f"{why}: submissions run as {who}, without namespaces",
               "a submission can read any file that user can (other submissions, the instructor tests) and use the network",
               "a submission can see and signal other processes of that user (and so reach the grader's answer channel)",
               "disk: its folder is a size-limited tmpfs, but it can also write to the machine's /tmp and /dev/shm"
               if mounts else "disk: no hard limit (its folder's size is only watched; it can write wherever that user can)"]
    isolation = Isolation(None, cgroups_version, as_root, drops, (), cpu=cpu, mounts_tmpfs=mounts)
    if isolation.one_at_a_time:
        missing.append(isolation.why_one_at_a_time + ": one submission at a time")
    return Isolation(None, cgroups_version, as_root, drops, tuple(missing), cpu=cpu, mounts_tmpfs=mounts)
