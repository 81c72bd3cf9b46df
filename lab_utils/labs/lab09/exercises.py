"""Lab 09: the batcher's flush rule, latency percentiles from timestamps, max_wait_ms for a latency budget."""
from __future__ import annotations

import math

from typing import Any

from ...exercises.core import ANY, Exercise, FROM_LESSON, Named, register

SETUP = "import math\nimport queue\nimport time\nimport numpy as np"


# ---- collect: the flush rule ------------------------------------------------------------------------------------------

COLLECT_PATIENCE_S = 2.0  # how long the check waits for collect before it feeds it enough to return
SPIN_CPU_SHARE = 0.1  # a blocking get uses ~0 % of a core while it waits; a loop spinning on get_nowait ~100 %


def _collect_cases(rng):
    return [{"kind": "full", "queued": rng.randint(8, 12), "max_batch": rng.randint(3, 6), "max_wait_s": 1.0},
            {"kind": "deadline", "queued": rng.randint(1, 3), "max_batch": 16, "max_wait_s": 0.1},
            # a request every 20 ms against a 100 ms deadline: a deadline reset by each request keeps the batch growing
            # even where a busy machine delays the feeder several times over
            {"kind": "stream", "every_s": 0.02, "n": 30, "max_batch": 64, "max_wait_s": rng.choice([0.1, 0.12])},
            {"kind": "zero", "queued": rng.randint(2, 5), "max_batch": 16, "max_wait_s": 0.0}]


def _feed(requests, first_id: int, n: int, every_s: float) -> None:
    import time

    for i in range(first_id, first_id + n):
        time.sleep(every_s)
        requests.put(i)


def _collect_one(collect, case) -> dict:
    """Run collect on one scripted queue in a thread; never hangs (a stuck collect is fed until it returns)."""
    import queue
    import threading
    import time

    requests: queue.Queue[int]
    box: dict[str, Any]
    requests, box = queue.Queue(), {}
    for i in range(1, case.get("queued", 0) + 1):
        requests.put(i)
    if case["kind"] == "stream":
        threading.Thread(target=_feed, args=(requests, 1, case["n"], case["every_s"]), daemon=True).start()

    def call():
        start, cpu_start = time.perf_counter(), time.thread_time()
        try:
            box["ids"] = [int(i) for i in collect(0, requests, case["max_batch"], case["max_wait_s"])]
        except NotImplementedError as exc:  # the exercise stub: re-raised below, outside the thread
            box["stub"] = exc
        except Exception as exc:  # the learner's code may raise anything
            box["error"] = f"{type(exc).__name__}: {exc}"
        box["elapsed_s"] = time.perf_counter() - start
        box["cpu_s"] = time.thread_time() - cpu_start  # CPU time of this thread alone: what waiting cost a core

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(COLLECT_PATIENCE_S)
    in_time = not worker.is_alive()
    if not in_time:
        for i in range(case["max_batch"] + 1):
            requests.put(1000 + i)
        worker.join(1.0)
    if "stub" in box:
        raise box["stub"]
    left: list[int] = []  # what collect left in the queue: a request taken and not returned is lost
    while case["kind"] != "stream" and in_time:
        try:
            left.append(int(requests.get_nowait()))
        except queue.Empty:
            break
    return {"ids": box.get("ids"), "error": box.get("error"), "elapsed_s": box.get("elapsed_s"), "in_time": in_time,
            "left": left, "cpu_s": box.get("cpu_s")}


def _collect_run(collect, cases):
    return [_collect_one(collect, case) for case in cases]


def _collect_expected(cases):
    """The batch each case must give (requests 0, 1, 2, ... in order), or None where arrivals race the deadline."""
    return [{"full": list(range(c["max_batch"])), "deadline": list(range(c.get("queued", 0) + 1)), "stream": None,
             "zero": list(range(min(c.get("queued", 0) + 1, c["max_batch"])))}[c["kind"]] for c in cases]


def spinning(got: dict) -> bool:
    """Whether collect kept a core busy while it waited (50 ms or more): its CPU time is a large share of its wall time."""
    waited = got.get("cpu_s") is not None and got.get("elapsed_s") is not None and got["elapsed_s"] >= 0.05
    return waited and got["cpu_s"] > SPIN_CPU_SHARE * got["elapsed_s"]


