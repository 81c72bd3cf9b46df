"""One definition per exercise: the inputs, how to run an answer on them, the reference, and the judge.

The same definition gives the learner's self-check (`check(answer)`, in the notebook, on fixed inputs) and the
grader's probe and grade (inputs drawn per run; the answer runs in a fresh process, the reference and the judge in
the grader). A judge names the classic wrong answers it recognises, as a hint, never as the answer.
"""
from __future__ import annotations

import copy
import importlib
import json
import math
import random
import re
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import conditions
from ..compare import is_number, max_abs_diff  # noqa: F401  # the labs' checks import max_abs_diff from here

SELF_CHECK_SEED = 0
FROM_LESSON = "from the solution's lesson cell"  # an Exercise's expected: run the solution's function


@dataclass(frozen=True)
class Exercise:
    """One graded answer: `name` is the function the learner defines."""

    lab: str
    name: str
    cases: Callable[[random.Random], Any]         # plain-data inputs drawn from a seeded generator
    run: Callable[[Callable, Any], Any]           # (a function, inputs) -> plain data; beside the learner's code
    expected: Callable[[Any], Any] | str          # inputs -> the right plain data; in the grader's own process.
                                                    # FROM_LESSON: `run` on the solution's own function of this name
    judge: Callable[[Any, Any, Any], tuple]       # (got, expected, inputs) -> (fraction of the points, message)
    hint: str                                     # what to look at when it fails, without the answer
    setup: str = ""                               # source run before the learner's definition in a probe process
    points: float = 1.0
    ranks: int = 0                                # > 0: the run launches this many real ranks
    shape: Callable[[Any, Any], Any] | None = None  # (reference, inputs) -> the answer's shape, where the reference is
                                                    # only part of the answer (one rank's weights); ANY: not checked
    requires: tuple[str, ...] = ()                # what the probe needs of the machine: "gpu", "slurm"; where it is
                                                    # missing the grader marks the exercise blocked, never 0
    named_errors: tuple[str, ...] = ()            # phrases of the check's own raised messages that name the mistake
                                                    # and its fix: no general hint after them

    def score(self, got, inputs) -> tuple[float, str]:
        """(fraction, message) for plain data `got` on `inputs`; any surprise in the data scores 0, and so does an
        answer whose shape differs from the reference's (a shorter list, missing keys, "nan" for a number),
        whatever the judge says."""
        try:
            expected = self.reference(inputs)
            fraction, message = self.judge(got, expected, inputs)
            fraction = float(fraction)
        except Exception as exc:  # malformed data: wrong shape, wrong types
            return 0.0, f"the answer has an unexpected form ({type(exc).__name__}: {str(exc)[:120]})"
        if not math.isfinite(fraction):
            return 0.0, f"the grade came out as {fraction!r}, counted as 0"
        if fraction > 0 and not conforms(got, self.shape(expected, inputs) if self.shape else expected):
            return 0.0, "the answer's shape differs from the reference's (a missing item, a missing key, or not a number)"
        return min(max(fraction, 0.0), 1.0), message

    def reference(self, inputs):
        """`expected(inputs)`, computed once per inputs in this process (grading a class, every answer is judged
        against the same reference); a copy, so that a judge cannot change the next answer's reference."""
        try:
            key = (self.name, json.dumps(inputs, sort_keys=True))
        except (TypeError, ValueError):  # not plain data (a repr could elide an array's middle): not cached
            return self._expected(inputs)
        with _REFERENCES_LOCK:
            value = _REFERENCES.get(key, _REFERENCES)  # the dict itself: not computed yet
        if value is _REFERENCES:
            value = self._expected(inputs)  # outside the lock: other exercises' references go on meanwhile
            with _REFERENCES_LOCK:
                if len(_REFERENCES) >= 64:
                    _REFERENCES.pop(next(iter(_REFERENCES)))
                _REFERENCES[key] = value
        return copy.deepcopy(value)

    def _expected(self, inputs):
        if callable(self.expected):
            return self.expected(inputs)
        # the module assign generates from the solution's lesson cell, found by the lab's number when first needed
        return self.run(getattr(importlib.import_module(f"lab_utils.labs.lab{self.lab}.lesson"), self.name), inputs)


_REFERENCES: dict[tuple[str, str], Any] = {}
_REFERENCES_LOCK = threading.Lock()

REGISTRY: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    """Add exercises to the course's registry; names are unique across labs (the learner's `check(fn)` finds them)."""
    for exercise in exercises:
        if exercise.name in REGISTRY and REGISTRY[exercise.name] is not exercise:
            raise ValueError(f"exercise {exercise.name!r} is defined twice (labs {REGISTRY[exercise.name].lab} "
                             f"and {exercise.lab})")
        REGISTRY[exercise.name] = exercise


def for_lab(lab: str) -> list[Exercise]:
    """The exercises of one lab, in the order they appear."""
    return [e for e in REGISTRY.values() if e.lab == str(lab).zfill(2)]


