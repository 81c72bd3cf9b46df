import csv
import time
from pathlib import Path

import pytest

from lab_utils import hardware, measure, workloads

HW = hardware.HardwareReport("h", 2, (), "3.11", "2.13.0", "2.21.0")


def counting(durations):
    calls = []
    def fn():
        calls.append(1)
        time.sleep(durations[min(len(calls) - 1, len(durations) - 1)])
    return fn, calls


def test_time_it_excludes_warmup_and_reports_median():
    fn, calls = counting([0.05, 0.05, 0.002, 0.003, 0.002])
    t = measure.time_it(fn, warmup=2, repeats=3)
    assert len(calls) == 5 and len(t.times) == 3 and t.warmup == 2
    assert t.median < 0.02  # the slow warm-up calls are not in it
    assert "median" in str(t) and "2 warm-up" in str(t)


def test_time_it_rejects_bad_counts():
    with pytest.raises(ValueError, match="repeats >= 1"):
        measure.time_it(lambda: None, repeats=0)


def test_time_interleaved_alternates_order_and_runs_setup():
    log = []
    timings = measure.time_interleaved({"a": lambda: log.append("a"), "b": lambda: log.append("b")},
                                       warmup=1, repeats=2, before={"b": lambda: log.append("setup-b")})
    assert log == ["a", "setup-b", "b", "setup-b", "b", "a", "a", "setup-b", "b"]
    assert set(timings) == {"a", "b"} and all(len(t.times) == 2 for t in timings.values())


def test_throughput_helpers():
    assert measure.samples_per_second(100, 0.5) == 200
    with pytest.raises(ValueError, match="duration must be positive"):
        measure.samples_per_second(100, 0)
    assert measure.throughput_from_step_times(10, [9.0, 1.0, 2.0, 100.0], warmup=1) == 5.0
    with pytest.raises(ValueError, match="all 2 step times are warm-up"):
        measure.throughput_from_step_times(10, [1.0, 2.0], warmup=2)


def test_median_after_warmup_keeps_all_when_the_warmup_would_leave_none():
    assert measure.median_after_warmup([9.0, 1.0, 2.0, 100.0], 1) == 2.0
    assert measure.median_after_warmup([9.0, 1.0], 2) == 5.0
    with pytest.raises(ValueError):
        measure.median_after_warmup([], 0)


def test_synchronize_on_cpu_is_a_no_op():
    measure.synchronize("cpu")
    measure.synchronize(None)


def result(**overrides):
    args = dict(lab="01", framework="torch", strategy="single-device", world_size=1, device="cpu", batch_size=64,
                samples_per_s=1234.5678, wall_s=1.5, accuracy=0.95, epochs=3, threads=1, workload="digits, cnn")
    args.update(overrides)
    return measure.Result(**args)


def test_write_and_read_results_with_the_machine(isolated_results):
    path = measure.write_result(result(), hw=HW)
    measure.write_result(result(strategy="ddp", world_size=2, accuracy=None, epochs=None, variant="2 ranks"), hw=HW)
    assert path == isolated_results / "lab01.csv"
    rows = measure.read_results(isolated_results)
    assert [r.strategy for r in rows] == ["single-device", "ddp"]
    assert rows[0].samples_per_s == pytest.approx(1234.57, rel=1e-5) and rows[0].machine.host == "h"
    assert rows[1].accuracy is None and rows[1].epochs is None and rows[1].variant == "2 ranks"
    assert rows[0].timestamp and rows[0].resources == 1 and rows[1].resources == 2
    with path.open() as handle:
        assert tuple(next(csv.reader(handle))) == measure.RESULT_COLUMNS


def test_results_go_beside_the_notebook_unless_told_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_RESULTS_DIR")
    monkeypatch.chdir(tmp_path)
    assert measure.results_dir() == tmp_path / "results"
    monkeypatch.setenv("LAB_RESULTS_DIR", str(tmp_path / "elsewhere"))
    assert measure.results_dir() == tmp_path / "elsewhere" and measure.results_dir("x") == Path("x")


def test_write_result_refuses_what_is_not_a_measurement(tmp_path):
    with pytest.raises(TypeError, match="takes a measure.Result"):
        measure.write_result({"lab": "01"}, tmp_path)
    with pytest.raises(ValueError, match="samples_per_s must be a positive number"):
        measure.write_result(result(samples_per_s=float("nan")), tmp_path, HW)


