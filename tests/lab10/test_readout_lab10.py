"""Lab 10's one-sentence answers (lab_utils.labs.lab10.readout) on fake rows: the table's question answered from its
own rows, and why the two projections differ, computed (learner s11r2g, findings 1 and 7)."""
import re

import pytest

from lab_utils import report
from lab_utils.labs.lab10 import readout
from lab_utils.measure import Result

W2, W3 = "CNN-3conv/synthetic28 step, launched ranks", "CNN-3conv/synthetic28 step"


def row(lab, strategy, ranks, rate, workload, threads=1, batch=256):
    """One results row, as the labs record them."""
    return Result(lab=lab, framework="torch", strategy=strategy, world_size=ranks, device="cpu", batch_size=batch,
                  samples_per_s=rate, wall_s=1.0, workload=workload, threads=threads)


def quiet_rows():
    """The quiet run's rows of the three ways (learner s11r2g's figures), each lab with its own baseline."""
    b2, b3 = row("02", "single", 1, 5921, W2), row("03", "single-process", 1, 5720, W3)
    return [report.Compared(b2, b2), report.Compared(row("02", "ddp", 2, 9460, W2), b2),
            report.Compared(row("02", "dp", 2, 9900, W2), b2), report.Compared(b3, b3),
            report.Compared(row("03", "single-process", 1, 8387, W3, threads=2), b3),
            report.Compared(row("03", "ddp", 2, 8881, W3), b3), report.Compared(row("03", "horovod-style", 2, 5996, W3), b3)]


def test_the_split_answer_names_each_way_its_lab_the_threads_and_theorys_reason():
    said = readout.split_answer(quiet_rows())
    assert said.startswith("answer: batch 256 over 2 ranks, speedup over its own lab's one process")
    assert "lab 02: DataParallel 1.67x > DDP 1.60x; lab 03: DDP 1.55x > Horovod-style 1.05x" in said
    assert "highest" not in said and "2 threads, no split: 1.47x (lab 03)" in said
    assert "\n  note: theory: Horovod-style makes one all-reduce call per gradient tensor, DDP one per bucket" in said
    answer = said.split("\n")[0]  # the answer itself holds the table's rows only, each once (learner s13r5g)
    assert sorted(re.findall(r"\d\.\d\dx", answer)) == ["1.05x", "1.47x", "1.55x", "1.60x", "1.67x"]


def test_the_split_answer_leaves_out_refused_rows_and_says_nothing_without_the_three():
    rows = quiet_rows()
    rows[2] = report.Compared(rows[2].row, rows[2].baseline, refused="two ways of timing")
    said = readout.split_answer(rows)
    assert "DataParallel 1.67x" not in said and "lab 02: DDP 1.60x; lab 03: DDP 1.55x > Horovod-style 1.05x" in said
    assert "not read here (n/m or [!] in the table): DataParallel (lab 02)" in said
    assert readout.split_answer(quiet_rows()[:1]) == ""
    assert "theory: Horovod" not in readout.split_answer(quiet_rows()[:3])  # no Horovod-style row: no reason


def test_the_split_answer_sets_other_labs_threads_beside_the_tables_and_says_when_they_flip_the_reading():
    """Learner s12r4g, findings 1-2: the answer quoted lab 03's two threads (1.31x, below its DDP 1.58x) while labs 01
    and 02 timed the same configuration at 1.75x: which lab you read decided whether threads beat DDP, unsaid."""
    rows = quiet_rows()
    b1 = row("01", "single-process", 1, 5954, W3)
    lab01 = [report.Compared(b1, b1), report.Compared(row("01", "single-process", 1, 10406, W3, threads=2), b1)]
    said = readout.split_answer(rows, others=rows + lab01)
    answer, *notes = said.split("\n")
    assert "2 threads, no split: 1.47x (lab 03)" in answer and "1.75x" not in answer  # other labs: a note line
    assert "  note: other labs timed 2 threads over their own baselines (rows not in this table): 1.75x (lab 01, " \
           "batch 256); threads trail lab 03's DDP (1.55x) on its own row, beat it on lab 01's" in "\n".join(notes)
    assert "other labs" not in readout.split_answer(rows)  # no other lab's threads: nothing to set beside
    low = [report.Compared(b1, b1), report.Compared(row("01", "single-process", 1, 7000, W3, threads=2), b1)]
    assert "lab 03's is the highest" in readout.split_answer(rows, others=low)


