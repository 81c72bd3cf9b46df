"""Around lab 09's dynamic batcher: requests with timestamps, a Poisson load generator, latency percentiles,
interleaved load runs, reference implementations (batcher, worker pool) for the checks, tests and `bench inference`,
torch.compile helpers, plots (the benchmark and the GPU check live in lab_utils/instructor)."""
from __future__ import annotations

import contextlib
import math
import os
import queue
import random
import shutil
import statistics
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field

from ... import conditions, measure, spec

DEFAULT_SHAPE = (1, 28, 28)
SATURATED_SHARE = 0.9  # a run that answered less than this share of its offered load did not keep up
LATE_GENERATOR_MS = 1.0  # a load generator whose median delay is above this did not offer the load it was asked to


def wide_head_cnn(width: int = 2048, num_classes: int = 10) -> list[dict]:
    """The course CNN's two conv layers with a wide head: two dense layers of `width` (as in AlexNet/VGG)."""
    return [spec.conv2d(16), spec.maxpool2d(), spec.conv2d(32), spec.maxpool2d(), spec.flatten(),
            spec.dense(width), spec.dense(width), spec.dense(num_classes, activation=None)]


def build_model(width: int = 2048, image_shape=DEFAULT_SHAPE, seed: int = 0, device: str = "cpu"):
    """The wide-head CNN in eval mode on `device`; the same seed gives the same weights in every process."""
    return spec.build_torch(wide_head_cnn(width), image_shape, seed=seed).eval().to(device)


def request_images(n: int = 256, image_shape=DEFAULT_SHAPE, seed: int = 0):
    """`n` procedural images as one float32 tensor (N, C, H, W); requests take one image each."""
    import torch

    from ... import data

    return torch.from_numpy(data.synthetic_images(n, image_shape=image_shape, seed=seed)[0])


# ---- requests and the load generator ------------------------------------------------------------------------------

@dataclass(eq=False)
class Request:
    """One inference request: one image, when it arrived, and once answered: when, with what (or which error)."""

    id: int
    image: object
    arrival_s: float
    done_s: float | None = None
    output: object = None
    error: str | None = None
    batch_size: int = 0

    def answer(self, output, now_s: float, batch_size: int) -> None:
        """Record the model's output for this request, answered at `now_s` in a batch of `batch_size`."""
        self.output, self.batch_size, self.done_s = output, batch_size, now_s

    def fail(self, message: str, now_s: float) -> None:
        """Answer this request with an error instead of an output."""
        self.error, self.done_s = message, now_s


def poisson_arrivals(rate_rps: float, duration_s: float, seed: int = 0) -> list[float]:
    """Arrival times (s from the start) of a Poisson process: independent requests at `rate_rps` on average."""
    if not rate_rps > 0 or not duration_s > 0:
        raise ValueError(f"need a positive rate and duration, got rate_rps={rate_rps!r}, duration_s={duration_s!r}")
    rng, times = random.Random(seed), []
    t = rng.expovariate(rate_rps)
    while t < duration_s:
        times.append(t)
        t += rng.expovariate(rate_rps)
    if not times:
        raise ValueError(f"{rate_rps} requests/s for {duration_s} s gave no request; raise the rate or the duration")
    return times


def burst(n: int) -> list[float]:
    """`n` requests that all arrive at once: an offered load above any server's capacity."""
    if n < 1:
        raise ValueError(f"a burst needs at least one request, got n={n}")
    return [0.0] * n


def _capture_errors(batcher, requests, stop, errors: list) -> None:
    """Thread body: run the batcher; keep its exception (with traceback) instead of printing it to stderr."""
    try:
        batcher(requests, stop)
    except BaseException:  # the batcher is the learner's code: whatever it raises is the result
        errors.append(traceback.format_exc())


def _next_unanswered(requests, start: int) -> int:
    while start < len(requests) and requests[start].done_s is not None:
        start += 1
    return start


def run_load(batcher, arrivals, images, *, label: str = "", bad: dict | None = None, drain_s: float = 0.3,
             stop_timeout_s: float = 10.0, offered_rps: float | None = None) -> "LoadRun":
    """Run `batcher(requests, stop)` in a thread, send it one request per arrival time; returns what it recorded."""
    if not callable(batcher):
        raise TypeError(f"batcher must be a function batcher(requests, stop), got {type(batcher).__name__}")
    if not len(arrivals) or not len(images):
        raise ValueError(f"need at least one arrival and one image, got {len(arrivals)} and {len(images)}")
    with conditions.measuring():  # what else ran meanwhile is reported with the served rates
        return _run_load(batcher, arrivals, images, label, bad or {}, drain_s, stop_timeout_s, offered_rps)


