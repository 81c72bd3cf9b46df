"""Lab 07's activation-checkpointing report (lab_utils/labs/lab07/report.py) and the checkpoint tables
(checkpoints.file_table, fold_table, trap_report), with made-up timings and made-up errors: the quiet case, the busy
case (n/m, the memory still shown) and a flagged row (learner s11r2f, lab 07 findings 1-4, 8, 10)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from lab_utils import conditions, measure, memory  # noqa: E402
from lab_utils.labs.lab07 import checkpoints, report  # noqa: E402
from lab_utils.measure.timing import Timing  # noqa: E402

QUIET = conditions.Load(60.0, 2, own=0.9, others=0.0, steal=0.0)
BUSY = conditions.Load(60.0, 2, own=0.9, others=1.7, steal=0.0)
NAMES = ["conv 1", "conv 2", "dense 1", "dense 2"]
NONE_MS = [8.0, 8.2, 7.9, 8.1, 8.0]
FACTOR = {"none": 1.0, "conv 1": 1.4, "conv 2": 1.33, "dense 1": 1.09, "dense 2": 1.1, "all": 1.8}
SAVED = {"none": 8.25, "conv 1": 3.66, "conv 2": 5.95, "dense 1": 8.25, "dense 2": 8.25, "all": 1.36}


def steps(load, factor=FACTOR):
    """A StepReading whose rounds are none's times x each choice's factor, with a little noise per round."""
    times = {k: Timing(tuple(t * f * (1 + 0.01 * (i % 2)) / 1e3 for i, t in enumerate(NONE_MS)), 1)
             for k, f in factor.items()}
    times["none"] = Timing(tuple(t / 1e3 for t in NONE_MS), 1)
    return report.StepReading({k: v * memory.MIB for k, v in SAVED.items()}, times, load)


FORWARD = {n: Timing(tuple(s / 1e3 for s in (2.5, 2.6, 2.5, 2.55, 2.6)), 1) for n in NAMES}


def test_the_step_table_prints_one_time_figure_per_row_and_says_what_it_is():
    """Finding 3: the table printed 'ms fwd+bwd' beside 'x none', and ms/ms did not give x none (paired rounds)."""
    text = steps(QUIET).table(batch=64)
    lines = text.splitlines()
    assert lines[0] == "checkpointing every block: 0.16x the activations, 1.80x the time of a step without checkpoints"
    head = lines[1]
    assert "ms" not in head and head.count("x none") == 2 and "time x none" in head
    assert "MiB x none" in head  # learner s12r3f finding 2: the two columns were both headed 'x none'
    row = next(line for line in lines if line.startswith("all "))
    assert row.split()[-2].endswith("x") and "n/m" not in row
    assert "batch of 64 images" in text and "median of the 5 rounds' own ratios" in text  # finding 4
    assert all(len(line) <= 100 for line in lines), text


def test_a_busy_machine_reads_n_m_for_every_time_and_still_shows_the_bytes():
    reading = steps(BUSY)
    text = reading.table(batch=64)
    assert all(reading.refused.values()) and "the time n/m here" in " ".join(text.split("checkpoint ")[0].split())
    assert "0.44x" in text and "not measurable here" in text
    assert all(len(line) <= 100 for line in text.splitlines()), text
    blocks = report.block_table(reading, NAMES, FORWARD)
    assert "n/m for conv 1, conv 2, dense 1, dense 2" in " ".join(blocks.split()) and "1.32x" not in blocks
    assert "forward ms / n/m (the step" in blocks and "8.00 ms" not in blocks  # no time the load refuses
    fig, ax = plt.subplots()
    reading.draw(ax)  # the memory alone: a line per size, no time scale
    assert len(ax.lines) == len(set(SAVED.values())) and "memory only" in ax.get_title()
    plt.close(fig)


def test_a_checkpointed_step_faster_than_none_is_flagged_and_not_a_result():
    reading = steps(QUIET, {**FACTOR, "all": 0.5})
    assert reading.flags["all"] and "not measurable here (more work in less time" in " ".join(reading.sentence().split())
    assert "*" in next(line for line in reading.table(64).splitlines() if line.startswith("all "))


def test_the_block_table_builds_the_gap_from_the_figures_it_prints_and_states_the_prediction_first():
    """Findings 3 and 10: 'beyond expected ms' came from medians beside a paired 'measured x none'; learner s13r7f
    findings 3 and 4: cryptic column names, and 'beyond ms' called noise in the table but a cost in the prose."""
    reading = steps(QUIET)
    text = report.block_table(reading, NAMES, FORWARD)
    lines = text.splitlines()
    # learner s13r6f finding 1: 'no checkpoint makes a step faster' read as 'not checkpointing makes it faster'
    assert lines[0] == "prediction: no checkpointed block makes the step faster: holds for conv 1, conv 2, dense 1, dense 2"
    said = " ".join(text.split())  # learner s12r3f finding 3: '90 % range' and 0.95 were never defined
    assert "(tested: the lowest of its 5 paired ratios >= 0.95: up to 5% faster counts as equal)" \
        in said, text  # learner s13r5f finding 3: the test on one short line, after the outcome
    assert lines[1].startswith("    (tested: ") and len(lines[1]) <= 100
    assert lines[2].split() == ["block", "frees", "MiB", "forward", "ms", "predicted", "x", "none", "measured", "x",
                                "none", "gap", "ms"], lines[2]
    for old in ("fwd range", "beyond ms", "expected x none", "(above)", "+1 forward"):
        assert old not in text, old
    base_ms = reading.times["none"].median * 1e3
    assert f"predicted x none = 1 + forward ms / {base_ms:.2f} ms (the step without checkpoints)" in said, said
    row = next(line for line in lines if line.startswith("conv 1 "))
    forward, predicted, measured, gap = row.split()[-4:]
    assert measured == reading.cell["conv 1"] and float(forward) == pytest.approx(2.55, abs=0.01)
    assert float(predicted[:-1]) == pytest.approx(1 + float(forward) / base_ms, abs=0.01)
    assert float(gap) == pytest.approx((float(measured[:-1]) - float(predicted[:-1])) * base_ms, abs=0.02)
    # one reading of the gap, computed: conv 1 (1.4x none, a 2.55 ms forward on 8 ms) costs ~0.7 ms more in every
    # round; dense 1 (1.09x) costs ~1.8 ms less than its forward predicts in every round: no cost beyond it
    assert "a cost beyond one forward (each block's range of its 5 rounds' own gaps): seen for conv 1 (" in said, said
    assert "the wrapper's own cost" in said and "less than one forward for dense 1 (" in said, said
    assert all(len(line) <= 100 for line in lines), text


def test_the_gap_line_calls_a_gap_whose_rounds_straddle_zero_noise_and_one_above_zero_a_cost():
    """Learner s13r7f finding 3: dense 2's 1.24 ms 'beyond' was noise in the table's footer and a real wrapper cost in
    the prose; the run now decides it from the rounds' own gaps (each round timed none, the step and the forward)."""
    forward = {n: Timing((0.0,) * 5, 1) for n in NAMES}  # forwards that take no time: the gap is step - none
    wobbly = {**FACTOR, "dense 2": 1.0}
    reading = steps(QUIET, wobbly)  # dense 2's rounds: 0 % and +1 % of none, alternating: the range includes 0
    reading.times["dense 2"] = Timing(tuple(t * (1.02 if i % 2 else 0.98) / 1e3 for i, t in enumerate(NONE_MS)), 1)
    said = " ".join(report.gap_line(reading, ["conv 1", "dense 2"], forward).split())
    assert said.startswith("a cost beyond one forward (each block's range of its 5 rounds' own gaps): seen for conv 1 (")
    assert "the wrapper's own cost" in said, said
    assert "not seen for dense 2: the range of its rounds' gaps includes 0 ms (noise)" in said, said


