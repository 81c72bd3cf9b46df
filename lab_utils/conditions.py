"""What else used the machine while a lab measured: other programs' CPU time and the hypervisor's steal, from /proc."""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass

from .process_tree import descendants

BUSY_SHARE = 0.10  # other programs (or steal) took more than this share of the machine: its speeds are not quiet speeds
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Sample:
    """One reading: seconds since the epoch, the machine's busy and stolen CPU seconds, this process tree's CPU seconds."""

    at: float
    busy_s: float
    steal_s: float
    own_s: float


@dataclass(frozen=True)
class Load:
    """CPU use between two samples, in cores: by this process and what it started (`own`), by every other program
    (`others`), and stolen by the hypervisor (`steal`)."""

    seconds: float
    cores: int
    own: float
    others: float
    steal: float

    @property
    def busy(self) -> bool:
        """True when other programs or the hypervisor took more than BUSY_SHARE of the machine."""
        return (self.others + self.steal) > BUSY_SHARE * self.cores

    def line(self) -> str:
        """One line for under a table of speeds."""
        text = (f"machine while measuring ({self.seconds:.0f} s): other programs used {self.others:.1f} of "
                f"{self.cores} cores, the hypervisor stole {self.steal:.1f}")
        if self.busy:
            text += "; these speeds are a busy machine's, not its quiet speeds: rerun with nothing else running"
        return text

    def note(self) -> list[str]:
        """A results-row note when the machine was busy, else nothing."""
        if not self.busy:
            return []
        return [f"measured while other programs used {self.others:.1f} and steal {self.steal:.1f} of {self.cores} cores"]


def _machine_seconds() -> tuple[float, float] | None:
    """(busy, steal) CPU seconds of the whole machine since boot, or None where /proc/stat is missing."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / _TICKS, steal / _TICKS


def _process_seconds(pid: int, with_children: bool) -> float:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime + (cutime + cstime if with_children else 0)) / _TICKS


def _own_seconds() -> float:
    """CPU seconds of this process and every process below it, those that ended included (their parent reaped
    them: this process, or the fork server ranks start from)."""
    me = os.getpid()
    return sum(_process_seconds(pid, True) for pid in [me] + descendants(me))


def sample() -> Sample | None:
    """A reading now, or None where there is no /proc."""
    machine = _machine_seconds()
    if machine is None:
        return None
    return Sample(time.time(), machine[0], machine[1], _own_seconds())


def between(first: Sample, last: Sample, cores: int | None = None) -> Load:
    """The Load from `first` to `last`."""
    seconds = max(last.at - first.at, 1e-9)
    cores = cores or os.cpu_count() or 1
    own = max(last.own_s - first.own_s, 0.0)
    busy = max(last.busy_s - first.busy_s, 0.0)
    return Load(seconds, cores, own / seconds, max(busy - own, 0.0) / seconds,
                max(last.steal_s - first.steal_s, 0.0) / seconds)


_WINDOWS: list[Load] = []  # the measuring windows since the last take()


@contextlib.contextmanager
def measuring():
    """Count the block as a measurement: what else used the machine meanwhile is added to what take() reports."""
    first = sample()
    try:
        yield
    finally:
        last = sample()
        if first is not None and last is not None:
            _WINDOWS.append(between(first, last))


def taken(reset: bool = False) -> Load | None:
    """The machine's Load over every measuring window since the last reset (None: none, or no /proc here)."""
    windows = list(_WINDOWS)
    if reset:
        _WINDOWS.clear()
    if not windows:
        return None
    seconds = sum(w.seconds for w in windows)
    mean = lambda name: sum(getattr(w, name) * w.seconds for w in windows) / seconds  # noqa: E731
    return Load(seconds, windows[0].cores, mean("own"), mean("others"), mean("steal"))