def _run_load(batcher, arrivals, images, label, bad, drain_s, stop_timeout_s, offered_rps) -> "LoadRun":
    requests: queue.Queue = queue.Queue()
    stop, errors, made = threading.Event(), list[str](), []
    thread = threading.Thread(target=_capture_errors, args=(batcher, requests, stop, errors), name="batcher", daemon=True)
    thread.start()
    lags = []
    start = time.perf_counter()
    for i, offset in enumerate(arrivals):
        target = start + offset
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        lags.append(time.perf_counter() - target)
        # stamped with its scheduled arrival, so a late load generator shows up as latency, as for a real client;
        # `bad` maps a request index to a replacement image
        request = Request(i, bad.get(i, images[i % len(images)]), target)
        made.append(request)
        requests.put(request)
    # `drain_s` to answer what is queued, then `stop`: what is left counts as unanswered
    deadline, waiting = time.perf_counter() + drain_s, 0
    while time.perf_counter() < deadline and thread.is_alive():
        waiting = _next_unanswered(made, waiting)
        if waiting == len(made):
            break
        time.sleep(0.002)
    stop.set()
    thread.join(stop_timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"the batcher did not return within {stop_timeout_s:g} s after `stop` was set: its loop must "
                           "check stop.is_set() and must not block forever (use a timeout when it waits on the queue)")
    # None for a burst (every arrival at 0); `offered_rps` labels the run with the rate asked for, if given
    arrived_rps = len(arrivals) / arrivals[-1] if arrivals[-1] > 0 else None
    return LoadRun(label, made, start, time.perf_counter(), offered_rps or arrived_rps, arrived_rps,
                   statistics.median(lags), max(lags), errors[0] if errors else None)


# ---- what a run measured --------------------------------------------------------------------------------------------

def latency_percentiles(arrivals_s, done_s, end_s: float, percentiles=(50, 95, 99)) -> list[float]:
    """Latency percentiles in ms, nearest rank; a request never answered (done None) counts as waiting until end_s."""
    if not len(arrivals_s) or len(arrivals_s) != len(done_s):
        raise ValueError(f"need one done time per arrival, got {len(arrivals_s)} arrivals and {len(done_s)} done times")
    latencies = sorted((end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s))
    n = len(latencies)
    return [1e3 * latencies[max(0, math.ceil(p / 100 * n) - 1)] for p in percentiles]


@dataclass(frozen=True)
class LoadSummary:
    """One load run in numbers: offered and achieved load, latency percentiles (ms), batch sizes, what went wrong."""

    label: str
    offered_rps: float | None  # the rate asked for
    arrived_rps: float | None  # the rate at which requests really arrived (a Poisson count varies around the rate)
    achieved_rps: float
    requests: int
    answered: int
    failed: int
    unanswered: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_batch: float
    lag_ms: float
    batcher_error: str | None = None

    @property
    def saturated(self) -> bool:
        """True when the server did not keep up: achieved load short of the arrived one, or many left unanswered."""
        behind = self.arrived_rps is not None and self.achieved_rps < SATURATED_SHARE * self.arrived_rps
        return behind or self.unanswered > (1 - SATURATED_SHARE) * self.requests

    def text(self) -> str:
        """One line for a table."""
        offered = f"{self.offered_rps:7.0f}" if self.offered_rps else "  burst"
        more = ">=" if self.unanswered else "  "
        line = (f"{self.label:<16} offered {offered}/s  achieved {self.achieved_rps:7.0f}/s  p50 {more}{self.p50_ms:7.1f}  "
                f"p95 {more}{self.p95_ms:7.1f}  p99 {more}{self.p99_ms:7.1f} ms  mean batch {self.mean_batch:5.1f}")
        if self.unanswered or self.failed:
            line += f"  ({self.unanswered} unanswered, {self.failed} errors)"
        return line


@dataclass
class LoadRun:
    """Everything one run_load recorded."""

    label: str
    requests: list
    start_s: float
    end_s: float
    offered_rps: float | None
    arrived_rps: float | None
    lag_median_s: float
    lag_max_s: float
    batcher_error: str | None

    def summary(self) -> LoadSummary:
        """Achieved requests/s (answered without error, over start -> last answer), percentiles, batch sizes."""
        reqs = self.requests
        ok = [r for r in reqs if r.done_s is not None and r.error is None]
        failed = sum(r.error is not None for r in reqs)
        unanswered = sum(r.done_s is None for r in reqs)
        last = self.end_s if unanswered else max(r.done_s for r in reqs)
        p50, p95, p99 = latency_percentiles([r.arrival_s for r in reqs], [r.done_s for r in reqs], self.end_s)
        batches = [r.batch_size for r in ok]
        mean_batch = len(batches) / sum(1 / b for b in batches) if batches else 0.0  # per batch, not per request
        return LoadSummary(self.label, self.offered_rps, self.arrived_rps, len(ok) / (last - self.start_s), len(reqs),
                           len(ok), failed, unanswered, p50, p95, p99, mean_batch, 1e3 * self.lag_median_s,
                           self.batcher_error.strip().splitlines()[-1] if self.batcher_error else None)