def test_the_split_answer_ranks_only_rows_apart_beyond_their_spreads():
    """Learner s12r4g, finding 5: 'DataParallel 1.70x > DDP 1.62x' with half the table's medians noisy."""
    rows = quiet_rows()
    rows[1] = report.Compared(row("02", "ddp", 2, 9460, W2).__class__(**{**vars(rows[1].row), "spread": 0.2}),
                              rows[1].baseline)
    said = readout.split_answer(rows)
    assert "lab 02: DataParallel 1.67x ~ DDP 1.60x; lab 03: DDP 1.55x > Horovod-style 1.05x;" in said
    assert "~: not ranked, the two medians lie within 25% of each other and within their repeats' spreads " \
           "(DataParallel 0%, DDP 20% (lab 02))" in said  # the spreads behind '~', printed (learner s13r5g, finding 1)


def test_the_split_answer_ranks_medians_further_apart_than_one_quantity_ever_is():
    """Learner s13r7g, finding 1: 'DDP 1.63x ~ Horovod-style 1.09x' (medians 1.49x apart, steps spread 43 %/67 %)
    called a tie; two medians of one quantity lie within 25 %, whatever the spreads of single steps."""
    from dataclasses import replace
    b3 = row("03", "single-process", 1, 5797, W3)
    ddp, hvd = replace(row("03", "ddp", 2, 9422, W3), spread=0.43), replace(row("03", "horovod-style", 2, 6327, W3),
                                                                           spread=0.67)
    said = readout.split_answer([report.Compared(b3, b3), report.Compared(ddp, b3), report.Compared(hvd, b3)])
    assert "lab 03: DDP 1.63x > Horovod-style 1.09x" in said and "~" not in said
    assert ">: faster, the medians lie more than 25% apart (more than two timings of one step differ by)" in said
    close = replace(hvd, samples_per_s=8000.0)  # 1.18x apart and within the spreads: still a tie
    assert "DDP 1.63x ~ Horovod-style 1.38x" in readout.split_answer(
        [report.Compared(b3, b3), report.Compared(ddp, b3), report.Compared(close, b3)])
    lines = readout.per_tensor_cost_line([report.Compared(b3, b3), report.Compared(ddp, b3), report.Compared(hvd, b3)],
                                         12, 0.43e-3)
    assert "of the 13.3 ms it lost to DDP" in lines  # ranked: theory's share of the measured loss is read
    # finding 4: '0.43 ms' per call beside alpha = 213.9 us looked wrong: the line says it is 2(N-1) x alpha
    assert "fixed cost per call, 2(N-1) x alpha = 0.43 ms (N = 2), = 4.7 ms per step" in lines


def test_the_split_answer_ranks_only_within_one_lab():
    """Learner s12r3g, finding 1: 'highest here: DDP' held only because lab 03's baseline was lower than lab 02's;
    within lab 02 DataParallel 1.65x beat DDP 1.55x."""
    b2, b3 = row("02", "single", 1, 5940, W2), row("03", "single-process", 1, 5684, W3)
    rows = [report.Compared(b2, b2), report.Compared(row("02", "ddp", 2, 9232, W2), b2),
            report.Compared(row("02", "dp", 2, 9787, W2), b2), report.Compared(b3, b3),
            report.Compared(row("03", "ddp", 2, 10385, W3), b3), report.Compared(row("03", "horovod-style", 2, 6798, W3), b3)]
    said = readout.split_answer(rows)
    assert "lab 02: DataParallel 1.65x > DDP 1.55x; lab 03: DDP 1.83x > Horovod-style 1.20x" in said
    assert "highest here: DDP" not in said and said.count("1.55x") == 1  # each figure once (issue 51)
    alone = readout.split_answer(rows[:2] + rows[3:5])  # one way per lab: nothing to rank
    assert "lab 02: DDP 1.55x; lab 03: DDP 1.83x" in alone and ">" not in alone