def test_read_results_explains_malformed_files(tmp_path):
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"other.csv, line 1: not a results CSV"):
        measure.read_results(tmp_path / "other.csv")
    good = measure.write_result(result(), tmp_path / "r", HW)
    bad = tmp_path / "bad.csv"
    bad.write_text(good.read_text().replace(",1234.57,", ",fast,"))
    with pytest.raises(ValueError, match=r"bad.csv, line 2: column 'samples_per_s' must be a number, got 'fast'"):
        measure.read_results(bad)
    bad.write_text(good.read_text().strip() + ",extra\n")
    with pytest.raises(ValueError, match=r"line 2: ragged row"):
        measure.read_results(bad)


@pytest.mark.parametrize("kwargs, says", [
    (dict(speedup=2.3, devices=2), "efficiency 115%, above 100 %"),
    (dict(baseline_rate=900, reference_rate=30000), "0.03x lab 01's"),
])
def test_implausible_figures_are_flagged_with_a_cause(kwargs, says):
    flags = measure.plausibility(**kwargs)
    assert len(flags) == 1 and says in flags[0]
    said = measure.flagged("x", flags)  # too long for one line: the flag under the figure, wrapped (learner s9i)
    assert said.startswith("x\n    [!] ") and max(map(len, said.splitlines())) <= measure.lines.WIDTH, said
    assert measure.flagged("x", [f"{flags[0]}"[:40]]).startswith("x  ")  # a short flag stays on the figure's line


@pytest.mark.parametrize("kwargs, says", [
    (dict(other_framework="TensorFlow"), "where TensorFlow also ran"),
    (dict(oversubscribed=True), "oversubscribed"),
])
def test_caveats_are_recorded_but_printed_as_notes_not_flags(kwargs, says):
    warnings = measure.plausibility(**kwargs)
    assert len(warnings) == 1 and says in warnings[0]
    assert measure.flagged("x", warnings) == f"x  (note: {warnings[0]})"  # nothing impossible: no [!]
    assert measure.flagged("x", warnings + measure.plausibility(speedup=2.3, devices=2)).count("[!]") == 1


def test_plausible_figures_are_not_flagged():
    assert measure.plausibility(speedup=1.8, devices=2, baseline_rate=30000, reference_rate=33000) == []
    assert measure.flagged("x", []) == "x"


def test_step_timer_drops_warmup_and_takes_the_median():
    timer = measure.StepTimer(warmup=1)
    timer.seconds = [5.0, 0.1, 0.3, 0.1]
    assert timer.samples_per_s(10) == pytest.approx(100) and timer.spread() == pytest.approx(2.0)
    assert measure.StepTimer().samples_per_s(10) is None


def test_a_rate_says_what_it_counts_and_an_old_csv_gains_the_column(tmp_path):
    import csv
    row = dict(lab="09", framework="torch", strategy="serving", variant="batch-1", workload="w", world_size=1,
               device="cpu", batch_size=1, samples_per_s=100.0, wall_s=1.0)
    with pytest.raises(ValueError, match="rate must be one of"):
        measure.write_result(measure.Result(**row, rate="samples/s"), tmp_path)
    old_columns = [c for c in measure.RESULT_COLUMNS if c not in ("rate", "cpu_model", "cpu_features", "flag_kinds")]
    path = tmp_path / "lab09.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(old_columns)
        writer.writerow(["2026-01-01T00:00:00+00:00", "09", "torch", "serving", "old", "w", "1", "cpu", "1", "", "",
                         "50", "1", "", "", "", "", "h", "2", "", "2", "2", "3.11"])
    measure.write_result(measure.Result(**row, rate=measure.ANSWERED), tmp_path)
    old, new = measure.read_results(path)
    assert (old.variant, old.rate, old.samples_per_s) == ("old", "", 50.0)
    assert (new.rate, new.samples_per_s) == (measure.ANSWERED, 100.0) and new.machine.cpu_model is not None


