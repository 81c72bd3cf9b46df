"""Lab 10's exercises, the wrong answers found by learners (the classic ones are in test_exercises.py): each fails the
self-check with its own hint and scores 0."""
import random

from lab_utils import exercises
from lab_utils.exercises import check, to_plain


def score(fn, seed: int = 7) -> float:
    exercise = exercises.get(fn.__name__)
    inputs = exercise.cases(random.Random(seed))
    return exercise.score(to_plain(exercise.run(fn, inputs)), inputs)[0]


def fails(fn, words: str) -> bool:
    result = check(fn)
    return not result and words in result.message and score(fn) == 0.0


def hardware(row):
    return row.world_size * (row.threads or 1)


def speedup_and_efficiency(row, baseline):
    speedup = row.samples_per_s / baseline.samples_per_s
    return speedup, speedup / (hardware(row) / hardware(baseline))


def test_speedup_and_efficiency_solution_passes():
    assert check(speedup_and_efficiency) and score(speedup_and_efficiency) == 1.0


def test_efficiency_as_a_percentage_fails():
    def speedup_and_efficiency(row, baseline):
        speedup = row.samples_per_s / baseline.samples_per_s
        return speedup, 100 * speedup / (hardware(row) / hardware(baseline))
    assert fails(speedup_and_efficiency, "not a percentage")


def test_speedup_from_wall_s_fails():  # learner B: it passed while every case had the same batch
    def speedup_and_efficiency(row, baseline):
        speedup = baseline.wall_s / row.wall_s
        return speedup, speedup / (hardware(row) / hardware(baseline))
    assert fails(speedup_and_efficiency, "that compares wall_s, the time of one batch")


def test_speedup_as_the_rows_wall_s_over_the_baselines_is_named():  # learner s8d: told only 'the other way round'
    def speedup_and_efficiency(row, baseline):
        speedup = row.wall_s / baseline.wall_s
        return speedup, speedup / (hardware(row) / hardware(baseline))
    assert fails(speedup_and_efficiency, "that is row.wall_s / baseline.wall_s")


def test_speedup_as_a_percentage_fails():
    def speedup_and_efficiency(row, baseline):
        speedup = row.samples_per_s / baseline.samples_per_s
        return 100 * speedup, speedup / (hardware(row) / hardware(baseline))
    assert fails(speedup_and_efficiency, "not a percentage")


def test_fit_serial_fraction_mistakes_each_get_their_own_hint():
    import numpy as np
    from scipy.optimize import curve_fit

    def fit_serial_fraction(points):  # the mean of each point's own s
        return float(np.mean([(1 / s - 1 / n) / (1 - 1 / n) for n, s in points]))
    assert fails(fit_serial_fraction, "averages each point's own s")

    def fit_serial_fraction(points):  # a free slope and intercept
        slope, intercept = np.polyfit([1 / n for n, _ in points], [1 / s for _, s in points], 1)
        return float(intercept)
    assert fails(fit_serial_fraction, "free slope")

    def fit_serial_fraction(points):  # least squares on S, not 1/S
        ns, speedups = zip(*points)
        (s,), _ = curve_fit(lambda n, s: 1 / (s + (1 - s) / n), np.array(ns, float), np.array(speedups, float), p0=[0.1])
        return float(s)
    assert fails(fit_serial_fraction, "speedups S themselves")


def test_fit_serial_fraction_clipped_to_0_1_fails():  # learner s5C: it passed, hiding the case lab 10 reports
    import numpy as np

    def fit_serial_fraction(points):
        a = np.array([1 - 1 / n for n, _ in points])
        b = np.array([1 / s - 1 / n for n, s in points])
        return float(np.clip(a @ b / (a @ a), 0.0, 1.0))
    assert fails(fit_serial_fraction, "do not clip s to 0..1")


def test_predict_speedup_mistakes_each_get_their_own_hint():  # learner s8: three got only the formula
    def predict_speedup(serial_fraction, devices):  # Gustafson's law
        return devices - serial_fraction * (devices - 1)
    assert fails(predict_speedup, "Gustafson")

    def predict_speedup(serial_fraction, devices):  # s and 1 - s swapped
        return 1 / ((1 - serial_fraction) + serial_fraction / devices)
    assert fails(predict_speedup, "swapped")

    def predict_speedup(serial_fraction, devices):  # the parallel part alone
        return (1 - serial_fraction) * devices
    assert fails(predict_speedup, "leaves the serial part out")

    def predict_speedup(serial_fraction, devices):  # multiplied by N
        return 1 / (serial_fraction + (1 - serial_fraction) * devices)
    assert fails(predict_speedup, "multiplied by N")

    def predict_speedup(serial_fraction, devices):  # 1/S
        return serial_fraction + (1 - serial_fraction) / devices
    assert fails(predict_speedup, "1/S")

    def predict_speedup(serial_fraction, devices):  # something else: the formula
        return 2.0
    assert fails(predict_speedup, "S(N) = 1 / (s + (1 - s) / N)")


