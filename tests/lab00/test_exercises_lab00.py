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


def median_time_upper_middle(fn, warmup, repeats, clock=time.perf_counter):
    times = sorted(_timed(fn, warmup, repeats, clock))
    return times[len(times) // 2]  # the median of an odd count only


def median_time_returns_the_list(fn, warmup, repeats, clock=time.perf_counter):
    return _timed(fn, warmup, repeats, clock)


for _fn in (median_time_upper_middle, median_time_returns_the_list):
    _fn.__name__ = _fn.__qualname__ = "median_time"


def test_the_middle_element_of_an_even_count_is_not_the_median():
    result = check(median_time_upper_middle)
    assert not result.passed and "of an even count" in result.message, result.message
    for seed in (1, 2, 3):
        fraction, message = grade(median_time_upper_middle, seed)
        assert fraction == 0.0 and "of an even count" in message, message


def test_a_returned_list_is_named_as_returned_not_as_raised():
    result = check(median_time_returns_the_list)
    assert not result.passed and "returned a list, not a number" in result.message, result.message
    assert "raised" not in result.message
    assert grade(median_time_returns_the_list)[0] == 0.0


def median_time_one_warmup_call_short(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.median(_timed(fn, warmup - 1, repeats + 1, clock))  # the last warm-up call timed too


median_time_one_warmup_call_short.__name__ = median_time_one_warmup_call_short.__qualname__ = "median_time"


def test_a_warm_up_one_call_short_is_named():
    result = check(median_time_one_warmup_call_short)
    assert not result.passed and "the last warm-up call" in result.message, result.message
    for seed in (1, 2, 3):
        fraction, message = grade(median_time_one_warmup_call_short, seed)
        assert fraction == 0.0 and "the last warm-up call" in message, message