def test_a_row_another_lab_measured_in_this_run_is_compared_with_it(isolated_results, monkeypatch):
    from lab_utils import conditions

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)  # a quiet machine: no busy note on the rows
    row = dict(framework="torch", strategy="single-process", variant="1 process x 1 thread", world_size=1,
               device="cpu", batch_size=256, wall_s=0.1, threads=1, workload=workloads.STEP_3CONV.name, spread=0.05)
    measure.record(measure.Result(lab="01", samples_per_s=3000.0, **row))
    agreeing = measure.record(measure.Result(lab="03", samples_per_s=3100.0, **row))
    assert "[!]" not in agreeing
    text = measure.record(measure.Result(lab="03", samples_per_s=4500.0, **row))
    # another lab's row comes from another lab's run: the flag says so, and how far apart (never "in this run")
    assert "[!]" in text and "measured twice by two labs' runs " in text and " s apart" in text and "lab 01" in text
    assert "in this run" not in text and "likelier wrong" not in text  # neither carries a note: no suspect named
    newest = measure.read_results(isolated_results / "lab03.csv")[-1]
    assert any("measured twice by two labs' runs" in f for f in newest.flags)  # the flag reaches the CSV as it reached the screen
    # another configuration (2 threads) is not the same quantity; a row with a note is, and the flag shows the note
    other = measure.record(measure.Result(lab="03", samples_per_s=9000.0, **dict(row, threads=2)))
    noted = measure.record(measure.Result(lab="05", samples_per_s=9000.0, flags="measured in a process where "
                                          "TensorFlow also ran: its threads compete for the cores", **row))
    assert "measured twice" not in other
    noted = " ".join(noted.split())  # the table's flag lines wrap at measure.lines.WIDTH
    assert "measured twice" in noted and "noted then: lab 05 (single-process 1 process x 1 thread): measured in a " \
        "process where TensorFlow also ran" in noted
    # only one of the two carries a note: the flag names it as the likelier wrong figure, whichever row the * marks
    assert "only lab 05 (single-process 1 process x 1 thread) carries such a note: it is the likelier wrong" in noted


KERAS = dict(framework="keras", strategy="single-device", world_size=1, device="cpu", batch_size=64, wall_s=0.1,
             threads=2, spread=0.05)


def test_the_same_measurement_under_two_labels_is_compared(isolated_results, monkeypatch):
    from lab_utils import conditions

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    digits = workloads.STEP_DIGITS.name
    in_kernel = measure.Result(lab="05", variant="one device", samples_per_s=30747.0, **KERAS,
                               workload=workloads.STEP_DIGITS_TF.name)
    own = measure.Result(lab="05", variant="keras (own process)", samples_per_s=18119.0, workload=digits, **KERAS,
                         flags="measured while other programs used 1.6 and steal 0.0 of 2 cores")
    torch_row = measure.Result(lab="05", variant="training run", samples_per_s=148.0, workload=digits,
                               **dict(KERAS, framework="torch"))
    text = measure.record([in_kernel, own, torch_row])
    said = ["; ".join(r.flags) for r in measure.read_results(isolated_results / "lab05.csv")]
    assert "1.70x apart" in said[1] and "lab 05 (single-device one device)" in said[1]
    assert "noted then: lab 05 (single-device keras (own process)): measured while other programs" in said[1]
    assert "measured twice" not in said[0] + said[2]  # the first has nothing before it; torch is another framework
    assert "[!]" in text
    # lab 01's training run fetches every batch (a DataLoader), lab 05's steps take prepared ones: not one quantity
    loaded = measure.Result(lab="01", variant="training run", samples_per_s=60000.0, workload=workloads.TRAINING_RUN.name,
                            **KERAS)
    assert "measured twice" not in measure.record(loaded)
    # a lab's own variants of one workload label are its comparison, not a repeat, under any other label either
    lab07 = [measure.Result(lab="07", variant=v, samples_per_s=r, workload=w, **dict(KERAS, framework="torch"))
             for v, r, w in (("float32", 460.0, workloads.PRECISION.name),
                             ("bfloat16 autocast", 430.0, workloads.PRECISION.name),
                             ("checkpoint none", 460.0, workloads.CHECKPOINTS.name),
                             ("checkpoint all", 260.0, workloads.CHECKPOINTS.name))]
    assert "measured twice" not in measure.record(lab07)


def test_a_row_whose_batch_its_workload_rules_out_is_refused(isolated_results):
    row = dict(lab="01", framework="torch", strategy="single-process", world_size=1, device="cpu", wall_s=0.1,
               samples_per_s=1000.0, workload=workloads.STEP_3CONV.name)
    with pytest.raises(ValueError, match="timed at batch 256, this row says 128"):
        measure.write_result(measure.Result(batch_size=128, **row))
    measure.write_result(measure.Result(batch_size=256, **row))
    measure.write_result(measure.Result(batch_size=128, **dict(row, workload="an older label")))
    assert [r.batch_size for r in measure.read_results(isolated_results / "lab01.csv")] == [256, 128]


