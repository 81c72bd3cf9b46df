"""The course's exercises, one definition each: `check(your_function)` is the learner's self-check; the grader
(lab_utils.instructor.grading.grade) runs the same definitions on inputs drawn per run. Lab NN's are in labNN.py, each
imported here (every labNN module of this folder: a new lab's file needs no line here) to register its exercises."""
import importlib
import pkgutil
import re

from .core import FROM_LESSON, REGISTRY, CheckResult, Exercise, check, close, for_lab, get, max_abs_diff, to_plain

for _name in sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"lab\d\d", m.name)):
    importlib.import_module(f"{__name__}.{_name}")  # in lab order

__all__ = ["FROM_LESSON", "REGISTRY", "CheckResult", "Exercise", "check", "close", "for_lab", "get", "max_abs_diff",
           "to_plain"]