def test_the_projections_gap_is_computed_as_serial_fractions_at_the_fitted_count():
    said = readout.projections_apart(4, 2.28, 3.32, 2, 1.60, 1.87)
    assert "(2.28x vs 3.32x)" in said and "s = 0.250 measured, 0.070 in the model" in said
    assert "the other 0.180" in said
    assert readout.implied_s(1.60, 2) == pytest.approx(0.25)
    faster = readout.projections_apart(4, 1.78, 3.24, 2, 1.41, 2.24)  # the model above 2x on 2 devices: s below 0
    assert "-0.107 in the model" in faster and "below 0: one rank's share ran faster per image" in faster


def test_a_one_row_fit_says_how_far_its_s_moves_with_the_rows_spread():
    """Learner s11r2g, finding 8: s = 0.252 'no range' beside speedups that spread ~50 % with their repeats."""
    low, high = readout.s_range(1.60, 2, 0.45)
    assert low == pytest.approx(readout.implied_s(1.60 * 1.225, 2)) and high == pytest.approx(readout.implied_s(1.24, 2))
    line = readout.s_range_line(0.252, 1.60, 2, 0.45)
    assert "moves 45%" in line and f"{low:.2f}-{high:.2f}" in line and "s = 0.252" in line
    assert readout.s_range_line(0.252, 1.60, 2, float("inf")) == ""
    assert readout.s_range(1.41, 2, 0.64) == (pytest.approx(readout.implied_s(1.41 * 1.32, 2)), 1.0)  # s above 1: 1


def test_amdahls_fit_prints_its_row_the_rows_beside_it_the_rule_and_how_precise_s_is(capsys):
    """The fit's report, moved out of the notebook's cell (issue 51): one configuration fitted, the twin row of another
    lab named with the rule that chose between them, and s's spread said (learner s11r2g, finding 8)."""
    from dataclasses import replace
    spread = [replace(c.row, spread=0.2) for c in quiet_rows()]  # every rate's repeats spread 20 %
    baselines = {r.lab: r for r in spread if r.world_size == 1 and (r.threads or 1) == 1}
    rows = [report.Compared(r, baselines[r.lab]) for r in spread]
    from lab_utils.labs.lab10 import lesson
    candidates, per_machine, serial, configuration, twins = readout.amdahl_fits(rows, "", (
        lesson.amdahl_rows, lesson.one_configuration, lesson.speedup_spread, lesson.speedups_apart, lesson.spread_said))
    text = capsys.readouterr().out
    assert len(serial) == 1 and list(configuration.values())[0].startswith("lab 02 ddp")
    assert "rule: the fit reads the row whose speedup moves least" in " ".join(text.split())
    assert "how precise: the row's speedup moves 40%" in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 100


def test_the_per_tensor_cost_is_set_against_the_time_horovod_style_lost():
    """Learner s11r2g, finding 1: 'no line says why Horovod-style is so much slower than DDP': theory's reason (one
    call per tensor), computed against the step time it lost, says how much of the gap it explains."""
    said = readout.per_tensor_cost_line(quiet_rows(), 12, 0.256e-3)
    assert "12 all-reduce calls per step" in said and "11 extra calls" in said and "2.8 ms per step" in said
    assert "of the 13.9 ms it lost to DDP" in said and "explains 20% of it" in said and "none timed here" in said
    assert readout.per_tensor_cost_line(quiet_rows()[:3], 12, 0.256e-3) == ""  # no lab 03 rows
    assert "explains" in readout.per_tensor_cost_line(quiet_rows(), 12, 1.5e-3) and "does not time" not in \
        readout.per_tensor_cost_line(quiet_rows(), 12, 1.5e-3)


def test_the_summary_opens_with_the_tables_answer_said_to_come_from_above():
    """Issue 51: a summary answers the lab's question in one sentence; a figure printed twice says '(from above)'."""
    import nbformat
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    table = next(c.source for c in cells if c.cell_type == "code" and "report.scaling(compared)" in c.source)
    summary = next(c.source for c in cells if c.cell_type == "code" and "best = report.best_speedup(mine)" in c.source)
    assert "answer = readout.split_answer(shown_rows, others=compared)" in table
    assert 'answer.split("\\n")[0]' in summary  # the answer line only: its notes stay under the table
    assert '"answer (from the table above):"' in summary and summary.index("if answer:") < summary.index("print(f\"{len(rows)}")


