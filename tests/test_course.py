import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from lab_utils.instructor import course


def test_strip_solutions_keeps_indentation_and_surrounding_code():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\nprint(f)"
    out = course.strip_solutions(source, "nb")
    assert out.splitlines() == ["def f(x):", "    # YOUR CODE HERE", f"    {course.STUB}", "", "print(f)"]
    assert "x + 1" not in out


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n### END SOLUTION", "line 2: '### END SOLUTION' without a matching"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "line 2: '### BEGIN SOLUTION' inside another"),
])
def test_broken_markers_are_reported(source, message):
    with pytest.raises(ValueError, match=message):
        course.strip_solutions(source, "lab.ipynb, cell 3")


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
    student = course.student_version(nb, "demo")
    code = student.cells[1]
    assert code.outputs == [] and code.execution_count is None and "papermill" not in code.metadata
    assert "NotImplementedError" in code.source and "x = 1" not in code.source
    assert nb.cells[1].outputs, "the solution itself is not modified"


def test_markers_in_markdown_are_refused():
    nb = new_notebook(cells=[new_markdown_cell("### BEGIN SOLUTION")])
    with pytest.raises(ValueError, match="belong in code cells"):
        course.student_version(nb, "demo")


def test_assign_writes_and_check_detects_drift(tmp_path):
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    make_solution(solutions)
    assert course.assign(solutions, notebooks, check=True) == [f"{notebooks / '00_demo.ipynb'} is missing"]
    assert course.assign(solutions, notebooks) == []
    assert course.assign(solutions, notebooks, check=True) == []
    make_solution(solutions, body="x = 2  # changed")
    nb = nbformat.read(solutions / "00_demo.ipynb", 4)
    nb.cells[0].source = "# Demo, edited"
    nbformat.write(nb, solutions / "00_demo.ipynb")
    assert "differs from what" in course.assign(solutions, notebooks, check=True)[0]
    (notebooks / "99_orphan.ipynb").write_text("{}")
    course.assign(solutions, notebooks)
    assert course.assign(solutions, notebooks, check=True) == [f"{notebooks / '99_orphan.ipynb'} has no source in solutions/"]


def test_committed_student_notebooks_match_solutions():
    problems = course.assign(check=True)
    assert problems == [], "run `python -m lab_utils assign` and commit notebooks/:\n" + "\n".join(problems)


def test_every_lab_has_a_parameters_cell_and_results_dir():
    for path in course.solution_notebooks():
        nb = nbformat.read(path, 4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
        assert "results_dir" in tagged[0].source and "seed" in tagged[0].source


def test_select_labs():
    sources = course.solution_notebooks()
    assert [p.name[:2] for p in course.select("1,00", sources)] == ["01", "00"]
    assert course.select(None, sources) == sources
    with pytest.raises(ValueError, match=r"unknown lab\(s\) \['42'\]"):
        course.select("42", sources)


def test_run_notebook_reports_the_failing_cell(tmp_path):
    nb = new_notebook(cells=[new_code_cell("results_dir = None", metadata={"tags": ["parameters"]}),
                             new_code_cell("print('fine')"), new_code_cell("1 / 0")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "src" / "07_broken.ipynb"
    src.parent.mkdir()
    nbformat.write(nb, src)
    run = course.run_notebook(src, tmp_path, {"results_dir": str(tmp_path)}, cell_timeout=60)
    assert run.error is not None and "ZeroDivisionError" in run.error and "cell" in run.error
    assert "07_broken.ipynb failed at" in course.failures_message([run])
    executed = nbformat.read(tmp_path / "07_broken.ipynb", 4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)


def test_summary_lists_times_failures_and_results(tmp_path):
    from lab_utils import hardware, measure

    hw = hardware.HardwareReport("h", 2, (), "3.11", "2.13.0", "-")
    measure.write_result(measure.Result(lab="01", framework="torch", strategy="single-device", world_size=1,
                                        device="cpu", batch_size=64, samples_per_s=1000, wall_s=2, accuracy=0.9,
                                        threads=2, workload="digits"), tmp_path, hw)
    runs = [course.NotebookRun("00_setup", 3.5), course.NotebookRun("01_cnn", 7.0, "cell 4: ValueError: bad")]
    text = course.summary(runs, tmp_path)
    assert "00_setup" in text and "FAILED: cell 4: ValueError: bad" in text and "10.5" in text
    assert "single-device" in text and "90.0%" in text and "speedup" in text
    assert course.failures_message(runs) == "01_cnn.ipynb failed at cell 4: ValueError: bad"


def test_run_times_in_the_readme_and_headers_come_from_the_committed_run():
    times = course.run_times()
    assert set(times) == {p.name[:2] for p in course.solution_notebooks()}, "run `make outputs`"
    assert course.update_run_times(times, check=True) == []


def test_run_times_are_written_where_they_disagree(tmp_path):
    readme = tmp_path / "README.md"
    other_table = "## On your hardware\n\n| lab | CPU | one GPU | many |\n|---|---|---|---|\n| 00 | cores | a GPU | GPUs |\n"
    readme.write_text("## Course map\n\n| lab | you learn | 2-core CPU | GPU |\n|---|---|---|---|\n"
                      "| 00 setup | things | 9 s | not measured |\n\n" + other_table)
    problems = course.update_run_times({"00": 4.4}, column="gpu", readme=readme)
    assert problems == ["README course map, lab 00: gpu time says 'not measured', the run took 4 s"]
    assert "| 00 setup | things | 9 s | 4 s |" in readme.read_text()
    assert readme.read_text().endswith(other_table), "a table outside the course map was rewritten"
    header = tmp_path / "00_setup.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# Lab 00\n\n**Run time:** about\n9 s on a 2-core CPU.")]), header)
    course.update_run_times({"00": 5.2}, readme=readme, notebooks=[header])
    assert "| 00 setup | things | 5 s | 4 s |" in readme.read_text() and readme.read_text().endswith(other_table)
    assert "**Run time:** about 5 s on a 2-core CPU." in nbformat.read(header, 4).cells[0].source
    assert course.update_run_times({"00": 4.4}, column="gpu", check=True, readme=readme) == []


def code_of(lab: str) -> str:
    """The code a learner reads in a lab's solution: its code cells."""
    path = next(p for p in course.solution_notebooks() if p.name.startswith(lab))
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
    for path in course.solution_notebooks():
        headings = [line for c in nbformat.read(path, 4).cells if c.cell_type == "markdown"
                    for line in c.source.splitlines() if line.startswith("## ")]
        found = [next((i for i, h in enumerate(headings) if step in h), None) for step in ("Data", "Model", "Strategy", "Measure")]
        assert None not in found and found == sorted(found), f"{path.name}: {headings}"