def test_an_allreduce_from_the_fit_is_compared_with_the_one_measured(isolated_results, monkeypatch):
    from lab_utils import conditions

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    course = dict(framework="torch", strategy="ddp", world_size=2, device="cpu", batch_size=256, threads=1,
                  rate=measure.ALLREDUCES, spread=0.1)
    measured = measure.Result(lab="03", variant="measured in the step", samples_per_s=1 / 2.7e-3, wall_s=2.7e-3,
                              workload="gradient all-reduce, cnn2d_3layer_fullconnected_3layer, 28x28", **course)
    fitted = measure.Result(lab="10", variant="", samples_per_s=1 / 0.72e-3, wall_s=0.72e-3,
                            workload="course CNN all-reduce per step (28x28)", **course,
                            flags="from the fit of the all-reduce sweep, not timed")
    measure.record(measured)
    text = measure.record(fitted)
    assert "[!]" in text and "3.75x apart" in text and "noted then: lab 10 (ddp): from the fit" in text


def test_a_flags_kind_survives_the_csv_round_trip(tmp_path):
    from lab_utils import detectors
    flags = (detectors.above_device_count(2.3, 2)[0], detectors.note("busy; then quiet"),
             detectors.Flag(detectors.Kind.NOISE, "spread"), "a plain string")
    row = measure.Result(lab="03", framework="torch", strategy="ddp", world_size=2, device="cpu", batch_size=8,
                         samples_per_s=10.0, wall_s=1.0, workload="w", flags=flags)
    measure.write_result(row, tmp_path, HW)
    back = measure.read_results(tmp_path)[0].flags
    assert back == flags  # "; " inside a text stays inside it: texts and kinds are two columns, not joined text
    assert [f.kind for f in back] == [detectors.Kind.ABOVE_100, detectors.Kind.NOTE, detectors.Kind.NOISE,
                                      detectors.Kind.NOTE]


def test_an_old_csv_without_kinds_reads_its_flags_by_their_phrases(tmp_path):
    import csv
    from lab_utils import detectors
    too_fast = detectors.above_device_count(2.3, 2)[0]
    old_columns = [c for c in measure.RESULT_COLUMNS if c != "flag_kinds"]
    values = {"timestamp": "2026-01-01T00:00:00+00:00", "lab": "03", "framework": "torch", "strategy": "ddp",
              "world_size": "2", "device": "cpu", "batch_size": "8", "samples_per_s": "10", "wall_s": "1",
              "workload": "w", "cpu_count": "2", "flags": f"busy; {too_fast}; repeats spread by 40 %"}
    path = tmp_path / "lab03.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerows([old_columns, [values.get(c, "") for c in old_columns]])
    flags = measure.read_results(path)[0].flags
    assert [f.kind for f in flags] == [detectors.Kind.NOTE, detectors.Kind.ABOVE_100, detectors.Kind.NOISE]
    measure.write_result(measure.Result(lab="03", framework="torch", strategy="ddp", world_size=2, device="cpu",
                                        batch_size=8, samples_per_s=10.0, wall_s=1.0, workload="w"), tmp_path, HW)
    old, new = measure.read_results(path)  # the file gained the column; the old row still reads the same
    assert old.flags == flags and new.flags == ()


def test_the_store_appends_and_reads_back_rows_verdicts_and_sweeps(tmp_path):
    store = measure.Store(tmp_path / "r")
    assert store.rows("results") == [] and store.rows("verdicts") == [] and store.rows("sweeps") == []
    row = measure.Result(lab="01", framework="torch", strategy="single", world_size=1, device="cpu", batch_size=8,
                         samples_per_s=10.0, wall_s=1.0, workload="w")
    assert store.append(row, HW).name == "lab01.csv"
    verdict = measure.decide([1.2] * 5, claim="A vs B", expected="A faster", lab="01", timed=False,
                             workload=workloads.STEP_3CONV)
    assert store.append(verdict, HW).name == "verdicts.csv"
    store.append(measure.AllReduceSweep("06", "gloo", 2, (4096,), (1e-4,), (0.1,)), HW)
    store.append(measure.AllReduceSweep("06", "gloo", 2, (4096,), (2e-4,), (0.1,)), HW)  # a rerun replaces lab 06's
    assert [r.samples_per_s for r in store.rows("results")] == [10.0]
    assert [v["verdict"] for v in store.rows("verdicts")] == [measure.HOLDS]
    assert [s.seconds for s in store.rows("sweeps")] == [(2e-4,)] and store.rows("sweeps")[0].host == HW.host
    with pytest.raises(TypeError, match="Results, verdicts and Sweeps"):
        store.append({"lab": "01"})
    with pytest.raises(ValueError, match="tables"):
        store.rows("flags")


