"""Lab 08's prose reads before the tables it explains (learner s10l: 'Why' after the throughput table, the staleness
prediction after the histograms, the rank correlation after the table that prints it, Hogwild's prediction after its
verdict), and its layout prose names who shares which core (worker 1 and the server, the straggler alone)."""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "solutions" / "08_sync_async.ipynb"


def cells():
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(LAB.read_text())["cells"]]


def first(pred) -> int:
    return next(i for i, (kind, source) in enumerate(cells()) if pred(kind, source))


def code_with(text):
    return first(lambda kind, source: kind == "code" and text in source)


def markdown_with(text):
    return first(lambda kind, source: kind == "markdown" and text in source)


def test_each_prediction_comes_before_the_table_that_reads_it():
    assert markdown_with("**What theory predicts.** A synchronous update waits") < code_with("parameter_server.throughput.throughput_report(")
    assert markdown_with("How to read it.** The first line is the section's answer") < code_with("parameter_server.throughput.throughput_report(")
    assert markdown_with("### Staleness: who sends how many") < code_with("parameter_server.plot_staleness(")
    assert markdown_with("The **rank correlation** (Spearman's") < code_with("rank_correlation(")
    assert markdown_with("What theory predicts for its accuracy") < code_with("hogwild_verdict = measure.verdict(")


def test_the_layout_prose_names_who_shares_which_core_and_no_message_excuse_remains():
    text = "\n".join(source for kind, source in cells() if kind == "markdown")
    assert "| 0 | worker 1 and the server |" in text and "| 1 | worker 2 alone (the straggler" in text
    assert "the server's messages weigh as much as the compute" not in text  # learner s10l: contradicts the design
    assert "stretches its *own* iteration" in text


def test_the_staleness_cell_reads_the_stragglers_counts_against_the_measured_iterations():
    source = cells()[code_with("parameter_server.plot_staleness(")][1]
    assert "parameter_server.staleness_report(" in source  # issue 51: its plumbing moved to the readout
    from lab_utils.labs.lab08.parameter_server import readout
    assert "straggler_count_line(factors[-1]" in open(readout.__file__).read()


def test_the_setup_cells_print_lines_of_at_most_100_columns():
    """Learner s11g, finding 12: cells 4 and 6 printed 107 and 102 columns (the update sizes; the layer table, whose
    conv2d rows spelled out every default argument)."""
    nb = json.loads(LAB.read_text())
    for marker in ("a synchronous update averages", "spec.describe(model_spec"):
        cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and marker in "".join(c["source"]))
        text = "".join("".join(o.get("text", "")) for o in cell["outputs"])
        assert text and max(len(line) for line in text.splitlines()) <= 100, marker


def test_the_summary_says_why_the_damped_replays_can_decide_where_the_damped_runs_did_not():
    """Learner s11g, finding 7: runs 1.09x 'not distinguishable', replays 1.10x 'holds', listed one after the other
    in the summary without the reason the prose gives (each replay pairs with its own run: the scatter cancels)."""
    summary = next(source for kind, source in cells() if kind == "code" and "each claim's outcome" in source)
    assert "if v is damped_replay_verdict" in summary and "each run paired with its own replay" in summary


def test_samples_to_the_target_off_the_snapshot_grid_are_named_with_their_cause():
    """Learner s11g, finding 7 (top list): Hogwild's 4,640 samples under 'moves in steps of 512 samples'."""
    table = next(source for kind, source in cells() if kind == "code" and "moves in steps of one snapshot" in source)
    assert "samples % snapshot" in table and "off that grid" in table and "poll finds the count past a step" in table


def test_the_rank_correlation_reads_one_straggler_factor_at_a_time_in_a_cell_of_its_own():
    """Learner s12r4g, findings 5 and 8: the correlation pooled the x1 and x4 runs (the factor moves both stale share
    and accuracy), and it and the run-clock/steady-rate bookkeeping sat in the main table's cell."""
    table = cells()[code_with("late_of = {}")][1]
    assert "rank_correlation(" not in table and "steady" not in table and "clocks_legend" not in table
    corr = cells()[code_with("rank_correlation(")][1]
    assert 'for f in (factors[0], factors[-1]):' in corr and 'settings[f]["async"]' in corr
    assert code_with("rank_correlation(") == code_with("late_of = {}") + 1


def test_keras_fits_failure_is_printed_as_expected_and_the_markdown_gives_no_direction_for_tfs_accuracy():
    """Learner s12r4g, findings 10-11: 'failed: ValueError ...' alarmed before cell 28 explained it; cell 28's 'can
    still end far above the torch server's' prepared for the opposite of what the run showed."""
    source = cells()[code_with("Keras model.fit under ParameterServerStrategy")][1]
    assert 'failed, as the next cell expects of Keras 3' in source and '"create_per_worker_dataset" in fit_error' in source
    prose = cells()[markdown_with("The lines above say whether each of the two ways ran here.")][1]
    assert "far above" not in prose and "Theory gives no direction" in " ".join(prose.split())


def test_the_labs_rates_are_printed_in_one_unit_and_the_record_tables_samples_per_s_is_converted():
    """A learner met grad/s in the throughput table, samples/s in the side-by-side table and TensorFlow's line for the
    same comparisons: every rate the lab prints is grad/s, and the record table's samples/s (every lab's unit) comes
    with its conversion."""
    tf_cell = cells()[code_with("tf_parameter_server, 1, args=")][1]
    assert "grad/s" in tf_cell and "samples/s" not in tf_cell and "tf_rate = tf_steps / tf_result" in tf_cell
    side = cells()[code_with("the digits runs (")][1]
    assert "'grad/s'" in side and "rate / batch_size" in side and "samples/s" not in side.replace('"samples_per_s"', "")
    record = cells()[code_with("print(measure.record(rows, results_dir, hw))")][1]
    assert "the grad/s above times the samples per" in record
    prose = cells()[markdown_with("### Everything side by side")][1]
    assert "gradients applied per second (grad/s" in prose and "rows: samples/s" not in prose
