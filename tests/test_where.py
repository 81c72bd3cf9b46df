"""The table a hang or a failure prints: each rank's record of collectives, and the first call where ranks differ."""
import time
from pathlib import Path

import pytest

from lab_utils.launch import RankError, launch, where

import workers


def call(seq, op, state="completed", shapes=((4,),), line=10):
    return {"seq": seq, "op": op, "shapes": [list(s) for s in shapes], "dtype": "float32",
            "where": ("tests/x.py", line, "w"), "state": state}


def test_the_first_difference_names_different_collectives_at_the_same_number():
    done = [call(1, "all_reduce"), call(2, "all_reduce")]
    reports = {0: {"calls": done + [call(3, "all_reduce", "in progress", line=5)], "count": 3},
               1: {"calls": done + [call(3, "barrier", "in progress", (), line=9)], "count": 3}}
    text = where.rank_table(reports, {0: "running", 1: "running"})
    assert "rank 0 is in all_reduce #3 at tests/x.py:5; rank 1 is in barrier #3 at tests/x.py:9" in text
    assert text.endswith("the ranks called different collectives")
    assert "0 | in a collective | all_reduce #3 [4] float32 | tests/x.py:5 | all_reduce #2 [4] float32" in " ".join(
        text.split())


def test_the_first_difference_names_a_skipped_call_and_different_shapes():
    skipped = {0: {"calls": [call(1, "all_reduce"), call(2, "all_reduce", "in progress")], "count": 2},
               1: {"calls": [call(1, "all_reduce")], "count": 1, "line": ("tests/x.py", 20, "w")}}
    text = where.first_difference(skipped)
    assert "rank 1 finished #1 and is not in a recorded collective, at tests/x.py:20" in text
    assert "rank(s) [1] never made call #2" in text
    assert "or its buffer broadcast at the start of a forward" in text  # learner s12r3c: DDP's other unseen call
    # learner s13r7f (lab 12 cell 25): a rank that sits at a backward line is in DDP's all-reduce, said plainly
    source = Path(__file__).parent / "fixtures" / "_where_backward.py"
    source.write_text("loss = model(x).sum()\nloss.backward()\n")
    try:
        skipped[1]["line"] = (str(source), 2, "w")
        said = where.first_difference(skipped)
    finally:
        source.unlink()
    assert said.endswith("rank(s) [1] never made call #2 and sit at a backward: under DDP that is its gradient "
                         "all-reduce (C++: not in the record), waiting for ranks that never joined it"), said
    shapes = {0: {"calls": [call(1, "all_reduce", "in progress", ((4,),))], "count": 1},
              1: {"calls": [call(1, "all_reduce", "in progress", ((5,),))], "count": 1}}
    assert where.first_difference(shapes).endswith("tensors of different shapes or dtypes to the same collective")


def test_matching_calls_all_waiting_are_said_so_and_one_report_compares_nothing():
    same = {r: {"calls": [call(1, "send", "in progress")], "count": 1} for r in (0, 1)}
    assert where.first_difference(same).startswith("every rank is in send #1 with matching calls so far")
    assert where.first_difference({0: same[0], 1: None}) == ""


def test_a_rank_that_raised_is_not_said_to_wait_in_the_call_it_was_in():
    """Learner s9f, lab 07 cell 69: the table showed 'raised RuntimeError' for both ranks, yet the line under it read
    'every rank is in gather_object #5 with matching calls so far: each waits for a peer'. The line reads the state
    column now: a rank that raised waits for nothing."""
    done = [call(4, "broadcast_object_list")]
    reports = {0: {"calls": done + [call(5, "gather_object", "failed (RuntimeError)")], "count": 5},
               1: {"calls": done + [call(5, "gather_object", "in progress")], "count": 5}}
    both = where.rank_table(reports, {0: "raised RuntimeError", 1: "raised RuntimeError"})
    finding = both.splitlines()[-1]
    assert finding == ("first difference: rank 0 raised RuntimeError in gather_object #5 (that call failed); rank 1 "
                       "raised RuntimeError while its gather_object #5 was unfinished (that call itself had not failed): "
                       "the recorded calls match so far, so no rank skipped one: an error ended the run (read it "
                       "above)"), finding
    # learner s10b: the rows say the same (rank 0's row read 'waits in -' beside 'raised ... in gather_object #5')
    rows = [" ".join(line.split()) for line in both.splitlines()[1:3]]
    assert rows[0].startswith("0 | raised RuntimeError | gather_object #5 [4] float32 (failed) |"), rows
    assert rows[1].startswith("1 | raised RuntimeError | gather_object #5 [4] float32 (unfinished) |"), rows
    assert "waits" not in finding and "every rank is in" not in finding
    one = where.first_difference(reports, {0: "raised RuntimeError", 1: "running"})
    assert one.startswith("rank 0 raised RuntimeError in gather_object #5 (that call failed); rank 1 is in "
                          "gather_object #5:") and one.endswith("a rank still in a collective waits for one that raised")
    # a call that failed is not a wait either, even where the launcher saw no exception
    failed = {0: reports[0], 1: reports[1]}
    assert not where.first_difference(failed, {0: "running", 1: "running"}).startswith("every rank is in")


