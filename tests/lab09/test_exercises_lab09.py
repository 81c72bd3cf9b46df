"""Lab 09's exercises: the solutions pass and score 1; each plausible wrong answer fails and scores 0."""
import math
import queue
import random
import time

import numpy as np
import pytest

from lab_utils import exercises
from lab_utils.exercises import check
from lab_utils.labs.lab09 import exercises as lab09_exercises
from lab_utils.labs.lab09 import lesson as lesson09
from test_judges import solution_function, solution_source


def score(fn, seed: int = 7) -> float:
    exercise = exercises.get(fn.__name__)
    inputs = exercise.cases(random.Random(seed))
    return exercise.score(exercises.to_plain(exercise.run(fn, inputs)), inputs)[0]


def passes(fn) -> bool:
    return bool(check(fn)) and score(fn) == 1.0


def fails(fn, words: str) -> bool:
    result = check(fn)
    return not result and words in result.message and score(fn) == 0.0


# ---- collect ------------------------------------------------------------------------------------------------------------

COLLECT_SOLUTION = solution_function(exercises.get("collect"))  # the solution notebook's


def test_collect_solution_passes():
    assert passes(COLLECT_SOLUTION)


def test_collect_with_a_deadline_reset_by_every_request_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = [first]
        while len(batch) < max_batch:
            try:
                batch.append(requests.get(timeout=max_wait_s) if max_wait_s > 0 else requests.get_nowait())
            except queue.Empty:
                break
        return batch
    assert fails(collect, "deadline moved")


def test_collect_that_spins_on_get_nowait_until_the_deadline_fails():
    def collect(first, requests, max_batch, max_wait_s):  # learner s15r9h: busy-waits, burning a core
        batch, deadline = [first], time.perf_counter() + max_wait_s
        while len(batch) < max_batch:
            try:
                batch.append(requests.get_nowait())
            except queue.Empty:
                if time.perf_counter() >= deadline:
                    break
        return batch
    assert fails(collect, "it spins")


def test_collect_that_blocks_is_not_called_spinning():
    cases = exercises.get("collect").cases(random.Random(7))
    got = exercises.get("collect").run(COLLECT_SOLUTION, cases)
    assert not any(lab09_exercises.spinning(g) for g in got)


@pytest.mark.slow
def test_collect_that_waits_for_a_full_batch_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = [first]
        while len(batch) < max_batch:
            batch.append(requests.get())
        return batch
    assert fails(collect, "waits for a full batch")


def test_collect_one_too_many_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = [first]
        deadline = time.perf_counter() + max_wait_s
        while len(batch) <= max_batch:
            try:
                batch.append(requests.get(timeout=max(0.0, deadline - time.perf_counter())))
            except queue.Empty:
                break
        return batch
    assert fails(collect, "at most max_batch")


def test_collect_that_does_not_count_first_is_told_that_first_counts():
    def collect(first, requests, max_batch, max_wait_s):  # learner s8d: max_batch taken from the queue, besides first
        taken = []
        deadline = time.perf_counter() + max_wait_s
        while len(taken) < max_batch:
            try:
                taken.append(requests.get(timeout=max(0.0, deadline - time.perf_counter())))
            except queue.Empty:
                break
        return [first] + taken
    assert fails(collect, "`first` counts toward it")


def test_collect_that_takes_one_request_too_many_and_drops_it_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = []
        deadline = time.perf_counter() + max_wait_s
        while len(batch) < max_batch:
            try:
                batch.append(requests.get(timeout=max(0.0, deadline - time.perf_counter())))
            except queue.Empty:
                break
        return [first] + batch[:max_batch - 1]
    assert fails(collect, "neither in the batch nor left in the queue")
    assert "request(s) [" in check(collect).message


def test_collect_without_waiting_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = [first]
        while len(batch) < max_batch:
            try:
                batch.append(requests.get_nowait())
            except queue.Empty:
                break
        return batch
    assert fails(collect, "keep waiting")


