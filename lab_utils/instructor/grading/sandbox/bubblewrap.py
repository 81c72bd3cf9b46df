"""The bubblewrap command line of a sandbox: its namespaces and capabilities, and its root built from a minimal
read-only tree (the system, the Python that runs the course, the course's `lab_utils`, `datasets` and `notebooks`)
with two size-limited tmpfs as all it can write."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .host import DROP

COURSE = Path(__file__).resolve().parents[4]
COURSE_PARTS = ("lab_utils", "datasets", "notebooks")  # what a submission may read of the course; never solutions/, tests/
WRITABLE = Path("/tmp")  # inside bubblewrap: where its working folders are (a size-limited tmpfs)


def python_paths() -> list[Path]:
    """The folders of the Python that runs the course (interpreter, standard library, venv, site-packages)."""
    import site

    found = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent,
             *map(Path, site.getsitepackages())}
    return sorted({p.resolve() for p in found if p.exists()})


def _outermost(paths) -> list[Path]:
    paths = sorted(set(paths), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for p in paths:
        if not any(p == q or p.is_relative_to(q) for q in kept):
            kept.append(p)
    return kept


SYSTEM = tuple(Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"))


def gpu_devices() -> list[Path]:
    return sorted(Path("/dev").glob("nvidia*"))


def course_reads() -> list[Path]:
    """The course's folders and the Python a sandbox reads (outside the system folders), outermost only."""
    course = [COURSE / part for part in COURSE_PARTS if (COURSE / part).exists()]
    return [p for p in _outermost(python_paths() + course) if not any(p.is_relative_to(s) for s in SYSTEM)]


def mounted_folders() -> list[Path]:
    """Every host folder a sandbox sees (read-only), as the host names it: what `tree` binds, the one list the grader
    checks its own folders against (the instructor tests, the output folder and the roster must lie elsewhere)."""
    system = [p for p in SYSTEM if p.exists()]
    return sorted({*system, *(p.resolve() for p in system), *course_reads(),
                   *((Path("/sys"),) if gpu_devices() else ())})


def tree(workdir: Path, disk_bytes: int, uid: int | None) -> list[str]:
    """bubblewrap arguments that build the sandbox's root from a minimal tree."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev"]
    gpu = gpu_devices()
    for device in gpu:  # a GPU machine: the devices, and the driver's view of them in /sys
        args += ["--dev-bind", str(device), str(device)]
    if gpu:
        args += ["--ro-bind", "/sys", "/sys"]
    # what it can write: two size-limited tmpfs that share the disk limit (/dev/shm a quarter, /tmp the rest:
    # /var/tmp points into it, and its working folders are in it); /dev and the root are read-only
    shm = disk_bytes // 4
    args += ["--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--perms", "1777", "--size", str(disk_bytes - shm), "--tmpfs", str(WRITABLE),
             "--perms", "0755", "--dir", "/var", "--symlink", str(WRITABLE), "/var/tmp"]
    if uid is None:  # in a user namespace the folder is made here; as root, by the dropped uid (DROP)
        args += ["--perms", "0700", "--dir", str(workdir)]
    reads = course_reads()
    made = {Path("/"), *SYSTEM, WRITABLE, Path("/dev"), Path("/proc"), Path("/var")}
    for path in reads:
        for parent in reversed(path.parents):
            if parent not in made and not any(parent.is_relative_to(r) for r in reads if r != path):
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        args += ["--ro-bind", str(path), str(path)]
        made.add(path)
    return args + ["--remount-ro", "/"]


def bwrap_command(bwrap: str, argv: list[str], workdir: Path, disk_bytes: int, uid: int | None,
            seccomp_fd: int | None = None) -> list[str]:
    """`argv` run by bubblewrap in a sandbox (as root, dropped to the sandbox's `uid` inside it)."""
    # the command is the namespace's pid 1: no bubblewrap process inside holds its descriptors
    wrapped = [bwrap, "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc",
               "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
    if uid is not None:  # root: bubblewrap builds the tree, then the command drops to the sandbox's uid
        wrapped += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        wrapped += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()), "--cap-drop", "ALL"]
    wrapped += tree(workdir, disk_bytes, uid)
    if seccomp_fd is not None:
        wrapped += ["--seccomp", str(seccomp_fd)]
    if uid is not None:
        return wrapped + ["--chdir", "/", "--", sys.executable, "-I", "-c", DROP, str(uid), str(workdir), *argv]
    return wrapped + ["--chdir", str(workdir), "--", *argv]
