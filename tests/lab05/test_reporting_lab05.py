"""Lab 05's reporting (lab_utils.labs.lab05.reporting): plain sentences and the optional side check, on fake figures
(learner s11r2e, lab 05 findings 1-5)."""
import random

from lab_utils import conditions, measure, tf_distribute, workloads
from lab_utils.labs.lab05 import reporting

QUIET = conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0)
BUSY = conditions.Load(60.0, 2, own=0.4, others=1.6, steal=0.0)


def upper_bound(ratios, load=QUIET):
    return measure.decide(ratios, lab="05", no_worse_than=0.10, upper=True, workload=workloads.STEP_DIGITS_TF,
                          claim="MirroredStrategy vs one device", expected="no faster than one device", load=load)


def test_a_slower_setup_reads_as_slower_in_plain_words_not_as_an_upper_bound_that_holds():
    line = measure.in_plain_words(upper_bound([0.64, 0.65, 0.66, 0.65, 0.63]), "MirroredStrategy", "one device",
                           "for logical-cpu devices")
    assert line.startswith("MirroredStrategy: 0.65x the speed of one device (35 % slower; range 0.63-0.66)")
    assert line.endswith("as predicted for logical-cpu devices") and "tested as" not in line and "-> holds" not in line


def test_a_faster_setup_says_faster_and_a_reversed_verdict_is_flagged_with_its_prediction():
    faster = measure.decide([1.55, 1.57, 1.6, 1.58, 1.56], lab="05", claim="2 workers vs 1 worker",
                            expected="2 workers faster", workload=workloads.WORKERS, load=QUIET)
    assert "1.57x the speed of 1 worker (57 % faster;" in measure.in_plain_words(faster, "2 workers", "1 worker")
    reversed_ = measure.decide([0.5, 0.52, 0.51, 0.49, 0.5], lab="05", claim="2 workers vs 1 worker",
                               expected="2 workers faster", workload=workloads.WORKERS, load=QUIET)
    assert "50 % slower" in measure.in_plain_words(reversed_, "2 workers", "1 worker")
    assert "[!] against the prediction (2 workers faster)" in measure.in_plain_words(reversed_, "2 workers", "1 worker")


def test_a_refused_verdict_prints_no_figure_in_its_plain_sentence():
    refused = measure.decide([0.6, 0.7, 0.65, 0.66, 0.64], lab="05", claim="2 workers vs 1 worker",
                             expected="2 workers faster", workload=workloads.WORKERS, load=BUSY, workers=2)
    assert refused.verdict == measure.CANNOT_SEE
    line = measure.in_plain_words(refused, "2 workers", "1 worker")
    assert measure.NOT_MEASURABLE in line and "0.6" not in line and "slower" not in line


def fake_turns(torch_ms=1.0, after_ms=1.3, keras_ms=2.0, loop_ms=1.2, rounds=3, steps=5):
    rng = random.Random(0)

    def times(ms):
        return [[ms * 1e-3 * rng.uniform(0.97, 1.03) for _ in range(steps)] for _ in range(rounds)]

    return [{"times": {"torch": times(torch_ms), reporting.LOOP: times(loop_ms)},
             "omp_wait_policy": tf_distribute.omp_wait_policy()},
            {"times": {"keras": times(keras_ms), "torch after TensorFlow": times(after_ms)}}]


def test_the_side_check_says_its_result_first_then_one_table_of_times_and_no_second_ratio(tmp_path, capsys):
    side = reporting.side_check(fake_turns(), 64, 2, tmp_path, load=QUIET)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("PyTorch alone: 1.")  # the plain sentence leads, before any table
    assert "faster" in out[0] and "as predicted" in " ".join(out[:3])
    header = next(line for line in out if line.startswith("setup"))
    assert "ms/step" in header and "vs" not in header  # times and rates, no ratio column
    assert not any("rates' ratio" in line for line in out)  # no second figure for a verdict's comparison
    # learner s13r6e, lab 05 finding 1: the medians' ratio beside the verdict's figure is said once, with both
    # numbers, only where they differ by more than 10 % (not here)
    joined = " ".join(" ".join(out).split())
    assert measure.OTHER_ROUNDS not in joined and "the two medians give" not in joined
    assert not any(line.lstrip().startswith("note:") for line in out)  # the rows' conditions: one line under it
    assert side["trap"].verdict == measure.HOLDS and side["engines"].verdict == measure.HOLDS
    assert (tmp_path / "verdicts.csv").exists()  # both verdicts recorded
    assert max(len(line) for line in out) <= 100


