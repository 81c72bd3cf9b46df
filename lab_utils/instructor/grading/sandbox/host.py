"""The machine's side of a sandbox: dedicated uids and their processes, the uid drop, size-limited tmpfs mounts, and
removing what a submission wrote."""
from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

SANDBOX_UIDS = range(1_600_000_000, 1_600_000_000 + 2**24)  # dedicated ids for submissions when the grader is root
# a dropped-privilege start, as root: the process becomes the sandbox's own uid before anything else runs, then makes
# and enters its working folder (a root without capabilities may not enter a folder that is the uid's alone)
DROP = ("import os, sys, ctypes; u = int(sys.argv[1]); os.setgroups([]); os.setresgid(u, u, u); os.setresuid(u, u, u); "
        "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); os.makedirs(sys.argv[2], mode=0o700, exist_ok=True); "
        "os.chdir(sys.argv[2]); os.execv(sys.argv[3], sys.argv[3:])")
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def _real_uids() -> Iterator[tuple[int, int]]:
    """(pid, real uid) of every process."""
    for status in Path("/proc").glob("[0-9]*/status"):
        found = None
        with contextlib.suppress(OSError, StopIteration, ValueError):
            line = next(l for l in status.read_text().splitlines() if l.startswith("Uid:"))
            found = int(status.parent.name), int(line.split()[1])
        if found is not None:
            yield found


def free_uid() -> int:
    """A dedicated uid that no process runs as."""
    in_use = {uid for _, uid in _real_uids()}
    while True:
        uid = random.choice(SANDBOX_UIDS)
        if uid not in in_use:
            return uid


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is `uid`."""
    return [pid for pid, real in _real_uids() if real == uid]


def mount_tmpfs(target: Path, size: int, uid: int, files: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={size},nr_inodes={files},mode=0700,uid={uid},gid={uid}".encode()
    return libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0


def unmount(target: Path) -> None:
    ctypes.CDLL(None, use_errno=True).umount2(str(target).encode(), _MNT_DETACH)


def folder_bytes(folder: Path) -> tuple[int, int]:
    """(bytes, file entries) under `folder`."""
    total, entries = 0, 0
    for root, dirs, files in os.walk(folder):
        entries += len(dirs) + len(files)
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total, entries


def parent_of(pid: int) -> int | None:
    """The pid's parent, or None when it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return None


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid`."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat_file.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat_file.parent.name))
    return found


def inodes_used(pid: int, folders) -> int | None:
    """File entries in use on the filesystems at `folders`, as process `pid` sees them (None where it cannot be told:
    gone, or still in the host's root, as a sandbox's first process is before it enters its own)."""
    try:
        root, host = os.stat(f"/proc/{pid}/root"), os.stat("/")
    except OSError:
        return None
    if (root.st_dev, root.st_ino) == (host.st_dev, host.st_ino):
        return None  # the host's /tmp holds the whole machine's files: not the sandbox's to answer for
    total = 0
    for folder in folders:
        try:
            info = os.statvfs(f"/proc/{pid}/root{folder}")
        except OSError:
            return None
        total += info.f_files - info.f_ffree
    return total


def remove_tree(path: Path) -> None:
    """Remove a folder a submission wrote in, also where it took its own permissions away (a folder of mode 000)."""
    def retry(function, name, _exc):
        with contextlib.suppress(OSError):
            parent = os.path.dirname(name)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, stat.S_IRWXU)
                shutil.rmtree(name, ignore_errors=True)
            else:
                function(name)

    if Path(path).exists():
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IRWXU)
        shutil.rmtree(path, onerror=retry)


def sweep_shared_folders(uid: int) -> None:
    """Without bubblewrap, as root: what the sandbox's uid left in the machine's shared temporary folders."""
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        if entry.is_dir(follow_symlinks=False):
                            remove_tree(Path(entry.path))
                        else:
                            os.unlink(entry.path)
