"""A sandbox per graded submission, without privileges, whoever runs the grader.

With bubblewrap: a root file system built from a minimal tree (the system's /usr and /etc, the Python that runs the
course, the course's `lab_utils`, `datasets` and student `notebooks`, all read-only; the root itself read-only), so
nothing of the instructor's layout (solutions, tests, the output folder, classmates, the grader's own folders) exists
inside, not even in /proc/self/mountinfo; its own pid, mount, network, ipc and uts namespaces; every capability
dropped; no_new_privs; a seccomp filter (`seccomp.py`); an environment built from an allow-list. As root, each sandbox
also runs under a dedicated unprivileged uid of its own, so the per-user process limit is a per-sandbox limit and
sandboxes cannot signal each other; as an ordinary user, in a user namespace. The command is the namespace's pid 1
(not dumpable), so no process of the submission can open its descriptors (the answer channel) through /proc.

Disk: all it can write is two size-limited tmpfs that share the limit, /tmp (its working folders; /var/tmp points
into it) and /dev/shm; the root and /dev are read-only. So the kernel counts everything the submission writes,
deleted-but-open files included, and frees it when the sandbox's last process ends: nothing of it is left on the
machine's disk. Files come in and out through pipes. CPU: with a writable cgroup cpu controller (as root) each sandbox gets at most its share (`Limits.cpus`, a
quota) and its CPU time is counted (`cpu_seconds`); elsewhere the grader grades one submission at a time and each
process gets an RLIMIT_CPU. Processes and memory: cgroups where writable, else rlimits. Where processes or CPU cannot
be limited per sandbox, `Isolation.one_at_a_time` says the grader must grade one at a time, and why.

Without bubblewrap (or with one that fails here), `detect()` says what is not promised; the grader then refuses
unless the instructor accepts the risk, and grades correctly with the risk written in every row.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import seccomp

CGROUP_ROOT = Path("/sys/fs/cgroup")  # v1 controllers below it (pids/, memory/, cpu/), or the v2 hierarchy itself
COURSE = Path(__file__).resolve().parents[2]
COURSE_PARTS = ("lab_utils", "datasets", "notebooks")  # what a submission may read of the course; never solutions/, tests/
WRITABLE = Path("/tmp")  # inside bubblewrap: where its working folders are (a size-limited tmpfs)
SANDBOX_UIDS = range(1_600_000_000, 1_600_000_000 + 2**24)  # dedicated ids for submissions when the grader is root
INSIDE_NAME = "learner"
# variables a submission inherits from the grader's environment: thread counts and hardware choices, nothing else
PASSED_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                    "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LAB_TARGET")
# a dropped-privilege start, as root: the process becomes the sandbox's own uid before anything else runs, then makes
# and enters its working folder (a root without capabilities may not enter a folder that is the uid's alone)
DROP = ("import os, sys, ctypes; u = int(sys.argv[1]); os.setgroups([]); os.setresgid(u, u, u); os.setresuid(u, u, u); "
        "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); os.makedirs(sys.argv[2], mode=0o700, exist_ok=True); "
        "os.chdir(sys.argv[2]); os.execv(sys.argv[3], sys.argv[3:])")
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


@dataclass(frozen=True)
class Limits:
    """What one submission may use at once."""

    memory_bytes: int = 8 * 2**30
    processes: int = 1024  # processes and threads: a TensorFlow worker alone runs about 115 threads
    file_bytes: int = 256 * 2**20  # the largest file it may write
    disk_bytes: int = 1 * 2**30  # everything it writes: /tmp, /var/tmp, /dev/shm and its folders, one filesystem
    cpus: float | None = None  # its share of the CPUs (a cgroup quota); None: no quota, usage still counted


@dataclass(frozen=True)
class Isolation:
    """How submissions will be kept apart on this machine, and what is not promised."""

    bubblewrap: str | None           # path of bwrap when it works here
    cgroups: str | None              # "v1" or "v2" when per-sandbox cgroups (pids, memory) can be made, else None
    as_root: bool                    # the grader is root: each sandbox gets a dedicated uid
    drops_to_uid: bool               # without bubblewrap, as root: the interpreter is reachable by a dedicated uid
    missing: tuple[str, ...] = ()    # promises this machine cannot keep
    cpu: bool = False                # per-sandbox cgroups of the cpu controller (quota and usage) can be made
    mounts_tmpfs: bool = False       # without bubblewrap, as root: its folder can be a size-limited tmpfs

    @property
    def complete(self) -> bool:
        return self.bubblewrap is not None

    @property
    def one_at_a_time(self) -> bool:
        """No per-sandbox process or CPU limit here: a fork bomb or a CPU burner would slow a classmate graded beside it."""
        return bool(self.why_one_at_a_time)

    @property
    def why_one_at_a_time(self) -> str:
        if not (self.cgroups or (self.as_root and (self.bubblewrap or self.drops_to_uid))):
            return "this machine has no per-submission process limit (no writable cgroups), so a fork bomb would " \
                   "starve a classmate graded beside it"
        if not self.cpu:
            return "this machine has no per-submission CPU limit (no writable cgroup cpu controller), so a " \
                   "submission's busy processes would slow a classmate graded beside it"
        return ""

    @property
    def row_note(self) -> str:
        """What every gradebook row says about how it was graded."""
        return "sandboxed (bubblewrap)" if self.complete else "NOT sandboxed (--unsandboxed): " + "; ".join(
            m.split(":")[0] for m in self.missing[:1])

    def describe(self) -> str:
        if self.complete:
            who = "a dedicated unprivileged uid per submission" if self.as_root else "your uid in a user namespace"
            cpu = "a CPU share per submission (cgroup quota)" if self.cpu else "RLIMIT_CPU per process"
            return ("sandbox: bubblewrap (minimal read-only tree; pid, mount, network, ipc namespaces; no capabilities, "
                    f"seccomp; {who}); disk: size-limited tmpfs only; limits by "
                    + (f"cgroups {self.cgroups}" if self.cgroups else "rlimits") + f"; {cpu}"
                    + (f"; one submission at a time: {self.why_one_at_a_time}" if self.one_at_a_time else ""))
        return "sandbox: NOT complete on this machine:\n" + "\n".join(f"  - {m}" for m in self.missing)


# ---- what this machine allows ------------------------------------------------------------------------------------

def _v1_dirs(controllers) -> list[Path]:
    """The v1 hierarchies of these controllers, each once (cpu and cpuacct are often mounted together)."""
    return sorted({(CGROUP_ROOT / c).resolve() for c in controllers})


def _can_make(parents: list[Path]) -> bool:
    name = f"lab-grader-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    made = []
    try:
        for parent in parents:
            (parent / name).mkdir()
            made.append(parent / name)
        return True
    except OSError:
        return False
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()


def _cgroups_writable() -> tuple[str | None, bool]:
    """("v1"/"v2"/None for pids and memory, whether the cpu controller can be used too)."""
    if os.geteuid() != 0:
        return None, False
    if all((CGROUP_ROOT / c).is_dir() for c in ("pids", "memory")) and _can_make(_v1_dirs(("pids", "memory"))):
        cpu = all((CGROUP_ROOT / c).is_dir() for c in ("cpu", "cpuacct")) \
            and (CGROUP_ROOT / "cpu" / "cpu.cfs_quota_us").exists() and _can_make(_v1_dirs(("cpu", "cpuacct")))
        return "v1", cpu
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        controllers = set((CGROUP_ROOT / "cgroup.subtree_control").read_text().split())
        if {"pids", "memory"} <= controllers and _can_make([CGROUP_ROOT]):
            return "v2", "cpu" in controllers
    return None, False


def _mount_tmpfs(target: Path, size: int, uid: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={size},mode=0700,uid={uid},gid={uid}".encode()
    return libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0


def _unmount(target: Path) -> None:
    ctypes.CDLL(None, use_errno=True).umount2(str(target).encode(), _MNT_DETACH)


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory(prefix="lab-grader-mount-") as folder:
        if not _mount_tmpfs(Path(folder), 2**20, 0):
            return False
        _unmount(Path(folder))
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


def detect(use_bubblewrap: bool = True) -> Isolation:
    """Look once at what this machine allows (use_bubblewrap=False: as if bubblewrap were absent)."""
    as_root = os.geteuid() == 0
    cgroups, cpu = _cgroups_writable()
    drops = as_root and _reachable_by_others(Path(sys.executable))
    bwrap = shutil.which("bwrap") if use_bubblewrap else None
    why = "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    if bwrap and seccomp.supported():
        candidate = Isolation(bwrap, cgroups, as_root, False, cpu=cpu)
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
    isolation = Isolation(None, cgroups, as_root, drops, (), cpu=cpu, mounts_tmpfs=mounts)
    if isolation.one_at_a_time:
        missing.append(isolation.why_one_at_a_time + ": one submission at a time")
    return Isolation(None, cgroups, as_root, drops, tuple(missing), cpu=cpu, mounts_tmpfs=mounts)


# ---- one submission's jail ----------------------------------------------------------------------------------------

def _free_uid() -> int:
    in_use = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, StopIteration, ValueError):
            line = next(l for l in status.read_text().splitlines() if l.startswith("Uid:"))
            in_use.add(int(line.split()[1]))
    while True:
        uid = random.choice(SANDBOX_UIDS)
        if uid not in in_use:
            return uid


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is `uid`."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, StopIteration, ValueError):
            line = next(l for l in status.read_text().splitlines() if l.startswith("Uid:"))
            if int(line.split()[1]) == uid:
                found.append(int(status.parent.name))
    return found


def _user_process_count() -> int:
    return len(processes_of(os.getuid()))


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
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


@dataclass
class Sandbox:
    """One submission's jail: `popen` starts a command in it; `close` kills everything in it. `scratch` is a folder of
    the grader's: without bubblewrap the submission works in it; with bubblewrap it is not seen from inside."""

    isolation: Isolation
    scratch: Path
    limits: Limits = field(default_factory=Limits)
    env: dict = field(default_factory=dict)
    uid: int | None = None
    exceeded: str = ""
    _cgroups: list[Path] = field(default_factory=list)
    _cpu_usage: tuple[Path, str] | None = None
    _processes: list[subprocess.Popen] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _mounted: bool = False

    def __post_init__(self):
        self.scratch = Path(self.scratch).resolve()
        if self.isolation.as_root and (self.isolation.bubblewrap or self.isolation.drops_to_uid):
            self.uid = _free_uid()
        name = f"lab-grader-{uuid.uuid4().hex[:12]}"
        try:
            self._make_cgroups(name)
        except OSError:
            self.close()
            raise
        if not self.isolation.bubblewrap and self.isolation.mounts_tmpfs and self.uid is not None:
            self._mounted = _mount_tmpfs(self.scratch, self.limits.disk_bytes, self.uid)
        if not self.isolation.bubblewrap and self.uid is not None and not self._mounted:
            os.chown(self.scratch, self.uid, self.uid)  # DROP makes its folders in it, as the sandbox's uid
        if not self.isolation.bubblewrap and not self._mounted:
            threading.Thread(target=self._watch_disk, daemon=True).start()  # the fallback: a watched folder

    def _make_cgroups(self, name: str) -> None:
        if self.isolation.cgroups == "v1":
            settings = {CGROUP_ROOT / "pids": {"pids.max": self.limits.processes},
                        CGROUP_ROOT / "memory": {"memory.limit_in_bytes": self.limits.memory_bytes}}
            if self.isolation.cpu:
                settings[CGROUP_ROOT / "cpu"] = {"cpu.cfs_period_us": 100_000}
                settings.setdefault(CGROUP_ROOT / "cpuacct", {})
            made = {}
            for controller, values in settings.items():
                path = controller.resolve() / name
                if path not in made:
                    path.mkdir()
                    self._cgroups.append(path)
                    made[path] = True
                for setting, value in values.items():
                    (path / setting).write_text(str(value))
            if self.isolation.cpu:
                self._cpu_usage = ((CGROUP_ROOT / "cpuacct").resolve() / name / "cpuacct.usage", "ns")
        elif self.isolation.cgroups == "v2":
            path = CGROUP_ROOT / name
            path.mkdir()
            self._cgroups.append(path)
            (path / "pids.max").write_text(str(self.limits.processes))
            (path / "memory.max").write_text(str(self.limits.memory_bytes))
            if self.isolation.cpu:
                self._cpu_usage = (path / "cpu.stat", "usage_usec")
        self._throttle()

    def cpu_seconds(self) -> float | None:
        """CPU time every process of this sandbox used so far, or None where it is not counted (no cpu cgroup)."""
        if self._cpu_usage is None:
            return None
        path, unit = self._cpu_usage
        try:
            text = path.read_text()
        except OSError:
            return None
        if unit == "ns":
            return int(text.split()[0]) / 1e9
        values = dict(line.split() for line in text.splitlines() if line.strip())
        return int(values.get("usage_usec", 0)) / 1e6

    # -- the command ---------------------------------------------------------------------------------------------

    def inside(self, workdir: str) -> Path:
        """Where a command's working folder (and HOME) named `workdir` is, as the command sees it."""
        return (WRITABLE if self.isolation.bubblewrap else self.scratch) / workdir

    def _tree(self, workdir: Path) -> list[str]:
        """bubblewrap arguments that build the sandbox's root from a minimal tree."""
        args = ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / name
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev"]
        gpu = sorted(Path("/dev").glob("nvidia*"))
        for device in gpu:  # a GPU machine: the devices, and the driver's view of them in /sys
            args += ["--dev-bind", str(device), str(device)]
        if gpu:
            args += ["--ro-bind", "/sys", "/sys"]
        # what it can write: two size-limited tmpfs that share the disk limit (/dev/shm a quarter, /tmp the rest:
        # /var/tmp points into it, and its working folders are in it); /dev and the root are read-only
        shm = self.limits.disk_bytes // 4
        args += ["--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
                 "--perms", "1777", "--size", str(self.limits.disk_bytes - shm), "--tmpfs", str(WRITABLE),
                 "--perms", "0755", "--dir", "/var", "--symlink", str(WRITABLE), "/var/tmp"]
        if self.uid is None:  # in a user namespace the folder is made here; as root, by the dropped uid (DROP)
            args += ["--perms", "0700", "--dir", str(workdir)]
        system = [Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64")]
        course = [COURSE / part for part in COURSE_PARTS if (COURSE / part).exists()]
        reads = [p for p in _outermost(python_paths() + course) if not any(p.is_relative_to(s) for s in system)]
        made = {Path("/"), *system, WRITABLE, Path("/dev"), Path("/proc"), Path("/var")}
        for path in reads:
            for parent in reversed(path.parents):
                if parent not in made and not any(parent.is_relative_to(r) for r in reads if r != path):
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += ["--ro-bind", str(path), str(path)]
            made.add(path)
        return args + ["--remount-ro", "/"]

    def command(self, argv: list[str], workdir: Path, seccomp_fd: int | None = None) -> list[str]:
        """`argv` as this sandbox runs it (unchanged, or dropped to the sandbox's uid, without bubblewrap)."""
        if not self.isolation.bubblewrap:
            if self.uid is not None:
                return [sys.executable, "-I", "-c", DROP, str(self.uid), str(workdir), *argv]
            return list(argv)
        # the command is the namespace's pid 1: no bubblewrap process inside holds its descriptors
        wrapped = [self.isolation.bubblewrap, "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc",
                   "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if self.uid is not None:  # root: bubblewrap builds the tree, then the command drops to the sandbox's uid
            wrapped += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            wrapped += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()), "--cap-drop", "ALL"]
        wrapped += self._tree(workdir)
        if seccomp_fd is not None:
            wrapped += ["--seccomp", str(seccomp_fd)]
        if self.uid is not None:
            return wrapped + ["--chdir", "/", "--", sys.executable, "-I", "-c", DROP, str(self.uid), str(workdir), *argv]
        return wrapped + ["--chdir", str(workdir), "--", *argv]

    def child_environment(self, home: Path) -> dict:
        """The environment a submission sees: built from an allow-list, never the grader's copied."""
        env = {k: os.environ[k] for k in PASSED_VARIABLES if k in os.environ}
        env.update(PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", HOME=str(home), USER=INSIDE_NAME,
                   LOGNAME=INSIDE_NAME, LANG="C.UTF-8", TMPDIR=str(WRITABLE) if self.isolation.bubblewrap else str(home),
                   MPLCONFIGDIR=str(home / ".mpl"), IPYTHONDIR=str(home / ".ipython"),
                   JUPYTER_RUNTIME_DIR=str(home / ".jupyter-runtime"), JUPYTER_DATA_DIR=str(home / ".jupyter"),
                   JUPYTER_CONFIG_DIR=str(home / ".jupyter-config"), PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg",
                   **self.env)
        return env

    def _preexec(self, cpu_seconds: float | None):
        limits, cgroups, isolation, uid = self.limits, list(self._cgroups), self.isolation, self.uid
        nproc = None
        if not cgroups:  # the per-user count: of the sandbox's own uid, or of this user (then shared: see one_at_a_time)
            nproc = limits.processes if uid is not None else _user_process_count() + limits.processes
        install = seccomp.installer() if not isolation.bubblewrap and seccomp.supported() else None
        cpu = int(cpu_seconds) + 1 if cpu_seconds else None

        def setup():
            os.setsid()
            for cgroup in cgroups:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            if cpu is not None:  # per process: a backstop where the sandbox's CPU time is not counted as a whole
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            if not cgroups:
                resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
                assert nproc is not None  # set above without cgroups
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if install is not None and uid is None:
                install()  # with a uid to drop to, the filter would refuse the drop: it is loaded after it (DROP)
        return setup

    def popen(self, argv: list[str], *, workdir: str, pass_fds=(), cpu_seconds: float | None = None,
              **kwargs) -> subprocess.Popen:
        """Start `argv` inside the sandbox, in a session of its own, in a fresh working folder `workdir` (its HOME).
        `cpu_seconds`: an RLIMIT_CPU for each of its processes, where the sandbox's CPU is not counted as a whole."""
        inside = self.inside(workdir)
        if not self.isolation.bubblewrap and self.uid is None:
            inside.mkdir(mode=0o700, parents=True, exist_ok=True)
        read_end = None
        if self.isolation.bubblewrap:
            read_end, write_end = os.pipe()
            os.write(write_end, seccomp.program())
            os.close(write_end)
            pass_fds = (*pass_fds, read_end)
        elif self.uid is not None and seccomp.supported():
            argv = [sys.executable, "-I", "-c", _SECCOMP_THEN_EXEC, *argv]
        cwd: str | Path
        if self.isolation.bubblewrap or self.uid is not None:
            cwd = "/"  # bubblewrap, or DROP, enters the folder
        else:
            cwd = inside
        try:
            process = subprocess.Popen(self.command(argv, inside, read_end), cwd=cwd, env=self.child_environment(inside),
                                       preexec_fn=self._preexec(None if self._cpu_usage else cpu_seconds),
                                       pass_fds=pass_fds, **kwargs)
        finally:
            if read_end is not None:
                os.close(read_end)
        self._processes.append(process)
        return process

    # -- limits and the end -------------------------------------------------------------------------------------

    def _watch_disk(self) -> None:
        while not self._stop.wait(0.5):
            used = _folder_bytes(self.scratch)
            if used > self.limits.disk_bytes:
                self.exceeded = f"it wrote more than {self.limits.disk_bytes // 2**20} MiB to its folder"
                self.kill_all()

    def _unthrottle(self) -> None:
        for cgroup in self._cgroups:
            for setting, value in (("cpu.cfs_quota_us", "-1"), ("cpu.max", "max 100000")):
                if (cgroup / setting).exists():
                    with contextlib.suppress(OSError):
                        (cgroup / setting).write_text(value)

    def _throttle(self) -> None:
        """Set the sandbox's CPU quota (its share), also again after kill_all lifted it."""
        quota = self.limits.cpus
        if not quota:
            return
        for cgroup in self._cgroups:
            for setting, value in (("cpu.cfs_quota_us", str(max(1000, int(quota * 100_000)))),
                                   ("cpu.max", f"{max(1000, int(quota * 100_000))} 100000")):
                if (cgroup / setting).exists():
                    with contextlib.suppress(OSError):
                        (cgroup / setting).write_text(value)

    def kill_all(self) -> None:
        """SIGKILL everything that runs in the sandbox, and wait until it is gone."""
        self._unthrottle()  # a process must run to die: a sandbox at its CPU quota would die slowly
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # processes that left the session: in the cgroup, or of the sandbox's uid
            pids = []
            for cgroup in self._cgroups:
                with contextlib.suppress(OSError):
                    pids += [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
            pids += processes_of(self.uid) if self.uid is not None else []
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        self._throttle()

    def close(self) -> None:
        self._stop.set()
        self.kill_all()
        for cgroup in self._cgroups:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        if self._mounted:
            _unmount(self.scratch)
            self._mounted = False
        if self.uid is not None and not self.isolation.bubblewrap:
            _sweep_shared_folders(self.uid)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _sweep_shared_folders(uid: int) -> None:
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


# without bubblewrap, as root: the filter is loaded after the drop to the sandbox's uid, then the command runs
_SECCOMP_THEN_EXEC = ("import os, sys, importlib.util as u; s = u.spec_from_file_location('seccomp', %r); "
                      "m = u.module_from_spec(s); s.loader.exec_module(m); m.installer()(); "
                      "os.execv(sys.argv[1], sys.argv[1:])" % str(Path(__file__).with_name("seccomp.py")))