def test_the_table_section_leads_with_its_answer_and_keeps_the_answers_notes_under_the_table():
    """Learner s15, finding 3: each section leads with one figure and one sentence; the table's answer came some 20
    lines below the row count, after the table, its notes and a footnote."""
    import nbformat
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    table = next(c.source for c in cells if c.cell_type == "code" and "report.scaling(compared)" in c.source)
    lead, notes, shown = (table.index(t) for t in ('print(measure.short_lines(lead', 'if answer_notes:',
                                                   "print(report.table("))
    assert lead < shown < notes and 'answer.partition("\\n")' in table
    assert "note on the answer above the table: " in table  # a note under the table names what it is about
    prose = next(c.source for c in cells if c.cell_type == "markdown" and "Where to look first:" in c.source)
    assert "the `answer:` line above the table" in " ".join(prose.split())


def test_the_ddp_step_names_what_compute_and_the_all_reduce_leave():
    """Learner s12r3g, finding 5: 2.49 ms = 1.07 compute + 0.58 all-reduce + 0.84 ms unnamed."""
    said = readout.step_rest_line(2.49e-3, 1.07e-3, 0.58e-3)
    assert "= 0.84 ms (34%) for the rest" in said and "optimizer step" in said and "coincidence" not in said
    # learner s12r4g, finding 8: 'the rest, 0.90 ms, is neither one rank's compute (0.90 ms ...)' read as a bug
    same = readout.step_rest_line(2.38e-3, 0.90e-3, 0.59e-3)
    assert "the step 2.38 ms - one rank's compute 0.90 ms" in same and "= 0.89 ms" in same and "coincidence" in same
    assert "account for the step" in readout.step_rest_line(1.7e-3, 1.1e-3, 0.58e-3)


def test_the_per_tensor_line_says_when_the_table_did_not_rank_the_loss_it_explains():
    """Learner s13r5g, finding 1: 'DDP 1.60x ~ Horovod-style 1.05x, no ranking' in the answer, then a 17.7 ms loss
    analysed as real: the line says the gap is one of medians the table does not rank."""
    from dataclasses import replace
    rows = [report.Compared(replace(c.row, spread=0.9, samples_per_s=(7800.0 if c.row.strategy == "horovod-style"
                                                                      else c.row.samples_per_s)), c.baseline)
            for c in quiet_rows()]  # 1.14x apart (within 25 %) and within their spreads: not ranked
    unranked = readout.per_tensor_cost_line(rows, 12, 0.256e-3)
    # learner s13r6g, finding 8: a loss the table does not rank gets theory's cost only, no explained share of it
    assert unranked.endswith("2.8 ms per step, a loss theory expects; the table does not rank the two rows (its ~), "
                             "so no share of a measured loss is read") and "explains" not in unranked
    assert "~" not in readout.per_tensor_cost_line(quiet_rows(), 12, 0.256e-3)  # ranked: nothing to say


def test_the_per_tensor_line_names_theorys_candidates_for_the_rest():
    """Learner s12r3g, finding 6: the fixed cost explained 19 % of the gap and nothing named the rest."""
    b3 = row("03", "single-process", 1, 5684, W3)
    rows = [report.Compared(b3, b3), report.Compared(row("03", "ddp", 2, 10385, W3), b3),
            report.Compared(row("03", "horovod-style", 2, 6798, W3), b3)]
    said = readout.per_tensor_cost_line(rows, 12, 0.229e-3)
    assert "explains 19% of it" in said and "12 waits per step for the slower rank" in said and "rough" not in said
    noisy = readout.per_tensor_cost_line(rows, 12, 0.229e-3, spread=8.09)  # learner s12r3g, finding 7: 809 %
    assert "explains 19% of it (a share read as an order of magnitude (above 100 %): the sweep's medians spread up " \
        "to 809%" in noisy
    # lab 10's one definition per word: 'rough' is above 25 %, 'an order of magnitude' above 100 % (learner s15)
    middling = readout.per_tensor_cost_line(rows, 12, 0.229e-3, spread=0.6)
    assert "(a share read as rough (above 25 %): the sweep's medians spread up to 60%" in middling
    assert "order of magnitude" not in middling