def test_collect_that_stops_at_a_passed_deadline_is_told_to_take_what_waits():
    # learner s5B: got only "the batch holds requests [0]; expected [0, 1, 2, 3, 4, 5]"
    def collect(first, requests, max_batch, max_wait_s):
        batch, deadline = [first], time.monotonic() + max_wait_s
        while len(batch) < max_batch:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                batch.append(requests.get(timeout=remaining))
            except queue.Empty:
                break
        return batch
    assert fails(collect, "take what is already waiting (get_nowait until queue.Empty)")


def test_collect_with_a_negative_timeout_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = [first]
        deadline = time.perf_counter() + max_wait_s
        while len(batch) < max_batch:
            try:
                batch.append(requests.get(timeout=deadline - time.perf_counter()))
            except queue.Empty:
                break
        return batch
    assert fails(collect, "never a negative timeout")


@pytest.mark.slow
def test_collect_that_waits_although_the_batch_is_full_fails():
    def collect(first, requests, max_batch, max_wait_s):
        batch = [first]
        deadline = time.perf_counter() + max_wait_s
        while time.perf_counter() < deadline:
            try:
                item = requests.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                break
            if len(batch) < max_batch:
                batch.append(item)
        return batch
    assert fails(collect, "without waiting for max_wait_s")


def test_collect_that_drops_first_fails():
    def collect(first, requests, max_batch, max_wait_s):
        return COLLECT_SOLUTION(first, requests, max_batch + 1, max_wait_s)[1:]
    assert fails(collect, "start with `first`")


# ---- latency_percentiles ------------------------------------------------------------------------------------------------

PERCENTILES_SOLUTION = solution_function(exercises.get("latency_percentiles"))  # the solution notebook's


def test_latency_percentiles_solution_passes():
    assert passes(PERCENTILES_SOLUTION)


def test_latency_percentiles_with_numpy_passes():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = [(end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s)]
        return list(1e3 * np.percentile(latencies, percentiles))
    assert passes(latency_percentiles)


def test_latency_percentiles_in_seconds_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        return [v / 1e3 for v in PERCENTILES_SOLUTION(arrivals_s, done_s, end_s, percentiles)]
    assert fails(latency_percentiles, "milliseconds")


def test_latency_percentiles_in_seconds_with_numpy_fails_naming_the_unit_and_no_general_hint():
    """Learner s11h: seconds (and latency 0 for unanswered) printed only numbers, then the general hint."""
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = [(end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s)]
        return [float(np.percentile(latencies, p)) for p in percentiles]
    assert fails(latency_percentiles, "they are in seconds") and "Hint:" not in check(latency_percentiles).message


def test_latency_percentiles_counting_unanswered_as_zero_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = sorted(0.0 if d is None else 1e3 * (d - a) for a, d in zip(arrivals_s, done_s))
        return [latencies[max(0, math.ceil(p / 100 * len(latencies)) - 1)] for p in percentiles]
    assert fails(latency_percentiles, "as latency 0") and "Hint:" not in check(latency_percentiles).message


def test_latency_percentiles_unknown_mistake_keeps_the_general_hint():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        return [1.0 for p in percentiles]
    assert fails(latency_percentiles, "expected about") and "Hint:" in check(latency_percentiles).message


def test_latency_percentiles_dropping_unanswered_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = sorted(d - a for a, d in zip(arrivals_s, done_s) if d is not None)
        return [1e3 * latencies[max(0, math.ceil(p / 100 * len(latencies)) - 1)] for p in percentiles]
    assert fails(latency_percentiles, "never answered")


def test_latency_percentiles_dropping_unanswered_with_numpy_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = [(d - a) * 1e3 for a, d in zip(arrivals_s, done_s) if d is not None]
        return [float(np.percentile(latencies, p)) for p in percentiles]
    assert fails(latency_percentiles, "never answered")


def test_latency_percentiles_sorting_arrivals_and_dones_apart_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        done = sorted(end_s if d is None else d for d in done_s)
        latencies = sorted(d - a for a, d in zip(sorted(arrivals_s), done))
        return [1e3 * latencies[max(0, math.ceil(p / 100 * len(latencies)) - 1)] for p in percentiles]
    assert fails(latency_percentiles, "pair each request")


def test_latency_percentiles_unsorted_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = [(end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s)]
        return [1e3 * latencies[max(0, math.ceil(p / 100 * len(latencies)) - 1)] for p in percentiles]
    assert fails(latency_percentiles, "sort them first")


