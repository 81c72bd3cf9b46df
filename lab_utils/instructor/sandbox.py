"""A sandbox per graded submission, without privileges, whoever runs the grader.

With bubblewrap: a root file system built from a minimal tree (the system's /usr and /etc, the Python that runs the
course, the course's `lab_utils`, `datasets` and student `notebooks`, all read-only; fresh /tmp, /dev/shm and /run;
the submission's own scratch folder, the only thing writable), so nothing of the instructor's layout (solutions, tests,
the output folder, classmates) exists inside, not even in /proc/self/mountinfo; its own pid, mount, network, ipc and
uts namespaces; every capability dropped; no_new_privs; a seccomp filter (`seccomp.py`); an environment built from an
allow-list. As root, each sandbox also runs under a dedicated unprivileged uid of its own, so the per-user process
limit is a per-sandbox limit and sandboxes cannot signal each other; as an ordinary user, in a user namespace.

Limits per sandbox: processes, memory and disk (cgroups where writable, else rlimits; the scratch folder's size is
watched and the sandbox killed when it grows past the limit). Where processes cannot be limited per sandbox (an
ordinary user without writable cgroups), `Isolation.one_at_a_time` says the grader must grade one at a time.

Without bubblewrap (or with one that fails here), `detect()` says what is not promised; the grader then refuses
unless the instructor accepts the risk, and grades correctly with the risk written in every row.
"""
from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import seccomp

CGROUP_ROOT = Path("/sys/fs/cgroup")  # v1 controllers below it (pids/, memory/), or the v2 hierarchy itself
COURSE = Path(__file__).resolve().parents[2]
COURSE_PARTS = ("lab_utils", "datasets", "notebooks")  # what a submission may read of the course; never solutions/, tests/
EMPTIED = ("/tmp", "/dev/shm", "/run", "/var/tmp")  # each submission gets fresh, empty ones
SANDBOX_UIDS = range(1_600_000_000, 1_600_000_000 + 2**24)  # dedicated ids for submissions when the grader is root
INSIDE_NAME = "learner"
# variables a submission inherits from the grader's environment: thread counts and hardware choices, nothing else
PASSED_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                    "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LAB_TARGET")
# a dropped-privilege start, as root: the process becomes the sandbox's own uid before anything else runs
# (its folder is entered after the drop: a root without capabilities may not enter a folder that is the uid's alone)
DROP = ("import os, sys, ctypes; u = int(sys.argv[1]); os.setgroups([]); os.setresgid(u, u, u); os.setresuid(u, u, u); "
        "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); os.chdir(sys.argv[2]); os.execv(sys.argv[3], sys.argv[3:])")


@dataclass(frozen=True)
class Limits:
    """What one submission may use at once."""

    memory_bytes: int = 8 * 2**30
    processes: int = 1024  # processes and threads: a TensorFlow worker alone runs about 115 threads
    file_bytes: int = 256 * 2**20  # the largest file it may write
    disk_bytes: int = 1 * 2**30  # its scratch folder, /tmp and /dev/shm together (each tmpfs is capped at this too)


@dataclass(frozen=True)
class Isolation:
    """How submissions will be kept apart on this machine, and what is not promised."""

    bubblewrap: str | None           # path of bwrap when it works here
    cgroups: str | None              # "v1" or "v2" when per-sandbox cgroups can be made, else None
    as_root: bool                    # the grader is root: each sandbox gets a dedicated uid
    drops_to_uid: bool               # without bubblewrap, as root: the interpreter is reachable by a dedicated uid
    missing: tuple[str, ...] = ()    # promises this machine cannot keep

    @property
    def complete(self) -> bool:
        return self.bubblewrap is not None

    @property
    def one_at_a_time(self) -> bool:
        """No per-sandbox process limit here: a fork bomb would starve a classmate graded at the same time."""
        return not (self.cgroups or (self.as_root and (self.bubblewrap or self.drops_to_uid)))

    @property
    def row_note(self) -> str:
        """What every gradebook row says about how it was graded."""
        return "sandboxed (bubblewrap)" if self.complete else "NOT sandboxed (--unsandboxed): " + "; ".join(
            m.split(":")[0] for m in self.missing[:1])

    def describe(self) -> str:
        if self.complete:
            who = "a dedicated unprivileged uid per submission" if self.as_root else "your uid in a user namespace"
            return ("sandbox: bubblewrap (minimal read-only tree; pid, mount, network, ipc namespaces; no capabilities, "
                    f"seccomp; {who}); limits by " + (f"cgroups {self.cgroups}" if self.cgroups else "rlimits")
                    + ("; one submission at a time: no per-sandbox process limit here" if self.one_at_a_time else ""))
        return "sandbox: NOT complete on this machine:\n" + "\n".join(f"  - {m}" for m in self.missing)


# ---- what this machine allows ------------------------------------------------------------------------------------