def _collect_judge(got, expected, cases):
    for g, right, case in zip(got, expected, cases):
        kind, wait, size = case["kind"], case["max_wait_s"], case["max_batch"]
        if not g["in_time"]:
            return 0.0, (f"collect did not return within {COLLECT_PATIENCE_S:g} s when fewer than max_batch requests "
                         f"came (max_wait_s={wait}): it waits for a full batch; stop at the deadline")
        if g["error"]:
            if "non-negative" in g["error"]:
                return 0.0, (f"with max_wait_s={wait} your collect raised {g['error']}: once the deadline has passed, "
                             "take only what is already waiting (get_nowait), never a negative timeout")
            return 0.0, f"your collect raised {g['error']}"
        ids, elapsed = g["ids"], g["elapsed_s"]
        if not ids or ids[0] != 0:
            return 0.0, "the batch must start with `first`, the request the batcher already holds"
        if ids != sorted(ids) or len(set(ids)) != len(ids):
            return 0.0, f"the batch holds requests {ids}: keep the queue's order, each request once"
        if len(ids) == size + 1:
            return 0.0, (f"collect returned {len(ids)} requests with max_batch={size}: a batch holds at most max_batch, "
                         "and `first` counts toward it; one too many: count `first` in the loop's bound and stop at "
                         "< max_batch, not <=")
        if len(ids) > size:
            return 0.0, f"collect returned {len(ids)} requests with max_batch={size}: a batch holds at most max_batch"
        if kind == "full":
            if len(ids) < size:
                return 0.0, f"{case['queued']} requests were waiting and max_batch={size}, but the batch holds {len(ids)}"
            if elapsed >= 0.5 * wait:
                return 0.0, (f"a full batch waited {elapsed:.2f} s: flush as soon as the batch holds max_batch "
                             "requests, without waiting for max_wait_s")
        elif kind == "deadline":
            if len(ids) != case["queued"] + 1:
                return 0.0, f"{case['queued']} requests were waiting besides `first`; the batch holds {len(ids)}"
            if elapsed < 0.8 * wait:
                return 0.0, (f"collect returned after {elapsed * 1e3:.0f} ms with max_wait_s={wait}: keep waiting for "
                             "more requests until max_wait_s has passed")
            if elapsed > wait + 0.9:
                return 0.0, f"collect returned after {elapsed:.2f} s with max_wait_s={wait}: stop at the deadline"
            if spinning(g):
                return 0.0, (f"collect waited {elapsed * 1e3:.0f} ms for requests that did not come and used "
                             f"{g['cpu_s'] * 1e3:.0f} ms of CPU time doing it: it spins (get_nowait in a loop) and "
                             "burns the core the load generator and the model need; block in "
                             "requests.get(timeout=deadline - now) instead")
        elif kind == "stream":
            if len(ids) == 1:
                return 0.0, (f"requests arrived every {case['every_s'] * 1e3:.0f} ms and max_wait_s={wait}, but the "
                             "batch holds only `first`: wait for more until the deadline")
            if len(ids) > 2 + round(wait / case["every_s"]) + 2:
                return 0.0, (f"requests arrived every {case['every_s'] * 1e3:.0f} ms and the batch grew to {len(ids)} "
                             f"in {elapsed:.2f} s with max_wait_s={wait}: the deadline moved with every request; "
                             "count max_wait_s from the start of collecting, once")
        lost = [i for i in range(1, case.get("queued", 0) + 1) if i not in ids and i not in g["left"]]
        if kind != "stream" and lost:
            return 0.0, (f"{case['queued']} requests were waiting and max_batch={size}: collect returned {ids} and "
                         f"request(s) {lost} are neither in the batch nor left in the queue, so they are never "
                         "answered: take a request from the queue only while the batch has room for it")
        if right is not None and ids != right:
            if kind == "zero" and len(ids) < len(right):  # stopped at the (already passed) deadline
                return 0.0, (f"with max_wait_s=0 and {case.get('queued', 0)} requests already waiting, the batch holds "
                             f"requests {ids}; expected {right}: a deadline that has passed ends the waiting, not the "
                             "taking: take what is already waiting (get_nowait until queue.Empty), up to max_batch")
            return 0.0, f"the batch holds requests {ids}; expected {right}"
        if kind == "zero":
            if elapsed > 0.2:
                return 0.0, f"with max_wait_s=0 collect took {elapsed:.2f} s: take what is waiting, do not wait"
            if len(ids) != case["queued"] + 1:
                return 0.0, (f"with max_wait_s=0 and {case['queued']} requests waiting the batch holds {len(ids)}: "
                             "take every request that is already waiting (up to max_batch)")
    return 1.0, "flushes at max_batch at once, or at the deadline counted from the start; max_wait_s=0 takes what waits"


