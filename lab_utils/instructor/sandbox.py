"""A sandbox per graded submission: its own process, mount, network and PID namespaces (bubblewrap), the course
read-only, only its scratch folder writable, other submissions, the output folder and the instructor tests hidden;
memory, process-count and file-size limits; everything in it killed together.

Where bubblewrap cannot make namespaces (not installed, no user namespaces), `detect()` says so, and the grader
prints what it then cannot promise.
"""
from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import site
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup")
COURSE = Path(__file__).resolve().parents[2]
EMPTIED = ("/tmp", "/dev/shm", "/run")  # each submission gets fresh, empty ones


def kept_under_emptied_folders() -> list[Path]:
    """The course and the Python it runs on, where they lie in a folder the sandbox empties (a clone in /tmp)."""
    needed = {COURSE, Path(sys.prefix), Path(sys.base_prefix), *map(Path, site.getsitepackages())}
    inside = {p.resolve() for p in needed if p.exists() and any(p.resolve().is_relative_to(e) for e in EMPTIED)}
    return sorted(p for p in inside if not any(p != q and p.is_relative_to(q) for q in inside))


@dataclass(frozen=True)
class Limits:
    """What one submission may use at once."""

    memory_bytes: int = 8 * 2**30
    processes: int = 1024  # processes and threads: a TensorFlow worker alone runs about 115 threads
    file_bytes: int = 256 * 2**20  # the largest file it may write


@dataclass(frozen=True)
class Isolation:
    """How submissions will be kept apart on this machine, and what is not promised."""

    bubblewrap: str | None           # path of bwrap when it works here
    cgroups: bool                    # memory and process limits enforced by cgroups (else rlimits)
    missing: tuple[str, ...] = ()    # promises this machine cannot keep

    def describe(self) -> str:
        if not self.missing:
            return ("sandbox: bubblewrap (pid, mount, network, ipc namespaces; course read-only; other submissions, "
                    "the output folder and instructor tests hidden); limits by " + ("cgroups" if self.cgroups else "rlimits"))
        return "sandbox: NOT complete on this machine:\n" + "\n".join(f"  - {m}" for m in self.missing)


def _bubblewrap_works(bwrap: str) -> bool:
    try:
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                               "--unshare-net", "--die-with-parent", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _cgroups_writable() -> bool:
    if os.geteuid() != 0:
        return False
    probe = [CGROUP_V1 / c / f"lab-grader-probe-{os.getpid()}" for c in ("pids", "memory")]
    try:
        for p in probe:
            p.mkdir()
        return True
    except OSError:
        return False
    finally:
        for p in probe:
            with contextlib.suppress(OSError):
                p.rmdir()


def detect() -> Isolation:
    """Look once at what this machine allows."""
    bwrap = shutil.which("bwrap")
    works = bool(bwrap) and _bubblewrap_works(bwrap)
    cgroups = _cgroups_writable()
    missing = []
    if not works:
        why = "bubblewrap is not installed (Debian: apt-get install bubblewrap)" if not bwrap else \
            "bubblewrap is installed but cannot create namespaces here (user namespaces disabled?)"
        missing += [f"{why}: submissions run as your user, without namespaces",
                    "a submission can read any file you can (other submissions, the instructor tests) and use the network",
                    "a submission can see and signal other processes of your user (a classmate's run, the grader)"]
    if not cgroups:
        missing.append("memory and process limits are per-process rlimits (no writable cgroups): a fork bomb is "
                       "stopped only by the time limit" + ("" if os.geteuid() else "; as root, rlimits do not cap processes"))
    return Isolation(bwrap if works else None, cgroups, tuple(missing) if not works else ())


@dataclass
class Sandbox:
    """One submission's jail: `popen` starts a command in it; `close` kills everything in it."""

    isolation: Isolation
    scratch: Path
    hidden: list[Path] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    env: dict = field(default_factory=dict)
    _cgroups: list[Path] = field(default_factory=list)
    _processes: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self):
        if self.isolation.cgroups:
            name = f"lab-grader-{uuid.uuid4().hex[:12]}"
            for controller, setting, value in (("pids", "pids.max", self.limits.processes),
                                               ("memory", "memory.limit_in_bytes", self.limits.memory_bytes)):
                path = CGROUP_V1 / controller / name
                path.mkdir()
                (path / setting).write_text(str(value))
                self._cgroups.append(path)

    def command(self, argv: list[str], cwd: Path) -> list[str]:
        """`argv` wrapped in bubblewrap (or unchanged when it is not available)."""
        if not self.isolation.bubblewrap:
            return list(argv)
        wrapped = [self.isolation.bubblewrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                   *(arg for folder in EMPTIED for arg in ("--tmpfs", folder))]
        for path in kept_under_emptied_folders():
            wrapped += ["--ro-bind", str(path), str(path)]
        for path in self.hidden:
            if path.is_dir():
                wrapped += ["--tmpfs", str(path)]
            elif path.exists():
                wrapped += ["--ro-bind", "/dev/null", str(path)]
        wrapped += ["--bind", str(self.scratch), str(self.scratch),
                    "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                    "--die-with-parent", "--new-session", "--chdir", str(cwd), "--"]
        return wrapped + list(argv)

    def _preexec(self):
        limits, cgroups = self.limits, list(self._cgroups)

        def setup():
            os.setsid()
            for cgroup in cgroups:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            if not cgroups:
                resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
                if os.geteuid() != 0:
                    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        return setup

    def popen(self, argv: list[str], *, cwd: Path, home: Path, **kwargs) -> subprocess.Popen:
        """Start `argv` inside the sandbox, in a session of its own, with `home` as its HOME."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LAB_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_", "TF_CONFIG", "JPY_", "PYTHON"))}
        env.update(HOME=str(home), TMPDIR="/tmp" if self.isolation.bubblewrap else str(home),
                   MPLCONFIGDIR=str(home / ".mpl"), IPYTHONDIR=str(home / ".ipython"),
                   JUPYTER_RUNTIME_DIR=str(home / ".jupyter-runtime"), JUPYTER_DATA_DIR=str(home / ".jupyter"),
                   PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg", **self.env)
        process = subprocess.Popen(self.command(argv, cwd), cwd=cwd, env=env, preexec_fn=self._preexec(), **kwargs)
        self._processes.append(process)
        return process

    def kill_all(self) -> None:
        """SIGKILL everything that runs in the sandbox, and wait until it is gone."""
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for cgroup in self._cgroups:
            for _ in range(100):  # processes that left the session are still in the cgroup
                pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
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
        self.kill_all()
        for cgroup in self._cgroups:
            with contextlib.suppress(OSError):
                cgroup.rmdir()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