def test_a_one_row_amdahl_projection_carries_its_s_range():
    """Learner s12r3g, finding 3: 's could lie anywhere in 0.00-0.43', then a bare 3.12x on 4 devices."""
    from types import SimpleNamespace
    fit = report.serial_fit([(2, 1.83)])
    one = [SimpleNamespace(speedup=1.83, hardware_ratio=2)]
    low, fitted, high = readout.amdahl_projection(fit, 4, one, lambda c: 0.47)
    span = readout.s_range(1.83, 2, 0.47)
    assert fitted == pytest.approx(fit.projection(4)[1]) and high == pytest.approx(4.0)  # s = 0: linear
    assert low == pytest.approx(1 / (span[1] + (1 - span[1]) / 4)) and low < 2.0
    assert readout.amdahl_projection(fit, 4, one, lambda c: float("inf")) == fit.projection(4)  # spread unknown


def test_a_speedups_spread_says_which_of_its_two_spreads_makes_it():
    """Learner s12r3g, finding 2: lab 02's 147 % came from its baseline's 75 %, and nothing said so."""
    from types import SimpleNamespace
    c = SimpleNamespace(row=SimpleNamespace(spread=0.72), baseline=SimpleNamespace(spread=0.75))
    assert readout.spread_parts(c) == " (rate 72% + baseline 75%)"
    assert readout.spread_parts(SimpleNamespace(row=SimpleNamespace(spread=None), baseline=None)) == ""


def test_the_communication_section_ends_with_one_computed_sentence():
    """Learner s12r4g: 'give the learner one concluding sentence per section'; theory's thresholds (cell 'The ratio
    tells you ...': a few percent leaves room, tens of percent cap) decide each model's reading."""
    said = readout.communication_answer({"digits CNN": 1.11, "CNN-3conv": 0.024})
    assert said.startswith("section's answer: CNN-3conv's all-reduce is 2.4 % of one rank's compute: room for "
                           "near-linear scaling; digits CNN's all-reduce is 111 % of one rank's compute: it caps"), said
    assert "a noticeable share" in readout.communication_answer({"x": 0.2, "y": None})
    assert readout.communication_answer({"x": None}) == ""
    # learner s13r6g, finding 1: one figure per model, the step's; the fit's 27 % beside 162 % left the choice open
    assert "fit" not in readout.communication_answer({"digits CNN": 1.62, "CNN-3conv": 0.024})


def test_a_sweep_median_above_a_larger_messages_is_marked_even_where_the_spreads_are_too_wide_for_the_star():
    """Learner s13r6g, finding 2: 65,536 B 0.531 ms above 262,144 B 0.344 ms (spreads 204 %, 393 %), no mark."""
    sizes = [4096, 16384, 65536, 262144, 1048576]
    seconds = [0.273e-3, 0.266e-3, 0.531e-3, 0.344e-3, 1.187e-3]
    marks = readout.out_of_order(sizes, seconds, [[], [], [], [], []])
    assert marks == ["", "", "~", "", ""]  # 4,096 B took 3 % longer than 16,384 B: within the 10 % tolerance
    assert readout.out_of_order(sizes, seconds, [[], [], ["flag"], [], []])[2] == ""  # a '*' row is said once
    line = readout.out_of_order_line(sizes, seconds, marks)
    assert line.startswith("~ 65,536 B (0.531 ms): took longer than a larger message")
    assert "order of magnitude up to 65,536 B" in line
    assert readout.out_of_order_line(sizes, sorted(seconds), readout.out_of_order(sizes, sorted(seconds), [[]] * 5)) == ""