def test_every_ms_of_the_checkpoint_section_is_on_the_speed_sections_scale():
    """Learner s13r7f finding 1: the speed section's step 8.9 ms, fwd+bwd alone 9.82 ms here, and the same training
    step ~10.5 ms in these rounds: the section now prints the step without checkpoints as the speed section's figure /
    the paired ratio, says how much slower these rounds ran, and scales every other ms by the same factor."""
    here = Timing(tuple(t * 1.07 / 1e3 for t in NONE_MS), 1)  # the training step in these rounds: 1.07x none
    there = Timing((7.2e-3, 7.3e-3, 7.25e-3, 7.3e-3, 7.2e-3), 1)  # the speed section's: faster rounds
    plain = steps(QUIET)
    reading = report.StepReading(plain.saved, plain.times, QUIET, anchor=(here, there))
    none_ms = 7.25 / 1.07
    assert reading.times["none"].median * reading.scale * 1e3 == pytest.approx(none_ms, rel=1e-6)
    said = " ".join(reading.table(batch=64).split())
    assert ("every ms below is on the speed section's scale: the step without checkpoints takes 7.25 / 1.070 = "
            f"{none_ms:.2f} ms") in said, said  # the division adds up (learner s13r8f)
    assert "x as long" not in said and "1.07x the step" not in said, said  # one figure (learner s15r9f)
    assert "8.00 ms" not in said and "(median)" not in said  # no second time for the step
    blocks = " ".join(report.block_table(reading, NAMES, FORWARD).split())
    assert f"/ {none_ms:.2f} ms (the step without checkpoints)" in blocks, blocks
    row = next(line for line in report.block_table(reading, NAMES, FORWARD).splitlines() if line.startswith("conv 1"))
    assert float(row.split()[3]) == pytest.approx(2.55 * reading.scale, abs=0.01)  # the forward, on the same scale
    assert all(len(line) <= 100 for line in reading.table(batch=64).splitlines())
    busy = report.StepReading(plain.saved, steps(BUSY).times, BUSY, anchor=(here, there))
    assert "n/m the step without checkpoints" in " ".join(busy.table(batch=64).split()) and " ms" not in \
        busy.table(batch=64).split("checkpoints\n")[-1]