def test_what_was_said_is_the_stores_and_printing_is_apart_from_writing(tmp_path):
    from lab_utils import detectors
    said = measure.store()
    above = detectors.above_device_count(2.3, 2)
    assert said.say(above) == above and said.say(above) == []  # said once, then pointed back to
    measure.forget()
    assert said.say(above) == above
    row = measure.Result(lab="03", framework="torch", strategy="ddp", world_size=2, device="cpu", batch_size=8,
                         samples_per_s=10.0, wall_s=1.0, workload="w", flags=tuple(above))
    text = measure.recorded_table([row], None, ["lab03.csv"])  # prints, writes nothing
    assert " *" in text and detectors.AS_ABOVE in text and not (tmp_path / "lab03.csv").exists()


def test_a_clash_with_lab_01s_baseline_names_how_lab_01_measured_it(isolated_results, monkeypatch):
    """Learners saw '[!] baseline 2,669 samples/s is 2.18x lab 01's 1,224' with no cause: lab 01 had fitted 1 thread
    on a busy machine. The clash names what lab 01's row recorded: its threads and the load it ran under."""
    from lab_utils import conditions

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    workload = workloads.STEP_3CONV.name
    assert measure.reference_conditions(workload, "1 process x 1 thread") is None  # lab 01 has not run
    busy = "measured while other programs used 1.3 and steal 0.0 of 2 cores"
    measure.record(measure.Result(lab="01", variant="1 process x 1 thread", samples_per_s=1224.0, workload=workload,
                                  **dict(KERAS, framework="torch", threads=1, batch_size=256), flags=busy))
    why = measure.reference_conditions(workload, "1 process x 1 thread", threads=2)
    assert "lab 01 ran it with 1 intra-op thread(s)" in why and "this with 2" in why and busy in why
    flags = measure.plausibility(baseline_rate=2669.0, reference_rate=measure.reference_rate(workload, "1 process x 1 thread"),
                                 reference_cause=why)
    assert len(flags) == 1 and "2.18x lab 01's 1,224" in flags[0] and busy in flags[0] and "; " not in flags[0]
    assert "another framework" not in flags[0]
    same = measure.reference_conditions(workload, "1 process x 1 thread", threads=1)
    assert "thread" not in same.split(", and")[0] and busy in same


def test_a_clash_with_a_quiet_reference_on_a_quiet_run_does_not_blame_the_load(isolated_results, monkeypatch):
    """Learner s10a: lab 05's quiet run flagged its loop against lab 01's quiet row, '... so the load now is the
    likelier cause', though neither run measured any load."""
    from lab_utils import conditions
    from lab_utils.measure import results_table

    workload = workloads.STEP_3CONV.name
    measure.record(measure.Result(lab="01", variant="1 process x 1 thread", samples_per_s=5979.0, workload=workload,
                                  **dict(KERAS, framework="torch", threads=1, batch_size=256)))
    monkeypatch.setattr(results_table, "run_conditions", lambda: conditions.Load(20.0, 2, 1.0, 0.0, 0.0))
    quiet = measure.reference_conditions(workload, "1 process x 1 thread", threads=1)
    assert "the load now" not in quiet and "this run measured none either: not the load" in quiet, quiet
    monkeypatch.setattr(results_table, "run_conditions", lambda: conditions.Load(20.0, 2, 0.3, 1.4, 0.0))
    assert "the load now is the likelier cause" in measure.reference_conditions(workload, "1 process x 1 thread",
                                                                                 threads=1)


def test_a_quantity_measured_twice_under_two_labels_names_both(isolated_results, monkeypatch):
    """Lab 05's flag named one workload while its table listed the two rows under two: the learner could not tell
    whether they should agree. The flag names both labels and says they measure one thing."""
    from lab_utils import conditions

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    in_kernel = measure.Result(lab="05", variant="one device", samples_per_s=30747.0, **KERAS,
                               workload=workloads.STEP_DIGITS_TF.name)
    own = measure.Result(lab="05", variant="keras (own process)", samples_per_s=18119.0, **KERAS,
                         workload=workloads.STEP_DIGITS.name)
    measure.record([in_kernel, own])
    said = "; ".join(measure.read_results(isolated_results / "lab05.csv")[1].flags)
    assert f"'{workloads.STEP_DIGITS_TF.name}' and '{workloads.STEP_DIGITS.name}'" in said, said
    assert "the same model, data and computation" in said


