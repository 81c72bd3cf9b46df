"""A launch in parts (a timeout costs one part, progress per part, the parameter named) and the cells after an
unfinished one, which say 'skipped' instead of raising NameError (issue 46, lab 08)."""
import pytest

from lab_utils.launch.parts import launch_parts
from lab_utils.skipping import Skipper, names_bound, names_used, skip_cells_needing
from tests.workers import part_failing_worker, parts_worker


def test_a_cell_needing_a_name_the_unfinished_launch_did_not_make_says_skipped_and_its_own_names_follow():
    namespace = {"tolerance": 1e-5, "np": None}
    skipper = Skipper({"runs_of", "check_result"}, "part 2 of 5: did not finish within 625 s", namespace)
    cell = "sync_runs = runs_of(mode='sync')\nprint(len(sync_runs))\n"
    replaced = skipper.source(cell)
    out = {}
    exec(replaced, {}, out)  # runs: no NameError
    assert replaced != cell and "skipped: the runs above did not finish" in replaced and "625 s" in replaced
    assert "sync_runs" in skipper.missing  # a later cell reading sync_runs is skipped too
    assert skipper.source("print(sync_runs[0])") != "print(sync_runs[0])"
    assert skipper.source("print(tolerance * 2)") == "print(tolerance * 2)"  # needs nothing missing: runs as written
    namespace["runs_of"] = lambda **kw: []  # the learner reran the launch with a larger timeout_s: cells run again
    assert skipper.source(cell) == cell
    assert skipper(["x = check_result\n"]) != ["x = check_result\n"] and skipper(["%time 1\n"]) == ["%time 1\n"]


def test_a_skipper_names_what_did_not_run_in_its_own_words():
    """Lab 09 after a kernel restart: its sections never ran, which 'the runs above did not finish' would misname."""
    skipper = Skipper({"grid"}, "run the notebook from the top", {}, head="this kernel has not run the lab's sections above")
    replaced = skipper.source("rows = grid['x']\n")
    assert "skipped: this kernel has not run the lab's sections above (run the notebook from the top)" in replaced
    assert "did not finish" not in replaced
    long = Skipper({"grid"}, "x" * 60, {}, head="this kernel has not run the lab's sections above").source("grid\n")
    out = {}
    exec(long.replace("print(", "said = (", 1), {}, out)
    assert out["said"].endswith(";\n  this cell needs grid")  # past 100 columns the name goes on a line of its own


def test_names_used_and_bound():
    source = "import numpy as np\nfrom a import b\nfor i, j in x:\n    y = f(i)\ndef g():\n    return z\n"
    assert {"x", "f", "i", "z"} <= names_used(source) and "y" not in names_used(source)
    assert {"np", "b", "i", "j", "y", "g"} <= names_bound(source)


def test_outside_ipython_nothing_is_registered():
    assert skip_cells_needing({"runs"}, "a reason") is None


def test_skipping_in_a_real_ipython_shell(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.user_ns.pop("runs_of", None)
        skipper = skip_cells_needing({"runs_of"}, "part 1 of 2: did not finish within 5 s, the parameter `timeout_s`")
        assert skipper in shell.input_transformers_post
        result = shell.run_cell("group = runs_of(mode='async')")
        assert result.success and "skipped: the runs above did not finish" in capsys.readouterr().out
        assert shell.run_cell("print(len(group))").success  # group came from the skipped cell: skipped too
        assert shell.run_cell("two = 1 + 1").success and shell.user_ns["two"] == 2
    finally:
        shell.input_transformers_post[:] = [t for t in shell.input_transformers_post if not isinstance(t, Skipper)]
        InteractiveShell.clear_instance()


@pytest.mark.slow
def test_a_part_that_times_out_costs_that_part_only_and_names_timeout_s(capsys):
    parts = [[0.0], [60.0], [0.0, 0.0]]
    done = launch_parts(parts_worker, 1, parts, timeout=8, runs_of_part=len)
    assert done.finished == [0, 2] and done.values[0] == [[0.0]] and done.values[2] == [[0.0, 0.0]]
    assert done.why().startswith("part 2 of 3: did not finish within 8 s, the parameter `timeout_s`")
    assert "timeout_s = 16" in done.why()
    out = capsys.readouterr().out
    assert "part 1/3: 1 runs" in out and "1 of 4 runs done" in out and "TIMED OUT" in out and "3 of 4 runs done" in out


@pytest.mark.slow
def test_a_failing_rank_stops_the_parts_after_it_and_surfaces_its_traceback(capsys):
    done = launch_parts(part_failing_worker, 1, [[1], [-1], [2]], timeout=60)
    assert done.finished == [0] and "a bad run in [-1]" in done.why()
    assert "part 3 of 3: not run: an earlier part failed" in done.why()
    assert "Traceback" in capsys.readouterr().out or "ValueError" in done.why()


def test_parts_stopped_for_one_reason_say_it_once():
    from lab_utils.launch.parts import Parts

    done = Parts([None, [1], None], {0: "did not finish within 4 s", 2: "did not finish within 4 s"})
    assert done.finished == [1] and done.why() == "parts 1, 3 of 3: did not finish within 4 s"
    assert Parts([[1]], {}).why() is None