def get(name: str) -> Exercise:
    """The exercise a learner's function of this name answers."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"no exercise is called {name!r}; exercises: {sorted(REGISTRY)}") from None


# ---- plain data only: no pickles, no objects with home-made __eq__ -------------------------------------------------

class KeyNotStr(TypeError):
    """An answer's dict with a key that is not a str (plain data's dicts have str keys, as JSON's do)."""

    def __init__(self, key) -> None:
        super().__init__(f"a dict with a key of type {type(key).__name__} ({key!r}) is not plain data: a dict's keys "
                         "must be strings")
        self.key = key


def to_plain(value, depth: int = 0):
    """JSON-able data from numbers, strings, lists, dicts, numpy arrays and tensors; anything else raises TypeError."""
    if depth > 20:
        raise TypeError("answer nested too deeply")
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return to_plain(value.item(), depth + 1)
    if isinstance(value, np.ndarray):
        return to_plain(value.tolist(), depth + 1)
    module = type(value).__module__ or ""
    if module.startswith("torch") and type(value).__name__ in ("Tensor", "Parameter"):
        return to_plain(value.detach().cpu().numpy(), depth + 1)
    if module.startswith(("tensorflow", "keras")) and hasattr(value, "numpy") and "Tensor" in type(value).__name__:
        return to_plain(np.asarray(value.numpy()), depth + 1)
    if type(value) in (list, tuple):
        return [to_plain(v, depth + 1) for v in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: to_plain(v, depth + 1) for k, v in value.items()}
    if type(value) is dict:  # a dict is plain data; its keys are what is wrong: say so (int job ids, learner s5C)
        raise KeyNotStr(next(k for k in value if type(k) is not str))
    raise TypeError(f"an answer of type {type(value).__name__} is not plain data (numbers, lists, arrays, tensors)")


def close(got, expected, tol: float = 1e-6) -> bool:
    """Nested equality with a relative numeric tolerance; plain data only."""
    if isinstance(expected, (list, tuple)):
        return isinstance(got, list) and len(got) == len(expected) and all(close(g, e, tol) for g, e in zip(got, expected))
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(close(got[k], expected[k], tol) for k in expected)
    if isinstance(expected, bool) or isinstance(expected, str) or expected is None:
        return type(got) is type(expected) and got == expected
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return abs(got - expected) <= tol * max(1.0, abs(expected))


class _Any:
    def __repr__(self):
        return "ANY"


ANY = _Any()  # in an answer's shape: any value


def conforms(got, expected) -> bool:
    """True when `got` has the reference's shape: lists of the same lengths, dicts with the same keys, a number where
    the reference has a number (None is left to the judge, which may give partial credit for it)."""
    if expected is ANY:
        return True
    if isinstance(expected, (list, tuple)):
        return isinstance(got, list) and len(got) == len(expected) and all(conforms(g, e) for g, e in zip(got, expected))
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(conforms(got[k], expected[k]) for k in expected)
    if type(expected) in (int, float) and got is not None:
        return is_number(got)
    return True


class CannotRunHere(RuntimeError):
    """An exercise's run could not run the learner's function where it was called (not a mistake in the function)."""


def is_stub(exc: BaseException) -> bool:
    """True when an exercise's stub raised: NotImplementedError here, or in a rank that ran the learner's code."""
    return isinstance(exc, NotImplementedError) or "NotImplementedError" in getattr(exc, "message", "")


def only_raises_not_implemented(definition: str, name: str) -> bool:
    """True when the definition of `name` is a stub: undecorated, a docstring at most, then `raise NotImplementedError`."""
    import ast

    try:
        tree = ast.parse(definition)
    except SyntaxError:
        return False
    for node in reversed(tree.body):  # the last definition is the one that runs
        if isinstance(node, ast.FunctionDef) and node.name == name:
            if node.decorator_list:  # a decorator may put another function (or anything) in its place: run it
                return False
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                else node.body
            raised = body[0].exc if len(body) == 1 and isinstance(body[0], ast.Raise) else None
            raised = raised.func if isinstance(raised, ast.Call) else raised
            return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


def last_line(exc: BaseException) -> str:
    """An exception as one short line, cut at a word; a failed rank's (RankError) is its own message and the
    launcher's explanation, not the last line of its traceback."""
    from ..launch import short_error

    if hasattr(exc, "rank") and hasattr(exc, "message"):
        hint = getattr(exc, "hint", "")
        # a message that names its rank already says where (learner s12r4e: "... then wait for both (in rank 1)"
        # read as if the advice were for rank 1 only)
        where = "" if f"rank {exc.rank} " in f"{exc.message} " else f" (in rank {exc.rank})"
        return short_error(f"{exc.message}{where}" + (f"; why: {hint}" if hint else ""), 400)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return short_error(text[-1] if text else type(exc).__name__, 300)


