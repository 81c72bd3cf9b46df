"""What else used the machine while a lab measured: other programs' CPU time and the hypervisor's steal, from /proc,
and how often the cgroup CPU quota stopped this process (throttling, from the group's cpu.stat)."""
from __future__ import annotations

import contextlib
import math
import os
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import hardware
from .process_tree import descendants

BUSY_SHARE = 0.10  # other programs (or steal) took more than this share of the machine: its speeds are not quiet speeds
THROTTLED_SHARE = 0.10  # the quota stopped this process in more than this share of the window's periods
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Sample:
    """One reading: seconds since the epoch, the machine's busy and stolen CPU seconds, this process tree's CPU seconds."""

    at: float
    busy_s: float
    steal_s: float
    own_s: float
    periods: int = 0  # the quota's periods so far (cpu.stat nr_periods) of the group whose quota limits this process
    throttled: int = 0  # of them, those in which the quota stopped the group (nr_throttled)
    throttled_s: float = 0.0  # seconds the group stood stopped (throttled_time ns, or throttled_usec)
    quota_cpus: float | None = None  # that group's quota in CPUs (None: no quota)
    quota_source: str = ""  # what limits this process's CPU time: "cgroup quota", "CPU_LIMIT", ...


@dataclass(frozen=True)
class Load:
    """CPU use between two samples, in cores: by this process and what it started (`own`), by every other program
    (`others`), and stolen by the hypervisor (`steal`); the CPU quota (`quota_cpus`, None: none) and the share of its
    periods in which it stopped this process (`throttled_share`)."""

    seconds: float
    cores: int
    own: float
    others: float
    steal: float
    quota_cpus: float | None = None
    throttled_share: float = 0.0
    quota_source: str = "cgroup quota"

    @property
    def busy(self) -> bool:
        """True when other programs or the hypervisor took more than BUSY_SHARE of the machine."""
        return (self.others + self.steal) > BUSY_SHARE * self.cores

    @property
    def throttled(self) -> bool:
        """True when the CPU quota stopped this process in more than THROTTLED_SHARE of the window's periods."""
        return self.quota_cpus is not None and self.throttled_share > THROTTLED_SHARE

    def _throttling(self, workers: int | None) -> str:
        assert self.quota_cpus is not None
        wanted = max(2, workers or 2, math.ceil(self.quota_cpus + 1))
        sharing = f"{workers} ranks share it" if workers and workers > 1 else "what runs in parallel shares it"
        return (f"this notebook may use {hardware.cpus_text(self.quota_cpus)} ({self.quota_source}) and was "
                f"throttled in {self.throttled_share * 100:.0f} % of the window: {sharing}: ask for cpu_limit >= {wanted} "
                "or run 1 rank")

    def cause(self, workers: int | None = None, what: str = "ranks") -> str | None:
        """One sentence naming why speeds in this window are not the machine's quiet speeds (a quota that throttled
        this process, other programs' CPU, steal), None when the window was quiet; `workers`: ranks (or `what`) that
        shared it. A quota smaller than the workers is named even when it did not throttle: other programs held the
        cores first, and the quota would have held the workers to its share anyway."""
        causes = []
        if self.throttled:
            causes.append(self._throttling(workers))
        elif self.quota_cpus is not None and workers and workers > self.quota_cpus and self.busy:
            causes.append(f"this notebook may use {hardware.cpus_text(self.quota_cpus)} ({self.quota_source}), less "
                          f"than the {workers} {what} it ran side by side")
        if self.others > BUSY_SHARE * self.cores:
            causes.append(f"other programs used {self.others:.1f} of {self.cores} cores")
        if self.steal > BUSY_SHARE * self.cores or (self.busy and self.steal >= 0.05):
            causes.append(f"the hypervisor stole {self.steal:.1f} of {self.cores} cores")
        return ", and ".join(causes) or None

    def line(self) -> str:
        """One line for under a table of speeds."""
        text = (f"machine while measuring ({window_text(self.seconds)}): other programs used {self.others:.1f} of "
                f"{self.cores} cores, the hypervisor stole {self.steal:.1f} cores")
        if self.quota_cpus is not None:
            text += (f", this notebook's {self.quota_source} of {hardware.cpus_text(self.quota_cpus)} throttled it in "
                     f"{self.throttled_share * 100:.0f} % of its periods")
        cause = self.cause()
        if cause:  # the causes this line has not said already (the others' and the stolen cores it just named)
            said = (f"other programs used {self.others:.1f} of {self.cores} cores",
                    f"the hypervisor stole {self.steal:.1f} of {self.cores} cores")
            rest = ", and ".join(c for c in cause.split(", and ") if c not in said)
            text += "; these speeds are not this machine's quiet speeds" + (f": {rest}" if rest else "")
            text += ": rerun with nothing else running" if self.busy else ""
        return text

    def note(self) -> list[str]:
        """A results-row note when the machine was busy or the quota throttled this process, else nothing."""
        parts = []
        if self.busy:
            parts.append(f"measured while other programs used {self.others:.1f} and steal {self.steal:.1f} of "
                         f"{self.cores} cores")
        if self.throttled:
            parts.append(self._throttling(None))
        return [", and ".join(parts)] if parts else []


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
    them: this process, or the fork server ranks start from), plus those of the processes counting_as_own() counts."""
    me = os.getpid()
    return sum(_process_seconds(pid, True) for pid in [me] + descendants(me)) + sum(t.seconds(fresh=True) for t in _ALSO_OWN)


class _OwnTracker:
    """Polls the processes a predicate picks (e.g. the tasks of this notebook's Slurm jobs, which slurmstepd starts,
    not this process) and keeps each one's last CPU seconds, so one that has ended still counts."""

    def __init__(self, predicate: Callable[[int], bool], every: float):
        self.predicate, self.every = predicate, every
        self.seen: dict[int, float] = {}  # pid -> its CPU seconds when last read
        self.before: dict[int, float] = {}  # pid -> its CPU seconds when the block began (its earlier time is not ours)
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.poll(first=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def poll(self, first: bool = False) -> None:
        """Read the CPU seconds of every process the predicate picks now."""
        me = os.getpid()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            try:
                picked = self.predicate(pid)
            except Exception:  # a process that ended, or one this user may not read: not ours
                picked = False
            if picked:
                cpu = _process_seconds(pid, False)  # its own time: its children are picked (and counted) themselves
                with self.lock:
                    if first:
                        self.before[pid] = cpu
                    self.seen[pid] = max(cpu, self.seen.get(pid, 0.0))

    def run(self) -> None:
        """Poll until stopped."""
        while not self.stop.wait(self.every):
            self.poll()

    def seconds(self, fresh: bool = False) -> float:
        """CPU seconds the picked processes used since the block began (fresh: read them now first)."""
        if fresh:
            self.poll()
        with self.lock:
            return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.seen.items())

    def close(self) -> None:
        """Stop polling after one last reading."""
        self.stop.set()
        self.thread.join()
        self.poll()


