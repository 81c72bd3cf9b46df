"""Every lab with exercises: its solution scores full marks, its student notebook (stubs) scores 0 — both graded."""
import shutil
from pathlib import Path

import pytest

from lab_utils import course, exercises, grade

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted({e.lab for e in exercises.BUILT_IN})


def test_every_lab_with_exercises_is_graded():
    with_markers = {p.name[:2] for p in course.solution_notebooks() if "### BEGIN SOLUTION" in p.read_text()}
    assert with_markers == set(LABS)


@pytest.mark.parametrize("lab", LABS)
def test_the_solution_scores_full_marks_and_the_student_version_zero(lab, tmp_path):
    name = next(p.name for p in course.solution_notebooks() if p.name.startswith(lab))
    shutil.copy(ROOT / "solutions" / name, tmp_path / "solution.ipynb")
    shutil.copy(ROOT / "notebooks" / name, tmp_path / "student.ipynb")
    rows = {r.student: r for r in grade.grade([tmp_path / "solution.ipynb", tmp_path / "student.ipynb"], lab,
                                               tmp_path / "out", timeout=400, jobs=2)}
    solution, student = rows["solution"], rows["student"]
    assert solution.status == "completed" and solution.score == solution.max_score > 0, solution.scores
    assert student.score == 0 and student.status in ("completed", "error")
    assert all("NotImplementedError" in s.message or "not defined" in s.message for s in student.scores)
    assert (tmp_path / "out" / "student.executed.ipynb").exists() and (tmp_path / "out" / "gradebook.csv").exists()
