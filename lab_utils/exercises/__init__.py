"""The course's exercises, one definition each: `check(your_function)` is the learner's self-check; the grader
(lab_utils.instructor.grade) runs the same definitions on inputs drawn per run."""
from . import lab00, lab01, lab02, lab03, lab04, lab05, lab06, lab07, lab08, lab09, lab10, lab11  # noqa: F401  (each registers its exercises)
from .core import REGISTRY, CheckResult, Exercise, check, close, for_lab, get, max_abs_diff, to_plain

__all__ = ["REGISTRY", "CheckResult", "Exercise", "check", "close", "for_lab", "get", "max_abs_diff", "to_plain"]
