"""Lab 12's Bug 5: a rank that dies says nothing; the launcher's table names it (learner s10c, lab 12 finding 1)."""
import json
import re
from pathlib import Path

import pytest

from lab_utils.launch import RankError, captured_stderr, launch
from workers import dying_in_step_worker

NOTEBOOK = Path(__file__).resolve().parents[2] / "solutions" / "12_debugging_hangs.ipynb"


def _cell(text):
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return next("".join(c["source"]) for c in cells if c["cell_type"] == "code" and text in "".join(c["source"]))


def test_the_dead_rank_demo_prints_the_table_that_names_the_rank_that_exited():
    cell = _cell("launch(dying_worker")
    assert "print(folded(table_of(dead)))" in cell  # the table, not only gloo's first line
    pattern = re.search(r're\.findall\(r"(.+?)", table_of\(dead\)', cell).group(1)
    with captured_stderr(), pytest.raises(RankError) as raised:
        launch(dying_in_step_worker, 2, timeout=30)
    text = str(raised.value)
    table = text[text.index("where each rank was"):]
    assert re.findall(pattern, table, re.M) == ["1"], table  # the cell's own reading of the table
    assert re.search(r"^0\s+\| raised", table, re.M), table