def test_the_file_table_counts_the_sample_count_as_a_tensor_written_once():
    """Finding 2: 'once' was 40 bytes; the prose said the step counters (8 x 4 = 32) and called the sample count
    pickled. The table now lists what 'once' holds, item by item, from the checkpoint's metadata."""
    files = {".metadata": 15301, "__0_0.distcp": 672792, "__1_0.distcp": 702245}
    row = {"sharded": 635196, "once": 0, "pickled": 0, "records": 24, "overhead": 37596}
    layout = {"__0_0.distcp": row, "__1_0.distcp": {**row, "once": 40, "pickled": 15260, "records": 45}}
    whole = {**{f"optimizer.state.{i}.step": 4 for i in range(8)}, "samples": 8}
    text = checkpoints.file_table(files, layout, whole, weights_bytes=423464)
    assert "8 step counters of Adam (one per parameter tensor) x 4 bytes + the sample count" in " ".join(text.split())
    assert "= 40 bytes = the column's 40: True" in " ".join(text.split())
    assert "3 x the weights' 423,464: True" in " ".join(text.split())
    assert "the sample count" not in text.split("pickled:")[-1]
    assert "records: the items a file holds, one per tensor or pickled value" in " ".join(text.split())  # s12r4f 13
    assert all(len(line) <= 100 for line in text.splitlines()), text


TRAP = ("rank 1 failed: RuntimeError: Read error: Connection reset by peer. This is typically caused by x\n\n"
        "where each rank was (its record of collectives, kept by lab_utils):\n"
        "rank | state               | waits in                                         | learner's line"
        "                                                               | last completed\n"
        "0    | exited              | -                                                | -"
        "                                                                            | -\n"
        "1    | raised RuntimeError | gather_object #5 (unfinished, background thread) | main thread: cell [35], line 55"
        " (edited: async_save on the training's group) | broadcast_object_list #4\n"
        "cell [n]: the cell Jupyter shows with [n] at its left (its execution count, which grows each time a cell "
        "runs), not the n-th cell of the notebook\n\n--- traceback\nTraceback ...")
ABORT = ("terminate called\n  what():  [enforce fail at pair.cc:1] op.preamble.length <= op.nbytes. 160 vs 4. "
         "Received data size doesn't match expected size.\n")


def test_the_trap_table_is_folded_to_100_columns_and_names_the_rank_that_aborted():
    """Findings 1 and 8: rows of 160-183 columns; 'a rank aborted' beside a table whose rank 0 'exited'."""
    text = checkpoints.trap_report(TRAP, ABORT, 0.9, 120)
    lines = text.splitlines()
    assert lines[0].startswith("after 0.9 s (the launch's limit: 120 s): rank 0 aborted (the table's 'exited')")
    assert all(len(line) <= 100 for line in lines), text
    assert "    learner's line: main thread: cell [35], line 55 (edited: async_save on the training's group)" in lines
    assert "    last completed: broadcast_object_list #4" in lines
    assert any(line.startswith("0    | exited") for line in lines) and "--- traceback" not in text
    assert checkpoints.paired_wrongly(TRAP, ABORT).startswith("a rank aborted")  # the rank unknown: as before
    # learner s13r6f finding 5: the 'cell [n]' legend comes before the rows that say 'cell [35]'
    legend = next(i for i, line in enumerate(lines) if line.startswith("cell [n]:"))
    assert lines[legend - 1].startswith("where each rank was") and legend < lines.index(
        "    learner's line: main thread: cell [35], line 55 (edited: async_save on the training's group)"), text


