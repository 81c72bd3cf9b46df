"""One cgroup per learner with a CPU quota and a memory limit: v1 (cpu and memory hierarchies) or v2 (unified).

The learner's groups nest under this process's own group in each hierarchy, in a folder `lab-classroom`, so that the
machine's (or container's) own limits still apply above them.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

PARENT = "lab-classroom"
PERIOD_US = 100_000
V2_ROOT = Path("/sys/fs/cgroup")


def version(root: Path = V2_ROOT) -> int:
    """2 on a unified hierarchy (cgroup.controllers at its root), else 1."""
    return 2 if (root / "cgroup.controllers").is_file() else 1


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """/proc/self/cgroup -> {controller: this process's group path}; the unified hierarchy under the key ''."""
    paths = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _v1_mounts(mountinfo: str) -> dict[str, Path]:
    """/proc/self/mountinfo -> {controller: where its v1 hierarchy is mounted}."""
    mounts = {}
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, super_fields = left.split(), right.split()
        if len(super_fields) >= 3 and super_fields[0] == "cgroup":
            for option in super_fields[2].split(","):
                if option in ("cpu", "memory"):
                    mounts[option] = Path(fields[4])
    return mounts


def parents() -> dict[str, Path]:
    """The folder under which each learner's group is made: {'cpu': ..., 'memory': ...} (v1) or {'': ...} (v2)."""
    own = _own_paths(Path("/proc/self/cgroup").read_text())
    if version() == 2:
        return {"": V2_ROOT / own.get("", "/").lstrip("/") / PARENT}
    mounts = _v1_mounts(Path("/proc/self/mountinfo").read_text())
    missing = [c for c in ("cpu", "memory") if c not in mounts]
    if missing:
        raise RuntimeError(f"no cgroup v1 {' or '.join(missing)} hierarchy is mounted (see /proc/self/mountinfo): "
                           "the classroom cannot limit each learner's CPU and memory here")
    return {c: mounts[c] / own.get(c, "/").lstrip("/") / PARENT for c in ("cpu", "memory")}


def controller_refusal() -> str | None:
    """Why per-learner groups cannot be made here (None when they can): a writable cpu and memory controller."""
    try:
        found = parents()
    except (OSError, RuntimeError, ValueError) as exc:
        return f"cannot find this process's cgroups: {exc}"
    for controller, parent in found.items():
        probe = parent.parent / f"{PARENT}-probe-{os.getpid()}"
        try:
            probe.mkdir()
            if controller == "":  # v2: create() hands cpu and memory down, if the group above has them
                ok = {"cpu", "memory"} <= set((parent.parent / "cgroup.controllers").read_text().split())
            else:
                ok = (probe / f"{controller}.stat").exists()
        except OSError as exc:
            return f"cannot create a cgroup under {parent.parent} ({exc.strerror}): per-learner limits need root and a writable cgroup {controller or 'v2'} controller"
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
        if not ok:
            return (f"the cgroup {controller or 'v2 cpu'} controller is not enabled under {parent.parent}: "
                    "per-learner limits cannot be set here")
    return None


@dataclass(frozen=True)
class LearnerGroup:
    """A learner's group: one folder per hierarchy (v1: cpu and memory; v2: one)."""

    folders: tuple[Path, ...]

    @classmethod
    def for_user(cls, name: str) -> "LearnerGroup":
        return cls(tuple(parent / name for parent in parents().values()))

    def create(self, cpu_limit: float, mem_limit: int) -> None:
        """Make the folders (and `lab-classroom` above them) and write the quota and the limit."""
        if cpu_limit <= 0 or mem_limit <= 0:
            raise ValueError(f"cpu_limit and mem_limit must be positive, got {cpu_limit} and {mem_limit}")
        quota = max(1000, round(cpu_limit * PERIOD_US))  # the kernel's smallest quota is 1 ms
        v2 = version() == 2
        for folder in self.folders:
            if v2:  # this process's own group, then lab-classroom, must hand the controllers down
                _enable_v2_controllers(folder.parent.parent)
            folder.parent.mkdir(exist_ok=True)
            if v2:
                _enable_v2_controllers(folder.parent)
            folder.mkdir(exist_ok=True)
            if (folder / "cpu.max").exists():
                (folder / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                (folder / "memory.max").write_text(str(mem_limit))
            elif (folder / "cpu.cfs_quota_us").exists():
                (folder / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (folder / "cpu.cfs_quota_us").write_text(str(quota))
            elif (folder / "memory.limit_in_bytes").exists():
                (folder / "memory.limit_in_bytes").write_text(str(mem_limit))

    def join(self, pid: int = 0) -> None:
        """Move process `pid` (0: the caller) into every folder; its children inherit them."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid or os.getpid()))

    def pids(self) -> set[int]:
        """The processes in the group now."""
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        return found

    def remove(self, timeout: float = 10.0) -> None:
        """Remove the folders (a group empties a moment after its last process exits: retried until `timeout`)."""
        deadline = time.monotonic() + timeout
        for folder in self.folders:
            while folder.exists():
                try:
                    folder.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cannot remove the cgroup {folder}: processes {sorted(self.pids())} "
                                           "are still in it") from None
                    time.sleep(0.1)


def remove_parents(folders) -> None:
    """Remove the `lab-classroom` folders once no learner's group is left in them."""
    for parent in {Path(f).parent for f in folders}:
        with contextlib.suppress(FileNotFoundError):
            parent.rmdir()


def _enable_v2_controllers(folder: Path) -> None:
    """v2: let `folder`'s children use the cpu and memory controllers."""
    control = folder / "cgroup.subtree_control"
    enabled = control.read_text().split()
    for controller in ("cpu", "memory"):
        if controller not in enabled:
            control.write_text(f"+{controller}")
