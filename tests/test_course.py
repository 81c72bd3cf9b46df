import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from lab_utils.instructor import labs
from lab_utils.instructor.course import assign, committed_outputs, headless


def test_strip_solutions_keeps_indentation_and_surrounding_code():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\nprint(f)"
    out = assign.strip_solutions(source, "nb")
    assert out.splitlines() == ["def f(x):", "    # YOUR CODE HERE", f"    {assign.STUB}", "", "print(f)"]
    assert "x + 1" not in out


def test_a_cell_writing_a_shell_script_gets_a_shell_stub():
    """Learner s11r2h (lab 11 cell 14): Python's raise inside a %%writefile bash script read as Python."""
    source = "%%writefile {f}\n#!/bin/bash\n### BEGIN SOLUTION\n#SBATCH --nodes=2\n### END SOLUTION\nsrun hostname"
    out = assign.strip_solutions(source, "nb")
    assert out.splitlines()[2:4] == ["# YOUR CODE HERE", assign.SHELL_STUB] and "NotImplementedError" not in out
    python = "%%writefile f.py\n#!/usr/bin/env python\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION"
    assert assign.STUB in assign.strip_solutions(python, "nb")


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n### END SOLUTION", "line 2: '### END SOLUTION' without a matching"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "line 2: '### BEGIN SOLUTION' inside another"),
])
def test_broken_markers_are_reported(source, message):
    with pytest.raises(ValueError, match=message):
        assign.strip_solutions(source, "lab.ipynb, cell 3")