MATCHED = ("rank 0 failed: RuntimeError: Application timeout caused pair closure\n\n"
           "where each rank was (its record of collectives, kept by lab_utils):\n"
           "rank | state               | waits in\n"
           "0    | raised RuntimeError | gather_object #5 (unfinished, background thread)\n"
           "1    | raised RuntimeError | gather_object #5 (unfinished, background thread)\n"
           "first difference: rank 0 raised RuntimeError while its gather_object #5 was unfinished: the recorded calls "
           "match so far, so no rank skipped one: an error ended the run (read it above)\n")


def test_a_trap_table_whose_recorded_calls_match_says_where_the_pairing_went_wrong():
    """Learner s12r4f finding 3: both ranks in the same gather_object #5, not the mismatch the prose told."""
    said = " ".join(checkpoints.trap_report(MATCHED, "", 5.9, 120).split())
    assert "deadlocked until a timeout" in said
    assert "the record does not hold FSDP's own collectives (dist.all_gather_single and reduce_scatter_single)" in said
    assert said.count("why the recorded calls match") == 1 and len(said.split("why the recorded")[1]) < 200  # 2 lines
    assert "each rank's checkpoint call met the other rank's FSDP call" in said
    assert "why the recorded calls match" not in checkpoints.trap_report(TRAP, ABORT, 0.9, 120)


def test_a_narrow_table_is_left_as_it_is():
    table = "rank | state\n0    | exited\n1    | raised"
    assert checkpoints.fold_table(table) == table


def test_lab07_cells_call_the_report_and_show_the_batch():
    cells = nbformat.read("solutions/07_memory_sharding.ipynb", 4).cells
    code = [c.source for c in cells if c.cell_type == "code"]
    table = next(s for s in code if "report.StepReading(" in s)
    assert "print(steps_read.table(batch=len(xc)))" in table and len(table.splitlines()) <= 30
    # learner s12r4f finding 1: the training step is timed in the checkpoint rounds too, and set beside none there
    assert 'runs["training step"] = functools.partial(training_step, ' in table
    assert 'anchor=(timed["training step"], speed["course CNN"]["float32"])' in table  # learner s13r7f finding 1
    record = next(s for s in code if "measure.record(rows" in s)
    assert "wall_s=t.median * steps_read.scale" in record  # the record's checkpoint rows on the same scale
    assert any("extra = [forward_time[name].median * steps_read.scale" in s for s in code)
    assert any("print(report.block_table(steps_read, names, forward_time))" in s for s in code)
    assert any("checkpoints.trap_report(said, rank_stderr.text" in s for s in code)
    counted = next(c for c in cells if c.cell_type == "code" and "saved_bytes, gradients = {}, {}" in c.source)
    printed = "".join(o.get("text", "") for o in counted.outputs)
    assert printed.startswith("batch of 64 images: 4x the micro-batch of 16")  # finding 4, committed (nbval-checked)
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert prose.count("README.md#results") == 2 and "every ratio and time\nbuilt from these rounds" not in prose


def test_the_summary_carries_the_accuracy_verdict_and_strategy_5():
    """Learner s12r3f findings 1 and 12: the summary printed two bare accuracies (read as 'bfloat16 trains better')
    and nothing of Strategy 5 (the resumed runs, async_save's verdict)."""
    assert report.accuracy_verdict(0.0167, 0.012, "bfloat16").startswith("within two standard errors: this test set "
                                                                        "cannot tell")
    beyond = report.accuracy_verdict(-0.03, 0.01, "bfloat16")
    assert beyond.startswith("beyond two") and "float32 trains better" in beyond and "cannot say" in beyond
    assert "not how much one training varies from seed to seed" in beyond, beyond  # learner s15r9f finding 5
    from lab_utils import measure
    held = measure.verdict([0.006, 0.0065, 0.0062, 0.0061, 0.0063], [0.02, 0.021, 0.0205, 0.02, 0.022],
                           claim="async_save vs save", expected="async_save holds the training loop for less time")
    said = " ".join(report.checkpoint_summary({1: 7.5e-09, 3: 1.5e-08, 2: 0.0}, held).split())
    assert "resumed on 1, 3, 2 ranks: max |final weights - uninterrupted| 1.5e-08" in said, said
    assert f"async_save against save: holds (save held the loop {held.ratio:.2f}x as long" in said, said
    refused = measure.Verdict("async_save vs save", "less", 3.0, 2.0, 4.0, measure.CANNOT_SEE, 5)
    said = report.checkpoint_summary({2: 0.0}, refused)
    assert said.endswith(measure.CANNOT_SEE) and "3.00x" not in said


