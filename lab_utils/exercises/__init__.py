"""The course's exercises, one definition each: `check(your_function)` is the learner's self-check; the grader
(lab_utils.instructor.grading.grade) runs the same definitions on inputs drawn per run. Lab NN's are in its folder,
lab_utils/labs/labNN/exercises.py, each imported here (every lab folder's: a new lab's file needs no line here) to
register its exercises; core.py holds the harness they share."""
import importlib
from pathlib import Path

from .core import FROM_LESSON, REGISTRY, CheckResult, Exercise, Named, check, close, for_lab, get, max_abs_diff, passes, to_plain

for _path in sorted((Path(__file__).resolve().parents[1] / "labs").glob("lab[0-9][0-9]/exercises.py")):
    importlib.import_module(f"lab_utils.labs.{_path.parent.name}.exercises")  # in lab order

__all__ = ["FROM_LESSON", "REGISTRY", "CheckResult", "Exercise", "Named", "check", "close", "for_lab", "get", "max_abs_diff",
           "passes", "to_plain"]