@pytest.mark.slow
def test_a_rank_that_skips_a_collective_under_a_condition_is_named_with_its_line():
    with pytest.raises(TimeoutError) as info:
        launch(workers.skipping_worker, 2, timeout=6)
    text = str(info.value)
    assert "rank 0 is in all_reduce #3 at tests/workers.py:85" in text, text
    assert "rank 1 is in barrier #3 at tests/workers.py:86" in text, text
    assert "the ranks called different collectives" in text


@pytest.mark.slow
def test_mismatched_collectives_are_named_whether_gloo_hangs_or_fails():
    with pytest.raises((TimeoutError, RankError)) as info:
        launch(workers.mismatched_worker, 2, timeout=6)
    text = str(info.value)
    assert "all_reduce #2 [3] float32" in text and "broadcast #2" in text, text
    assert "tests/workers.py:95" in text and "tests/workers.py:97" in text, text


@pytest.mark.slow
def test_a_rank_that_raised_comes_back_with_the_table_beside_its_traceback():
    with pytest.raises(RankError) as info:
        launch(workers.failing_worker, 2, args=(1,), timeout=60)
    text = str(info.value)
    assert "rank 0 is in barrier #1 at tests/workers.py:38" in text, text
    assert "rank 1 made no recorded collective call and raised ValueError at tests/workers.py:37" in text, text
    assert text.index("where each rank was") < text.index("--- traceback from rank 1")


@pytest.mark.slow
def test_lab03s_hanging_worker_prints_the_table():
    start = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        launch(workers.hanging_worker, 2, timeout=6)  # lab 03's hanging_worker: the last rank never arrives
    text = str(info.value)
    assert "rank 0 is in barrier #1 at tests/workers.py:47" in text, text
    assert "rank 1 made no recorded collective call and is not in a recorded collective, at tests/workers.py:46" in text, text
    assert time.monotonic() - start < 6 + 10


@pytest.mark.slow
def test_lab06s_ring_deadlock_prints_the_table():
    from lab_utils.labs.lab06 import lesson as lab06

    with pytest.raises(TimeoutError) as info:
        launch(lab06.deadlock_worker, 2, args=(60,), timeout=6)  # gloo's own timeout later than the launch's
    text = str(info.value)
    assert "every rank is in send #1 with matching calls so far" in text, text
    source = Path(lab06.__file__).read_text().splitlines()
    line = next(n for n, text_line in enumerate(source, 1) if "dist.send(" in text_line and
                n > next(m for m, t in enumerate(source, 1) if t.startswith("def blocking_step")))  # deadlock_worker calls it
    assert text.count(f"lab_utils/labs/lab06/lesson.py:{line}") == 2, text


def test_the_record_wraps_torch_distributed_notes_the_callers_line_and_state_and_comes_off(monkeypatch):
    import torch
    import torch.distributed as dist

    from lab_utils.launch import record

    original = dist.all_reduce
    monkeypatch.setenv(record.ENABLED, "0")
    assert record.start_recording() is False and dist.all_reduce is original  # LAB_COLLECTIVE_RECORD=0: nothing wrapped
    monkeypatch.delenv(record.ENABLED)
    try:
        assert record.start_recording() is True and dist.all_reduce is not original
        record.clear()
        with pytest.raises((RuntimeError, ValueError)):  # no process group here: the call fails, and is recorded so
            dist.all_reduce(torch.ones(3, dtype=torch.float64))
        line = test_the_record_wraps_torch_distributed_notes_the_callers_line_and_state_and_comes_off.__code__
        (call,) = record.snapshot()["calls"]
        assert call["op"] == "all_reduce" and call["seq"] == 1 and call["shapes"] == [[3]] and call["dtype"] == "float64"
        assert call["state"].startswith("failed") and call["where"][0] == line.co_filename
        assert where.call_text(call) == "all_reduce #1 [3] float64"
    finally:
        record.stop_recording()
        record.clear()
    assert dist.all_reduce is original


def test_a_notebook_function_sent_by_value_keeps_its_cell_file_name():
    import pickle

    from lab_utils.launch import sending

    namespace = {"__name__": "__notebook__"}  # not importable: cloudpickle sends it by value
    exec(compile("def worker(rank, world_size):\n    return rank\n", "/tmp/ipykernel_1/123.py", "exec"), namespace)
    (worker, args), = pickle.loads(sending.serialise([(namespace["worker"], ())]))
    assert worker.__code__.co_filename == "/tmp/ipykernel_1/123.py" and worker(3, 4) == 3  # cloudpickle writes <dynamic-code>