def test_the_rows_not_in_the_fit_follow_their_heading_and_which_s_to_believe_comes_after_them():
    """Learner s12r4g, finding 12: 'not in the fit (4 row(s) ...):' was cut from its rows by the paragraph."""
    import inspect
    source = inspect.getsource(readout.amdahl_fits)
    assert source.index("not in the fit (") < source.index("for c in others:") < source.index("which s to believe")


def test_one_way_timed_in_two_workloads_gets_a_line_naming_both_setups():
    """Learner s12r4g, finding 4: lab 02's DataParallel scaled 1.29x at batch 512 and 1.70x at batch 256 ('launched
    ranks'), a larger batch scaling worse, unexplained: the two are two workloads timed two ways."""
    rows = quiet_rows()
    b = row("02", "single", 1, 6035, "CNN-3conv/synthetic28 step in one process", batch=512)
    rows += [report.Compared(b, b), report.Compared(row("02", "dp", 2, 7783, b.workload, batch=512), b)]
    (line,) = readout.one_way_twice(rows)
    assert line.startswith("lab 02 timed DataParallel (2 devices) in 2 workloads: 1.29x (batch 512, in one "
                           "process), 1.67x (batch 256, launched ranks): each against its own workload's"), line
    assert "not one measured twice" in line and readout.one_way_twice(quiet_rows()) == []


def test_the_verdict_list_carries_a_labs_missed_prediction():
    """Learner s13r5g, finding 9: lab 08 said 'the predicted 5%: missed', lab 10's list said only 'holds'."""
    import nbformat
    row = {"ratio": "0.94958", "notes": "restated: these pairs scatter by 3.1%, ...: the claim tested is 'no worse by "
                                        "more than 10%', not 5% (a noisier run tests a weaker claim)"}
    assert readout.prediction_missed(row) == "; the predicted 5%: missed (median 0.950x below 0.952x = 1/1.05)"
    assert readout.prediction_missed({**row, "ratio": "0.97"}) == ""  # inside the 5 %: nothing missed
    assert readout.prediction_missed({"ratio": "0.90", "notes": ""}) == ""  # tested as predicted: its verdict says
    source = "".join(c.source for c in nbformat.read("solutions/10_scaling_report.ipynb", 4).cells)
    assert "missed = readout.prediction_missed(v)" in source
    # the summary's counts count it as 'prediction missed', as the list names it, not among the 'holds'
    assert 'word = "prediction missed" if readout.prediction_missed(said[-1]) else said[-1]["verdict"]' in source
    # learner s13r6g, finding 12: the line's first word is the prediction's outcome, the weaker claim's after it
    assert "f\"  {'prediction missed' if missed else v['verdict']}: {claim}" in source
    assert "f\": it {v['verdict']})\" if missed" in source


def test_one_way_to_read_other_machines_and_the_reused_sweep_names_its_sizes():
    """Learner s13r5g, findings 4 and 10: the intro said copy into results/, section Project said a folder of its own;
    the reused lab 06 sweep reached 64 MiB beside this lab's allreduce_max_bytes of 16 MiB, unsaid."""
    import nbformat
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    assert "`extra_results`" in cells[0].source and "append its `verdicts.csv`" not in cells[0].source
    source = "".join(c.source for c in cells if c.cell_type == "code")
    assert "{max(sweep['sizes']) / 2**20:g} MiB, not this lab's allreduce_max_bytes" in source


def test_a_flagged_split_row_names_the_figure_its_own_lab_reads_instead():
    """Learner s13r6g, finding 3: DataParallel at batch 256 had three figures (1.69x, 1.65x, 1.23x) and a 7-line [!];
    the answer says which one lab 02 reads: its other run of the same way, devices and batch."""
    from lab_utils import detectors
    rows = quiet_rows()
    flagged = row("02", "dp", 2, 9900, W2)
    flagged = Result(**{**flagged.__dict__, "flags": (detectors.Flag(detectors.Kind.CONTRADICT, "1.65x against 1.23x"),)})
    rows[2] = report.Compared(flagged, rows[0].baseline)
    one = row("02", "single", 1, 5540, W3 + " in one process")
    sweep = report.Compared(row("02", "dp", 2, 6810, W3 + " in one process"), one)
    said = readout.split_answer(rows, others=[report.Compared(one, one), sweep])
    assert ("not read here (n/m or [!] in the table): DataParallel (lab 02; its two runs at batch 256 disagree, and "
            "lab 02 reads the other one: 1.23x (in one process))") in said, said
    assert "its two runs" not in readout.split_answer(rows)  # no other run: nothing invented