def test_the_side_check_on_a_busy_machine_refuses_its_verdicts_and_prints_no_figure(tmp_path, capsys):
    side = reporting.side_check(fake_turns(), 64, 2, tmp_path, load=BUSY)
    out = capsys.readouterr().out
    assert side["trap"].verdict == side["engines"].verdict == measure.CANNOT_SEE
    assert out.startswith("PyTorch alone vs PyTorch where TensorFlow ran: " + measure.NOT_MEASURABLE)
    assert "1.30x" not in out and "2.00x" not in out and "faster" not in out  # no figure beside a refusal
    assert "the two medians give" not in " ".join(out.split())  # nor a line about the figure it refused
    assert max(len(line) for line in out.splitlines()) <= 100


def test_lab01_line_says_how_to_get_lab01s_figure_when_it_is_missing():
    line = reporting.lab01_line({}, {}, None, None, None, "CNN-2conv/digits8 training run")
    assert "run Lab 01 first" in " ".join(line.split()) and max(map(len, line.splitlines())) <= 100


def test_lab01_line_gives_the_pair_one_figure():
    """Latest learner walk, lab 05: '54,701 samples/s = 0.94x Lab 01's 57,974: they agree: 6% apart' gave one pair
    two figures; where they agree the gap is the one figure, and the ratio stays only beside a note or flag."""
    import types

    def line(own, lab01):
        rates = {reporting.LOOP: tf_distribute.StepRate(own, 0.03, 3, 30)}
        return " ".join(reporting.lab01_line(rates, {reporting.LOOP: []}, lab01, types.SimpleNamespace(spread=0.03),
                                             None, "CNN-2conv/digits8 training run").split())
    agree = line(54701.0, 57974.0)
    assert agree.startswith("Lab 01's loop in a process of its own: 54,701 samples/s against Lab 01's 57,974: they "
                            "agree: 6% apart"), agree
    assert "0.94x" not in agree
    apart = line(20000.0, 57974.0)
    assert "= 0.34x Lab 01's 57,974: see the" in apart and "agree" not in apart, apart


def test_the_kernel_table_says_each_setup_plainly_first_and_shows_the_verdicts_figure_or_n_m(capsys):
    rng = random.Random(1)
    one = [1e-3 * rng.uniform(0.98, 1.02) for _ in range(15)]
    paired = {"one device": one, "MirroredStrategy": [t / 0.65 for t in one]}
    rates = {name: tf_distribute.step_rate(64, [times]) for name, times in paired.items()}
    for load, figure in ((QUIET, "0.65x"), (BUSY, measure.N_M)):
        v = upper_bound(measure.paired_ratios(paired["MirroredStrategy"], one), load)
        reporting.kernel_table(rates, paired, load, "logical-cpu", {"MirroredStrategy": v})
        out = capsys.readouterr().out.splitlines()
        row = next(line for line in out if line.split()[:1] == ["MirroredStrategy"] and line.split()[1].isdigit())
        assert row.split()[2] == figure and max(map(len, out)) <= 100
        if load is QUIET:
            assert out[0].startswith("MirroredStrategy: 0.65x the speed of one device (35 % slower")
        else:
            assert measure.NOT_MEASURABLE in out[0] and "0.65" not in " ".join(out)