# ---- the learner's self-check ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckResult:
    """Outcome of a self-check: true when passed; shows as a PASS/FAIL line (with a hint) in a notebook."""

    name: str
    passed: bool
    message: str = ""
    details: dict = field(default_factory=dict, compare=False)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'}  {self.name}"
        return head + (f": {self.message}" if self.message else "")

    def _ipython_display_(self) -> None:
        """Nothing more: check() has printed this line already (a cell's last expression would print it twice)."""


class Named(str):
    """A judge's message that names the mistake and its fix itself: check() adds no general hint after it."""


def named_unless(*generic):
    """A judge whose failing messages name the mistake (Named: check() adds no hint) unless they contain `generic`."""
    def wrap(judge):
        def judged(got, expected, case):
            fraction, message = judge(got, expected, case)
            plain = fraction >= 1.0 or any(g in message for g in generic)
            return fraction, message if plain else Named(message)
        return judged
    return wrap


NOT_WRITTEN = "not written yet: replace the `raise NotImplementedError(...)` line"


def _unwritten(answer, name: str) -> bool:
    """The function is still its stub, as far as its source (when Python has it) shows."""
    import inspect
    import textwrap

    try:
        return only_raises_not_implemented(textwrap.dedent(inspect.getsource(answer)), name)
    except (OSError, TypeError):
        return False


def check(answer, *, seed: int = SELF_CHECK_SEED) -> CheckResult:
    """Run your function on the exercise's inputs and compare with the reference; prints PASS, or FAIL with a hint.

    It prints whatever follows it in the cell (a result shown only as a cell's last expression would vanish behind a
    later print), and returns the result for code that wants it."""
    from ..measure import lines  # here: lab_utils.measure imports this package's neighbours

    result = _checked(answer, seed)
    print(lines.wrap(repr(result)))  # at 100 columns, its later lines indented (learners: PASS lines of 200 characters)
    return result


def passes(answer, *, seed: int = SELF_CHECK_SEED) -> bool:
    """Whether `answer` passes its self-check, nothing printed: a later cell built on an exercise says when it does not
    (its own figures may not show the mistake)."""
    return _checked(answer, seed).passed


def _checked(answer, seed: int) -> CheckResult:
    """check()'s outcome, not printed."""
    name = getattr(answer, "__name__", None)
    if not callable(answer) or name is None:
        raise TypeError(f"check() takes the function you wrote (e.g. check(shard)), got {type(answer).__name__}")
    exercise = get(name)
    if _unwritten(answer, name):  # at once, without starting ranks that would each raise it
        return CheckResult(name, False, NOT_WRITTEN)
    inputs = exercise.cases(random.Random(seed))
    hint = f". Hint: {exercise.hint}" if exercise.hint else ""  # none where every message names the mistake itself

    def hint_after(exc) -> str:
        """The hint after a raised error, unless the check's own message in it names the mistake already."""
        return "" if any(phrase in str(exc) for phrase in exercise.named_errors) else hint
    try:
        with conditions.not_measuring():  # its ranks are no measurement: a later record reads the lab's own windows
            raw = exercise.run(answer, inputs)
    except Exception as exc:  # the learner's code may raise anything
        if is_stub(exc):
            return CheckResult(name, False, NOT_WRITTEN)
        if isinstance(exc, TimeoutError):  # a hang raised nothing: the launcher stopped it
            from ..launch import short_error

            return CheckResult(name, False, f"your {name} did not finish: {short_error(exc, 400)}{hint_after(exc)}")
        from ..launch.errors import StartedWhileImporting

        if isinstance(exc, (CannotRunHere, StartedWhileImporting)):  # the place the check ran, not the function
            return CheckResult(name, False, f"the check could not run {name} here (not a mistake in it): {exc}")
        if any(phrase in str(exc) for phrase in exercise.named_errors):  # the check's own message: not the learner's
            said = re.sub(r"^\w+(?:Error|Exception): ", "", last_line(exc))  # the error type is not the learner's
            return CheckResult(name, False, f"the check stopped your {name}: {said}")
        return CheckResult(name, False, f"your {name} raised {last_line(exc)}{hint_after(exc)}")
    try:
        got = to_plain(raw)
    except TypeError as exc:
        if isinstance(exc, KeyNotStr):
            return CheckResult(name, False, f"your {name} returned a dict with a key of type "
                                            f"{type(exc.key).__name__} ({exc.key!r}): a dict's keys must be strings, "
                                            f"{str(exc.key)!r} not {exc.key!r}{hint}")
        return CheckResult(name, False, f"your {name} returned {str(exc).split(' is not')[0].replace('an answer of', 'something of')}, "
                                        f"not plain data (numbers, strings, lists, arrays){hint}")
    fraction, message = exercise.score(got, inputs)
    if fraction < 1.0 and not isinstance(message, Named):  # a message that names the mistake needs no general hint
        message += hint
    return CheckResult(name, fraction >= 1.0, message, {"fraction": fraction, "named": isinstance(message, Named)})