def _collect_named(got, expected, cases):
    """_collect_judge, its messages that name the mistake and its fix marked Named (no general hint after them): all
    but a bare raised error and a batch compared with the expected one."""
    fraction, message = _collect_judge(got, expected, cases)
    generic = message.startswith("your collect raised") and ": once" not in message or "; expected" in message
    return fraction, message if fraction >= 1.0 or generic else Named(message)


COLLECT = Exercise("09", "collect", _collect_cases, _collect_run, _collect_expected, _collect_named,
                   "take requests until the batch holds max_batch or a deadline set once (start + max_wait_s) "
                   "passes; a queue.get timeout must never be negative", setup=SETUP,
                   shape=lambda right, cases: [dict.fromkeys(("ids", "error", "elapsed_s", "in_time", "left", "cpu_s"),
                                                             ANY)] * len(cases))


# ---- latency percentiles from timestamps ------------------------------------------------------------------------------

def _percentile_cases(rng):
    cases = []
    for n, missing in ((200, 6), (rng.randrange(60, 160), 0), (300, 9)):
        start = round(rng.uniform(100, 5000), 3)  # perf_counter-like clock: not zero at the start
        arrivals = sorted(start + rng.uniform(0, 2) for _ in range(n))
        done = [a + rng.lognormvariate(math.log(0.02), 0.8) for a in arrivals]  # answers come out of order
        end = max(done) + 0.05
        for i in rng.sample(range(n // 4), missing):  # early requests never answered: the longest waits
            done[i] = None
        cases.append({"arrivals_s": arrivals, "done_s": done, "end_s": end,
                      "percentiles": [50, 95, 99] if n % 2 else [50, 90, 99, 99.5]})
    return cases


def _percentile_run(latency_percentiles, cases):
    return [[float(v) for v in latency_percentiles(c["arrivals_s"], c["done_s"], c["end_s"], c["percentiles"])]
            for c in cases]


def _latencies(case, *, drop_missing=False, sort=True, pair=True, missing_as_zero=False) -> list[float]:
    arrivals, done = case["arrivals_s"], case["done_s"]
    if drop_missing:
        arrivals, done = zip(*[(a, d) for a, d in zip(arrivals, done) if d is not None])
    done = [(a if missing_as_zero else case["end_s"]) if d is None else d for a, d in zip(arrivals, done)]
    if not pair:
        arrivals, done = sorted(arrivals), sorted(done)
    values = [1e3 * (d - a) for a, d in zip(arrivals, done)]
    return sorted(values) if sort else values


def _nearest_rank(values, p) -> float:
    return values[max(0, math.ceil(p * len(values) / 100 - 1e-9) - 1)]


def _percentile_expected(cases):
    return [[_nearest_rank(_latencies(c), p) for p in c["percentiles"]] for c in cases]


def _accepted(values, percentiles) -> list[list[float]]:
    """The percentiles of sorted `values` by each accepted method: nearest rank, numpy's default (linear), and
    nearest rank with p / 100 * n a hair above an integer."""
    import numpy as np

    return [[_nearest_rank(values, p) for p in percentiles], [float(v) for v in np.percentile(values, percentiles)],
            [values[max(0, math.ceil(p / 100 * len(values)) - 1)] for p in percentiles]]


def _same(got, want) -> bool:
    return len(got) == len(want) and all(abs(g - w) <= 1e-6 * max(1.0, abs(w)) for g, w in zip(got, want))


def _percentile_judge(got, expected, cases):
    for g, e, c in zip(got, expected, cases):
        if len(g) != len(c["percentiles"]):
            return 0.0, f"return one latency per requested percentile ({len(c['percentiles'])}), got {len(g)}"
        values, ps = _latencies(c), c["percentiles"]
        if any(_same(g, method) for method in _accepted(values, ps)):  # the first is the reference, e
            continue
        named = _percentile_mistake(g, c, values, ps)
        if named:  # the mistake named, and its fix: no general hint after it
            return 0.0, Named(named)
        return 0.0, f"for percentiles {ps} expected about {[round(v, 2) for v in e]} ms, got {[round(v, 2) for v in g]}"
    return 1.0, "percentiles of done - arrival in ms, unanswered requests counted until end_s"


def _percentile_mistake(g, c, values, ps) -> str:
    """The learner's mistake, where `g` is what a known wrong answer gives (by any accepted percentile method); ''."""
    if any(_same(g, [v / 1e3 for v in method]) for method in _accepted(values, ps)):
        return ("your latencies are 1000x too small: they are in seconds (done - arrival, as the clock gives them); "
                "multiply by 1000 to return milliseconds")
    if any(_same(g, method) for method in _accepted(_latencies(c, drop_missing=True), ps)):
        return ("you left out the requests that were never answered (done is None): count each as waiting "
                "until end_s; dropping them hides exactly the slowest requests")
    if any(_same(g, method) for method in _accepted(_latencies(c, missing_as_zero=True), ps)):
        return ("you counted the requests never answered (done is None) as latency 0: each waited until end_s, "
                "so its latency is end_s - arrival, the longest of all, not the shortest")
    if _same(g, [_nearest_rank(_latencies(c, pair=False), p) for p in ps]):
        return ("you sorted the arrival and done times separately: answers come out of order, so pair each "
                "request's done time with its own arrival time, then sort the latencies")
    unsorted = _latencies(c, sort=False)
    if _same(g, [unsorted[max(0, math.ceil(p / 100 * len(unsorted)) - 1)] for p in ps]):
        return "you picked a rank from the unsorted latencies: sort them first"
    if _same(g, [values[min(len(values) - 1, int(p / 100 * len(values)))] for p in ps]):
        return ("one rank too high: the p-th percentile of n sorted latencies is the ceil(p/100 * n)-th "
                "smallest, at index ceil(p/100 * n) - 1")
    if _same(g, [sum(values) / len(values)] * len(ps)):
        return "that is the mean latency for every percentile: a percentile is a rank in the sorted latencies"
    return ""


LATENCY_PERCENTILES = Exercise(
    "09", "latency_percentiles", _percentile_cases, _percentile_run, _percentile_expected, _percentile_judge,
    "latency = done - arrival per request (end_s for a request never answered), in ms, sorted; the p-th percentile "
    "is the ceil(p/100 * n)-th smallest", setup=SETUP)


# ---- choosing max_wait_ms for a latency budget --------------------------------------------------------------------------

def _row(wait, offered, achieved, p50, p99) -> dict:
    return {"max_wait_ms": wait, "offered_rps": offered, "achieved_rps": achieved, "p50_ms": p50, "p99_ms": p99}


def _budget_cases(rng):
    load = float(rng.randrange(1500, 3000))
    jitter = lambda x: round(x * rng.uniform(0.95, 1.05), 2)  # noqa: E731
    normal = [_row(0, load, load * 0.99, jitter(6), jitter(30)), _row(1, load, load * 0.99, jitter(7), jitter(12)),
              _row(5, load, load * 0.99, jitter(11), jitter(20)), _row(20, load, load * 0.98, jitter(25), jitter(45))]
    boundary = [dict(r) for r in normal]
    behind = [_row(0, load, load * 0.99, 6.0, 14.0), _row(5, load, load * 0.99, 9.0, 18.0),
              _row(20, load, load * 0.6, 12.0, 19.0)]  # fell behind: served 60 % of the load
    p50_trap = [_row(0, load, load, 3.0, 9.0), _row(5, load, load, 8.0, 16.0), _row(20, load, load, 15.0, 60.0)]
    for rows in (behind, p50_trap):
        rng.shuffle(rows)
    # rows come in no particular order: here the largest fitting max_wait_ms is neither last (largest first) nor
    # first (smallest first) among the rows that fit
    descending = sorted(normal, key=lambda r: -r["max_wait_ms"])
    return [{"rows": descending, "budget_ms": 25.0},
            {"rows": normal, "budget_ms": 25.0},
            {"rows": boundary, "budget_ms": boundary[2]["p99_ms"]},  # exactly on the budget still fits
            {"rows": behind, "budget_ms": 20.0},
            {"rows": p50_trap, "budget_ms": 20.0},
            {"rows": descending, "budget_ms": 5.0}]  # nothing fits


def _budget_run(choose_max_wait, cases):
    out = []
    for c in cases:
        value = choose_max_wait([dict(r) for r in c["rows"]], c["budget_ms"])
        out.append(value if value is None or isinstance(value, dict) else float(value))  # a dict: the judge says why
    return out


def _largest(rows, keep) -> float | None:
    fits = [r["max_wait_ms"] for r in rows if keep(r)]
    return max(fits) if fits else None


KEEP_UP = 0.95  # the notebook's rule, in its text and solution: the grid's serving.SATURATED_SHARE (tested equal)


def _keeps_up(r) -> bool:
    return r["achieved_rps"] >= KEEP_UP * r["offered_rps"]


def _fitting_in_list_order(rows, budget_ms, strict: bool = False) -> list:
    return [r["max_wait_ms"] for r in rows
            if (r["p99_ms"] < budget_ms if strict else r["p99_ms"] <= budget_ms) and _keeps_up(r)]


# the wrong rules a learner plausibly writes, and what to say about each
_BUDGET_MISTAKES = (
    (lambda rows, b: _largest(rows, lambda r: r["p99_ms"] < b and _keeps_up(r)),
     "a p99 exactly on the budget meets it: compare with <=, not <"),
    (lambda rows, b: min(rows, key=lambda r: r["p99_ms"])["max_wait_ms"],
     "you chose the lowest p99 (and never None); choose the largest max_wait_ms that still meets the budget: larger "
     "batches cost less compute per request and leave room for bursts"),
    (lambda rows, b: _largest(rows, lambda r: r["p50_ms"] <= b and _keeps_up(r)),
     "you judged the budget on p50; the budget is on p99, the latency 99 % of requests stay under"),
    (lambda rows, b: _largest(rows, lambda r: r["p99_ms"] <= b),
     "a setting that served less than 95 % of the offered load fell behind, whatever its p99 says: require "
     "achieved_rps >= 0.95 x offered_rps"),
    (lambda rows, b: max(r["max_wait_ms"] for r in rows),
     "you chose the largest max_wait_ms without looking at the budget"),
    (lambda rows, b: min(_fitting_in_list_order(rows, b), default=None),
     "you chose the smallest max_wait_ms that fits; choose the largest: larger batches cost less compute per request "
     "and leave room for bursts"),
    (lambda rows, b: _largest(rows, lambda r: r["p99_ms"] <= b and r["achieved_rps"] >= r["offered_rps"]),
     "you required achieved_rps >= offered_rps: a load's measured rate scatters around the offered one, so a server "
     "that keeps up answers about as much, not always more; the rule allows 5 %: achieved_rps >= 0.95 x offered_rps"),
    (lambda rows, b: (_fitting_in_list_order(rows, b) or [None])[-1],
     "you took the last row that fits, in the order of the list; the rows come in no particular order: take the "
     "largest max_wait_ms among the rows that fit"),
    (lambda rows, b: (_fitting_in_list_order(rows, b) or [None])[0],
     "you took the first row that fits, in the order of the list; the rows come in no particular order: take the "
     "largest max_wait_ms among the rows that fit"),
    # both at once (learner s13r5h: told only of the order): each half named
    (lambda rows, b: (_fitting_in_list_order(rows, b, strict=True) or [None])[-1],
     "two mistakes: you took the last row that fits, in the order of the list (the rows come in no particular "
     "order: take the largest max_wait_ms among the rows that fit), and a p99 exactly on the budget meets it: "
     "compare with <=, not <"),
)


def _budget_judge(got, expected, cases):
    if any(isinstance(g, dict) for g in got):
        return 0.0, Named("you returned a whole row (a dict); return the chosen row's max_wait_ms, a number (or None "
                          "when no row fits)")
    if all(g == e for g, e in zip(got, expected)):
        return 1.0, "the largest max_wait_ms whose p99 fits the budget while keeping up with the load"
    for rule, message in _BUDGET_MISTAKES:
        if all(g == rule(c["rows"], c["budget_ms"]) for g, c in zip(got, cases)):
            return 0.0, Named(message)  # the mistake named, with its fix: no general hint after it
    g, e, c = next((g, e, c) for g, e, c in zip(got, expected, cases) if g != e)
    if e is None:
        return 0.0, f"with a budget of {c['budget_ms']} ms no setting fits, yet you chose {g}: return None then"
    return 0.0, (f"with a {c['budget_ms']} ms budget expected max_wait_ms={e}, got {g}: keep every row whose p99 fits "
                 "and that keeps up (the rows come in no particular order), then take the largest max_wait_ms")


CHOOSE_MAX_WAIT = Exercise(
    "09", "choose_max_wait", _budget_cases, _budget_run, FROM_LESSON, _budget_judge,
    "keep the rows with p99_ms <= budget and achieved_rps >= 0.95 x offered_rps (in any order); return the largest "
    "max_wait_ms among them, a number, or None", setup=SETUP)

register(COLLECT, LATENCY_PERCENTILES, CHOOSE_MAX_WAIT)