def test_a_row_measured_under_a_condition_its_lab_names_is_a_note_in_the_results_table(isolated_results, monkeypatch):
    """Lab 05's launched loop 0.60x Lab 01's kernel loop: lab 05 names the OpenMP wait policy as what can move it, so
    the results table reads the pair as a note naming that cause, not a `[!]` 'contradict each other'."""
    from lab_utils import conditions, detectors

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    run = dict(KERAS, framework="torch", variant="training run", workload=workloads.TRAINING_RUN.name)
    measure.record(measure.Result(lab="01", samples_per_s=28886.0, **run))
    why = "launched: its idle OpenMP threads sleep at once"
    text = measure.record(measure.Result(lab="05", samples_per_s=17256.0, flags=[detectors.condition(why)], **run))
    said = "1.67x apart, under different conditions (lab 05 (single-device training run): " + why
    assert "[!]" not in text and said in " ".join(text.split())
    flags = measure.read_results(isolated_results / "lab05.csv")[-1].flags
    assert detectors.conditions_of(flags) == [why] and not detectors.impossible(flags)  # its kind reaches the CSV
    far = measure.record(measure.Result(lab="05", samples_per_s=12000.0, flags=[detectors.condition(why)], **run))
    assert "[!]" in far and "more than 2x" in far  # beyond what its condition explains


def test_lab_03s_launched_baseline_beside_lab_01s_kernel_baseline_is_a_named_condition(isolated_results, monkeypatch):
    """The quiet run's one-thread step: 3,995 samples/s in lab 01's kernel, 6,259 in lab 03's launched process (1.57x).
    Lab 03 names the launched process as its rows' condition, so the pair reads as a note naming it, not a `[!]`;
    beyond CONDITION_FACTOR apart it is still a contradiction."""
    from lab_utils import conditions, detectors
    from lab_utils.launch import launched_not_kernel

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    step = dict(framework="torch", strategy="single-process", variant="1 process x 1 thread", world_size=1, device="cpu",
                batch_size=256, threads=1, workload=workloads.STEP_3CONV.name)
    measure.record(measure.Result(lab="01", samples_per_s=3995.0, wall_s=0.064, repeats=8, spread=0.05, **step))
    launched = detectors.condition(launched_not_kernel())
    text = measure.record(measure.Result(lab="03", samples_per_s=6259.0, wall_s=0.041, repeats=2, spread=0.06,
                                         flags=[launched], **step))
    assert "[!]" not in text and "1.57x apart, under different conditions" in text, text
    assert "launched process of its own, not in a notebook's kernel" in text and "not a contradiction" in text
    far = measure.record(measure.Result(lab="03", samples_per_s=3995.0 * (detectors.CONDITION_FACTOR + 0.2),
                                        wall_s=0.03, repeats=2, spread=0.06, flags=[launched], **step))
    assert "[!]" in far and "more than 2x" in far  # a gap no process explains stays a contradiction


def test_lab_03_records_its_one_process_rows_as_launched_and_says_so():
    """Lab 03's record cell gives its one-process rows (timed in a launched rank) the launched condition, and its prose
    states the condition rule's factor (the results table's, not a figure of this run)."""
    import nbformat

    from lab_utils import detectors

    cells = nbformat.read(Path(__file__).parents[1] / "solutions" / "03_ddp.ipynb", 4).cells
    record = next(c.source for c in cells if c.cell_type == "code" and "measure.record(recorded" in c.source)
    assert "detectors.condition(launched_not_kernel())" in record and "brief_notes=True" in record
    from lab_utils.labs.lab03 import speed  # the rows are built there (learner s11r2c: cell 89's plumbing)
    assert "own if ranks == 1" in Path(speed.__file__).read_text() and "beside_lab01(" in Path(speed.__file__).read_text()
    prose = " ".join(c.source.replace("\n", " ") for c in cells if c.cell_type == "markdown")
    factor = f"{detectors.CONDITION_FACTOR:g}×"  # the factor itself, in either wording (s13 merge: the prose moved)
    assert f"up to {factor} apart" in prose and f"beyond {factor}" in prose, "lab 03 must state the rule's factor"
    lr = next(c.source for c in cells if c.cell_type == "code" and "lr_verdict = measure.verdict(" in c.source)
    assert "timed=False, seeded=True" in lr  # seeded accuracies: no load note (learner s8f, lab 03 finding 5)


def test_lab_01_states_the_rules_its_reference_rows_are_checked_by():
    """Lab 01's prose names the results table's window and links the README's Results section, which states the
    numbers the code applies: the tolerance, the window, the one-rank reference's factor (learner s11r2a: the rule
    moved out of lab 01, whose quiet run never shows it)."""
    import nbformat

    from lab_utils import detectors

    path = Path(__file__).parents[1] / "solutions" / "01_single_device_cnn.ipynb"
    prose = " ".join(c.source.replace("\n", " ") for c in nbformat.read(path, 4).cells if c.cell_type == "markdown")
    assert f"in the last {measure.SAME_RUN_S // 3600:g} hours" in prose and "(../README.md#results)" in prose
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    results = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0].replace("\n", " ")
    assert f"in the last {measure.SAME_RUN_S // 3600:g} hours" in results
    assert f"more than {detectors.TWICE_TOLERANCE:.0%}".replace("%", " %") in results
    assert f"more than {measure.BASELINE_FACTOR:g}×" in results


