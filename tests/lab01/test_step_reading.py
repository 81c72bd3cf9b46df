"""Lab 01's reading of one run's step times and of a noisy reference row (learner s10a, cells 23 and 29)."""
from lab_utils.labs.lab01 import steps


def test_steps_alternating_slow_and_fast_are_said_with_which_rate_later_labs_compare():
    """Busy run: steps ~10 ms / ~1.5 ms in turn, median 1.48 ms, mean 2.74 ms, the two rates 1.83x apart."""
    alternating = [0.0015, 0.0101] * 20 + [0.0015] * 30
    said = steps.step_mix(alternating)
    assert "20 of 70 steps took over 2x it" in said, said
    assert said.startswith("mean step ") and "about every other step" in said and "waited" in said, said
    assert "later labs compare" in said and "training rate (the median)" in said, said
    quiet = [0.00122, 0.00125, 0.0013, 0.0012, 0.00118] * 12 + [0.00449, 0.0083]  # s10a's quiet rerun
    calm = steps.step_mix(quiet)
    assert "within 25%" in calm and "waited" not in calm, calm
    few = [0.0012] * 60 + [0.02] * 8  # a few slow steps, not alternating: counted, not called every other one
    rare = steps.step_mix(few)
    assert "8 of 68 steps took over 2x it" in rare and "every other" not in rare, rare


def test_a_noisy_reference_row_is_marked_and_says_whether_it_still_serves():
    """Busy run: '1 process x 1 thread 3809 samples/s (median of 8 steps, spread 227%)' with no mark beside it."""
    line = steps.reference_noise("1 process x 1 thread", 2.27, 8)
    assert line.startswith("noise: 1 process x 1 thread's 8 steps spread 227%, above 25%") and "still the reference" in line
    assert "beyond 2x" in line
    assert steps.reference_noise("1 process x 1 thread", 0.08, 8) is None
