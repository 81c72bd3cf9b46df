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


def test_a_table_wider_than_100_columns_gives_its_last_column_a_line_of_its_own():
    """Learner s11f, lab 12 finding 2: the dead rank's table printed a 111-column row, since folded() keeps table rows
    whole. A table too wide now prints its last column under each row; narrower tables are left as they are."""
    import nbformat

    from lab_utils.labs.lab12 import debugging

    cells = nbformat.read("solutions/12_debugging_hangs.ipynb", 4).cells
    setup = next(c.source for c in cells if c.cell_type == "code" and "import first_lines, folded, mismatch_lines, table_of" in c.source)
    assert "from lab_utils.labs.lab12.debugging import" in setup  # issue 51: the lab's reading helpers in lab_utils
    namespace = {"folded": debugging.folded}
    table = ("where each rank was (its record of collectives, kept by lab_utils):\n"
             "rank | state               | waits in                           | learner's line    | last completed\n"
             "0    | raised RuntimeError | all_reduce #2 [2] float32 (failed) | cell [27], line 6 | all_reduce #1 [2] float32\n"
             "1    | exited              | -                                  | -                 | -")
    out = namespace["folded"](table).splitlines()
    assert max(len(line) for line in out) <= 100, out
    assert out[1].endswith("| learner's line") and out[2].endswith("| cell [27], line 6"), out
    assert out[3] == "    last completed: all_reduce #1 [2] float32" and out[4].startswith("1    | exited"), out
    # learner s13r7f 12-F7: the moved column read as another layout with a meaning: one line under the table says why
    assert out[5] == "(last completed: on a line of its own under its row, to fit 100 columns)", out
    assert len(out) == 6  # the exited rank's '-' gets no line
    narrow = "rank | state\n0    | exited"
    assert namespace["folded"](narrow) == narrow