def test_a_refused_speedup_raises_no_flag_that_reads_it():
    """Learner s9d: lab 02's table printed 'not measurable here' for every speedup, then '[!] ... speedup 2.27x on 2x
    the hardware is efficiency 113 %'; lab 00 printed a refusal, then a note reading its 0.23x. A refused ratio is not
    read: no [!] above the device count, no note on threads that waited; the other checks still run."""
    from lab_utils import detectors

    assert detectors.impossible(measure.plausibility(speedup=2.27, devices=2))  # read: the flag stays
    assert measure.plausibility(speedup=2.27, devices=2, refused=True) == []
    assert measure.plausibility(speedup=0.23, devices=2, threads=2, refused=True) == []
    kept = measure.plausibility(speedup=2.27, devices=2, oversubscribed=True, refused=True)
    assert len(kept) == 1 and "oversubscribed" in kept[0]  # what does not read the ratio is still said


def test_a_refusal_on_many_rows_is_said_once_under_the_table(isolated_results):
    """Learner s9d, lab 02 cell 49: the same 'not measurable here' note printed under 10 rows."""
    why = (f"{measure.NOT_MEASURABLE}: other programs used 1.6 of 2 cores while this measured: 2 devices share the 0.4 "
           f"left, so no speedup over one can be read from this run ({measure.UNREAD})")
    rows = [result(lab="02", strategy="dp", variant="DataParallel, 2 devices", world_size=2, batch_size=b,
                   workload=f"refusal test {b % 2}", flags=(why,)) for b in (8, 64, 512)]
    rows.append(result(lab="02", strategy="single", variant="1 device", batch_size=8, workload="refusal test 0"))
    table = measure.recorded_table(rows, None, ["lab02.csv"])
    assert table.count("other programs used 1.6 of 2 cores") == 1, table
    assert "not measurable here, rows dp DataParallel, 2 devices: other programs used 1.6" in table, table
    assert "note: not measurable here" not in table and max(len(line) for line in table.splitlines()) <= 120, table
    rows.append(result(lab="02", strategy="ddp", variant="DDP", world_size=2, batch_size=8, workload="refusal test 0",
                       flags=(why,)))
    both = measure.recorded_table(rows, None, ["lab02.csv"])
    assert "rows dp DataParallel, 2 devices; ddp DDP: other programs" in both.replace("\n    ", " "), both
    # learner s10c, lab 13: 'rows spatial' refused the large image's row only; the small images' spatial rows were read
    read = [result(lab="13", strategy="spatial", world_size=2, batch_size=1, workload=f"w {size}",
                   flags=(why,) if size == "large" else ()) for size in ("small", "large")]
    named = measure.recorded_table(read, None, ["lab13.csv"]).replace("\n    ", " ")
    assert "not measurable here, rows spatial (w large): other programs" in named, named


def test_short_lines_keeps_the_breaks_flagged_made():
    """short_lines(flagged(...)) must not turn flagged's note lines into runs of spaces mid-sentence (lab 04 cell 67)."""
    from lab_utils import measure
    text = "  GPipe M=8: 100.1 ms, " + "x" * 20 + " word" * 30
    out = measure.short_lines(measure.flagged(text, ["noisy: the steps spread naive 177%" + " more" * 30]))
    assert all("  " not in line.strip() for line in out.splitlines())  # no run of spaces inside a line
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "\n    note: noisy" in out


def test_a_measured_twice_flag_quotes_a_rows_load_refusals_as_their_load_once(isolated_results, monkeypatch):
    """Learner s10e (lab 02 cell 49): a 14-line [!] quoted the DDP row's two refusals in full; the flag names the
    refused row's load once ('refused for the load (...)') and still names it the likelier wrong figure."""
    from lab_utils import conditions

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    course = dict(framework="torch", strategy="ddp", world_size=2, device="cpu", batch_size=256, threads=1,
                  spread=0.1, variant="DDP", workload=workloads.LAUNCHED_3CONV.name, wall_s=0.05)
    refused = ("not measurable here: other programs used 0.8 of 2 cores while this measured: 2 ranks share the 1.2 "
               "left, so no speedup over one can be read from this run (measured and recorded, but its ratio is not "
               "read as a result)")
    verdict = f"lab 02's verdict on DDP vs DataParallel: {refused.replace('no speedup over one', 'neither side')}"
    measure.record(measure.Result(lab="03", samples_per_s=9685.0, **course))
    text = measure.record(measure.Result(lab="02", samples_per_s=4632.0, flags=(refused, verdict), **course))
    flag = next(f for f in measure.read_results(isolated_results / "lab02.csv")[-1].flags if "measured twice" in f)
    assert "2.09x apart" in flag and "likelier wrong figure" in flag, flag
    assert flag.count("refused for the load (other programs used 0.8 of 2 cores)") == 1, flag
    assert "measured and recorded" not in flag and "[!]" in text


