"""One submission's jail (`Sandbox`): `popen` starts a command in it, with bubblewrap where this machine has it (else
dropped to a dedicated uid, or as the grader's user, with rlimits and a seccomp filter loaded in the child); `close`
kills everything in it and frees what it held."""
from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import bubblewrap, cgroups, seccomp
from .bubblewrap import WRITABLE
from .host import (DROP, children_of, folder_bytes, free_uid, inodes_used, parent_of, mount_tmpfs, processes_of,
                   sweep_shared_folders, unmount)
from .isolation import Isolation, Limits

INSIDE_NAME = "learner"
# variables a submission inherits from the grader's environment: thread counts and hardware choices, nothing else
PASSED_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                    "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LAB_TARGET")
# without bubblewrap, as root: the filter is loaded after the drop to the sandbox's uid, then the command runs
_SECCOMP_THEN_EXEC = ("import os, sys, importlib.util as u; s = u.spec_from_file_location('seccomp', %r); "
                      "m = u.module_from_spec(s); s.loader.exec_module(m); m.installer()(); "
                      "os.execv(sys.argv[1], sys.argv[1:])" % str(Path(__file__).with_name("seccomp.py")))


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
            self.uid = free_uid()
        name = f"lab-grader-{uuid.uuid4().hex[:12]}"
        try:
            self._cpu_usage = cgroups.make(name, self.isolation, self.limits, self._cgroups)
        except OSError:
            self.close()
            raise
        if not self.isolation.bubblewrap and self.isolation.mounts_tmpfs and self.uid is not None:
            self._mounted = mount_tmpfs(self.scratch, self.limits.disk_bytes, self.uid, self.limits.files)
        if not self.isolation.bubblewrap and self.uid is not None and not self._mounted:
            os.chown(self.scratch, self.uid, self.uid)  # DROP makes its folders in it, as the sandbox's uid
        if not self.isolation.bubblewrap and not self._mounted:
            threading.Thread(target=self._watch_disk, daemon=True).start()  # the fallback: a watched folder
        if self.isolation.bubblewrap:  # bubblewrap sizes its tmpfs but cannot bound their inodes: they are watched
            threading.Thread(target=self._watch_files, daemon=True).start()

    def cpu_seconds(self) -> float | None:
        """CPU time every process of this sandbox used so far, or None where it is not counted (no cpu cgroup)."""
        return cgroups.cpu_seconds(self._cpu_usage)

    # -- the command ---------------------------------------------------------------------------------------------

    def inside(self, workdir: str) -> Path:
        """Where a command's working folder (and HOME) named `workdir` is, as the command sees it."""
        return (WRITABLE if self.isolation.bubblewrap else self.scratch) / workdir

    def command(self, argv: list[str], workdir: Path, seccomp_fd: int | None = None) -> list[str]:
        """`argv` as this sandbox runs it (in bubblewrap; without it unchanged, or dropped to the sandbox's uid)."""
        if self.isolation.bubblewrap:
            return bubblewrap.bwrap_command(self.isolation.bubblewrap, argv, workdir, self.limits.disk_bytes, self.uid,
                                      seccomp_fd)
        if self.uid is not None:
            return [sys.executable, "-I", "-c", DROP, str(self.uid), str(workdir), *argv]
        return list(argv)

    def child_environment(self, home: Path) -> dict:
        """The environment a submission sees: built from an allow-list, never the grader's copied."""
        env = {k: os.environ[k] for k in PASSED_VARIABLES if k in os.environ}
        env.update(PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", HOME=str(home), USER=INSIDE_NAME,
                   LOGNAME=INSIDE_NAME, LANG="C.UTF-8", TMPDIR=str(WRITABLE) if self.isolation.bubblewrap else str(home),
                   MPLCONFIGDIR=str(home / ".mpl"), IPYTHONDIR=str(home / ".ipython"),
                   JUPYTER_RUNTIME_DIR=str(home / ".jupyter-runtime"), JUPYTER_DATA_DIR=str(home / ".jupyter"),
                   JUPYTER_CONFIG_DIR=str(home / ".jupyter-config"), PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg",
                   **self.env)
        # submissions are graded several at a time: idle OpenMP threads sleep rather than spin on a core another needs
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        return env

    def _preexec(self, cpu_seconds: float | None):
        limits, own_cgroups, isolation, uid = self.limits, list(self._cgroups), self.isolation, self.uid
        nproc = None
        if not own_cgroups:  # the per-user count: of the sandbox's own uid, or of this user (then shared: see one_at_a_time)
            nproc = limits.processes if uid is not None else len(processes_of(os.getuid())) + limits.processes
        install = seccomp.installer() if not isolation.bubblewrap and seccomp.supported() else None
        cpu = int(cpu_seconds) + 1 if cpu_seconds else None

        def setup():
            os.setsid()
            os.umask(0o077)  # what a submission writes (without bubblewrap: in the grader's folder) is its own alone
            for cgroup in own_cgroups:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            if cpu is not None:  # per process: a backstop where the sandbox's CPU time is not counted as a whole
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            if not own_cgroups:
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
            os.write(write_end, seccomp.filter_program())
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
            used, entries = folder_bytes(self.scratch)
            if used > self.limits.disk_bytes:
                self.exceeded = f"it wrote more than {self.limits.disk_bytes // 2**20} MiB to its folder"
                self.kill_all()
            elif entries > self.limits.files:
                self.exceeded = self._too_many_files()
                self.kill_all()

    def _too_many_files(self) -> str:
        return (f"it made more than {self.limits.files} files and folders (each costs the machine memory, "
                "whatever its size)")

    def _watch_files(self) -> None:
        """With bubblewrap: the file entries on the sandbox's two tmpfs, seen through its first process's root."""
        inner: dict[int, list[int]] = {}  # bubblewrap's pid -> its child's: the command, in the sandbox's namespaces
        while not self._stop.wait(0.5):
            for process in list(self._processes):
                if process.poll() is not None:
                    continue
                inside = inner.get(process.pid)
                if not inside or parent_of(inside[0]) != process.pid:  # gone, and its pid maybe another's by now
                    inside = children_of(process.pid)
                inner[process.pid] = inside
                used = inodes_used(inside[0], (WRITABLE, Path("/dev/shm"))) if inside else None
                if used is not None and used > self.limits.files:
                    self.exceeded = self._too_many_files()
                    self.kill_all()

    def kill_all(self) -> None:
        """SIGKILL everything that runs in the sandbox, and wait until it is gone."""
        cgroups.unthrottle(self._cgroups)  # a process must run to die: a sandbox at its CPU quota would die slowly
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # processes that left the session: in the cgroup, or of the sandbox's uid
            pids = cgroups.processes_in(self._cgroups) + (processes_of(self.uid) if self.uid is not None else [])
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        cgroups.throttle(self._cgroups, self.limits.cpus)

    def close(self) -> None:
        self._stop.set()
        self.kill_all()
        cgroups.remove(self._cgroups)
        if self._mounted:
            unmount(self.scratch)
            self._mounted = False
        if self.uid is not None and not self.isolation.bubblewrap:
            sweep_shared_folders(self.uid)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
