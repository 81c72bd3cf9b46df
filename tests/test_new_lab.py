"""A lab's pieces are found by its number, and a new lab is added by the recipe "Adding a lab"
(lab_utils/instructor/README.md): a lab 99, scaffolded in a temporary copy of the course, goes through assign, course,
grade, the benchmarks and the GPU checks without a line changed anywhere but its own files: its notebook and its
folder lab_utils/labs/lab99/ (declaration in __init__.py, exercises, benchmark, GPU check)."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lab_utils import exercises
from lab_utils.instructor import labs
from lab_utils.instructor.course import headless
from lab_utils.instructor.gpu import registry as gpu_check

ROOT = Path(__file__).resolve().parents[1]


# ---- the course's own labs -----------------------------------------------------------------------------------------

def test_a_lab_is_found_by_its_number():
    lab = labs.find_lab(9)
    assert lab == labs.find_lab("9") == labs.find_lab("09") and lab.solution.name == "09_inference_throughput.ipynb"
    assert lab.notebook == ROOT / "notebooks" / lab.solution.name and lab.notebook.exists()
    assert lab.lesson == ROOT / "lab_utils" / "labs" / "lab09" / "lesson.py"
    assert lab.exercises == ROOT / "lab_utils" / "labs" / "lab09" / "exercises.py"
    assert "lab_utils.labs.lab09.serving" in lab.learner_modules()
    assert [b.name for b in lab.declared.benchmarks] == ["inference"] and lab.declared.gpu_check.module == \
        "lab_utils.labs.lab09.gpu_check"
    assert labs.find_lab(0).lesson is None and labs.find_lab(0).declared.gpu_check is None
    with pytest.raises(ValueError, match=r"unknown lab 42; this course has \['00', '01'"):
        labs.find_lab(42)


def test_every_declaration_belongs_to_a_lab_and_names_what_exists():
    numbers = [lab.number for lab in labs.all_labs()]
    assert numbers == [f"{n:02d}" for n in range(14)]
    assert set(labs.DECLARED) <= set(numbers)
    names = [b.name for _, b in labs.benchmarks()]
    assert len(names) == len(set(names)), names
    def file(module: str) -> Path:
        return ROOT.joinpath(*module.split(".")).with_suffix(".py")

    for lab, b in labs.benchmarks():
        assert {file(ref.rpartition(".")[0]).exists() for ref in (b.measure, b.show)} == {True}, b
        assert b.measure.startswith(f"lab_utils.labs.lab{lab}."), b
    for lab, check in labs.gpu_checks():
        assert check.module == f"lab_utils.labs.lab{lab}.gpu_check" and file(check.module).exists(), check


def test_the_registries_are_derived_from_the_declarations_and_the_files():
    """The benchmarks, the GPU checks, the test sizes and the exercises are each the labs' own, in lab order."""
    from lab_utils.instructor.bench.registry import BENCHES

    assert [(b.lab, name) for name, b in BENCHES.items()] == [(lab, b.name) for lab, b in labs.benchmarks()]
    assert list(BENCHES) == ["overhead", "classmates", "dp", "ddp", "pipeline", "tf", "collectives", "memory", "async",
                             "inference", "cluster", "record"]  # what `make bench` ran before it asked `bench --list`
    assert BENCHES["inference"].measure.__module__ == "lab_utils.labs.lab09.bench"
    assert [(c.lab, c.run.__module__, c.limit_s) for c in gpu_check.CHECKS] == \
        [(lab, c.module, c.limit_s) for lab, c in labs.gpu_checks()]
    assert gpu_check.QUICK == {"01", "03", "05", "09"}
    assert headless.TEST_PARAMETERS == {lab: d.test_size for lab, d in labs.DECLARED.items() if d.test_size}
    with_exercises = {lab.number for lab in labs.all_labs() if lab.exercises}
    assert {e.lab for e in exercises.REGISTRY.values()} == with_exercises
    assert [lab for lab, d in labs.DECLARED.items() if d.tensorflow] == ["05"]


