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


def test_speedup_as_a_percentage_fails():
    def speedup_and_efficiency(row, baseline):
        speedup = row.samples_per_s / baseline.samples_per_s
        return 100 * speedup, speedup / (hardware(row) / hardware(baseline))
    assert fails(speedup_and_efficiency, "not a percentage")
