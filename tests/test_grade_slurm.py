"""grade --slurm: each submission's sandboxed run is a task of a job array on the cluster's nodes; scored in the
grader. The gradebook equals local grading of the same submissions; a task killed mid-run is retried once, and a task
lost twice still gets a row. Runs where a Slurm cluster answers (CI: `make cluster` as root); skipped elsewhere."""
import threading
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from lab_utils.labs.lab11 import slurm
from lab_utils.instructor.grading import grade
from lab_utils.instructor.grading.sandbox import machine
from test_grade import HONEST, HONEST_IMPORTS, PREDICT, SERIAL, SPEEDUP, STUBS, notebook

pytestmark = pytest.mark.skipif(slurm.find_cluster() is None, reason=slurm.SKIPPED)


def submissions(folder):
    # one of each kind of row (a class of the same kinds twice grades on Slurm as this one does, at twice the cost):
    # full marks two ways, a stub, partial credit with a wrong answer, a dying kernel, a failing cell, two refusals
    made = {"correct": notebook(SERIAL, PREDICT, SPEEDUP), "honest_names": notebook(HONEST_IMPORTS, HONEST),
            "stub": notebook(STUBS),
            "partial": notebook(SPEEDUP, "def fit_serial_fraction(points):\n    raise NotImplementedError",
                                "def predict_speedup(serial_fraction, devices):\n    return devices"),
            "crashes": notebook(SPEEDUP, "import os\nos._exit(1)", SERIAL, PREDICT),
            "calls_sys_exit": notebook(SPEEDUP, "import sys\nsys.exit(1)", SERIAL, PREDICT)}
    paths = []
    for name, nb in made.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
        paths.append(folder / f"{name}.ipynb")
    (folder / "not_a_notebook.ipynb").write_text("{this is not json")
    no_params = notebook(SPEEDUP)
    no_params.cells[1].metadata["tags"] = []
    nbformat.write(no_params, folder / "no_parameters.ipynb")
    return paths + [folder / "not_a_notebook.ipynb", folder / "no_parameters.ipynb"]


def summary(rows):
    return [(r.student, r.score, r.max_score, r.status, [(s.name, s.points) for s in r.scores]) for r in rows]


# what local grading gives these submissions, row by row (tests/test_grade.py grades the same kinds locally, in the
# sandbox, and asserts the same): full marks, a stub's zero, partial credit, answers kept when the kernel dies or a
# cell fails, and zero for what cannot be read. Slurm must give exactly these
EXERCISES = ("speedup_and_efficiency", "fit_serial_fraction", "predict_speedup")
LOCAL_GRADEBOOK = [(name, score, 3.0, status, list(zip(EXERCISES, points))) for name, score, status, points in (
    ("correct", 3.0, "completed", (1.0, 1.0, 1.0)), ("honest_names", 3.0, "completed", (1.0, 1.0, 1.0)),
    ("stub", 0.0, "completed", (0.0, 0.0, 0.0)), ("partial", 1.0, "completed", (1.0, 0.0, 0.0)),
    ("crashes", 3.0, "kernel_died", (1.0, 1.0, 1.0)), ("calls_sys_exit", 3.0, "error", (1.0, 1.0, 1.0)),
    ("not_a_notebook", 0.0, "invalid", (0.0, 0.0, 0.0)), ("no_parameters", 0.0, "invalid", (0.0, 0.0, 0.0)))]


@pytest.mark.slow
def test_grading_on_slurm_gives_the_local_gradebook(tmp_path):
    """(Graded on Slurm only: grading the same 8 locally again, ~25 CPU-seconds, would re-check what test_grade.py's
    hostile suite checks of the same kinds of submission.)"""
    if not machine.detect_isolation().complete:
        pytest.skip("no sandbox on this machine")
    paths = submissions(tmp_path)
    said = []
    on_slurm = grade.grade(paths, "10", tmp_path / "slurm-out", timeout=60, cell_timeout=10, seed=7,
                           slurm={}, say=said.append)
    assert summary(on_slurm) == LOCAL_GRADEBOOK
    assert any("job array" in line for line in said)
    assert all(r.sandbox.startswith("sandboxed") for r in on_slurm if r.status != "invalid")
    assert (tmp_path / "slurm-out" / "gradebook.csv").read_text().count("\n") == 9


def _kill_first_task_once(seen):
    def on_submit(job_id, attempt):
        if attempt == 0:
            def kill():
                for _ in range(300):  # cancel task 0 once it runs
                    if any(j.get("ArrayTaskId") == "0" and j.get("JobState") == "RUNNING" for j in slurm.job_info(job_id)):
                        slurm.cancel(f"{job_id}_0")
                        seen.append(job_id)
                        return
                    time.sleep(0.2)
            threading.Thread(target=kill, daemon=True).start()
    return on_submit


@pytest.mark.slow
def test_a_task_killed_mid_run_is_retried_once_and_a_lost_one_still_gets_a_row(tmp_path):
    if not machine.detect_isolation().complete:
        pytest.skip("no sandbox on this machine")
    nb = notebook(SPEEDUP, SERIAL, PREDICT)
    nb.cells.append(new_code_cell("import time\ntime.sleep(3)"))  # long enough to be killed while it runs
    nbformat.write(nb, tmp_path / "correct.ipynb")
    nbformat.write(notebook(STUBS), tmp_path / "stub.ipynb")
    paths = [tmp_path / "correct.ipynb", tmp_path / "stub.ipynb"]
    killed = []
    rows = grade.grade(paths, "10", tmp_path / "retried", timeout=60, cell_timeout=10, seed=3, say=lambda s: None,
                       slurm={"retries": 1, "on_submit": _kill_first_task_once(killed)})
    assert killed and [(r.student, r.score, r.status) for r in rows] == [("correct", 3, "completed"), ("stub", 0, "completed")]
    killed.clear()
    rows = grade.grade(paths, "10", tmp_path / "lost", timeout=60, cell_timeout=10, seed=3, say=lambda s: None,
                       slurm={"retries": 0, "on_submit": _kill_first_task_once(killed)})
    assert killed and [(r.student, r.status) for r in rows] == [("correct", "lost"), ("stub", "completed")]
    assert "lost" in rows[0].message and rows[0].max_score == 3