def test_a_notebook_cell_is_named_by_the_number_jupyter_shows_and_the_table_says_how_to_find_it(monkeypatch):
    """Learner s9f (labs 06, 07): 'Cell In[36], line 55' is IPython's name for the cell whose execution count is 36,
    which equals neither its position nor anything a learner reads as a cell's name. Now 'cell [36], line 55' (the
    [36] Jupyter shows at the cell's left), and a table that names one says under it what [n] is."""
    monkeypatch.setattr(where, "_cell_number", lambda filename: 36 if filename == "<cell>" else None)
    assert where.place(("<cell>", 55)) == "cell [36], line 55"
    assert where.place(("tests/x.py", 5)) == "tests/x.py:5"
    reports = {r: {"calls": [call(1, "send", "in progress")], "count": 1, "line": ("<cell>", 55)} for r in (0, 1)}
    reports[0]["calls"][0]["where"] = ("<cell>", 55, "w")
    text = where.rank_table(reports, {0: "running", 1: "running"})
    assert "cell [36], line 55" in text and "Cell In" not in text
    assert text.endswith("\n" + where.CELL_LEGEND) and "at its left" in where.CELL_LEGEND
    # learner s12r4f: 'all_reduce #3 [1] float32 | cell [5]': the call's [1] (a shape) read as a cell, like [5]
    assert "\nsend #1 [4] float32: the operation, its sequence number, its tensors' shape [4], their dtype\n" in text
    assert max(len(line) for line in where.CELL_LEGEND.splitlines()) <= 100  # learners: lines of 145 characters
    assert where.CELL_LEGEND not in where.rank_table({0: {"calls": [call(1, "send", "in progress")], "count": 1}},
                                                     {0: "running"})  # no cell named: no legend
    import re
    sanitize = open("tests/nbval_sanitize.cfg").read()  # nbval reads old and new outputs alike
    rule = next(block for block in sanitize.split("\n\n") if "execution count" in block)
    regex = re.search(r"^regex: (.*)$", rule, re.M)[1]
    assert re.sub(regex, "X", "at Cell In[7], line 3; at cell [12], line 4") == "at X, line 3; at X, line 4"


def test_a_rank_that_raised_before_a_call_is_named_as_the_cause_not_as_a_skip():
    """Learner s10d (lab 11 cell 76): task 1 raised, yet the line listed a skipped collective, a rank not there yet
    or a call the record does not see, and read '(failed (RuntimeError))'."""
    reports = {0: {"calls": [call(1, "all_reduce"), call(2, "all_reduce", "failed (RuntimeError)")], "count": 2},
               1: {"calls": [call(1, "all_reduce")], "count": 1, "line": ("tests/x.py", 17, "w")}}
    text = where.first_difference(reports, {0: "raised RuntimeError", 1: "raised ValueError"})
    assert "rank(s) [1] raised before call #2" in text and "the error is the cause" in text
    assert "skipped a collective the others made" not in text and "(it failed: RuntimeError)" in text
    assert "((" not in text and "))" not in text


def test_a_call_made_on_a_background_thread_says_so_and_the_main_threads_line_is_named_as_such():
    """Learner s11f, lab 07 finding 4: 'gather_object #5 (unfinished) | cell [35], line 55' paired the background save
    thread's collective with the main thread's line (its .backward()), and the learner looked for the bug there."""
    import threading

    from lab_utils.launch import record

    background = dict(call(5, "gather_object", "in progress"), where=None, thread="save")
    reports = {0: {"calls": [background], "count": 5, "line": ("tests/x.py", 55, "w")},
               1: {"calls": [dict(background, state="failed (RuntimeError)")], "count": 5,
                   "line": ("tests/x.py", 55, "w")}}
    rows = [" ".join(line.split()) for line in where.rank_table(reports, {0: "running", 1: "raised E"}).splitlines()]
    assert rows[1].startswith("0 | in a collective | gather_object #5 [4] float32 (background thread) | main thread: "
                              "tests/x.py:55 |"), rows
    assert rows[2].startswith("1 | raised E | gather_object #5 [4] float32 (failed, background thread) | main "
                              "thread: tests/x.py:55 |"), rows
    main = {0: {"calls": [call(5, "gather_object", "in progress", line=7)], "count": 5, "line": ("tests/x.py", 55, "w")}}
    assert "main thread" not in where.rank_table(main, {0: "running"})  # the main thread's own call: its own line

    record.clear()  # the record marks a call made off the main thread with that thread's name
    wrapped = record._wrap("all_reduce", lambda *a, **k: None)
    thread = threading.Thread(target=wrapped, args=(None,), name="save")
    thread.start()
    thread.join()
    wrapped(None)
    off_main, on_main = record.snapshot()["calls"]
    record.clear()
    assert off_main["thread"] == "save" and "thread" not in on_main
