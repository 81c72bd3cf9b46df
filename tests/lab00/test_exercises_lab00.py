"""Lab 00's median_time: wrong answers found by a new learner get a hint that names their mistake, and score 0."""
import statistics
import time

import pytest

from lab_utils.exercises import check
from lab_utils.labs.lab00 import reading
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


def median_time_unsorted_middle(fn, warmup, repeats, clock=time.perf_counter):
    times = _timed(fn, warmup, repeats, clock)
    return times[len(times) // 2]  # the middle of the run, not of the sorted times


def median_time_loop_as_one_block(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    start = clock()
    for _ in range(repeats):
        fn()
    return (clock() - start) / repeats  # the mean of the timed calls


def median_time_loop_total(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    start = clock()
    for _ in range(repeats):
        fn()
    return clock() - start


def median_time_mean_of_calls(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.mean(_timed(fn, warmup, repeats, clock))  # each call timed, then the mean


def median_time_chained_reads(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times, before = [], clock()
    for _ in range(repeats):
        fn()
        now = clock()
        times.append(now - before)
        before = now
    return statistics.median(times)  # right: one read per call plus one


for _fn in (median_time_unsorted_middle, median_time_loop_as_one_block, median_time_loop_total,
            median_time_mean_of_calls, median_time_chained_reads):
    _fn.__name__ = _fn.__qualname__ = "median_time"


def test_the_middle_of_the_unsorted_times_is_told_to_sort_first():
    """Learner s10i: times[len // 2] unsorted got a generic 'expected 12.979 ms, got 13.807 ms'."""
    for seed in (0, 1, 2, 3):
        fraction, message = grade(median_time_unsorted_middle, seed)
        assert fraction == 0.0 and "sort the times first" in message, message
    result = check(median_time_unsorted_middle)
    assert not result.passed and "sort the times first" in result.message, result.message


def test_a_loop_timed_as_one_block_is_named_not_only_its_mean():
    """Learner s10i: timing the whole loop / repeats got 'that is the mean of the timed calls', true in value only."""
    for answer in (median_time_loop_as_one_block, median_time_loop_total):
        result = check(answer)
        assert not result.passed and "you timed the loop as one block" in result.message, result.message
        assert grade(answer)[0] == 0.0
    result = check(median_time_mean_of_calls)  # each call timed, then their mean: the mean, not the block
    assert not result.passed and "the mean of the timed calls" in result.message, result.message
    assert "one block" not in result.message


def test_a_clock_read_once_per_call_plus_one_passes():
    assert check(median_time_chained_reads).passed
    assert grade(median_time_chained_reads)[0] == 1.0


def test_the_minimum_is_told_why_the_course_takes_the_median():
    def median_time(fn, warmup, repeats, clock=time.perf_counter):
        return min(_timed(fn, warmup, repeats, clock))
    result = check(median_time)
    assert not result.passed and "the minimum is the best case" in result.message, result.message


def median_time_of_timestamps(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    stamps = []
    for _ in range(repeats):
        fn()
        stamps.append(clock())  # the moment each call ended, not how long it took
    return statistics.median(stamps)


def median_time_of_start_stamps(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    stamps = []
    for _ in range(repeats):
        stamps.append(clock())  # the moment each call began
        fn()
    return statistics.median(stamps)


def median_time_first_repeats(fn, warmup, repeats, clock=time.perf_counter):
    times = []
    for _ in range(warmup + repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times[:repeats])  # the first `repeats` calls: warm-up in, last calls out


def median_time_of_mixed_readings(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    readings = []
    for _ in range(repeats):
        readings.append(clock())
        fn()
        readings.append(clock())
    return statistics.median(readings)  # neither the 'after' nor the 'before' readings alone: the fallback names it


for _fn in (median_time_of_timestamps, median_time_of_start_stamps, median_time_first_repeats,
            median_time_of_mixed_readings):
    _fn.__name__ = _fn.__qualname__ = "median_time"


def test_clock_readings_instead_of_durations_are_named_as_timestamps():
    """Learner s11a, lab 00 cells 24-25: 'expected the median of the 7 timed calls, 12.979 ms, got 202.177 ms' for
    clock() readings kept instead of differences: the message did not say they were timestamps."""
    for answer, when in ((median_time_of_timestamps, "after"), (median_time_of_start_stamps, "before")):
        result = check(answer)
        assert not result.passed and f"clock() readings taken {when} each timed call" in result.message, result.message
        assert "timestamps" in result.message and "not durations" in result.message, result.message
        assert grade(answer)[0] == 0.0
    mixed = check(median_time_of_mixed_readings)
    assert not mixed.passed and "longer than the slowest call" in mixed.message, mixed.message
    assert "not the readings" in mixed.message, mixed.message


def test_the_first_repeats_of_every_call_are_named_as_warm_up_included():
    """Learner s11a: times[:repeats] of warm-up and timed calls got only 'expected ..., got ...'."""
    result = check(median_time_first_repeats)
    assert not result.passed and "the first" in result.message and "warm-up included" in result.message, result.message
    assert grade(median_time_first_repeats)[0] == 0.0


def median_time_no_warmup(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.median(_timed(fn, 0, warmup + repeats, clock))  # every call timed


def median_time_mean(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.mean(_timed(fn, warmup, repeats, clock))


for _fn in (median_time_no_warmup, median_time_mean):
    _fn.__name__ = _fn.__qualname__ = "median_time"


def test_a_message_that_names_the_mistake_gets_no_hint_repeating_it():
    """Learner s11r2a, lab 00 exercise: the appended 'Hint: ...' said again what the message had said."""
    for wrong, said in ((median_time_no_warmup, "warm-up included"), (median_time_mean, "the mean of the timed")):
        result = check(wrong)
        assert not result.passed and said in result.message and "Hint:" not in result.message, result.message


# ---- one_off_cost (learner s12r4a, lab 00 'make it a 5': a second exercise that makes the learner see a cold call) --

def _one_off(rule):
    rule.__name__ = rule.__qualname__ = "one_off_cost"
    return rule


@pytest.mark.parametrize("wrong, named", [
    (lambda cold, warm: cold - statistics.mean(warm) if cold > max(warm) else 0.0, "*mean* warm repeat"),
    (lambda cold, warm: cold - min(warm) if cold > max(warm) else 0.0, "*fastest* warm repeat"),
    (lambda cold, warm: cold - max(warm) if cold > max(warm) else 0.0, "*slowest* warm repeat"),
    (lambda cold, warm: cold - statistics.median(warm), "return 0.0"),
    (lambda cold, warm: max(cold - statistics.median(warm), 0.0), "only one slower than every warm repeat"),
    (lambda cold, warm: cold - statistics.median(warm) if cold > 2 * statistics.median(warm) else 0.0,
     "above a multiple of it"),
    (lambda cold, warm: 1e3 * (cold - statistics.median(warm)) if cold > max(warm) else 0.0, "milliseconds"),
    (lambda cold, warm: cold / statistics.median(warm) if cold > max(warm) else 0.0, "a ratio"),
    (lambda cold, warm: cold - statistics.median(warm) if cold >= max(warm) else 0.0, "(>=)"),  # learner s13r5a
], ids=["mean", "fastest", "slowest", "never-hidden", "above-median", "twice-median", "ms", "ratio", "at-least"])
def test_a_wrong_one_off_cost_is_named(wrong, named):
    result = check(_one_off(wrong))
    assert not result.passed and named in result.message, result.message
    assert "Hint" not in result.message
    assert grade(_one_off(wrong))[0] == 0.0


def test_the_right_one_off_cost_passes_and_the_use_cell_reads_the_self_check_first():
    right = _one_off(lambda cold, warm: cold - statistics.median(warm) if cold > max(warm) else 0.0)
    assert check(right).passed and grade(right)[0] == 1.0
    import io
    from contextlib import redirect_stdout
    from pathlib import Path

    import nbformat

    from lab_utils.exercises import passes
    from lab_utils.measure.timing import Timing

    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "00_setup_and_devices.ipynb", 4).cells
    source = next(c.source for c in cells if c.cell_type == "code" and "reading.one_off_cost_lines(cost, cold, right)" in c.source)
    for answer, said in ((right, "23.7 ms of one-off cost above the warm median"),
                         (_one_off(lambda cold, warm: cold - statistics.median(warm)), "failed its self-check")):
        out = io.StringIO()
        with redirect_stdout(out):
            exec(source, {"one_off_cost": answer, "passes": passes, "cold": 0.0457, "reading": reading,
                          "right": Timing(times=[0.022, 0.0216, 0.0225], warmup=2)})
        assert said in out.getvalue(), out.getvalue()


# ---- speedup_verdict (learner s13r5a, lab 00 'make it a 5', learned: an exercise that reads a ratio against theory) -

def _verdict(rule):
    rule.__name__ = rule.__qualname__ = "speedup_verdict"
    return rule


def _reading(speedup, n, noise=0.10, low=None, up=1.0):
    low = 1 / n if low is None else low
    if speedup > n * (1 + noise) or speedup < low:
        return "impossible"
    if speedup > n:
        return "at the limit"
    return "as predicted" if speedup > up else "not faster"


@pytest.mark.parametrize("wrong, named", [
    (lambda one, many, n: _reading(many / one, n), "upside down"),
    (lambda one, many, n: _reading(one / many, n, noise=0.0), "no allowance for noise"),
    (lambda one, many, n: _reading(one / many, n, low=0.0), "no lower bound"),
    (lambda one, many, n: _reading(one / many, n, low=1.0000001), "every speedup up to 1 called impossible"),
    (lambda one, many, n: _reading(one / many, n, noise=0.25), "the noise line's allowance for one setting's repeats"),
    # learner s13r6a: N + 0.1 for '10 % above N' passed when the one at-the-limit case drew below 2.1 on 2 threads
    (lambda one, many, n: "impossible" if one / many > n + 0.1 else _reading(one / many, n), "10 % OF N"),
    # learner s13r6a: a speedup of exactly 1x read as 'as predicted' (1 <= s) passed; its mirror at exactly N
    (lambda one, many, n: _reading(one / many, n, up=1.0 - 1e-12), "exactly 1x called 'as predicted'"),
    (lambda one, many, n: "at the limit" if one / many == n else _reading(one / many, n), "exactly N called"),
    # learner s13r8a: 0.5 as the lower bound on every N passed when the 4-thread not-faster case drew above 0.5
    (lambda one, many, n: _reading(one / many, n, low=0.5), "a lower bound of 0.5 on every N"),
    # learner s15r9a: exactly 1/N or exactly 1.1 N called impossible passed (the boundaries were not in the cases)
    (lambda one, many, n: "impossible" if one / many <= 1 / n else _reading(one / many, n), "exactly 1/N called"),
    (lambda one, many, n: "impossible" if one / many >= 1.1 * n else _reading(one / many, n), "exactly 1.1 N called"),
], ids=["inverted", "no-noise", "no-lower-bound", "below-1-impossible", "spread-allowance", "plus-0.1", "at-least-1",
        "at-least-N", "half-as-lower-bound", "at-most-1/N-impossible", "at-least-1.1N-impossible"])
def test_a_wrong_speedup_verdict_is_named(wrong, named):
    result = check(_verdict(wrong))
    assert not result.passed and named in result.message and "Hint" not in result.message, result.message
    assert grade(_verdict(wrong))[0] == 0.0


@pytest.mark.parametrize("wrong, said", [
    (lambda one, many, n: _reading(one / many, n, up=0.9), "expected 'not faster'"),  # 'faster' read loosely
    (lambda one, many, n: "within", "return one of 'as predicted'"),
    (lambda one, many, n: one / many, "return one of"),  # the speedup itself, not its verdict
], ids=["loose-faster", "other-word", "a-number"])
def test_other_wrong_verdicts_fail_with_the_case_that_shows_them(wrong, said):
    result = check(_verdict(wrong))
    assert not result.passed and said in result.message, result.message
    assert grade(_verdict(wrong))[0] == 0.0


def test_the_right_speedup_verdict_passes_and_the_use_cell_reads_the_self_check_and_the_load_first():
    import io
    from contextlib import redirect_stdout
    from pathlib import Path

    import nbformat

    from lab_utils import measure
    from lab_utils.exercises import passes
    from lab_utils.measure.timing import Timing

    right = _verdict(lambda one, many, n: _reading(one / many, n))
    assert check(right).passed and grade(right)[0] == 1.0
    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "00_setup_and_devices.ipynb", 4).cells
    source = next(c.source for c in cells if c.cell_type == "code" and "by your speedup_verdict" in c.source)
    timings = {"1 thread": Timing(times=[0.020] * 3, warmup=2), "2 threads": Timing(times=[0.0139] * 3, warmup=2)}
    settings, rates = {"1 thread": 1, "2 threads": 2}, {"1 thread": 12800.0, "2 threads": 18420.0}

    def said(answer, compared=("2 threads vs 1 thread: 1.44x (of the medians)", [])):
        out = io.StringIO()
        with redirect_stdout(out):
            exec(source, {"speedup_verdict": answer, "passes": passes, "measure": measure, "compared": compared,
                          "timings": timings, "settings": settings, "rates": rates})
        return out.getvalue()

    assert "(1.44x, from above), by your speedup_verdict: 'as predicted'" in said(right)
    assert "failed its self-check" in said(_verdict(lambda one, many, n: _reading(many / one, n)))
    refused = (f"2 threads vs 1 thread: {measure.NOT_MEASURABLE}: other programs used 1.2 of 2 cores", [])
    assert "not measurable under the measured load" in said(right, refused)
    assert "no speedup to read" in said(right, None)


def test_the_verdict_cases_hold_a_speedup_of_exactly_1_n_1_over_n_and_1_1_n():
    """The four edges the rules name ('above 1', 'at most N', 'from 1/N', 'at most 10 % above N') are in every
    self-check, exactly (no rounding)."""
    import random

    from lab_utils.labs.lab00.exercises import SPEEDUP_VERDICT

    for seed in range(20):
        cases = SPEEDUP_VERDICT.cases(random.Random(seed))
        speedups = [(c["one_thread_s"] / c["many_threads_s"], c["threads"]) for c in cases]
        assert any(s == 1.0 for s, n in speedups) and any(s == n for s, n in speedups if n > 1)
        assert any(s == 1 / n for s, n in speedups) and any(s == 1.1 * n for s, n in speedups)
