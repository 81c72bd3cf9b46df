"""Lab 00's median_time: wrong answers found by a new learner get a hint that names their mistake, and score 0."""
import statistics
import time

from lab_utils.exercises import check
from answers import grade


def _timed(fn, warmup, repeats, clock):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return times


def median_time_own_clock(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.median(_timed(fn, warmup, repeats, time.perf_counter))  # the clock argument ignored


def median_time_in_milliseconds(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.median(_timed(fn, warmup, repeats, clock)) * 1e3


for _fn in (median_time_own_clock, median_time_in_milliseconds):
    _fn.__name__ = _fn.__qualname__ = "median_time"


def test_a_timer_that_ignores_the_given_clock_is_told_to_use_it():
    result = check(median_time_own_clock)
    assert not result.passed and "time with clock(), the argument" in result.message, result.message
    assert grade(median_time_own_clock)[0] == 0.0


def test_a_median_in_milliseconds_is_told_to_return_seconds():
    result = check(median_time_in_milliseconds)
    assert not result.passed and "milliseconds: return seconds" in result.message, result.message
    assert grade(median_time_in_milliseconds)[0] == 0.0


def median_time_lower_index(fn, warmup, repeats, clock=time.perf_counter):
    times = sorted(_timed(fn, warmup, repeats, clock))
    return times[len(times) // 2 - 1]  # one below the middle


median_time_lower_index.__name__ = median_time_lower_index.__qualname__ = "median_time"


def test_an_index_off_the_middle_is_named():
    result = check(median_time_lower_index)
    assert not result.passed and "neighbour of the median" in result.message, result.message
    assert grade(median_time_lower_index)[0] == 0.0