def keras_rows(one_device_rate, one_device_spread, keras_rate, keras_spread, keras_flag):
    """Lab 05's one-device row and the side check's Keras row (its own process) under `keras_flag`, as recorded."""
    same = dict(lab="05", framework="keras", strategy="single-device", world_size=1, device="cpu", batch_size=64,
                threads=2, repeats=30)
    return [measure.Result(variant="one device", samples_per_s=one_device_rate, wall_s=64 / one_device_rate,
                           spread=one_device_spread, workload=workloads.STEP_DIGITS_TF.name, **same),
            measure.Result(variant="keras (own process)", samples_per_s=keras_rate, wall_s=64 / keras_rate,
                           spread=keras_spread, flags=[keras_flag], workload=workloads.STEP_DIGITS.name, **same)]


def test_the_side_checks_keras_twin_of_the_kernels_step_is_one_short_note(tmp_path, monkeypatch):
    """Learner s12r3e, lab 05 finding 3: the record's note on Keras measured twice (kernel, own process) was a 9-line
    sentence; the lab records with brief_notes, so it is one line under the row whose own note says why."""
    from lab_utils import detectors

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    rows = keras_rows(51522.0, 0.12, 36763.0, 0.29, detectors.condition(reporting.KERAS_COMPANY))
    table = measure.record(rows, tmp_path, brief_notes=True)
    notes = [line for line in table.splitlines() if "measured 51,522" in line]
    assert len(notes) == 1 and ("1.40x apart, allowed: rows timed under different conditions (the note just "
                                "above) may lie up to 2x apart") in " ".join(table.split()), table  # shared note (s13-h7)
    assert "one quantity under two workload labels" not in table and "theory does not fix" not in table
    assert "wakes them" in " ".join(table.split())  # the row's own note says why this Keras figure is lower


def test_a_held_verdict_prints_its_figure_in_one_line_and_what_held_only_where_the_bound_decided():
    """Learner s12r4e, lab 05 finding 6: a 4-line test block restated a 30 % slowdown; learner s13r5e: even 'what held:
    at most 10 % faster' restated it. A range wholly past 1 is said in one line; a bound that decided says what held."""
    import re

    v = upper_bound([0.70, 0.67, 0.74, 0.71, 0.69, 0.72, 0.70])
    text = reporting.brief(v)
    joined = " ".join(text.split())
    assert "holds as predicted at 0.70x (range" in joined and "tested as" not in joined and "what held" not in joined
    assert len(text.splitlines()) <= 2 and max(map(len, text.splitlines())) <= 100
    # the course's output checks still read its claim, figure and pairs (tests/test_outputs.py's STACKED_LINE)
    stacked = re.compile(r"^\s*verdict, (?P<claim>.+?): (?:holds|reversed|not distinguishable here) (?:.*? )?"
                         r"(?P<ratio>\d+\.\d\d)x \([^()]*? over (?P<pairs>\d+) paired repeats\)")
    m = stacked.match(joined)
    assert m and m["ratio"] == "0.70" and m["pairs"] == "7"
    close = " ".join(reporting.brief(upper_bound([0.98, 1.02, 1.01, 0.99, 1.03, 1.0, 1.01])).split())
    assert "what held: MirroredStrategy at most 10 % faster than one device (the whole range below 1.10)" in close
    cost = measure.decide([0.98, 1.02, 1.03, 0.99, 1.01], lab="05", no_worse_than=0.10, max_restated=float("inf"),
                          workload=workloads.STEP_DIGITS, claim="PyTorch alone vs PyTorch where TensorFlow ran",
                          expected="PyTorch alone no slower", load=QUIET)
    assert "PyTorch alone at most 10 % slower than PyTorch where TensorFlow ran (the whole range above 0.91)" \
        in " ".join(reporting.brief(cost).split())
    win = measure.decide([1.22, 1.15, 1.3, 1.2, 1.25], lab="05", no_worse_than=0.10, max_restated=float("inf"),
                         workload=workloads.STEP_DIGITS, claim="PyTorch alone vs PyTorch where TensorFlow ran",
                         expected="PyTorch alone no slower", load=QUIET)
    assert "what held" not in reporting.brief(win) and "1/1.10" not in reporting.brief(win)