def test_learner_s9c_mistakes_are_named_not_raised():
    """Learner s9c: `N / (1 - s)` got a bare ZeroDivisionError (the check's s = 1 case), `row.threads * ...` a bare
    TypeError, and s from the mean efficiency the generic fit hint."""
    def predict_speedup(serial_fraction, devices):  # divides by zero at s = 1
        return devices / (1 - serial_fraction)
    assert fails(predict_speedup, "N / (1 - s) grows as s grows")
    assert "ZeroDivisionError" not in check(predict_speedup).message

    def predict_speedup(serial_fraction, devices):  # another division that raises at s = 1: named as raised
        return 1 / (serial_fraction + (1 - serial_fraction) / devices) if serial_fraction < 1 else 1 / 0
    assert fails(predict_speedup, "predict_speedup(1.0, 4) raised ZeroDivisionError")

    def speedup_and_efficiency(row, baseline):  # threads None on GPU rows
        speedup = row.samples_per_s / baseline.samples_per_s
        return speedup, speedup / (row.world_size * row.threads / (baseline.world_size * baseline.threads))
    assert fails(speedup_and_efficiency, "(row.threads or 1)")

    import numpy as np

    def fit_serial_fraction(points):  # 1 - the mean efficiency
        return float(1 - np.mean([s / n for n, s in points]))
    assert fails(fit_serial_fraction, "1 minus the mean efficiency")


def test_fit_serial_fraction_learner_s9j_mistakes_are_named():
    """Learner s9j: a polyfit with an intercept clipped to 0..1, and a straight line through S (not 1/S), got the
    generic 'Amdahl: 1/S = s + (1 - s)/N is linear in s' hint."""
    import numpy as np

    def fit_serial_fraction(points):  # polyfit with an intercept on 1 - 1/N, then clipped
        return float(np.clip(np.polyfit([1 - 1 / n for n, _ in points], [1 / s for _, s in points], 1)[0], 0, 1))
    assert fails(fit_serial_fraction, "No intercept") and fails(fit_serial_fraction, "do not clip")

    def fit_serial_fraction(points):  # polyfit's intercept on 1/N, clipped
        return float(np.clip(np.polyfit([1 / n for n, _ in points], [1 / s for _, s in points], 1)[1] - 1, 0, 1))
    assert fails(fit_serial_fraction, "do not clip")

    def fit_serial_fraction(points):  # least squares on S through the origin
        x = np.array([1 - 1 / n for n, _ in points])
        y = np.array([s for _, s in points])
        return float(x @ y / (x @ x))
    assert fails(fit_serial_fraction, "speedups S themselves")


def test_the_mean_of_one_over_s_minus_one_over_n_without_its_factor_is_named():
    """Learner s10g: mean(1/S - 1/N), the (1 - 1/N) factor left out, got the generic law; it names the factor."""
    import numpy as np

    def fit_serial_fraction(points):
        return float(np.mean([1 / s - 1 / n for n, s in points]))
    assert fails(fit_serial_fraction, "without the factor (1 - 1/N)")


def test_one_over_s_regressed_without_subtracting_one_over_n_is_named():
    """Learner s12r3g, exercise 2 E: least squares of 1/S on 1 - 1/N (the 1/N term kept) got the generic law."""
    import numpy as np

    def fit_serial_fraction(points):
        x = np.array([1 - 1 / n for n, _ in points])
        y = np.array([1 / sp for n, sp in points])
        return float((x @ y) / (x @ x))
    assert fails(fit_serial_fraction, "subtract the 1/N term")


def test_lab_10s_failures_carry_no_hint_that_restates_the_message():
    """Learner s10g: every FAIL ended with the same 'Hint:' sentence after a message that already named the mistake."""
    def speedup_and_efficiency(row, baseline):
        return row.samples_per_s / baseline.samples_per_s, 0.5

    def predict_speedup(s, n):
        return 2.0 * n

    for fn in (speedup_and_efficiency, predict_speedup):
        result = check(fn)
        assert not result and "Hint:" not in result.message, result.message


def test_fit_serial_fraction_task_names_the_residual_the_check_wants():
    """A fit of S itself (curve_fit) is least squares too: the task names the residual that the check accepts."""
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).parents[2] / "notebooks" / "10_scaling_report.ipynb").read_text())["cells"]
    task = next("".join(c["source"]) for c in cells if "### Exercise 2" in "".join(c["source"]))
    assert "Σ (1/S − 1/N − s (1 − 1/N))²" in task and "curve_fit" in task