_ALSO_OWN: list[_OwnTracker] = []


@contextlib.contextmanager
def counting_as_own(predicate: Callable[[int], bool], every: float = 0.2):
    """Inside the block, count the CPU of the processes for which predicate(pid) is true as this notebook's own, not
    other programs' (e.g. its Slurm jobs' tasks); polled every `every` s, so a process that ends in the block counts
    up to its last reading. Open it around measuring(), so both of that window's samples see it."""
    tracker = _OwnTracker(predicate, every) if os.path.isdir("/proc") else None
    if tracker is not None:
        _ALSO_OWN.append(tracker)
    try:
        yield
    finally:
        if tracker is not None:
            tracker.close()
            _ALSO_OWN.remove(tracker)


def throttling(root: Path = Path("/")) -> tuple[int, int, float, float | None]:
    """(periods, throttled periods, seconds throttled, quota in CPUs or None) of the cgroup whose quota limits this
    process, from its cpu.stat (v1: throttled_time in ns, v2: throttled_usec); zeros where there is none."""
    try:
        found = hardware.quota_group(root)
        if found is None:
            return 0, 0, 0.0, None
        version, group, quota = found
        stat = dict(line.split()[:2] for line in (group / "cpu.stat").read_text().splitlines() if len(line.split()) >= 2)
        seconds = int(stat.get("throttled_usec", 0)) / 1e6 if version == 2 else int(stat.get("throttled_time", 0)) / 1e9
        return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0)), seconds, quota
    except (OSError, ValueError):  # no cpu.stat, or one this reader does not know: no throttling counted
        return 0, 0, 0.0, None


