"""Slurm's accounting (sacct): whether it keeps records here, jobs' recorded states and names once settled, and
their elapsed and CPU time (what seff divides)."""
from __future__ import annotations

import re
import time

from .cluster import command, seconds
from .jobs import DONE_STATES


def accounting() -> str | None:
    """None when sacct reads this cluster's job records; else why not, in one sentence."""
    try:
        command(["sacct", "-n", "-X", "-j", "1"])
    except RuntimeError as exc:
        if "disabled" in str(exc):
            return ("sacct: this cluster keeps no job records (accounting storage is disabled: `make cluster` starts "
                    "slurmdbd where Debian's mariadb-server and slurmdbd are installed)")
        return f"sacct does not answer here: {exc}"
    return None


def sacct_states(job_ids) -> dict[str, str]:
    """The job lines' states in sacct (the last record of a requeued job), job id -> state."""
    out = command(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(map(str, job_ids))])
    return {job: state.split()[0] for job, state in (line.split("|") for line in out.splitlines() if "|" in line)}


def controller_names(job_ids) -> dict[str, str]:
    """job id -> its name as slurmctld knows it (while it remembers the job: MinJobAge, 5 minutes by default)."""
    names = {}
    for job in job_ids:
        try:
            found = re.search(r"\bJobName=(\S+)", command(["scontrol", "show", "job", "-o", str(job)]))
        except RuntimeError:  # forgotten already: sacct's name is the only one
            continue
        if found:
            names[str(job)] = found.group(1)
    return names


def sacct_names(job_ids) -> dict[str, str]:
    """job id -> the job's name in sacct."""
    out = command(["sacct", "-n", "-X", "-P", "-o", "JobID,JobName", "-j", ",".join(map(str, job_ids))])
    return {job: name for job, name in (line.split("|", 1) for line in out.splitlines() if "|" in line)}


def settled(job_ids, timeout: float = 15.0, poll: float = 0.3) -> dict[str, str]:
    """Wait until sacct records every job as ended, under its own name (slurmdbd lags a moment behind slurmctld,
    and until it has the job's full record sacct may show a placeholder name such as 'allocation'); their states."""
    deadline = time.monotonic() + timeout
    names = controller_names(job_ids)
    while True:
        states = sacct_states(job_ids)
        ended = all(states.get(str(j), "").startswith(DONE_STATES) for j in job_ids)
        recorded = sacct_names(job_ids) if ended and names else {}
        if (ended and all(recorded.get(job) == name for job, name in names.items())) or time.monotonic() > deadline:
            return states
        time.sleep(poll)


def usage(job_ids, timeout: float = 15.0, poll: float = 0.3) -> dict[str, tuple[float, float, int]]:
    """job id -> (elapsed s, CPU s, CPUs) from sacct, once the CPU time of every job is recorded (it arrives after the
    job's end state): what `seff` divides."""
    deadline = time.monotonic() + timeout
    while True:
        # without -X: the job's own line then sums its steps' CPU time (with -X it is the allocation's alone, 0)
        out = command(["sacct", "-n", "-P", "-o", "JobID,Elapsed,TotalCPU,AllocCPUS", "-j", ",".join(map(str, job_ids))])
        found = {job: (seconds(elapsed), seconds(cpu), int(cpus)) for job, elapsed, cpu, cpus in
                 (line.split("|") for line in out.splitlines() if line.count("|") == 3) if "." not in job}
        if (len(found) == len(job_ids) and all(v[1] > 0 for v in found.values())) or time.monotonic() > deadline:
            return found
        time.sleep(poll)


LOW_EFFICIENCY = 0.9  # under it, a job paid for core time it did not use (a common target: above 90 %)


def efficiency_reading(used: dict[str, tuple[float, float, int]], busy: str | None,
                       rounded: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What the chain's CPU efficiencies say, read from them: above 100 % (more cores than given; for a job in
    `rounded`, whose elapsed time is sacct's whole seconds, that rounding can do it), and the busy machine named as
    a cause only for a job that read under LOW_EFFICIENCY (used: job -> (elapsed s, CPU s, CPUs)). Lines of at most
    100 columns."""
    from ....measure.lines import wrap
    efficiency = {job: cpu / max(1e-3, elapsed * cpus) for job, (elapsed, cpu, cpus) in used.items()}
    lines = []
    over = [job for job, e in efficiency.items() if e > 1 and job not in rounded]
    if over:
        lines.append(f"above 100 % (job(s) {', '.join(over)}): more CPU time than elapsed time x CPUs, so the job's "
                     "processes ran on more cores than it was given (a cluster that binds tasks to their cores stops "
                     "that)")
    whole = [job for job, e in efficiency.items() if e > 1 and job in rounded]
    if whole:
        lines.append(f"above 100 % (job(s) {', '.join(whole)}): no time of the batch script's own, so the elapsed time "
                     "is sacct's whole seconds, which can read a job of a few seconds short")
    low = [job for job, e in efficiency.items() if e < LOW_EFFICIENCY]
    if not busy:
        lines.append("the machine was quiet while the chain ran: the elapsed time is the job's own")
    elif low:
        lines.append(f"while the chain ran, {busy}: elapsed time includes waiting for a core, "
                     f"which can explain the efficiency under {LOW_EFFICIENCY:.0%} of job(s) {', '.join(low)}")
    else:
        lines.append(f"while the chain ran, {busy}; still no job read under {LOW_EFFICIENCY:.0%}: "
                     "each got a core when it needed one")
    return [wrap(line) for line in lines]
