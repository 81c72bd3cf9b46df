"""The grader: scores come from exported data judged outside the kernel; bad submissions never stop the batch."""
import csv
import subprocess
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lab_utils import exercises, grade

ROOT = Path(__file__).resolve().parent.parent

SPEEDUP = '''
def speedup_and_efficiency(row, baseline):
    speedup = row["samples_per_s"] / baseline["samples_per_s"]
    ratio = (row["world_size"] * (row["threads"] or 1)) / (baseline["world_size"] * (baseline["threads"] or 1))
    return speedup, speedup / ratio
'''
SERIAL = '''
import numpy as np

def fit_serial_fraction(points):
    a = np.array([1 - 1 / n for n, _ in points])
    b = np.array([1 / s - 1 / n for n, s in points])
    return float(a @ b / (a @ a))
'''
PREDICT = '''
def predict_speedup(serial_fraction, devices):
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / devices)
'''
MARKER = "lab_grader_test_marker_3141"  # a leftover process carries it on its command line


def notebook(*cells) -> nbformat.NotebookNode:
    params = new_code_cell("seed = 0\nresults_dir = None")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# a lab 06 submission"), params] + [new_code_cell(textwrap.dedent(c)) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


SUBMISSIONS = {
    "correct": notebook(SPEEDUP, SERIAL, PREDICT),
    "loops_forever": notebook("while True:\n    pass", SPEEDUP, SERIAL, PREDICT),
    "calls_sys_exit": notebook(SPEEDUP, "import sys\nsys.exit(1)", SERIAL, PREDICT),
    "calls_os_exit": notebook(SPEEDUP, "import os\nos._exit(0)", SERIAL, PREDICT),
    "kills_its_kernel": notebook(SPEEDUP, SERIAL, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", PREDICT),
    "deleted_a_cell": notebook(SPEEDUP, PREDICT),
    "first_raises": notebook("def speedup_and_efficiency(row, baseline):\n    raise NotImplementedError", SERIAL, PREDICT),
    "forges": notebook(
        """
        class Always:
            def __eq__(self, other): return True
            def __float__(self): return 1.0
        def speedup_and_efficiency(row, baseline):
            return Always(), Always()
        """,
        "def fit_serial_fraction(points):\n    return 0.5\npassed = True\nprint('PASS  serial fraction')",
        """
        from lab_utils import checks
        checks.check_predict_speedup = lambda fn: 'PASS  predicted speedup'
        def predict_speedup(s, n):
            return n
        print(checks.check_predict_speedup(predict_speedup))
        """),
    "prints_megabytes": notebook(SPEEDUP, "print('x' * 3_000_000)", SERIAL, PREDICT),
    "warns_on_stderr": notebook("import sys, warnings\nwarnings.warn('careful')\nsys.stderr.write('noise\\n' * 100)",
                                SPEEDUP, SERIAL, PREDICT),
    "leaves_processes": notebook(SPEEDUP, SERIAL, PREDICT, f"""
        import subprocess
        subprocess.Popen(['sleep', '300', '{MARKER}'], start_new_session=True)
        subprocess.Popen(['sh', '-c', 'sleep 301 {MARKER} &'])
        """),
}

HIDDEN_TEST = '''
from lab_utils.exercises import Exercise

def _probe(fn, ns):
    return fn(0.5, 64)

def _grade(value):
    expected = 1 / (0.5 + 0.5 / 64)
    return (1.0, "right at 64 devices") if abs(value - expected) < 1e-9 else (0.0, "wrong at 64 devices")

EXERCISES = [Exercise("06", "predict_speedup", _probe, _grade, "Amdahl's law at many devices", points=2.0)]
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    paths = []
    for name, nb in SUBMISSIONS.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
        paths.append(folder / f"{name}.ipynb")
    (folder / "not_a_notebook.ipynb").write_text("{this is not json")
    paths.append(folder / "not_a_notebook.ipynb")
    tests = tmp_path_factory.mktemp("instructor_tests")
    (tests / "hidden.py").write_text(HIDDEN_TEST)
    out = tmp_path_factory.mktemp("graded")
    # a student who knows where the gradebook and the instructor tests are: reads the tests, writes the gradebook
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT, f"""
        print(open({str(tests / 'hidden.py')!r}).read())
        with open({str(out / 'gradebook.csv')!r}, 'w') as book:
            book.write('student,lab,score,max_score,status\\ntampers,06,100,5,completed\\n')
        import lab_utils.exercises as ex
        ex.close = lambda got, expected, tol=0: True
        """), folder / "tampers.ipynb")
    paths.append(folder / "tampers.ipynb")
    rows = grade.grade(paths, "06", out, tests_dir=tests, timeout=90, cell_timeout=8, jobs=2)
    return {r.student: r for r in rows}, out


def score(graded, name):
    return {s.name: s.points for s in graded[0][name].scores}


def test_a_correct_submission_gets_every_point_including_the_hidden_test(graded):
    row = graded[0]["correct"]
    assert row.status == "completed" and row.score == row.max_score == 5  # 3 built-in + a 2-point instructor test


def test_reading_the_tests_and_writing_the_gradebook_changes_no_grade(graded):
    assert graded[0]["tampers"].score == 5 and graded[0]["tampers"].status == "completed"
    assert score(graded, "forges")["predict_speedup"] == 0


def test_every_submission_has_one_gradebook_row_whatever_happened(graded):
    rows, out = graded
    with (out / "gradebook.csv").open() as handle:
        book = list(csv.DictReader(handle))
    assert [r["student"] for r in book] == list(SUBMISSIONS) + ["not_a_notebook", "tampers"]
    assert {"student", "lab", "score", "max_score", "status"} <= set(book[0])
    assert all(r["status"] in grade.STATUSES for r in book)
    assert next(r for r in book if r["student"] == "tampers")["score"] == "5"  # what the notebook wrote was replaced


def test_an_infinite_loop_is_interrupted_and_later_answers_still_count(graded):
    row = graded[0]["loops_forever"]
    assert row.status == "timeout" and row.score == 5


def test_sys_exit_is_an_error_in_one_cell_only(graded):
    row = graded[0]["calls_sys_exit"]
    assert row.status == "error" and row.score == 5


@pytest.mark.parametrize("name", ["calls_os_exit", "kills_its_kernel"])
def test_a_dead_kernel_keeps_the_answers_exported_before_it_died(graded, name):
    row = graded[0][name]
    assert row.status == "kernel_died"
    points = score(graded, name)
    assert points["speedup_and_efficiency"] == 1 and points["predict_speedup"] == 0
    assert "did not run to the end" in row.scores[2].message or "not defined" in row.scores[2].message


def test_a_deleted_exercise_scores_zero_with_a_reason_and_the_rest_counts(graded):
    row = graded[0]["deleted_a_cell"]
    assert score(graded, "deleted_a_cell") == {"speedup_and_efficiency": 1, "fit_serial_fraction": 0, "predict_speedup": 1,
                                               "predict_speedup (instructor test)": 2}
    assert "not defined" in next(s for s in row.scores if s.name == "fit_serial_fraction").message


def test_an_exercise_that_raises_does_not_cost_the_later_ones(graded):
    assert score(graded, "first_raises") == {"speedup_and_efficiency": 0, "fit_serial_fraction": 1, "predict_speedup": 1,
                                             "predict_speedup (instructor test)": 2}
    assert "NotImplementedError" in graded[0]["first_raises"].scores[0].message


def test_forged_answers_flags_and_patched_checks_earn_nothing(graded):
    row = graded[0]["forges"]
    assert row.score == 0
    assert "not plain data" in row.scores[0].message
    assert "Hint:" in row.scores[1].message


def test_megabytes_of_output_and_warnings_cost_nothing(graded, tmp_path):
    rows, out = graded
    assert rows["prints_megabytes"].score == 5 and rows["warns_on_stderr"].score == 5
    executed = nbformat.read(out / "prints_megabytes.executed.ipynb", 4)
    longest = max(len(o.get("text", "")) for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert longest < grade.MAX_OUTPUT_CHARS + 100


def test_the_student_never_sees_the_grader_cells_or_the_instructor_tests(graded):
    _, out = graded
    for name in SUBMISSIONS:  # ("tampers" printed the tests itself)
        written = (out / f"{name}.executed.ipynb").read_text() if (out / f"{name}.executed.ipynb").exists() else ""
        feedback = (out / f"{name}.feedback.md").read_text()
        for text in (written, feedback):
            assert "abs(value - expected)" not in text and "export_named" not in text and "hidden.py" not in text


def test_processes_a_submission_leaves_behind_are_killed(graded):
    alive = subprocess.run(["pgrep", "-f", MARKER], capture_output=True, text=True).stdout.split()
    assert alive == []


def test_a_file_that_is_not_a_notebook_is_invalid_with_a_reason(graded):
    row = graded[0]["not_a_notebook"]
    assert row.status == "invalid" and row.score == 0 and "not a readable notebook" in row.message


def test_to_plain_refuses_objects_and_keeps_data():
    class Always:
        def __eq__(self, other):
            return True

    with pytest.raises(TypeError, match="not plain data"):
        exercises.to_plain([1, Always()])
    import numpy as np
    import torch

    assert exercises.to_plain({"a": (np.float32(1.5), torch.tensor([1, 2]))}) == {"a": [1.5, [1, 2]]}


def test_close_compares_plain_data_only():
    assert exercises.close([1.0, [2.0]], [1.0 + 1e-9, [2.0]])
    assert not exercises.close(True, 1.0) and not exercises.close("1", 1.0) and not exercises.close([1.0], [1.0, 2.0])


def test_prepare_exports_after_the_defining_cell_or_at_the_end():
    nb = notebook("x = 1", SPEEDUP, "y = 2")
    prepared = grade.prepare(nb, "06", grade.exercises_for("06"), Path("/tmp/e"), "tok")
    sources = [c.source for c in prepared.cells]
    defining = next(i for i, src in enumerate(sources) if src.lstrip().startswith("def speedup_and_efficiency"))
    assert "export_named('06', 'speedup_and_efficiency'" in sources[defining + 1]
    assert sources[defining + 2] == "y = 2"  # the exercises defined nowhere are exported at the end
    assert "'fit_serial_fraction'" in sources[-2] and "'predict_speedup'" in sources[-1]
    assert all("raises-exception" in c.metadata["tags"] for c in prepared.cells if c.cell_type == "code")


def test_duplicate_student_names_and_unknown_labs_are_refused(tmp_path):
    a, b = tmp_path / "x" / "ann.ipynb", tmp_path / "y" / "ann.ipynb"
    with pytest.raises(ValueError, match="same student"):
        grade.grade([a, b], "06", tmp_path / "out")
    with pytest.raises(ValueError, match="no graded exercises"):
        grade.grade([a], "42", tmp_path / "out")