def _budget_limit() -> tuple[float | None, str]:
    """(CPUs, source) of a quota, CPU_LIMIT or Slurm limit below the affinity mask, else (None, "")."""
    budget = hardware.cpu_budget()
    return (budget.cpus, budget.source) if budget.limited_by_quota else (None, "")


def sample() -> Sample | None:
    """A reading now, or None where there is no /proc."""
    machine = _machine_seconds()
    if machine is None:
        return None
    periods, throttled, throttled_s, quota = throttling()
    limit, source = _budget_limit()
    return Sample(time.time(), machine[0], machine[1], _own_seconds(), periods, throttled, throttled_s,
                  limit if limit is not None else quota, source or ("cgroup quota" if quota is not None else ""))


def between(first: Sample, last: Sample, cores: int | None = None) -> Load:
    """The Load from `first` to `last`."""
    seconds = max(last.at - first.at, 1e-9)
    cores = cores or os.cpu_count() or 1
    own = max(last.own_s - first.own_s, 0.0)
    busy = max(last.busy_s - first.busy_s, 0.0)
    periods = last.periods - first.periods
    share = max(last.throttled - first.throttled, 0) / periods if periods > 0 and last.quota_cpus is not None else 0.0
    return Load(seconds, cores, own / seconds, max(busy - own, 0.0) / seconds,
                max(last.steal_s - first.steal_s, 0.0) / seconds, last.quota_cpus, min(share, 1.0),
                last.quota_source or "cgroup quota")


UNREAD_OVER_ONE = "no speedup over one"  # what a load leaves unreadable in N workers against one (the default)


