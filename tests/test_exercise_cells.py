"""An exercise cell holds only the learner's function(s): a learner who replaces the whole cell with an answer loses
nothing the lab needs later (issue 51: lab 07's `import itertools` lived in its exercise cell; replacing the cell made
the self-check and the next cell fail with a NameError). Imports and constants belong in the setup cells."""
import ast
import json
from pathlib import Path

import pytest

from lab_utils.instructor.course.assign import BEGIN

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def exercise_cells(path: Path) -> list[tuple[int, str]]:
    """(index, source) of the notebook's code cells that hold a solution region, cell magics (%%writefile) left out."""
    cells = json.loads(path.read_text())["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells)
            if c["cell_type"] == "code" and BEGIN in "".join(c["source"])
            and not "".join(c["source"]).lstrip().startswith("%%")]


def extra_statements(source: str) -> list[str]:
    """The top-level statements of a cell other than function definitions (and a docstring-like bare string)."""
    return [ast.unparse(node).splitlines()[0] for node in ast.parse(source).body
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name[:2])
def test_every_exercise_cell_holds_only_the_learners_functions(path):
    found = {index: extra for index, source in exercise_cells(path) if (extra := extra_statements(source))}
    assert not found, (f"{path.name}: exercise cell(s) hold more than the learner's function(s) "
                       f"(move each into the lab's setup cell): {found}")


@pytest.mark.parametrize("source", ["import itertools\n\ndef f():\n    pass\n", "ALIGN = 4\n\ndef f():\n    pass\n",
                                    "def f():\n    pass\n\nhelper = f\n"])
def test_the_scan_catches_an_import_a_constant_and_a_helper_value(source):
    assert extra_statements(source)


def test_the_scan_accepts_functions_alone():
    assert extra_statements("def f():\n    pass\n\n\ndef g():\n    return f()\n") == []
    assert all(exercise_cells(path) is not None for path in SOLUTIONS)
    assert sum(len(exercise_cells(path)) for path in SOLUTIONS) >= 40  # the course's exercises, all scanned