def test_the_summarys_best_speedup_names_its_way_batch_and_workload_and_a_one_row_fit_claims_no_missing_range():
    """Learner s13r6g, findings 4-5: 'best ... 1.59x (lab 02 dp, batch 512 ...)' read against the answer's DataParallel
    'not read here' at batch 256; 's = 0.287 (one row: its own s, no range)' beside a printed range."""
    import nbformat
    source = "".join(c.source for c in nbformat.read("solutions/10_scaling_report.ipynb", 4).cells)
    assert "{dict(readout.SPLITS).get(best.row.strategy, best.row.strategy)} at batch {best.row.batch_size}" in source
    assert "({best.row.workload}{'' if best.row.batch_size == 256 else '; not the batch 256 of the answer above'})" \
        in source
    assert "at batch {best.row.batch_size} on {best.row.workload.split()[0]}" in source  # one setup, two labs
    said = report.serial_fit([(2, 1.554)]).describe()
    assert said == "s = 0.287 (one row, not a fit over several)" and "no range" not in said


def test_a_flagged_row_of_the_short_table_keeps_100_columns():
    """Learner s13r6g, finding 13: the DataParallel row with its ' *' printed 101 columns (the row itself 99)."""
    from lab_utils import detectors

    def table(variant, flags=()):
        base = Result(**{**row("03", "single-process", 1, 5935, W3).__dict__, "variant": variant})
        dp = Result(**{**row("03", "dp", 2, 9710, W3).__dict__, "flags": flags})
        text = report.table([report.Compared(base, base), report.Compared(dp, base)], short=True)
        return next(line for line in text.splitlines() if " dp " in line)
    variant = next("x" * k for k in range(1, 80) if len(table("x" * k)) == 99)  # 99 columns, as the quiet run's
    flagged = table(variant, (detectors.Flag(detectors.Kind.CONTRADICT, "1.65x against 1.23x"),))
    assert flagged.endswith("%*") and len(flagged) == 100, (len(flagged), flagged)
    assert table("x", (detectors.Flag(detectors.Kind.CONTRADICT, "1.65x against 1.23x"),)).endswith("% *")


def test_one_all_reduce_gets_the_steps_figure_and_one_measured_line_for_the_others():
    """Learner s13r7g, findings 2 and 3: 0.54 ms in the step, 1.61 ms alone, 0.46 ms from the fit, and two shares
    (51 %, 25 %) back to back: the share of a step names its whole; the figures alone get one line, measured."""
    share = readout.step_share_line(2.21e-3, 1.61e-3, 0.54e-3)
    assert share == ("the DDP digits run: a step took 2.21 ms (median); the same 0.54 ms all-reduce is 24% of that "
                     "whole step (above: of one rank's compute)") and "1.61" not in share
    assert "mostly the transfer" in readout.step_share_line(2.21e-3, 0.4e-3, 0.54e-3)  # above alone: the split
    line = readout.alone_line(55000, 1.61e-3, 0.46e-3, [4096, 65536, 262144], [0.807e-3, 0.607e-3, 0.428e-3],
                              [1.81, 1.45, 1.38])
    assert ("1.61 ms in this launch and 0.61 ms in the sweep's launch at 65,536 B, spread 145% (its fit: 0.46 ms at "
            "55,000 B): 2.7x apart between two launches") in line and line.endswith("the step's figure is the lab's")
    assert "this launch's sweep" in readout.alone_line(55000, 1.61e-3, None, [65536], [0.6e-3], [None],
                                                       other_launch=False)
    assert readout.alone_line(55000, 1.61e-3, None, [], [], []) == ""


