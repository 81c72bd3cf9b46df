"""Offering load to a batcher: requests with timestamps, a Poisson load generator and bursts, one run of a batcher
under a load (`run_load`), and every batcher at every load in interleaved rounds (`interleaved_loads`)."""
from __future__ import annotations

import queue
import random
import statistics
import threading
import time
import traceback
from dataclasses import dataclass

from .... import conditions, measure
from .figures import LoadRun, LoadStats


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
    started_s: float | None = None  # when its batch's forward pass began (None: not stamped)

    def answer(self, output, now_s: float, batch_size: int, started_s: float | None = None) -> None:
        """Record the model's output for this request, answered at `now_s` in a batch of `batch_size` whose forward
        pass began at `started_s` (optional: it lets a run's end be told from a final batch's wait)."""
        self.output, self.batch_size, self.done_s, self.started_s = output, batch_size, now_s, started_s

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