def window_text(seconds: float) -> str:
    """A measuring window's length as printed: one decimal under 10 s, so a short window never reads as '0 s'."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def speedup_visible(workers: int, budget: hardware.CpuBudget | None = None, load: Load | None = None,
                    what: str = "ranks", unread: str = UNREAD_OVER_ONE) -> str | None:
    """None when N parallel `workers` (`what`: ranks, threads, devices) can beat 1 here, else why not: the CPU time
    this process may use (its budget) or, given a measured `load`, what other programs left free. `unread`: what
    that load leaves unreadable, as the refusal names it (a comparison of two N-worker setups names its own)."""
    if workers < 2:
        return None
    budget = budget or hardware.cpu_budget()
    if budget.cpus < 1.5:
        share = "one CPU's time" if budget.cpus >= 1 - 1e-9 else f"the time of {hardware.cpus_text(budget.cpus)}"
        return (f"this notebook may use {hardware.cpus_text(budget.cpus)} ({budget.source}): {workers} {what} "
                f"share {share}, so " + ("they cannot beat one" if unread == UNREAD_OVER_ONE else
                                         f"{unread} can be read from this run"))
    if load is not None:
        free = min(budget.cpus, load.cores - load.others - load.steal)
        if free < 1.5:
            # others' CPU is a mean over the window, not a cap: say the measured mean, never a share the workers had
            # all along (learner s10a: "2 threads share the 1.2 left" beside rates 1.69x apart)
            return (f"other programs used {load.others + load.steal:.1f} of {load.cores} cores on average over the "
                    f"{window_text(load.seconds)} this measured, {max(free, 0):.1f} free on average: too few for "
                    f"{workers} {what} to run side by side all along, so {unread} can be read from this run")
    return None


_WINDOWS: list[Load] = []  # the measuring windows since the last take()
_NOT_MEASURING = [0]  # > 0: inside not_measuring(), whose windows are no measurement


@contextlib.contextmanager
def measuring():
    """Count the block as a measurement: what else used the machine meanwhile is added to what take() reports."""
    first = sample()
    try:
        yield
    finally:
        last = sample()
        if first is not None and last is not None and not _NOT_MEASURING[0]:
            _WINDOWS.append(between(first, last))


@contextlib.contextmanager
def not_measuring():
    """A block that measures nothing (a self-check's ranks): the launches in it add no window to what take() reports."""
    _NOT_MEASURING[0] += 1
    try:
        yield
    finally:
        _NOT_MEASURING[0] -= 1


def last_window() -> Load | None:
    """The machine's Load over the latest measuring window alone (e.g. one launch), None if there is none: the
    conditions of one measurement, for every line that reads it (a summary later reuses it, not a wider mean)."""
    return _WINDOWS[-1] if _WINDOWS else None


def taken(reset: bool = False) -> Load | None:
    """The machine's Load over every measuring window since the last reset (None: none, or no /proc here)."""
    windows = list(_WINDOWS)
    if reset:
        _WINDOWS.clear()
    return mean_load(windows)


def mean_load(windows) -> Load | None:
    """The machine's Load over `windows` (Loads, e.g. last_window() after each of one measurement's parts), weighted
    by their seconds; None where there is none: the conditions of that one measurement, not of every window since."""
    windows = [w for w in windows if w is not None]
    if not windows:
        return None
    seconds = sum(w.seconds for w in windows)
    mean = lambda name: sum(getattr(w, name) * w.seconds for w in windows) / seconds  # noqa: E731
    quota = next((w for w in reversed(windows) if w.quota_cpus is not None), None)
    return Load(seconds, windows[0].cores, mean("own"), mean("others"), mean("steal"),
                quota.quota_cpus if quota else None, mean("throttled_share") if quota else 0.0,
                quota.quota_source if quota else "cgroup quota")


# ---- intra-op threads that fit the CPU left free by classmates ------------------------------------------------------

FREE_SLACK = 0.25  # others' use below a quarter of a core (a browser, the Jupyter server) does not cost a thread


def _free(seconds: float, budget: hardware.CpuBudget) -> tuple[int, Load | None, float | None]:
    """(threads, the load measured over `seconds`, the CPUs it left free): free_cpus' decision and what it rests on."""
    first = sample()
    time.sleep(seconds)
    last = sample()
    if first is None or last is None:  # no /proc: the budget is all there is to go by
        return budget.whole(), None, None
    load = between(first, last)
    mask = next((s.cpus for s in budget.sources if s.name == hardware.MASK), float(load.cores))
    free = min(mask, load.cores) - load.others - load.steal
    return max(1, min(budget.whole(), math.floor(free + FREE_SLACK))), load, max(0.0, free)


def free_cpus(seconds: float = 0.3, budget: hardware.CpuBudget | None = None) -> int:
    """Whole CPUs free for this process now: its cores minus what other programs used over `seconds` (read from
    /proc/stat), rounded down (FREE_SLACK forgiven), at least 1, at most its budget (cpu_budget().whole())."""
    return _free(seconds, budget or hardware.cpu_budget())[0]


def fit_threads(seconds: float = 0.3, budget: hardware.CpuBudget | None = None) -> str:
    """Set torch's intra-op threads to free_cpus() (a thread whose core another program holds makes every parallel
    operation wait for it); returns the decision in words."""
    import torch

    budget = budget or hardware.cpu_budget()
    threads, load, free = _free(seconds, budget)
    torch.set_num_threads(threads)
    if load is None or free is None:
        return f"torch intra-op threads: {threads} (this notebook may use {budget.describe()})"
    used = round(load.others + load.steal, 1)
    joint = "but" if used else "and"  # 'but other programs used 0.0' read oddly
    return textwrap.fill(  # at 100 columns, later lines indented (learners: one line of 183 characters)
        f"torch intra-op threads: {threads}, one per CPU free now: this notebook may use {budget.describe()}, {joint} "
        f"other programs used {load.others + load.steal:.1f} of {load.cores} cores while it looked, leaving "
        f"{free:.1f} free" + (" (at least 1 thread runs)" if free + FREE_SLACK < 1 else ""), 100,
        subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