BUSY_SHARE = 0.9  # forward passes that took this share of a run or more: the server computed nearly all the time


def time_split(run: LoadRun, passes) -> str:
    """A load run's time split: its forward passes, `passes` ((requests, seconds) each), against the rest of the run
    (collecting, waiting, answering), from its start to its last answer; a saturated run says which side lost the race:
    computing nearly all the time (its batches were too small to answer the load) or not (its time went elsewhere)."""
    stats, passes = run.summary(), list(passes)
    answered = [r.done_s for r in run.requests if r.done_s is not None]
    span = (run.end_s if stats.unanswered or not answered else max(answered)) - run.start_s
    served, busy = sum(n for n, _ in passes), sum(s for _, s in passes)
    share, computing_rps, mean = busy / span, served / busy if busy else 0.0, served / max(1, len(passes))
    text = (f"{len(passes)} forward passes of {mean:.1f} requests ({busy / max(1, len(passes)) * 1e3:.2f} ms each), "
            f"{share:.0%} of the run; {computing_rps:.0f} requests/s while they ran; answered {stats.achieved_rps:.0f}/s")
    if not stats.saturated:
        return text
    if share >= BUSY_SHARE:
        return (text + f"; saturated with its forward passes running {share:.0%} of the time: batches of {mean:.1f} "
                f"answer {computing_rps:.0f}/s at most, below the load")
    return (text + f"; saturated while its forward passes ran only {share:.0%} of the time: the rest went outside them, "
            "to collecting batches (with a max_wait_ms, waiting for requests), answering, or a thread waiting for a core")


@dataclass(frozen=True)
class LoadStats:
    """Medians over interleaved repeats of one (server, load) pair, and how far the repeats spread."""

    label: str
    load: str
    offered_rps: float | None
    arrived_rps: float | None
    achieved_rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_batch: float
    saturated: bool
    rounds: int
    spread_rps: float
    spread_p99: float
    runs: tuple = field(repr=False, default=())

    @classmethod
    def of(cls, label: str, load: str, runs) -> "LoadStats":
        med = lambda name: statistics.median(getattr(r, name) for r in runs)  # noqa: E731
        arrived = med("arrived_rps") if runs[0].arrived_rps else None
        return cls(label, load, runs[0].offered_rps, arrived, med("achieved_rps"), med("p50_ms"),
                   med("p95_ms"), med("p99_ms"), med("mean_batch"), any(r.saturated for r in runs), len(runs),
                   measure.spread(r.achieved_rps for r in runs), measure.spread(r.p99_ms for r in runs), tuple(runs))

    @property
    def flags(self) -> list[str]:
        """Warnings about these figures: a load generator that fell behind its schedule (noise is the table's line)."""
        flags = []
        lag = max((r.lag_ms for r in self.runs), default=0.0)
        if lag > LATE_GENERATOR_MS:
            flags.append(f"the load generator sent requests {lag:.1f} ms late (median): the machine is busy, and that "
                         "delay counts as latency")
        return flags

    def text(self) -> str:
        """One line for a table; >= marks a percentile that is a lower bound (requests were left unanswered)."""
        bound = ">=" if any(r.unanswered for r in self.runs) else "  "
        return measure.flagged(
            f"{self.label:<14} {self.load:<5} offered {self.offered_rps or 0:7.0f}/s  arrived {self.arrived_rps or 0:7.0f}/s  "
            f"achieved {self.achieved_rps:7.0f}/s "
            f"(spread {self.spread_rps:4.0%})  p50 {bound}{self.p50_ms:6.1f}  p95 {bound}{self.p95_ms:6.1f}  "
            f"p99 {bound}{self.p99_ms:6.1f} ms "
            f"(spread {self.spread_p99:4.0%})  batch {self.mean_batch:5.1f}" + ("  SATURATED" if self.saturated else ""),
            self.flags)