def test_latency_percentiles_one_rank_too_high_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = sorted((end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s))
        return [1e3 * latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] for p in percentiles]
    assert fails(latency_percentiles, "one rank too high")


def test_latency_percentiles_mean_fails():
    def latency_percentiles(arrivals_s, done_s, end_s, percentiles):
        latencies = [(end_s if d is None else d) - a for a, d in zip(arrivals_s, done_s)]
        return [1e3 * sum(latencies) / len(latencies)] * len(percentiles)
    assert fails(latency_percentiles, "mean")


# ---- choose_max_wait ----------------------------------------------------------------------------------------------------

def test_choose_max_wait_solution_passes():
    assert passes(lesson09.choose_max_wait)  # the solution's, the reference


def test_choose_max_wait_strict_comparison_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] < budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return max(fits) if fits else None
    assert fails(choose_max_wait, "<=, not <")


def test_choose_max_wait_lowest_p99_fails():
    def choose_max_wait(rows, budget_ms):
        return min(rows, key=lambda r: r["p99_ms"])["max_wait_ms"]
    assert fails(choose_max_wait, "lowest p99")


def test_choose_max_wait_on_p50_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p50_ms"] <= budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return max(fits) if fits else None
    assert fails(choose_max_wait, "p50")


def test_choose_max_wait_ignoring_the_load_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] <= budget_ms]
        return max(fits) if fits else None
    assert fails(choose_max_wait, "fell behind")


def test_choose_max_wait_ignoring_the_budget_fails():
    def choose_max_wait(rows, budget_ms):
        return max(r["max_wait_ms"] for r in rows)
    assert fails(choose_max_wait, "without looking at the budget")


def test_choose_max_wait_never_none_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r for r in rows if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return max(fits, key=lambda r: r["max_wait_ms"])["max_wait_ms"] if fits else rows[0]["max_wait_ms"]
    assert fails(choose_max_wait, "return None")


def test_choose_max_wait_last_fitting_row_in_list_order_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return fits[-1] if fits else None
    assert fails(choose_max_wait, "last row that fits")


def test_choose_max_wait_first_fitting_row_in_list_order_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return fits[0] if fits else None
    assert fails(choose_max_wait, "first row that fits")


def test_choose_max_wait_strict_and_list_order_at_once_names_both():
    """Learner s13r5h: '<' and the last fitting row in list order got the generic hint, naming the order only."""
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] < budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return fits[-1] if fits else None
    assert fails(choose_max_wait, "last row that fits") and fails(choose_max_wait, "<=, not <")


def test_choose_max_wait_smallest_and_without_slack_are_named():
    # learner s5B: both got only "expected max_wait_ms=..., got ..."
    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return min(fits) if fits else None
    result = check(choose_max_wait)
    assert not result.passed and "the smallest max_wait_ms that fits" in result.message, result.message

    def choose_max_wait(rows, budget_ms):
        fits = [r["max_wait_ms"] for r in rows if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= r["offered_rps"]]
        return max(fits) if fits else None
    result = check(choose_max_wait)
    assert not result.passed and "the rule allows 5 %" in result.message, result.message


def test_one_rule_for_kept_up_in_the_grid_and_exercise_3():
    from lab_utils.labs.lab09 import exercises as lab09, serving
    assert lab09.KEEP_UP == serving.SATURATED_SHARE
    assert f"{lab09.KEEP_UP} * r[\"offered_rps\"]" in solution_source(exercises.get("choose_max_wait"))


def test_choose_max_wait_returning_the_row_fails():
    def choose_max_wait(rows, budget_ms):
        fits = [r for r in rows if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= 0.95 * r["offered_rps"]]
        return max(fits, key=lambda r: r["max_wait_ms"]) if fits else None
    assert fails(choose_max_wait, "whole row")


@pytest.mark.parametrize("name", ["collect", "latency_percentiles", "choose_max_wait"])
def test_stubs_fail(name):
    def stub(*args):
        raise NotImplementedError
    stub.__name__ = name
    result = check(stub)
    assert not result and "not written yet" in result.message
