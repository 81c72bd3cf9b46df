"""Labs 04 and 06's deadlocks end on gloo's own timeout inside the ranks, before the launch's: the call that gives up
asks the launcher for the table of every rank and carries it as a note (the worker may catch the error and go on)."""
import linecache
from pathlib import Path

import pytest

from lab_utils.launch import launch, record
from lab_utils.variants import variant

import workers


def line_of(module, function: str, text: str) -> int:
    """The line number of the first line holding `text` inside `function` in a generated lesson's source."""
    source = Path(module.__file__).read_text().splitlines()
    start = next(n for n, line in enumerate(source, 1) if line.startswith(f"def {function}("))
    return next(n for n, line in enumerate(source, 1) if n > start and text in line)


def rows(table: str) -> dict:
    """rank -> (waits in, learner's line) of a table's rows."""
    cells = [[c.strip() for c in row.split(" | ")] for row in table.splitlines() if row[:1].isdigit() and " | " in row]
    return {int(c[0]): (c[2], c[3]) for c in cells}


@pytest.mark.slow
def test_lab06s_ring_deadlock_gives_the_table_when_gloo_gives_up_before_the_launch():
    from lab_utils.labs.lab06 import lesson as lab06

    outcomes = launch(lab06.deadlock_worker, 2, args=(2,), timeout=60)  # gloo gives up after 2 s, the launch at 60 s
    assert all(outcome.startswith("gave up") for outcome, _ in outcomes), outcomes
    assert any("Timed out" in outcome for outcome, _ in outcomes), outcomes
    text = next(table for _, table in outcomes if table)
    assert text.startswith(record.NOTE_HEADER), text
    line = line_of(lab06, "blocking_step", "dist.send(")
    assert rows(text) == {r: ("send #1 [4] float32", f"lab_utils/labs/lab06/lesson.py:{line}") for r in (0, 1)}, text
    assert "first difference: every rank is in send #1 with matching calls so far" in text, text


@pytest.mark.slow
def test_lab04s_blocking_send_1f1b_deadlock_names_both_stages_sends_and_the_edited_lines():
    from lab_utils import spec
    from lab_utils.labs.lab04 import pipeline as pl
    from lab_utils.labs.lab04 import lesson as lab04

    forward = variant(lab04.forward_op, {
        "ctx.pending.append(dist.isend(out.detach().to(ctx.wire), dst=ctx.rank + 1))  # start sending, do not wait":
        "dist.send(out.detach().to(ctx.wire), dst=ctx.rank + 1)"}, name="blocking send", show=False)
    backward = variant(lab04.backward_op, {
        "ctx.pending.append(dist.isend(x.grad.to(ctx.wire), dst=ctx.rank - 1))  # d loss / d x, back to the previous stage":
        "dist.send(x.grad.to(ctx.wire), dst=ctx.rank - 1)"}, name="blocking send", show=False)
    run = pl.PipelineRun("1f1b", "1f1b", 4, batch_size=32, split=(2,), model="cnn2d_2layer_fullconnected_2layer")
    ranks = launch(workers.giving_up, 2, args=(lab04.stage_worker, [run], forward, backward, 2), timeout=60)
    assert all("gave up" in o for o in ranks) and any("Timed out" in o["gave up"] for o in ranks), ranks
    text = next(o["table"] for o in ranks if o["table"])
    forward_line = line_of(lab04, "forward_op", "dist.isend(")
    backward_line = line_of(lab04, "backward_op", "dist.isend(")
    message = f"send #2 {[8, *pl.stage_input_shape(spec.preset(run.model), (1, 28, 28), (2,), 1)]} float32"
    # stage 0 sends micro-batch 1's activations forward while stage 1 sends micro-batch 0's gradient back: both wait
    assert rows(text) == {0: (message, f"lab_utils/labs/lab04/lesson.py:{forward_line} (edited: blocking send)"),
                          1: (message, f"lab_utils/labs/lab04/lesson.py:{backward_line} (edited: blocking send)")}, text
    assert "first difference: every rank is in send #2 with matching calls so far" in text, text


def test_a_call_that_gives_up_asks_for_the_table_while_it_still_reads_in_progress_and_others_do_not_ask():
    asked = []

    def ask(report):
        asked.append(report)
        return "rank | state\n0    | timed out"

    def gives_up(tensor, dst):
        raise RuntimeError("[pair.cc:1] Timed out waiting 2000ms for send operation to complete")

    def bad_argument(tensor, dst):
        raise ValueError("Invalid destination rank: should be within the range [0, 2), but got 5.")

    record.clear()
    record.ask_on_timeout(ask)
    try:
        with pytest.raises(RuntimeError) as info:
            record._wrap("send", gives_up)([1.0], 1)
        (report,) = asked
        assert report["ended"] == "timed out" and report["calls"][-1]["state"] == "in progress"
        assert record.table_note(info.value) == f"{record.NOTE_HEADER}\nrank | state\n0    | timed out"
        assert record.snapshot()["calls"][-1]["state"] == "failed (RuntimeError)"
        with pytest.raises(ValueError) as info:
            record._wrap("send", bad_argument)([1.0], 5)
        assert len(asked) == 1 and record.table_note(info.value) == ""  # not a wait that ended: no table
        record.without_table_note(info.value)  # safe on an error without notes
    finally:
        record.ask_on_timeout(None)
        record.clear()
    with pytest.raises(RuntimeError) as info:  # outside a launch nobody answers: the error goes on without a table
        record._wrap("send", gives_up)([1.0], 1)
    assert record.table_note(info.value) == ""
    record.clear()


def test_an_edited_copys_line_is_placed_on_the_line_it_replaced_in_the_original():
    from lab_utils import variants
    from lab_utils.launch import where

    namespace = {"__name__": "__notebook__"}
    source = "def op(x):\n    y = x + 1\n    send(y)  # wait\n    return y\n"
    exec(compile(source, "cell_op.py", "exec"), namespace)
    linecache.cache["cell_op.py"] = (len(source), None, source.splitlines(True), "cell_op.py")  # as IPython does
    edited = variants.variant(namespace["op"], {"send(y)  # wait": "send(y)\n    send(y)"}, name="twice", show=False)
    filename = edited.__code__.co_filename
    assert variants.original_line(filename, 2) == ("cell_op.py", 2, "twice")  # kept
    assert variants.original_line(filename, 5) == ("cell_op.py", 4, "twice")  # kept, after the added line
    assert variants.original_line(filename, 3) is None and variants.original_line(filename, 4) is None  # 1 line -> 2
    assert where.place((filename, 2)) == "cell_op.py:2 (edited: twice)"
    assert variants.original_line("cell_op.py", 2) is None


@pytest.mark.slow
def test_a_gave_up_error_that_leaves_the_worker_brings_back_one_table_beside_its_traceback():
    from lab_utils.launch import RankError
    from lab_utils.labs.lab06 import lesson as lab06

    raising = variant(lab06.deadlock_worker, {'outcome = "gave up: " + short_error(err, sentences=1)': "raise"},
                      name="raise", show=False)
    with pytest.raises(RankError) as info:
        launch(raising, 2, args=(2,), timeout=60)
    text = str(info.value)
    assert text.count("where each rank was") == 1 and record.NOTE_HEADER not in text, text
    assert text.index("where each rank was") < text.index("--- traceback from rank"), text
