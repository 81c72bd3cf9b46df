"""All-reduce sweeps: the file a lab saves and lab 10 reads, and the flags on their figures."""
from __future__ import annotations

import math
from pathlib import Path

from .. import detectors
from ..compare import max_abs_diff
from ..measure import AllReduceSweep, Machine, store
from ..measure.store import SWEEPS_JSON


SWEEP_MAX_AGE_S = 6 * 3600


def save_allreduce(lab: str, sizes, seconds, spreads, devices: int, backend: str, directory=None,
                   busy_cores: tuple[float, int] | None = None) -> Path:
    """Keep an all-reduce sweep (message bytes, median seconds, spreads) in the results store for another lab;
    `busy_cores`: (others' mean cores, cores) over its window, so the lab that reuses it reads its flags' cause."""
    others, cores = busy_cores if busy_cores is not None else (None, 0)
    return store(directory).append(AllReduceSweep(lab, backend, devices, tuple(int(n) for n in sizes),
                                         tuple(float(t) for t in seconds), tuple(float(v) for v in spreads),
                                         others=None if others is None else float(others), cores=int(cores)))


def recent_allreduce(devices: int, backend: str, directory=None, max_age_s: float = SWEEP_MAX_AGE_S) -> dict | None:
    """The newest all-reduce sweep of this machine with these ranks and backend, if it is recent enough; else None."""
    import datetime as _dt

    machine, now = Machine.here(), _dt.datetime.now(_dt.timezone.utc)
    fits = [s for s in store(directory).rows("sweeps") if s.host == machine.host and s.cpu_model == machine.cpu_model
            and s.devices == devices and s.backend == backend
            and (now - _dt.datetime.fromisoformat(s.timestamp)).total_seconds() <= max_age_s]
    newest = max(fits, key=lambda s: s.timestamp) if fits else None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(newest).items()} if newest else None


def no_sweep(devices: int, backend: str, directory=None, labs=()) -> str:
    """Why recent_allreduce found no sweep of lab 06's for these ranks and backend here, in words; `labs`: the labs
    whose results rows were found (lab 06's rows copied without its sweep file is the usual case)."""
    folder = store(directory)
    sweeps = [s for s in folder.rows("sweeps") if s.lab == "06"]
    if not sweeps:
        if "06" in labs:
            return (f"lab 06's rows are here but not its sweep: the sweep is {SWEEPS_JSON}, not a CSV; copy "
                    f"it from lab 06's results folder into {folder.directory.name}/ beside its lab06.csv")
        return "lab 06 has recorded no sweep in this results folder"
    machine = Machine.here()
    if not any(s.host == machine.host and s.cpu_model == machine.cpu_model for s in sweeps):
        return f"lab 06's sweep in {SWEEPS_JSON} was measured on another machine"
    if not any(s.devices == devices and s.backend == backend for s in sweeps):
        return f"lab 06's sweep of this machine used other ranks or another backend than {devices} {backend} ranks"
    return f"lab 06's sweep of this machine is older than {SWEEP_MAX_AGE_S / 3600:g} hours"


HALF_THE_TIME = 0.5  # a larger message whose median took less than this share of a smaller one's: flagged, whatever
#                      the spreads (a median of all-reduces on a busy machine scatters, but not by 2x)


def kib(nbytes: float) -> str:
    """A message size as the all-reduce tables print it: '4 KiB', '1024 KiB'."""
    return f"{nbytes / 1024:g} KiB"


# what moves a small all-reduce's median on a quiet machine: theory, said where the load cannot explain a flag
WAKE_UP = ("a small all-reduce's time is mostly the ranks waking each other up, which moves up to 10x between runs "
           "with where the scheduler puts them, not with the message size")  # one clause


def allreduce_flags(sizes, seconds, spreads=None, busy_cores=None) -> list[list[detectors.Flag]]:
    """Per message size, its flags (detectors.more_work_less_time, the one rule every lab applies to more work in
    less time): a larger message took more than 10 % less time beyond the spreads of both medians' repeats, or less
    than HALF_THE_TIME of it whatever the spreads (repeats this scattered would otherwise excuse any median).
    `busy_cores`: (others' mean cores, cores) over the sweep's window: the flags' cause fits that load (WAKE_UP where
    it is too light to explain them)."""
    spreads = list(spreads) if spreads is not None else [None] * len(sizes)
    result = []
    for i, (nbytes, s, spread) in enumerate(zip(sizes, seconds, spreads)):
        said = []
        for m, t, sp in zip(sizes[i + 1:], seconds[i + 1:], spreads[i + 1:]):
            said = (detectors.more_work_less_time(nbytes, s, m, t, small_spread=spread, large_spread=sp, show=kib,
                                                  busy_cores=busy_cores, quiet_cause=WAKE_UP)
                    or detectors.more_work_less_time(nbytes, s, m, t, tolerance=1 - HALF_THE_TIME, show=kib,
                                                     busy_cores=busy_cores, quiet_cause=WAKE_UP))
            if said:
                break
        result.append(said)
    return result


SUPERLINEAR_MARGIN = 1.2  # a batch k times larger may take up to 1.2 k times longer before it is flagged


def batch_time_flags(small_batch: int, small_s: float, large_batch: int, large_s: float,
                     less_time_cause: str | None = None) -> list[detectors.Flag]:
    """A warning when a larger batch took far more than proportionally longer than a smaller one, or less time
    (`less_time_cause`: what the caller measured to be off, for the less-time flag)."""
    ratio, work = large_s / small_s, large_batch / small_batch
    if ratio > SUPERLINEAR_MARGIN * work:
        return [detectors.note(f"batch {large_batch} took {ratio:.1f}x the time of batch {small_batch} for {work:g}x the "
                               "images: more than proportional, so one of the two medians is off (a busy machine, or "
                               "the larger batch spilled out of the cache) and ratios built on them are suspect")]
    return detectors.more_work_less_time(small_batch, small_s, large_batch, large_s, what="images",
                                         cause=less_time_cause)


