"""Judges that trust nothing: for every exercise, the solution's own answer (run as the grader's probe runs it) scores
full marks, and forged versions of that answer score 0 — emptied lists and dicts, NaN or a constant in place of every
number, the most common answer of other draws — on several draws of the inputs."""
import random
from pathlib import Path

import pytest

from lab_utils import exercises
from lab_utils.exercises import to_plain
from lab_utils.instructor import labs
from lab_utils.instructor.grading import submission_reader

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (1, 2)  # the constant and common-string forgeries need two draws to differ


def seeds(exercise):
    """Two draws; one for an exercise that launches ranks (each draw is a launch): its answers are numbers that a
    constant, NaN or emptied forgery changes on any draw, and its judge is the same code on every draw."""
    return SEEDS[:1] if exercise.ranks else SEEDS
NAMES = sorted(exercises.REGISTRY)
# TensorFlow sets its devices once per process: lab 05's exercises are judged in tests/lab05/test_exercises_lab05.py,
# from the one TensorFlow process that file starts
JUDGED_WITH_TENSORFLOW = [n for n in NAMES if exercises.get(n).lab == "05"]
JUDGED_HERE = [n for n in NAMES if n not in JUDGED_WITH_TENSORFLOW]


def solution_function(exercise):
    """The learner's function as the solution notebook defines it, with the names the notebook gave it."""
    import nbformat

    path = next(p for p in labs.solution_notebooks() if p.name.startswith(exercise.lab))
    cells = [c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code"]
    namespace = {"__name__": "__learner__"}
    exec(compile(exercise.setup or "", "<set-up>", "exec"), namespace)
    exec(compile(submission_reader.definition(cells, exercise.name), "<solution>", "exec"), namespace)
    return namespace[exercise.name]


def solution_source(exercise) -> str:
    """The text of the learner's function as the solution notebook's cell writes it (to edit into wrong answers)."""
    import ast

    import nbformat

    path = next(p for p in labs.solution_notebooks() if p.name.startswith(exercise.lab))
    for cell in nbformat.read(path, 4).cells:
        if cell.cell_type == "code" and f"def {exercise.name}(" in cell.source:
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.FunctionDef) and node.name == exercise.name:
                    return "\n".join(cell.source.splitlines()[node.lineno - 1:node.end_lineno]) + "\n"
    raise LookupError(f"{path.name} defines no {exercise.name}")


def replaced(value, leaf):
    """`value` with every number (or string) passed through `leaf`."""
    if isinstance(value, list):
        return [replaced(v, leaf) for v in value]
    if isinstance(value, dict):
        return {k: replaced(v, leaf) for k, v in value.items()}
    return leaf(value)


def emptied(value):
    """Every variant of `value` with one list or dict made empty."""
    if isinstance(value, (list, dict)) and value:
        yield [] if isinstance(value, list) else {}
        items = list(enumerate(value)) if isinstance(value, list) else list(value.items())
        for key, item in items:
            for variant in emptied(item):
                copy = list(value) if isinstance(value, list) else dict(value)
                copy[key] = variant
                yield copy


def numbers_to(constant):
    return lambda v: constant if type(v) in (int, float) else v


def strings_to(constant):
    return lambda v: constant if isinstance(v, str) else v


@pytest.fixture(scope="module")
def answers():
    """name -> [(inputs, the solution's answer)] over SEEDS."""
    return {}


def draws(name):
    """[(inputs, the solution's answer)] over SEEDS, computed in this process."""
    exercise = exercises.get(name)
    fn = solution_function(exercise)
    return [(inputs, to_plain(exercise.run(fn, inputs))) for inputs in
            (exercise.cases(random.Random(seed)) for seed in seeds(exercise))]


def solved(answers, name):
    if name not in answers:
        answers[name] = draws(name)
    return answers[name]


@pytest.mark.parametrize("name", JUDGED_HERE)
def test_forged_empty_nan_and_constant_answers_score_zero(name, answers):
    assert_forgeries_score_zero(exercises.get(name), solved(answers, name))


def test_every_exercise_is_judged_here_or_in_its_tensorflow_process():
    assert sorted(JUDGED_HERE + JUDGED_WITH_TENSORFLOW) == NAMES and JUDGED_WITH_TENSORFLOW


def assert_forgeries_score_zero(exercise, draws):
    """The solution's answer on each draw scores full marks; every forged version of it scores 0."""
    strings = [s for _, got in draws for s in _leaves(got) if isinstance(s, str)]
    for inputs, got in draws:
        fraction, message = exercise.score(got, inputs)
        assert fraction == 1.0, f"the solution scored {fraction}: {message}"
        forged = {"empty": [[], {}, None, 0, ""], "nan": [replaced(got, numbers_to("nan")), replaced(got, numbers_to("inf"))],
                  "constant": [replaced(got, numbers_to(c)) for c in (0, 1, 0.5)],
                  "a list or dict emptied": list(emptied(got))[:200],
                  "a common string": [replaced(got, strings_to(s)) for s in sorted(set(strings))[:5]]}
        for kind, variants in forged.items():
            for variant in variants:
                if variant == got:
                    continue
                fraction, message = exercise.score(variant, inputs)
                # a right number with a wrong label (e.g. the type of a value) may keep partial credit, never full
                assert fraction == 0.0 or (kind == "a common string" and fraction < 1.0), \
                    f"{kind} answer {str(variant)[:200]} scored {fraction}: {message}"


def _leaves(value):
    if isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value