def test_a_ratio_on_the_fit_says_how_far_off_the_fit_may_be_before_its_reading_changes():
    """Learner s13r7g, finding 5: the sweep spread 42-331 %, yet its fit's 3.1 % ratio came with no error."""
    assert readout.fit_margin(0.031) == "; the fit would have to be 3.2x too low for it to reach 10%"
    assert readout.fit_margin(0.6) == "; the fit would have to be 2.0x too high for it to fall below 30%"
    assert readout.fit_margin(0.2) == ""


def test_the_sections_answer_points_to_the_note_where_a_ratio_rests_on_a_noisy_median():
    """Learner s13r7g, finding 3: 51 % on a compute median spread 102 %, then 'it caps the scaling' unqualified; the
    answer points to the note (an order of magnitude), never 'roughly', the lab's word for spreads above 25 %."""
    said = readout.communication_answer({"digits CNN": 0.51, "CNN-3conv": 0.031}, noted={"digits CNN"})
    assert "digits CNN's all-reduce is 51 % of one rank's compute: it caps the scaling (read it as its note above " \
        "says)" in said.replace("51%", "51 %") and "3.1 % of one rank's compute: room for near-linear scaling;" in said
    assert "rough" not in said


def test_the_summarys_flip_flag_names_each_claim_it_means():
    """Learner s15, lab 10 finding 2: '[!] a claim of lab 08 held in one run and reversed in another' named no claim."""
    said = readout.flips_line([("08", "Hogwild vs sync, late accuracy"), ("02", "DDP vs DataParallel (gloo)")])
    assert said.startswith("  [!] 2 claims held in one run and reversed in another")
    assert said.index("lab 02: DDP vs DataParallel (gloo)") < said.index("lab 08: Hogwild vs sync, late accuracy")
    one = readout.flips_line([("03", "lr x 2 vs one device's lr")])
    assert "[!] 1 claim held" in one and "decided it)" in one and "lab 03: lr x 2 vs one device's lr" in one
    assert readout.flips_line([]) == ""


def test_one_setup_timed_by_two_labs_says_whether_the_rates_or_the_baselines_make_the_gap():
    """Learner s15r9g, finding 1: DDP was 1.35x in lab 03 and 1.91x in lab 02, the cause left to assemble: the DDP
    rates agreed within 1.10x, the labs' one-process baselines lay 1.29x apart."""
    b2, b3 = row("02", "single", 1, 2511, W2), row("03", "single-process", 1, 3233, W3)
    lab02, lab03 = report.Compared(row("02", "ddp", 2, 4795, W2), b2), report.Compared(row("03", "ddp", 2, 4377, W3), b3)
    said = readout.rates_or_baselines(lab03, lab02)
    assert said.startswith("1.35x (lab 03) vs 1.91x (lab 02): the DDP rates agree within 1.10x (lab 03 4,377, lab 02 "
                           "4,795 samples/s); the one-process baselines lie 1.29x apart (lab 03 3,233, lab 02 2,511")
    assert said.endswith("the baselines make most of the gap")
    same_base = report.Compared(row("02", "ddp", 2, 6000, W2), row("02", "single", 1, 3233, W2))
    said = readout.rates_or_baselines(lab03, same_base)  # equal baselines: the rates make the gap
    assert "the DDP rates lie 1.37x apart" in said and said.endswith("the rates make most of the gap")
    lines = readout.two_labs_lines([report.Compared(b2, b2), lab02, report.Compared(b3, b3), lab03])
    assert len(lines) == 1 and lines[0].startswith("DDP at batch 256 on 2x the hardware, timed by two labs: 1.91x")
    assert readout.two_labs_lines(quiet_rows()[:3]) == []  # one lab: nothing to set beside


def test_the_summary_lists_one_setups_labs_highest_speedup_first_and_names_each_projections_baseline():
    """Learner s15r9g, finding 1: 'best' listed the lower 1.35x first; the projections did not say whose baseline."""
    import nbformat
    source = "".join(c.source for c in nbformat.read("solutions/10_scaling_report.ipynb", 4).cells)
    assert "sorted([best, *twins], key=lambda c: -c.speedup)" in source and "highest speedup first" in source
    assert "readout.rates_or_baselines(*ranked[:2])" in source and "readout.two_labs_lines(shown_rows)" in source
    assert "over lab {fitted.row.lab}'s baseline" in source
