"""A sandbox's cgroups (v1 or v2, where writable, as root): its process and memory limits, its CPU quota and the CPU
time it used."""
from __future__ import annotations

import contextlib
import errno
import os
import time
import uuid
from pathlib import Path

from .isolation import Isolation, Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")  # v1 controllers below it (pids/, memory/, cpu/), or the v2 hierarchy itself


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


def writable() -> tuple[str | None, bool]:
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


def make(name: str, isolation: Isolation, limits: Limits, made: list[Path]) -> tuple[Path, str] | None:
    """Make the sandbox's cgroups, appending each to `made` as it is made (so a failure leaves none behind), with its
    limits and its CPU quota; returns where its CPU usage is counted (file, unit), or None."""
    cpu_usage: tuple[Path, str] | None = None
    if isolation.cgroups == "v1":
        settings = {CGROUP_ROOT / "pids": {"pids.max": limits.processes},
                    CGROUP_ROOT / "memory": {"memory.limit_in_bytes": limits.memory_bytes}}
        if isolation.cpu:
            settings[CGROUP_ROOT / "cpu"] = {"cpu.cfs_period_us": 100_000}
            settings.setdefault(CGROUP_ROOT / "cpuacct", {})
        for controller, values in settings.items():
            path = controller.resolve() / name
            if path not in made:
                path.mkdir()
                made.append(path)
            for setting, value in values.items():
                (path / setting).write_text(str(value))
        if isolation.cpu:
            cpu_usage = ((CGROUP_ROOT / "cpuacct").resolve() / name / "cpuacct.usage", "ns")
    elif isolation.cgroups == "v2":
        path = CGROUP_ROOT / name
        path.mkdir()
        made.append(path)
        (path / "pids.max").write_text(str(limits.processes))
        (path / "memory.max").write_text(str(limits.memory_bytes))
        if isolation.cpu:
            cpu_usage = (path / "cpu.stat", "usage_usec")
    throttle(made, limits.cpus)
    return cpu_usage


def cpu_seconds(cpu_usage: tuple[Path, str] | None) -> float | None:
    """CPU time the cgroup's processes used so far, or None where it is not counted (no cpu cgroup)."""
    if cpu_usage is None:
        return None
    path, unit = cpu_usage
    try:
        text = path.read_text()
    except OSError:
        return None
    if unit == "ns":
        return int(text.split()[0]) / 1e9
    values = dict(line.split() for line in text.splitlines() if line.strip())
    return int(values.get("usage_usec", 0)) / 1e6


def _write_where_present(cgroups: list[Path], settings: tuple[tuple[str, str], ...]) -> None:
    """Each setting into each cgroup that has it (v1 and v2 name them differently)."""
    for cgroup in cgroups:
        for setting, value in settings:
            if (cgroup / setting).exists():
                with contextlib.suppress(OSError):
                    (cgroup / setting).write_text(value)


def throttle(cgroups: list[Path], cpus: float | None) -> None:
    """Set the sandbox's CPU quota (its share), also again after `unthrottle` lifted it."""
    if not cpus:
        return
    quota = max(1000, int(cpus * 100_000))
    _write_where_present(cgroups, (("cpu.cfs_quota_us", str(quota)), ("cpu.max", f"{quota} 100000")))


def unthrottle(cgroups: list[Path]) -> None:
    """Lift the CPU quota: a process must run to die, and a sandbox at its quota would die slowly."""
    _write_where_present(cgroups, (("cpu.cfs_quota_us", "-1"), ("cpu.max", "max 100000")))


def processes_in(cgroups: list[Path]) -> list[int]:
    """Pids in the sandbox's cgroups."""
    pids = []
    for cgroup in cgroups:
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    return pids


def remove(made: list[Path], wait_s: float = 5.0) -> list[Path]:
    """Remove a sandbox's emptied cgroups; returns those still there. A cgroup whose last process has just died can
    refuse for a moment (EBUSY until its exit is complete), so each is retried for up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    left = []
    for cgroup in made:
        while True:
            try:
                cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    left.append(cgroup)
                    break
                time.sleep(0.02)
    return left