def make_solution(folder, name="00_demo.ipynb", body="x = 1"):
    cell = new_code_cell(f"### BEGIN SOLUTION\n{body}\n### END SOLUTION\nprint(x)", execution_count=3,
                         outputs=[new_output("stream", name="stdout", text="1\n")])
    cell.metadata["papermill"] = {"duration": 1}
    nb = new_notebook(cells=[new_markdown_cell("# Demo"), cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def test_student_version_has_stubs_and_no_outputs(tmp_path):
    nb = nbformat.read(make_solution(tmp_path), 4)
    student = assign.student_version(nb, "demo")
    code = student.cells[1]
    assert code.outputs == [] and code.execution_count is None and "papermill" not in code.metadata
    assert "NotImplementedError" in code.source and "x = 1" not in code.source
    assert nb.cells[1].outputs, "the solution itself is not modified"


def test_markers_in_markdown_are_refused():
    nb = new_notebook(cells=[new_markdown_cell("### BEGIN SOLUTION")])
    with pytest.raises(ValueError, match="belong in code cells"):
        assign.student_version(nb, "demo")


def test_assign_writes_and_check_detects_drift(tmp_path):
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    make_solution(solutions)
    assert assign.assign(solutions, notebooks, check=True) == [f"{notebooks / '00_demo.ipynb'} is missing"]
    assert assign.assign(solutions, notebooks) == []
    assert assign.assign(solutions, notebooks, check=True) == []
    make_solution(solutions, body="x = 2  # changed")
    nb = nbformat.read(solutions / "00_demo.ipynb", 4)
    nb.cells[0].source = "# Demo, edited"
    nbformat.write(nb, solutions / "00_demo.ipynb")
    assert "differs from what" in assign.assign(solutions, notebooks, check=True)[0]
    (notebooks / "99_orphan.ipynb").write_text("{}")
    assign.assign(solutions, notebooks)
    assert assign.assign(solutions, notebooks, check=True) == [f"{notebooks / '99_orphan.ipynb'} has no source in solutions/"]


def test_committed_student_notebooks_match_solutions():
    problems = assign.assign(check=True)
    assert problems == [], "run `python -m lab_utils assign` and commit notebooks/:\n" + "\n".join(problems)


def test_every_lab_has_a_parameters_cell_and_results_dir():
    for path in labs.solution_notebooks():
        nb = nbformat.read(path, 4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
        assert "results_dir" in tagged[0].source and "seed" in tagged[0].source


def test_test_size_parameters_are_declared_by_their_lab_and_keep_their_types():
    """headless.TEST_PARAMETERS (what nbval and `course --size test` append) only shrinks parameters the lab declares,
    with values of the declared type, and parameter_lines writes them as Python that gives the same values."""
    notebooks = {path.name[:2]: path for path in labs.solution_notebooks()}
    assert set(headless.TEST_PARAMETERS) <= set(notebooks)
    for lab, overrides in headless.TEST_PARAMETERS.items():
        params = next(c for c in nbformat.read(notebooks[lab], 4).cells if "parameters" in c.metadata.get("tags", []))
        declared = {}
        exec(params.source, {}, declared)
        for name, value in overrides.items():
            assert name in declared, f"lab {lab}'s parameters cell declares no {name!r}"
            assert type(value) is type(declared[name]), (lab, name, value, declared[name])
        injected = dict(declared)
        exec(headless.parameter_lines(overrides, "test size"), {}, injected)
        assert injected == {**declared, **overrides}


@pytest.mark.slow
def test_nbval_runs_the_labs_with_their_test_parameters(pytester):
    """The pytest plugin appends a lab's test-size parameters to the parameters cell nbval runs; --lab-size full
    leaves the notebook's own defaults."""
    cell = nbformat.v4.new_code_cell("seed = 0\ntimed_steps = 8\nprint(timed_steps)")
    cell.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, pytester.path / "02_demo.ipynb")
    pytester.makeconftest("""
import nbval.plugin

def pytest_collection_modifyitems(items):
    for item in items:
        print("SOURCE", repr(item.cell.source))
""")
    source = cell.source
    for size, want in (("test", source + "\n" + headless.parameter_lines(headless.TEST_PARAMETERS["02"], "test size")),
                       ("full", source)):
        result = pytester.runpytest_subprocess("--nbval-lax", "--collect-only", "-s", f"--lab-size={size}",
                                               "-p", "no:cacheprovider", "-p", "lab_utils.instructor.pytest_plugin",
                                               "02_demo.ipynb")
        assert [line for line in result.outlines if line.startswith("SOURCE")] == [f"SOURCE {want!r}"], result.outlines


def test_the_slowest_files_named_first_exist():
    from lab_utils.instructor.pytest_plugin import SLOWEST_FIRST

    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
    assert [name for name in SLOWEST_FIRST if not (labs.ROOT / name).is_file()] == []


def test_the_slowest_files_are_found_in_lab_folders_too():
    """A file under tests/labNN/ is ranked by its path from the root, not by its folder's name."""
    from types import SimpleNamespace

    from lab_utils.instructor.pytest_plugin import SLOWEST_FIRST, _rank

    for name in SLOWEST_FIRST:
        assert _rank(SimpleNamespace(fspath=labs.ROOT / name), labs.ROOT) == SLOWEST_FIRST.index(name)
    assert _rank(SimpleNamespace(fspath=labs.ROOT / "tests" / "test_not_slow.py"), labs.ROOT) == len(SLOWEST_FIRST)


def test_select_labs():
    sources = labs.solution_notebooks()
    assert [p.name[:2] for p in headless.select("1,00", sources)] == ["01", "00"]
    assert headless.select(None, sources) == sources
    with pytest.raises(ValueError, match=r"unknown lab\(s\) \['42'\]"):
        headless.select("42", sources)


def test_run_notebook_reports_the_failing_cell(tmp_path):
    nb = new_notebook(cells=[new_code_cell("results_dir = None", metadata={"tags": ["parameters"]}),
                             new_code_cell("print('fine')"), new_code_cell("1 / 0")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "src" / "07_broken.ipynb"
    src.parent.mkdir()
    nbformat.write(nb, src)
    run = headless.run_notebook(src, tmp_path, {"results_dir": str(tmp_path)}, cell_timeout=60)
    assert run.error is not None and "ZeroDivisionError" in run.error and "cell" in run.error
    assert "07_broken.ipynb failed at" in headless.failures_message([run])
    executed = nbformat.read(tmp_path / "07_broken.ipynb", 4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)


def test_a_cell_that_times_out_is_named_and_the_notebook_as_far_as_it_ran_is_kept(tmp_path):
    nb = new_notebook(cells=[new_code_cell("results_dir = None", metadata={"tags": ["parameters"]}),
                             new_code_cell("print('fine')"), new_code_cell("import time\ntime.sleep(60)"),
                             new_code_cell("print('never')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "src" / "07_slow.ipynb"
    src.parent.mkdir()
    nbformat.write(nb, src)
    run = headless.run_notebook(src, tmp_path, {"results_dir": str(tmp_path)}, cell_timeout=3)
    assert run.error is not None and "CellTimeoutError" in run.error, run.error
    assert "cell 3 (code cell 4, starting `import time`)" in run.error and "3 s" in run.error, run.error  # injected cell
    executed = nbformat.read(tmp_path / "07_slow.ipynb", 4)
    assert "fine" in "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))


def test_the_default_cell_timeout_scales_with_how_slow_the_machine_is_now(monkeypatch):
    from lab_utils import hardware

    monkeypatch.setattr(hardware, "slowness", lambda repeats=5: 3.0)
    assert headless.cell_limit(None) == 3 * headless.DEFAULT_CELL_TIMEOUT_S
    assert headless.cell_limit(42) == 42


def test_summary_lists_times_failures_and_results(tmp_path):
    from lab_utils import hardware, measure

    hw = hardware.HardwareReport("h", 2, (), "3.11", "2.13.0", "-")
    measure.write_result(measure.Result(lab="01", framework="torch", strategy="single-device", world_size=1,
                                        device="cpu", batch_size=64, samples_per_s=1000, wall_s=2, accuracy=0.9,
                                        threads=2, workload="digits"), tmp_path, hw)
    runs = [headless.NotebookRun("00_setup", 3.5), headless.NotebookRun("01_cnn", 7.0, "cell 4: ValueError: bad")]
    text = headless.course_summary(runs, tmp_path)
    assert "00_setup" in text and "FAILED: cell 4: ValueError: bad" in text and "10.5" in text
    assert "single-device" in text and "90.0%" in text and "speedup" in text
    assert headless.failures_message(runs) == "01_cnn.ipynb failed at cell 4: ValueError: bad"


def test_run_times_in_the_readme_and_headers_come_from_the_committed_run():
    times = committed_outputs.run_times()
    assert set(times) == {p.name[:2] for p in labs.solution_notebooks()}, "run `make outputs`"
    assert committed_outputs.update_run_times(times, check=True) == []


def test_run_times_are_written_where_they_disagree(tmp_path):
    readme = tmp_path / "README.md"
    other_table = "## On your hardware\n\n| lab | CPU | one GPU | many |\n|---|---|---|---|\n| 00 | cores | a GPU | GPUs |\n"
    readme.write_text("## Course map\n\n| lab | you learn | 2-core CPU | GPU |\n|---|---|---|---|\n"
                      "| 00 setup | things | 9 s | not measured |\n\n" + other_table)
    problems = committed_outputs.update_run_times({"00": 4.4}, column="gpu", readme=readme)
    assert problems == ["README course map, lab 00: gpu time says 'not measured', the run took 4 s"]
    assert "| 00 setup | things | 9 s | 4 s |" in readme.read_text()
    assert readme.read_text().endswith(other_table), "a table outside the course map was rewritten"
    header = tmp_path / "00_setup.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# Lab 00\n\n**Run time:** about\n9 s on a 2-core CPU.")]), header)
    committed_outputs.update_run_times({"00": 5.2}, readme=readme, notebooks=[header])
    assert "| 00 setup | things | 5 s | 4 s |" in readme.read_text() and readme.read_text().endswith(other_table)
    # the time is rewritten where it stands: the cell's line breaks stay (lab 11's wrapped header became 195 columns)
    assert "**Run time:** about\n5 s on a quiet 2-core CPU." in nbformat.read(header, 4).cells[0].source
    assert committed_outputs.update_run_times({"00": 4.4}, column="gpu", check=True, readme=readme) == []
    # checking: the times are "about" one run's; another run within 2x agrees, one 2.5x slower does not
    assert committed_outputs.update_run_times({"00": 7.4}, check=True, readme=readme, notebooks=[header]) == []
    assert len(committed_outputs.update_run_times({"00": 13.0}, check=True, readme=readme, notebooks=[header])) == 2


def code_of(lab: str) -> str:
    """The code a learner reads in a lab's solution: its code cells."""
    path = next(p for p in labs.solution_notebooks() if p.name.startswith(lab))
    return "\n".join(c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code")


@pytest.mark.parametrize("lab, needed", [
    ("03", ["dist.init_process_group(", "DistributedSampler(", ".set_epoch(", "DDP(", "dist.destroy_process_group("]),
    ("04", ["dist.recv(", "isend("]),
    ("05", ["strategy.run("]),
    ("06", ["dist.send(", "dist.recv("]),
])
def test_the_parallel_code_is_in_the_notebook(lab, needed):
    code = code_of(lab)
    assert [n for n in needed if n not in code] == []


def test_every_lab_walks_data_model_strategy_measure_in_order():
    for path in labs.solution_notebooks():
        headings = [line for c in nbformat.read(path, 4).cells if c.cell_type == "markdown"
                    for line in c.source.splitlines() if line.startswith("## ")]
        found = [next((i for i, h in enumerate(headings) if step in h), None) for step in ("Data", "Model", "Strategy", "Measure")]
        assert None not in found and found == sorted(found), f"{path.name}: {headings}"


# ---- lesson cells: the notebook is the source of lab_utils/labs/labNN/lesson.py -------------------------------------

def make_lesson(folder, name="03_demo.ipynb", body="    return np.sqrt(x) + OFFSET"):
    """A solution with an import cell, a lesson cell (a function and a constant), and a cell that runs it."""
    imports = new_code_cell("import numpy as np\nimport json\nfrom pathlib import Path")
    lesson = new_code_cell(f"# NBVAL_IGNORE_OUTPUT\nOFFSET = 1\n\n\ndef root(x):\n    \"\"\"A lesson.\"\"\"\n{body}\n\n"
                           "print(root(4))", execution_count=2, outputs=[new_output("stream", name="stdout", text="3\n")])
    lesson.metadata["tags"] = ["lesson"]
    nb = new_notebook(cells=[new_markdown_cell("# Demo"), imports, lesson, new_code_cell("root(9)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def test_assign_exports_lesson_cells_and_check_detects_a_one_line_edit(tmp_path):
    solutions, notebooks, lessons = tmp_path / "solutions", tmp_path / "notebooks", tmp_path / "lessons"
    lessons.mkdir()
    make_lesson(solutions)
    make_solution(solutions)  # 00_demo: no lesson cell, no module
    assert assign.assign(solutions, notebooks, lessons_dir=lessons, check=True) == [
        f"{notebooks / '00_demo.ipynb'} is missing", f"{notebooks / '03_demo.ipynb'} is missing", f"{lessons / 'lab03' / 'lesson.py'} is missing"]
    assert assign.assign(solutions, notebooks, lessons_dir=lessons) == []
    assert sorted(str(p.relative_to(lessons)) for p in lessons.rglob("*.py")) == ["lab03/lesson.py"]
    text = (lessons / "lab03" / "lesson.py").read_text()
    assert "GENERATED by `python -m lab_utils assign`" in text and "Do not edit" in text
    assert "03_demo.ipynb, cell 2 (id " in text  # each block names its source cell
    assert "import numpy as np" in text and "import json" not in text and "Path" not in text  # only what it uses
    assert "print(root(4))" not in text and "NBVAL" not in text  # the cell's run stays in the notebook
    namespace = {}
    exec(compile(text, "lab03.py", "exec"), namespace)
    assert namespace["root"](9) == 4.0 and namespace["__all__"] == ["root"]
    assert "lesson" in nbformat.read(notebooks / "03_demo.ipynb", 4).cells[2].metadata["tags"]  # kept for the learner
    assert assign.assign(solutions, notebooks, lessons_dir=lessons, check=True) == []
    # a one-line edit of the lesson cell, not re-exported: the check fails, naming the module
    path = solutions / "03_demo.ipynb"
    nb = nbformat.read(path, 4)
    nb.cells[2].source = nb.cells[2].source.replace("np.sqrt(x) + OFFSET", "np.sqrt(x) + 2 * OFFSET")
    nbformat.write(nb, path)
    problems = assign.assign(solutions, notebooks, lessons_dir=lessons, check=True)
    assert f"{lessons / 'lab03' / 'lesson.py'} differs from what the lesson cells of {path} export" in problems
    assign.assign(solutions, notebooks, lessons_dir=lessons)
    assert "np.sqrt(x) + 2 * OFFSET" in (lessons / "lab03" / "lesson.py").read_text()
    # a module no notebook generates any more is reported, then removed
    nb.cells[2].metadata["tags"] = []
    nbformat.write(nb, path)
    assert assign.assign(solutions, notebooks, lessons_dir=lessons, check=True)[-1] == (
        f"{lessons / 'lab03' / 'lesson.py'} is generated from no notebook's lesson cells")
    assign.assign(solutions, notebooks, lessons_dir=lessons)
    assert not (lessons / "lab03" / "lesson.py").exists()


def test_an_exercise_solution_in_a_lesson_cell_is_exported_whole_and_stripped_for_the_learner(tmp_path):
    """An exercise's reference is the solution's cell (tagged `lesson`): the module gets the whole solution, the student
    notebook the stub, and a drift between the solution and the module fails the check."""
    solutions, notebooks, lessons = tmp_path / "solutions", tmp_path / "notebooks", tmp_path / "lessons"
    lessons.mkdir()
    path = make_lesson(solutions, body="    ### BEGIN SOLUTION\n    return np.sqrt(x) + OFFSET\n    ### END SOLUTION")
    assert assign.assign(solutions, notebooks, lessons_dir=lessons) == []
    text = (lessons / "lab03" / "lesson.py").read_text()
    assert "return np.sqrt(x) + OFFSET" in text and "SOLUTION" not in text
    student = nbformat.read(notebooks / "03_demo.ipynb", 4).cells[2].source
    assert "np.sqrt" not in student and "NotImplementedError" in student
    nb = nbformat.read(path, 4)
    nb.cells[2].source = nb.cells[2].source.replace("np.sqrt(x) + OFFSET", "np.sqrt(x) - OFFSET")
    nbformat.write(nb, path)
    assert f"{lessons / 'lab03' / 'lesson.py'} differs from what the lesson cells of {path} export" in assign.assign(
        solutions, notebooks, lessons_dir=lessons, check=True)


def test_exercise_references_come_from_the_solutions_lesson_cells():
    """The exercises whose reference is the solution's code import it from lab_utils.labs.labNN.lesson (generated from the
    solution's cell), so no exercise module types a solution again (test_package_layout finds a copy by its name)."""
    from lab_utils import exercises
    from lab_utils.instructor.course import export

    lessons = {path.name[:2]: set(export.defined_functions(nbformat.read(path, 4)))
               for path in labs.solution_notebooks()}
    for lab, name in [("01", "throughput"), ("07", "choose_checkpoints"),
                      ("08", "staleness_from_order"), ("08", "damped_lr"), ("09", "choose_max_wait"),
                      ("10", "speedup_and_efficiency"), ("11", "sbatch_header"),
                      ("11", "train_resumable"), ("13", "halo_rows"), ("13", "slab_bounds"), ("13", "exchange_halo"),
                      ("13", "halo_bytes_per_step")]:
        assert name in lessons[lab], f"lab {lab}'s {name} is no lesson"
        # train_resumable's reference runs the lesson's function twice (stopped, then resumed); exchange_halo's is the
        # zero-padded whole image's rows, computed without ranks (the lesson's exchange is checked against it)
        if name not in ("train_resumable", "exchange_halo"):
            assert exercises.get(name).expected == exercises.FROM_LESSON, f"{name}'s reference is typed again"


def test_a_lesson_that_reads_a_computed_value_is_refused(tmp_path):
    make_lesson(tmp_path, body="    return np.sqrt(x) + data_size")
    nb = nbformat.read(tmp_path / "03_demo.ipynb", 4)
    nb.cells[1].source += "\ndata_size = len(json.dumps({}))"
    nbformat.write(nb, tmp_path / "03_demo.ipynb")
    problems = assign.assign(tmp_path, tmp_path / "notebooks", lessons_dir=tmp_path / "lessons", check=True)
    assert any("data_size (used in cell 2; bound by running cell 1)" in p for p in problems), problems


@pytest.mark.slow
def test_generated_lesson_modules_import_without_side_effects():
    import subprocess
    import sys

    modules = sorted(p.parent.name for p in assign.LESSONS.glob("lab[0-9][0-9]/lesson.py"))
    assert "lab03" in modules
    code = "; ".join(f"import lab_utils.labs.{m}.lesson" for m in modules)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          cwd=labs.ROOT)
    assert done.returncode == 0 and done.stdout == "", done.stderr[-2000:]
