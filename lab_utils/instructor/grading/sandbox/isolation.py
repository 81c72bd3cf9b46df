"""What one submission may use (`Limits`), and how this machine keeps submissions apart (`Isolation`)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one submission may use at once."""

    memory_bytes: int = 8 * 2**30
    processes: int = 1024  # processes and threads: a TensorFlow worker alone runs about 115 threads
    file_bytes: int = 256 * 2**20  # the largest file it may write
    disk_bytes: int = 1 * 2**30  # everything it writes: /tmp, /var/tmp, /dev/shm and its folders, one filesystem
    files: int = 65_536  # file entries (files, folders, links: tmpfs inodes) it may make; each costs host memory
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