def test_a_verdict_that_does_not_simply_hold_prints_whole():
    reversed_ = upper_bound([1.5, 1.45, 1.55, 1.52, 1.48])  # clearly faster than 'no faster' allows
    said = reporting.brief(reversed_)
    assert reversed_.verdict == measure.REVERSED and "what held" not in said and "[!]" in said  # Verdict's own block
    refused = upper_bound([0.7, 0.71, 0.69, 0.7, 0.72], load=BUSY)
    said = reporting.brief(refused)
    assert measure.CANNOT_SEE in said and "what held" not in said and "0.70" not in said


def test_the_two_keras_figures_are_set_side_by_side_with_their_ratio():
    """Learner s13r5e, lab 05 finding 8: the ratio of the two Keras figures was never printed; learner s13r6e, finding
    2: it is said once, in the side check's line, in the results table's direction ('1.65x apart', not '0.61x')."""
    line = reporting.keras_twins(44822.0, 27173.0)
    assert line == ("keras' 27,173 samples/s lies below section 5's 44,822 from back-to-back steps (1.65x apart), as "
                    "theory puts it")
    assert "not below" in reporting.keras_twins(26140.4, 29374.0)
    # a scratch run beside other helpers: 2.11x apart, which the results table flags as a contradiction
    far = reporting.keras_twins(45545.0, 21612.0)
    assert "(2.11x apart): more than the 2x" in far and "flags it" in far and "as theory puts it" not in far
    busy = reporting.keras_twins(29374.0, 26140.4, busy=True)
    assert "1.12x apart" in busy and "as theory puts it" not in busy and "no order is read" in busy


def test_the_side_check_says_the_keras_twin_and_no_ratio_of_the_tables_medians(tmp_path, capsys):
    """Learner s13r6e, lab 05 'make it a 5': the side check's one line under the table says why Keras sits below
    section 5's figure; the latest learner walk: 'the table's two medians give 1.31x, the verdict 1.18x' printed two
    figures for one comparison, so only the verdict's is printed, even where the table's medians drift from it."""
    turns = fake_turns()
    rng = random.Random(11)  # slow steps here and there: the medians 3.25x apart, the paired ratios' median 1.30x
    turns[0]["times"]["torch"] = [[1e-3 * rng.choice([1, 1, 2.5]) for _ in range(5)] for _ in range(3)]
    turns[1]["times"]["torch after TensorFlow"] = [[1.3e-3 * rng.choice([1, 1, 2.5]) for _ in range(5)]
                                                   for _ in range(3)]
    side = reporting.side_check(turns, 64, 2, tmp_path, load=QUIET, kernel_rate=64 / 1.2e-3)
    out = capsys.readouterr().out
    joined = " ".join(out.split())
    assert "lies below section 5's 53,333 from back-to-back steps" in joined and "(a settle, as in Lab 02)" in joined
    assert "two medians give" not in joined and measure.OTHER_ROUNDS not in joined, out
    medians = side["rates"]["torch"].samples_per_s / side["rates"]["torch after TensorFlow"].samples_per_s
    assert abs(medians / side["trap"].ratio - 1) > 0.05  # the case the old note spoke for
    assert f"{medians:.2f}x" not in joined and max(map(len, out.splitlines())) <= 100, out