def test_labs_lists_a_labs_pieces_and_gpu_check_refuses_a_lab_without_one():
    shown = subprocess.run([sys.executable, "-m", "lab_utils", "labs", "9"], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    for piece in ("solutions/09_inference_throughput.ipynb", "notebooks/09_inference_throughput.ipynb",
                  "lab_utils/labs/lab09/lesson.py", "lab_utils/labs/lab09/exercises.py", "lab_utils.labs.lab09.serving",
                  "run_s=0.25",
                  "inference (lab_utils/labs/lab09/bench.py)", "lab_utils/labs/lab09/gpu_check.py (90 s"):
        assert piece in shown.stdout, shown.stdout
    refused = subprocess.run([sys.executable, "-m", "lab_utils", "gpu-check", "--labs", "10"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "lab(s) 10 declare no GPU check" in refused.stderr, refused.stderr


# ---- lab 99, added by the recipe in a copy of the course -----------------------------------------------------------

LESSON = '''def scaled_sum(values, scale):
    """The lesson's code: what the lab teaches, exported to lab_utils/labs/lab99/lesson.py."""
    return scale * sum(values)'''
EXERCISE = '''def mean_of(values):
    """The mean of a list of numbers."""
    ### BEGIN SOLUTION
    return sum(values) / len(values)
    ### END SOLUTION'''
EXERCISES_MODULE = '''"""Lab 99: the mean of a list."""
from __future__ import annotations

from lab_utils.exercises.core import Exercise, close, register


def _cases(rng):
    return [[2.0, 4.0]] + [[round(rng.uniform(-5, 5), 3) for _ in range(rng.randint(1, 6))] for _ in range(4)]


def _run(mean_of, cases):
    return [float(mean_of(values)) for values in cases]


def _expected(cases):
    return [sum(values) / len(values) for values in cases]


def _judge(got, expected, cases):
    if close(got, expected):
        return 1.0, "the means are right"
    if close(got, [sum(values) for values in cases]):
        return 0.0, "that is the sum: divide it by the number of values"
    return 0.0, "the mean of a list is its sum over its length"


register(Exercise("99", "mean_of", _cases, _run, _expected, _judge, "the sum over the number of values"))
'''
BENCH_MODULE = '''"""Lab 99's benchmark: a sum, timed."""
import json
import statistics
import time


def bench(*, repeats: int = 3) -> dict:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sum(range(100_000))
        times.append(time.perf_counter() - start)
    return {"benchmark": "scaffold", "repeats": repeats, "median_s": statistics.median(times)}


def print_bench(result: dict) -> None:
    print(json.dumps(result))
'''
GPU_MODULE = '''"""Lab 99's GPU check: its sum on the GPU against the CPU's."""


def gpu_check() -> dict[str, str]:
    import torch

    if not torch.cuda.is_available():
        return {"sum on cuda:0 = sum on the CPU": "skipped: no GPU"}
    values = torch.arange(1000.0)
    same = torch.equal(values.cuda().sum().cpu(), values.sum())
    return {"sum on cuda:0 = sum on the CPU": "passed" if same else "failed: the sums differ"}
'''
DECLARATION = '''"""Lab 99: a scaffolded lab, all in this folder."""

TEST_SIZE = {"repeats": 2}
BENCHMARKS = (dict(name="scaffold", measure="lab_utils.labs.lab99.bench.bench",
                   show="lab_utils.labs.lab99.bench.print_bench", options=(), repeats=3),)
GPU_CHECK = dict(module="lab_utils.labs.lab99.gpu_check", limit_s=60)
'''


def lab99_notebook() -> nbformat.NotebookNode:
    """A lab of the course's shape: title, parameters cell, imports, a lesson cell, an exercise and its self-check."""
    parameters = new_code_cell('seed = 0\nresults_dir = "results"\nrepeats = 5')
    parameters.metadata["tags"] = ["parameters"]
    lesson = new_code_cell(LESSON)
    lesson.metadata["tags"] = ["lesson"]
    nb = new_notebook(cells=[
        new_markdown_cell("# Lab 99 — a scaffolded lab\n\n**Run time:** about 2 s on a 2-core CPU"), parameters,
        new_code_cell("from lab_utils.exercises import check"), lesson,
        new_code_cell('print("repeats:", repeats)\nprint("lesson:", scaled_sum([1, 2, 3], scale=2))'),
        new_code_cell(EXERCISE), new_code_cell("check(mean_of)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture
def course_copy():
    """A copy of the course (lab_utils, datasets, solutions) in a folder every uid can read (the grader runs a
    submission as an unprivileged uid), with lab 99 added as the README's recipe says."""
    folder = Path(tempfile.mkdtemp(prefix="lab99-course-"))
    try:
        folder.chmod(0o755)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for part in ("lab_utils", "datasets", "solutions"):
            shutil.copytree(ROOT / part, folder / part, ignore=ignore)
        package = folder / "lab_utils"
        nbformat.write(lab99_notebook(), folder / "solutions" / "99_scaffold.ipynb")
        lab = package / "labs" / "lab99"
        lab.mkdir()
        (lab / "__init__.py").write_text(DECLARATION)
        (lab / "exercises.py").write_text(EXERCISES_MODULE)
        (lab / "bench.py").write_text(BENCH_MODULE)
        (lab / "gpu_check.py").write_text(GPU_MODULE)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def in_copy(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m lab_utils ARGS` (or `python -c CODE` for args ("-c", code)) on the copy's lab_utils."""
    argv = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "lab_utils", *args]
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_new_lab_99_goes_through_assign_course_grade_bench_and_gpu_check(course_copy, tmp_path):
    copy = course_copy
    # assign: the student notebook (solution stubbed) and the lesson module, generated from the notebook
    in_copy(copy, "assign")
    student = (copy / "notebooks" / "99_scaffold.ipynb").read_text()
    assert "# YOUR CODE HERE" in student and "sum(values) / len(values)" not in student
    lesson = (copy / "lab_utils" / "labs" / "lab99" / "lesson.py").read_text()
    assert "def scaled_sum(values, scale):" in lesson and "GENERATED" in lesson
    # found by its number: every piece, from its files and its declaration
    shown = in_copy(copy, "labs", "99").stdout
    for piece in ("solutions/99_scaffold.ipynb", "notebooks/99_scaffold.ipynb", "lab_utils/labs/lab99/lesson.py",
                  "lab_utils/labs/lab99/exercises.py", "lab_utils.exercises", "repeats=2",
                  "scaffold (lab_utils/labs/lab99/bench.py)", "lab_utils/labs/lab99/gpu_check.py (60 s)"):
        assert piece in shown, shown

    # course: executed headless at its declared test size; its self-check passes
    ran = in_copy(copy, "course", "--labs", "99", "--size", "test", "--out", str(tmp_path / "run"), timeout=180)
    assert re.search(r"99_scaffold\.ipynb: [\d.]+ s, ok", ran.stdout), ran.stdout
    executed = nbformat.read(tmp_path / "run" / "99_scaffold.ipynb", 4)
    printed = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                      for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "repeats: 2" in printed and "lesson: 12" in printed and "PASS  mean_of" in printed, printed

    # grade: the solution scores full marks, the student notebook (its stub) 0
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    shutil.copy(copy / "solutions" / "99_scaffold.ipynb", submissions / "ann.ipynb")
    shutil.copy(copy / "notebooks" / "99_scaffold.ipynb", submissions / "bob.ipynb")
    in_copy(copy, "grade", "--lab", "99", str(submissions / "ann.ipynb"), str(submissions / "bob.ipynb"),
            "--out", str(tmp_path / "graded"), "--jobs", "2", "--timeout", "120", "--unsandboxed", timeout=240)
    with open(tmp_path / "graded" / "gradebook.csv", newline="") as handle:
        rows = {r["student"]: r for r in csv.DictReader(handle)}
    assert (rows["ann"]["score"], rows["ann"]["max_score"], rows["ann"]["status"]) == ("1", "1", "completed"), rows
    assert rows["bob"]["score"] == "0" and rows["bob"]["lab"] == "99", rows

    # the benchmark and the GPU check it declares: listed, run by name, and (the check) run in a process of its own
    code = ("import json\nfrom lab_utils.instructor import cli\nfrom lab_utils.instructor.gpu import registry as gpu_check\n"
            "cli.main(['bench', '--list'])\ncli.main(['bench', 'scaffold', '--repeats', '2'])\n"
            "check = next(c for c in gpu_check.CHECKS if c.lab == '99')\n"
            "print('CHECK', json.dumps(gpu_check.run_check(check.run, check.limit_s, quick=False)))\n"
            "cli.main(['gpu-check', '--labs', '99'])\n")
    out = in_copy(copy, "-c", code, timeout=180).stdout.splitlines()
    assert out[:13] == ["overhead", "classmates", "dp", "ddp", "pipeline", "tf", "collectives", "memory", "async",
                        "inference", "cluster", "record", "scaffold"], out
    assert json.loads(out[13]) == {"benchmark": "scaffold", "repeats": 2, "median_s": json.loads(out[13])["median_s"]}
    verdicts = json.loads(out[14].removeprefix("CHECK "))
    assert list(verdicts) == ["sum on cuda:0 = sum on the CPU"] and \
        verdicts["sum on cuda:0 = sum on the CPU"] in ("passed", "skipped: no GPU"), verdicts
    assert set(json.loads(out[-1])["checks"]) in ({"lab 99"}, {"lab 00: hardware plan", "lab 99: sum on cuda:0 = sum on "
                                                                                         "the CPU"}), out[-1]

    # nothing of lab 99 reached the course itself
    assert not list((ROOT / "notebooks").glob("99_*")) and not (ROOT / "lab_utils" / "labs" / "lab99").exists()