def interleaved_loads(batchers: dict, loads_rps: dict, *, images, rounds: int = 2, duration_s: float = 0.6,
                      seed: int = 0, drain_s: float = 0.3) -> dict:
    """Every batcher at every offered load, `rounds` times; returns {(batcher label, load label): LoadStats}."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    pairs = [(b, l) for l in loads_rps for b in batchers]
    runs: dict[tuple, list] = {pair: [] for pair in pairs}
    for round_, (b, l) in measure.numbered_rounds(pairs, rounds):  # no batcher always runs first
        # one seed per round: every batcher gets the same arrival times within a round
        arrivals = poisson_arrivals(loads_rps[l], duration_s, seed=seed + round_)
        runs[(b, l)].append(run_load(batchers[b], arrivals, images, label=b, drain_s=drain_s,
                                     offered_rps=loads_rps[l]).summary())
    return {pair: LoadStats.of(pair[0], pair[1], r) for pair, r in runs.items()}


# ---- reference solutions of lab 09's exercises (the batcher and the worker pool are its notebook's: lessons.lab09) --

def collect(first, requests, max_batch: int, max_wait_s: float) -> list:
    """The flush rule: `first` plus queued requests until max_batch are held or max_wait_s has passed; the batch."""
    batch = [first]
    deadline = time.perf_counter() + max_wait_s
    while len(batch) < max_batch:
        remaining = deadline - time.perf_counter()
        try:  # max_wait_s = 0 (or time up): take only what is already waiting
            batch.append(requests.get(timeout=remaining) if remaining > 0 else requests.get_nowait())
        except queue.Empty:
            break
    return batch


# ---- torch.compile helpers --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def fresh_compile_cache():
    """torch.compile's on-disk cache in a new, empty folder for the block (a cold start); yields the folder."""
    folder = tempfile.mkdtemp(prefix="lab09-inductor-")
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
        shutil.rmtree(folder, ignore_errors=True)


def compile_counts() -> dict[str, int]:
    """torch.compile's work in this process so far: graphs traced, code generated anew, code loaded from the cache."""
    from torch._dynamo.utils import counters  # no public counter exists; this is what torch's own tests read

    return {"graphs": int(counters["stats"]["unique_graphs"]),  # recompilations included
            "generated": int(counters["inductor"]["fxgraph_cache_miss"]),
            "from_cache": int(counters["inductor"]["fxgraph_cache_hit"])}


def compile_unavailable() -> str | None:
    """Why torch.compile cannot run here (its CPU code generator needs a C++ compiler), or None."""
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        return ("torch.compile's CPU backend (inductor) generates C++ and needs a C++ compiler (g++ or clang++); "
                "none is installed")
    return None


# ---- plots ------------------------------------------------------------------------------------------------------------

def plot_batch_sweep(batch_sizes, seconds, axes=None, title: str = ""):
    """Latency per batch and samples/s against the batch size (two panels); returns the axes."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    axes = axes if axes is not None else plt.subplots(1, 2, figsize=(10, 3.4))[1]
    axes[0].plot(batch_sizes, [s * 1e3 for s in seconds], "o-")
    axes[0].set_ylabel("latency of one batch (ms)")
    axes[1].plot(batch_sizes, [b / s for b, s in zip(batch_sizes, seconds)], "o-", color="tab:green")
    axes[1].set_ylabel("throughput (samples/s)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
    axes[0].set_yscale("log")
    axes[0].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    if title:
        axes[0].figure.suptitle(title)
    return axes


def plot_latency_throughput(stats: dict, ax=None, percentile: str = "p99"):
    """One curve per server: the chosen latency percentile against achieved throughput, one point per offered load."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ax = ax or plt.subplots(figsize=(6.5, 4))[1]
    servers = list(dict.fromkeys(label for label, _ in stats))
    for label in servers:
        points = sorted((s for (b, _), s in stats.items() if b == label), key=lambda s: s.offered_rps or 0)
        ax.plot([s.achieved_rps for s in points], [getattr(s, f"{percentile}_ms") for s in points], "o-", label=label)
        for s in points:
            if s.saturated:
                ax.plot(s.achieved_rps, getattr(s, f"{percentile}_ms"), "x", color="black", ms=10)
    for offered in sorted({round(s.offered_rps) for s in stats.values() if s.offered_rps}):
        ax.axvline(offered, color="grey", lw=0.8, ls=":")
        ax.annotate(f"offered {offered}/s", (offered, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    rotation=90, ha="right", va="top", color="grey")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("achieved throughput (requests/s)")
    ax.set_ylabel(f"{percentile} latency (ms)")
    ax.set_title(f"{percentile} latency against throughput (x: saturated)")
    ax.legend(fontsize=8)
    return ax