def test_each_comparison_prints_its_verdicts_figure_once(tmp_path, capsys):
    """Learner s13r7e, lab 05 finding 1 put a medians note under each comparison; the latest learner walk could not
    see why that note's figure differed from the verdict's: each comparison now prints one figure, the verdict's, in
    its plain sentence and its verdict line, and no other."""
    turns = fake_turns(keras_ms=2.6)
    rng = random.Random(26)  # slow steps here and there: both pairs' medians drift from their paired ratios
    for process, name, ms in ((0, "torch", 1.0), (1, "torch after TensorFlow", 1.3), (1, "keras", 2.6)):
        turns[process]["times"][name] = [[ms * 1e-3 * rng.choice([1, 1, 2.5]) for _ in range(5)] for _ in range(3)]
    side = reporting.side_check(turns, 64, 2, tmp_path, load=QUIET)
    lines = capsys.readouterr().out.splitlines()
    joined = " ".join(" ".join(lines).split())
    assert joined.count(f"{side['trap'].ratio:.2f}x") == 2 and joined.count(f"{side['engines'].ratio:.2f}x") == 2
    assert "medians give" not in joined and "as above" not in joined, lines


def test_the_keras_row_in_the_results_table_says_in_one_note_why_and_how_far_below(tmp_path, monkeypatch):
    """Learner s13r7e, lab 05 finding 2: two notes under the Keras row, the second 'allowed ... may lie up to 2x apart'
    read as a fudge: one note says the settle and how far below the one-device row it came, computed."""
    from lab_utils import detectors

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    rows = keras_rows(36291.1, 0.23, 22605.0, 0.05, detectors.condition(reporting.settled_note(36291.1, 22605.0)))
    table = " ".join(measure.record(rows, tmp_path, brief_notes=True).split())
    assert table.count("note:") == 1 and "may lie up to" not in table and "[!]" not in table, table
    assert "then wakes them: 1.61x below the one-device row's 36,291, whose steps ran back to back" in table, table


def test_a_no_worse_claim_held_below_1_is_not_said_as_predicted():
    """Learner s15r9e, lab 05 finding 2: 0.95x (range 0.87-0.97) read 'as predicted' for 'PyTorch alone no slower'."""
    def no_slower(ratios):
        return measure.decide(ratios, lab="05", no_worse_than=0.10, max_restated=float("inf"), load=QUIET,
                              workload=workloads.STEP_DIGITS, claim="PyTorch alone vs PyTorch where TensorFlow ran",
                              expected="PyTorch alone no slower")
    behind = no_slower([0.95, 0.93, 0.96, 0.94, 0.97, 0.92, 0.95, 0.94])
    assert behind.verdict == measure.HOLDS and behind.ratio < 1
    line = measure.in_plain_words(behind, "PyTorch alone", "PyTorch where TensorFlow ran")
    assert "as predicted" not in line and "slower" in line
    assert "against the predicted direction (PyTorch alone no slower)" in line and "no difference it can" in line
    ahead = no_slower([1.05, 1.03, 1.06, 1.04, 1.07, 1.02, 1.05, 1.04])
    assert measure.in_plain_words(ahead, "PyTorch alone", "PyTorch where TensorFlow ran").endswith("as predicted")


def test_a_launched_loop_below_lab01_says_the_measured_reason_when_the_bare_step_is_below_too():
    """Learner s15r9e, lab 05 cell 52: 17,173 against Lab 01's 26,180 (1.52x) was 'a note, not a contradiction' with
    no measured reason; the same process's bare step below Lab 01's loop is one."""
    import types

    def line(bare):
        rates = {reporting.LOOP: tf_distribute.StepRate(17173.0, 0.05, 3, 30),
                 "torch": tf_distribute.StepRate(bare, 0.03, 3, 30)}
        flags = {reporting.LOOP: tf_distribute.loop_conditions(tf_distribute.omp_wait_policy())}
        return " ".join(reporting.lab01_line(rates, flags, 26180.0, types.SimpleNamespace(spread=0.03), None,
                                             "CNN-2conv/digits8 training run").split())
    slow_process = line(21449.0)
    assert "a note, not a contradiction" in slow_process
    assert "why: this process's step without the fetch (the torch row, 21,449 samples/s) also ran below Lab 01's " \
           "26,180" in slow_process and "not the loop's" in slow_process
    assert "why:" not in line(30000.0)  # the bare step not below Lab 01's: no such reason to give