def test_the_chart_merges_labels_that_would_overlap_and_draws_each_points_range():
    """Learner s12r4f finding 7: 'dense 1' and 'dense 2' printed on top of each other; the chart showed no spread."""
    fig, ax = plt.subplots()
    steps(QUIET).draw(ax)
    labels = [t.get_text() for t in ax.texts]
    plt.close(fig)
    assert "dense 1, dense 2" in labels and "dense 1" not in labels, labels
    assert len(ax.containers) == len(FACTOR)  # one error bar per choice


def test_the_medians_note_says_which_ratio_differs_from_the_verdict_and_why():
    """Learner s13r5f finding 2: '(each median comes from other rounds: ...)' was cryptic; the note names the ratio of
    the two medians beside the verdict's figure, and prints nothing where they agree or the verdict is refused."""
    from types import SimpleNamespace

    speed = {"course CNN": {"float32": Timing((8.0e-3,) * 5, 1), "bfloat16": Timing((7.8e-3,) * 5, 1)},
             "wide CNN": {"float32": Timing((80.0e-3,) * 5, 1), "bfloat16": Timing((50.0e-3,) * 5, 1)}}
    verdicts = {"course CNN": SimpleNamespace(verdict=measure.HOLDS, ratio=1.01, repeats=5),
                "wide CNN": SimpleNamespace(verdict=measure.HOLDS, ratio=1.60, repeats=5)}
    said = " ".join(report.medians_note(speed, verdicts, "bfloat16").split())
    assert "course CNN: 1.03, not the verdict's 1.01x" in said and "wide CNN" not in said, said
    assert "median of those 5 ratios" in said
    verdicts["course CNN"] = SimpleNamespace(verdict=measure.HOLDS, ratio=1.03, repeats=5)
    assert report.medians_note(speed, verdicts, "bfloat16") == ""
    verdicts["course CNN"] = SimpleNamespace(verdict=measure.CANNOT_SEE, ratio=1.01, repeats=5)
    assert report.medians_note(speed, verdicts, "bfloat16") == ""


def test_the_step_table_says_in_plain_words_when_its_rounds_were_noisy():
    """Learner s13r7f finding 2: the quiet run's steps spread 23-29 %, and the only noise line (under the block table,
    counting forwards 'left out') was unreadable: one plain line under the step table, only where steps spread."""
    assert "noise:" not in steps(QUIET).table(batch=64)
    noisy = steps(QUIET)
    noisy.times["conv 1"] = Timing((11.2e-3, 14.5e-3, 11.0e-3, 11.3e-3, 11.1e-3), 1)
    said = " ".join(report.StepReading(noisy.saved, noisy.times, QUIET).table(batch=64).split())
    assert ("noise: 1 of the 6 steps spread more than 25% over their 5 rounds (the widest 31%: a few slow rounds); "
            "time x none, a median of per-round ratios, is not moved by a few") in said, said


def test_the_anchor_lines_division_adds_up_as_printed():
    """Learner s13r8f, lab 07 finding 2: '8.7 / 1.04 = 8.39 ms' (8.37 by hand): the printed division used the
    rounded ratio of the table and the rounded time; it prints the figures it divides."""
    import re

    here = Timing(tuple(t * 1.043 / 1e3 for t in NONE_MS), 1)  # the training step timed in these rounds
    there = Timing(tuple(s / 1e3 for s in (8.66, 8.71, 8.69, 8.7, 8.72)), 1)  # as the speed section timed it
    times = {"none": Timing(tuple(t / 1e3 for t in NONE_MS), 1), "all": Timing(tuple(t * 1.8 / 1e3 for t in NONE_MS), 1)}
    read = report.StepReading({k: SAVED[k] * memory.MIB for k in times}, times, QUIET, anchor=(here, there))
    line = " ".join(report.anchor_line(read).split())
    top, below, result = map(float, re.search(r"takes ([\d.]+) / ([\d.]+) = ([\d.]+) ms", line).groups())
    assert abs(top / below - result) < 0.006, line