def step_shorter_than_compute(step_s: float, compute_s: float,
                              factor: float = detectors.CONDITION_FACTOR) -> list[detectors.Flag]:
    """[!] when a whole DDP step (its compute, then its all-reduce) took less time than one rank's compute alone,
    by more than `factor`: a tolerance for timing one in a launched process and the other in a kernel (the same
    allocator, lab_utils.allocator, but two processes timed at different moments, which the machine's load moves);
    more work cannot take less time, so one of the two medians is off and no ratio built on them is read."""
    if step_s <= 0 or compute_s <= 0 or step_s * factor >= compute_s:
        return []
    return [detectors.Flag(detectors.Kind.LESS_TIME, f"a whole DDP step ({step_s * 1e3:.2f} ms, compute and "
                           f"all-reduce) took less than one rank's compute alone ({compute_s * 1e3:.2f} ms), "
                           f"{compute_s / step_s:.1f}x less, beyond the {factor:g}x allowed for two processes (a "
                           "launched one, the kernel) timed apart: one of the two medians is off (a busy machine)")]


WAITED_FACTOR = 10.0  # the all-reduce in the step may take this many times its time alone (it waits for the slower
#                       rank) before the step's figure is that rank's lateness, not communication


def allreduce_disagreement(alone_s: float, in_step_s: float, factor: float = 2.0,
                           waited_factor: float = WAITED_FACTOR,
                           busy_cores: tuple[float, int] | None = None) -> list[detectors.Flag]:
    """A warning when the same all-reduce was faster inside a DDP step than alone, by more than `factor` (in the step
    it also waits for the slower rank, so it can take longer than alone, never much less); or slower in the step by
    more than `waited_factor`: then the step's figure measures how late the other rank was, not the communication.
    `busy_cores` (others' mean cores, cores): where that load cannot explain the first gap, it is the ranks' wake-up
    (alone, each rank idles between messages; in the step both cores are busy): a note, and the step's figure stands."""
    if in_step_s <= 0 or alone_s <= 0:
        return []
    if alone_s / in_step_s > factor and busy_cores is not None and (
            detectors.load_reach(*busy_cores) < alone_s / in_step_s):
        return [detectors.note(f"alone it took {alone_s / in_step_s:.1f}x the step's figure, with other programs on "
                               f"{busy_cores[0]:.1f} of {busy_cores[1]:g} cores, too few to explain it: alone, each "
                               "rank idles between messages and waits for its core to wake (the wake-up that moves lab 06's small all-reduces); in the "
                               "step both ranks are busy, so the step's figure is the one a step pays")]
    if alone_s / in_step_s > factor:
        return detectors.disagree(alone_s, in_step_s, factor=factor, what="the same gradients' all-reduce",
                                  second="in the DDP step",
                                  why=" (in the step it also waits for the slower rank, so it cannot be faster than "
                                      "alone: one of the two was disturbed, rerun on a quiet machine)")
    if in_step_s / alone_s > waited_factor:
        return detectors.disagree(alone_s, in_step_s, factor=waited_factor, what="the same gradients' all-reduce",
                                  second="in the DDP step",
                                  why=f" (more than {waited_factor:g}x: in the step it waited for a rank that was "
                                      "descheduled, so that figure is the other rank's lateness on a busy machine, "
                                      "not communication, and a communication / compute ratio built on it says "
                                      "nothing)")
    return []


WAITING_SHOWN = 1.5  # the step's all-reduce this many times its time alone: the split into transfer and waiting is said


def allreduce_share(step_s: float, alone_s: float, in_step_s: float) -> str:
    """The gradient all-reduce's share of a DDP step, split where the step's figure is well above the all-reduce alone:
    the time alone is the transfer, the rest of the step's figure waiting for the slower rank."""
    def part(seconds):
        return f"{seconds * 1e3:.2f} ms ({seconds / step_s * 100:.0f} %)"

    whole = f"a step took {step_s * 1e3:.2f} ms (median), of which {part(in_step_s)} in the gradient all-reduce"
    if in_step_s < alone_s / 1.1:  # below its time alone: two launches' figures, no waiting to split off
        return (f"{whole}: {alone_s / in_step_s:.1f}x below its time alone ({alone_s * 1e3:.2f} ms, another launch): "
                "no waiting for a slower rank shows, so all of it the transfer")
    if in_step_s <= WAITING_SHOWN * alone_s:
        return f"{whole}: within 1.5x of its time alone ({alone_s * 1e3:.2f} ms), so mostly the transfer"
    return (f"{whole}: {part(alone_s)} the transfer (its time alone, {in_step_s / alone_s:.1f}x less) and "
            f"{part(in_step_s - alone_s)} waiting for the slower rank, which more bandwidth would not shorten")


def noise_or_bug(reference, other, tolerance: float) -> str:
    """'identical', 'floating-point noise' (max difference within tolerance) or 'a real difference'."""
    diff = max_abs_diff(reference, other)
    if diff == 0.0:
        return "identical"
    return "floating-point noise" if diff <= tolerance else "a real difference"


def log2_sizes(smallest: int, largest: int) -> list[int]:
    """Powers of two from smallest to largest bytes."""
    return [2 ** k for k in range(int(math.log2(smallest)), int(math.log2(largest)) + 1)]