def test_a_wrapped_line_never_splits_a_figure_from_its_unit():
    """Lab 10 cell 28 printed 'transfer / compute 57' and '%' on two lines (learner s10l, finding 11): wrap() and
    short_lines() keep '57 %', '0.82 ms', '1.80 GB/s', '2.1 x' whole, and print plain spaces."""
    from lab_utils.measure import lines
    for figure in ("57 %", "0.82 ms", "1.80 GB/s", "424 kB", "2.1 x"):
        for cut in range(60, 101):  # the break falls on the figure's space for one of these widths
            text = "a" * (cut - len(figure) + figure.index(" ")) + " " + figure + " then more words" * 5
            for out in (lines.wrap(text), measure.short_lines(text)):
                assert figure in out, (cut, out)
                assert lines.NO_BREAK not in out
    assert lines.unbroken_units("2 ranks x2, 3 xs") == "2 ranks x2, 3 xs"  # not units: breakable as before


def test_a_wrapped_line_never_strands_its_closing_figure():
    """Learner s11a, lab 00 cell 29: '... (median of 7 interleaved repeats, spread' then '    5%)' alone on a line."""
    from lab_utils.measure import lines
    text = ("forward pass of the 2-conv CNN, 1 thread: 13,605 images/s (median of 7 interleaved repeats, spread 5%)")
    for out in (lines.wrap(text), measure.short_lines(text)):
        assert out.splitlines()[-1].strip() == "spread 5%)" and lines.NO_BREAK not in out, out
    for end in ("1.03x.", "12", "0.5"):
        assert lines.unbroken_units(f"a b {end}") == f"a b{lines.NO_BREAK}{end}"
    assert lines.unbroken_units("5 ranks then words") == "5 ranks then words"  # a figure inside a line: breakable


def test_a_table_whose_cell_printed_the_noise_line_does_not_repeat_it():
    """Learner s10i, lab 00 cell 26: the results table repeated the timing cell's noise line word for word."""
    rows = [measure.Result(lab="00", framework="torch", strategy="single-process", variant=v, world_size=1,
                           device="cpu", batch_size=256, samples_per_s=r, wall_s=1.0, workload="w", spread=0.38)
            for v, r in (("1 thread", 100.0), ("2 threads", 170.0))]
    assert "noise: 2 of 2 medians" in measure.recorded_table(rows, None, ["lab00.csv"])
    once = measure.recorded_table(rows, None, ["lab00.csv"], noise_above=True)
    assert "noise" not in once and "2 threads" in once and once.endswith("in the results folder")


def test_a_brief_note_is_one_line_under_the_row_whose_own_note_names_the_condition(tmp_path, monkeypatch):
    """Learner s11r2c, lab 03 cell 89: the cross-lab note was one six-line sentence repeating the row's own note.
    With brief_notes it is one short line; without (every other lab), the full sentence as before."""
    from lab_utils import conditions, detectors, workloads
    from lab_utils.launch import launched_not_kernel

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    step = dict(framework="torch", strategy="single-process", variant="1 process x 2 threads", world_size=1,
                device="cpu", batch_size=256, threads=2, workload=workloads.STEP_3CONV.name)
    measure.record(measure.Result(lab="01", samples_per_s=10544.0, wall_s=0.024, repeats=8, spread=0.05, **step),
                   tmp_path)
    launched = detectors.condition(launched_not_kernel())
    row = measure.Result(lab="03", samples_per_s=8387.0, wall_s=0.03, repeats=2, spread=0.06, flags=[launched], **step)
    brief = measure.record(row, tmp_path, brief_notes=True)
    assert " ".join(brief.split()).count("lab 01 measured") == 1
    assert ("note: lab 01 measured 10,544: 1.26x apart, allowed: rows timed under different "
                "conditions (the note just above) may lie up to 2x apart") in " ".join(brief.split()), brief
    assert "condition above" not in brief  # learner s12r4g: read as a rule stated above, which lab 10 never states
    full = measure.record(row, tmp_path)
    assert "which its lab says can move such a figure" in " ".join(full.split()), full
