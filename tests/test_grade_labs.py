"""Every lab with exercises: its solution scores full marks, its student notebook (stubs) scores 0 — probes only
(the whole-notebook run is covered by test_grade.py and by nbval, which executes every solution once). In the sandbox
where bubblewrap works, without one (and said so in every row) where it does not: grading is right either way."""
import shutil
from pathlib import Path

import pytest

from lab_utils import exercises
from lab_utils.instructor import labs
from lab_utils.instructor.grading import grade

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted({e.lab for e in exercises.REGISTRY.values()})


def test_every_lab_with_exercises_is_graded():
    with_markers = {p.name[:2] for p in labs.solution_notebooks() if "### BEGIN SOLUTION" in p.read_text()}
    assert with_markers == set(LABS)


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS)
def test_the_solution_scores_full_marks_and_the_student_version_zero(lab, tmp_path):
    name = next(p.name for p in labs.solution_notebooks() if p.name.startswith(lab))
    shutil.copy(ROOT / "solutions" / name, tmp_path / "solution.ipynb")
    shutil.copy(ROOT / "notebooks" / name, tmp_path / "student.ipynb")
    rows = {r.student: r for r in grade.grade([tmp_path / "solution.ipynb", tmp_path / "student.ipynb"], lab,
                                               tmp_path / "out", jobs=2, execute_notebooks=False, unsandboxed=True,
                                               say=lambda s: None)}
    solution, student = rows["solution"], rows["student"]
    assert solution.score == solution.max_score > 0, [(s.name, s.points, s.message) for s in solution.scores]
    assert student.score == 0
    assert all("stub" in s.message for s in student.scores), [s.message for s in student.scores]
    assert (tmp_path / "out" / "gradebook.csv").exists()