def _cgroups_writable() -> str | None:
    if os.geteuid() != 0:
        return None
    name = f"lab-grader-probe-{os.getpid()}"
    v1 = [CGROUP_ROOT / c / name for c in ("pids", "memory")]
    if all((CGROUP_ROOT / c).is_dir() for c in ("pids", "memory")):
        try:
            for p in v1:
                p.mkdir()
            return "v1"
        except OSError:
            pass
        finally:
            for p in v1:
                with contextlib.suppress(OSError):
                    p.rmdir()
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        controllers = set((CGROUP_ROOT / "cgroup.subtree_control").read_text().split())
        if {"pids", "memory"} <= controllers:
            try:
                (CGROUP_ROOT / name).mkdir()
                return "v2"
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    (CGROUP_ROOT / name).rmdir()
    return None


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
        scratch = Path(folder) / "s"
        scratch.mkdir()
        try:
            with Sandbox(isolation, scratch) as box:
                process = box.popen([sys.executable, "-I", "-c", "print('ok')"], cwd=scratch, home=scratch,
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
    cgroups = _cgroups_writable()
    drops = as_root and _reachable_by_others(Path(sys.executable))
    bwrap = shutil.which("bwrap") if use_bubblewrap else None
    why = "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    if bwrap and seccomp.supported():
        failure = _bubblewrap_works(Isolation(bwrap, cgroups, as_root, False))
        if failure:  # once more: a machine under load can be slow to start the first Python
            failure = _bubblewrap_works(Isolation(bwrap, cgroups, as_root, False))
        if not failure:
            return Isolation(bwrap, cgroups, as_root, False)
        why = f"bubblewrap is installed but cannot make a sandbox here ({failure[:200]})"
    elif bwrap:
        why = "bubblewrap is installed but this processor's system calls are not in the seccomp filter"
    who = ("a dedicated unprivileged uid" if drops else "ROOT: a submission can change any file on this machine") \
        if as_root else "your user"
    missing = [f"{why}: submissions run as {who}, without namespaces",
               "a submission can read any file that user can (other submissions, the instructor tests) and use the network",
               "a submission can see and signal other processes of that user"]
    if not cgroups and not (as_root and drops):
        missing.append("no per-submission process and memory limits (no writable cgroups): one submission at a time")
    return Isolation(None, cgroups, as_root, drops, tuple(missing))


# ---- one submission's jail ----------------------------------------------------------------------------------------

def _free_uid() -> int:
    in_use = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
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
    """One submission's jail: `popen` starts a command in it; `close` kills everything in it."""

    isolation: Isolation
    scratch: Path
    limits: Limits = field(default_factory=Limits)
    env: dict = field(default_factory=dict)
    uid: int | None = None
    exceeded: str = ""
    _cgroups: list[Path] = field(default_factory=list)
    _processes: list[subprocess.Popen] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self):
        self.scratch = Path(self.scratch).resolve()
        if self.isolation.as_root and (self.isolation.bubblewrap or self.isolation.drops_to_uid):
            self.uid = _free_uid()
        if self.isolation.cgroups == "v1":
            name = f"lab-grader-{uuid.uuid4().hex[:12]}"
            for controller, setting, value in (("pids", "pids.max", self.limits.processes),
                                               ("memory", "memory.limit_in_bytes", self.limits.memory_bytes)):
                path = CGROUP_ROOT / controller / name
                path.mkdir()
                (path / setting).write_text(str(value))
                self._cgroups.append(path)
        elif self.isolation.cgroups == "v2":
            path = CGROUP_ROOT / f"lab-grader-{uuid.uuid4().hex[:12]}"
            path.mkdir()
            (path / "pids.max").write_text(str(self.limits.processes))
            (path / "memory.max").write_text(str(self.limits.memory_bytes))
            self._cgroups.append(path)
        threading.Thread(target=self._watch_disk, daemon=True).start()

    # -- the command ---------------------------------------------------------------------------------------------

    def _tree(self) -> list[str]:
        """bubblewrap arguments that build the sandbox's root from a minimal tree."""
        args = ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / name
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--ro-bind", "/etc", "/etc", "--dev", "/dev", "--proc", "/proc"]
        for folder in EMPTIED:
            if Path(folder).parent != Path("/") and Path(folder).parent.name not in ("dev",):
                args += ["--perms", "0755", "--dir", str(Path(folder).parent)]
            args += ["--perms", "1777", "--size", str(self.limits.disk_bytes), "--tmpfs", folder]
        gpu = sorted(Path("/dev").glob("nvidia*"))
        for device in gpu:  # a GPU machine: the devices, and the driver's view of them in /sys
            args += ["--dev-bind", str(device), str(device)]
        if gpu:
            args += ["--ro-bind", "/sys", "/sys"]
        system = [Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64")]
        course = [COURSE / part for part in COURSE_PARTS if (COURSE / part).exists()]
        reads = [p for p in _outermost(python_paths() + course) if not any(p.is_relative_to(s) for s in system)]
        made = {Path("/"), *system, *map(Path, EMPTIED), Path("/dev"), Path("/proc")}
        for path, how in [(p, "--ro-bind") for p in reads] + [(self.scratch, "--bind")]:
            for parent in reversed(path.parents):
                if parent not in made and not any(parent.is_relative_to(r) for r in reads if r != path):
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += [how, str(path), str(path)]
            made.add(path)
        return args

    def command(self, argv: list[str], cwd: Path, seccomp_fd: int | None = None) -> list[str]:
        """`argv` as this sandbox runs it (unchanged, or dropped to the sandbox's uid, without bubblewrap)."""
        if not self.isolation.bubblewrap:
            return [sys.executable, "-I", "-c", DROP, str(self.uid), str(cwd), *argv] if self.uid is not None else list(argv)
        wrapped = [self.isolation.bubblewrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                   "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if self.uid is not None:  # root: bubblewrap builds the tree, then the command drops to the sandbox's uid
            wrapped += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            wrapped += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()), "--cap-drop", "ALL"]
        wrapped += self._tree()
        if seccomp_fd is not None:
            wrapped += ["--seccomp", str(seccomp_fd)]
        if self.uid is not None:
            return wrapped + ["--chdir", "/", "--", sys.executable, "-I", "-c", DROP, str(self.uid), str(cwd), *argv]
        wrapped += ["--chdir", str(cwd), "--"]
        return wrapped + list(argv)

    def environment(self, home: Path) -> dict:
        """The environment a submission sees: built from an allow-list, never the grader's copied."""
        env = {k: os.environ[k] for k in PASSED_VARIABLES if k in os.environ}
        env.update(PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", HOME=str(home), USER=INSIDE_NAME,
                   LOGNAME=INSIDE_NAME, LANG="C.UTF-8", TMPDIR="/tmp" if self.isolation.bubblewrap else str(home),
                   MPLCONFIGDIR=str(home / ".mpl"), IPYTHONDIR=str(home / ".ipython"),
                   JUPYTER_RUNTIME_DIR=str(home / ".jupyter-runtime"), JUPYTER_DATA_DIR=str(home / ".jupyter"),
                   JUPYTER_CONFIG_DIR=str(home / ".jupyter-config"), PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg",
                   **self.env)
        return env

    def _hand_over(self) -> None:
        """Give the scratch folder to the sandbox's uid (files the grader put there included)."""
        if self.uid is None:
            return
        for root, dirs, files in os.walk(self.scratch):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                with contextlib.suppress(OSError):
                    os.lchown(name, self.uid, self.uid)

    def _preexec(self):
        limits, cgroups, isolation, uid = self.limits, list(self._cgroups), self.isolation, self.uid
        nproc = None
        if not cgroups:  # the per-user count: of the sandbox's own uid, or of this user (then shared: see one_at_a_time)
            nproc = limits.processes if uid is not None else _user_process_count() + limits.processes
        install = seccomp.installer() if not isolation.bubblewrap and seccomp.supported() else None

        def setup():
            os.setsid()
            for cgroup in cgroups:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            if not cgroups:
                resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if install is not None and uid is None:
                install()  # with a uid to drop to, the filter would refuse the drop: it is loaded after it (DROP)
        return setup

    def popen(self, argv: list[str], *, cwd: Path, home: Path, pass_fds=(), **kwargs) -> subprocess.Popen:
        """Start `argv` inside the sandbox, in a session of its own, with `home` as its HOME."""
        self._hand_over()
        read_end = None
        if self.isolation.bubblewrap:
            read_end, write_end = os.pipe()
            os.write(write_end, seccomp.program())
            os.close(write_end)
            pass_fds = (*pass_fds, read_end)
        elif self.uid is not None and seccomp.supported():
            argv = [sys.executable, "-I", "-c", _SECCOMP_THEN_EXEC, *argv]
        try:
            process = subprocess.Popen(self.command(argv, cwd, read_end), cwd=cwd, env=self.environment(home),
                                       preexec_fn=self._preexec(), pass_fds=pass_fds, **kwargs)
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

    def kill_all(self) -> None:
        """SIGKILL everything that runs in the sandbox, and wait until it is gone."""
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for _ in range(100):  # processes that left the session: still in the cgroup, or still of the sandbox's uid
            pids = [int(p) for c in self._cgroups for p in (c / "cgroup.procs").read_text().split()]
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

    def close(self) -> None:
        self._stop.set()
        self.kill_all()
        for cgroup in self._cgroups:
            with contextlib.suppress(OSError):
                cgroup.rmdir()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# without bubblewrap, as root: the filter is loaded after the drop to the sandbox's uid, then the command runs
_SECCOMP_THEN_EXEC = ("import os, sys, importlib.util as u; s = u.spec_from_file_location('seccomp', %r); "
                      "m = u.module_from_spec(s); s.loader.exec_module(m); m.installer()(); "
                      "os.execv(sys.argv[1], sys.argv[1:])" % str(Path(__file__).with_name("seccomp.py")))
