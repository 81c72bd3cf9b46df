"""What lab 11's cells print and say: section 4 (Slurm against launch, the same steps), where a Slurm 'win' beyond the
pairs' noise is said to be no speed-up, with what the run measured, and the prose and the printed rule use the
verdict's own thresholds; the GPU script's lines that differ read as whole commands; scontrol's fields are explained."""
import contextlib
import io

import nbformat

from lab_utils import conditions, learner_code, measure
from lab_utils.labs.lab11 import report as lab11_report


def cell(cell_id: str) -> str:
    """The source of one cell of lab 11's solution notebook, by its id."""
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def same_work_win():
    """Section 4's same_work_win (lab11 report; learner s12r3h: report plumbing leaves the notebook)."""
    return lab11_report.same_work_win


def steady(ratios, load=None):
    """The section's verdict on these paired ratios (Slurm over launch), decided under `load`."""
    return measure.decide(ratios, claim="Slurm vs launch, steady steps/s", no_worse_than=0.10, same_work=True,
                          expected="Slurm no more than 10 % slower", load=load)


def load(others: float) -> conditions.Load:
    """A 2-core machine where other programs used `others` cores."""
    return conditions.Load(seconds=10.0, cores=2, own=1.0, others=others, steal=0.0)


def test_a_win_beyond_noise_on_a_busy_machine_is_no_speed_up_and_names_the_load():
    busy = load(0.9)
    line = same_work_win()(steady([1.15, 1.2, 1.22, 1.26, 1.21, 1.19, 1.23, 1.24], busy), busy)
    assert "not Slurm itself" in line and "0.9 of 2" in line and "sessions of their own" in line


def test_a_win_on_a_quiet_machine_is_no_speed_up_and_names_how_each_path_was_placed():
    """Learner s12r4h's quiet run (range 1.003-1.04) read 'What it measured: nothing this run measured: rerun it on a
    quiet machine' on a quiet machine."""
    win = steady([1.15, 1.2, 1.22, 1.26, 1.21, 1.19, 1.23, 1.24], load(0.0))
    line = same_work_win()(win, load(0.0), SPEED)
    assert "not Slurm itself" in line and "quiet machine" not in line and "core(s) [0, 1]" in line
    assert "this run does not measure" in line and "session of its own" in line
    assert "quiet machine" not in same_work_win()(win, load(0.0))
    # learner s13r8h: "no cost at all, as theory predicts" above a 1.15x win, then "no speed-up" under it
    plain = lab11_report.plain_steady(steady([1.02, 1.34, 1.1, 1.2, 1.05, 1.3, 1.15, 1.25], load(0.0)))
    assert "no cost, as theory predicts" in plain and "not Slurm's" in plain and "no cost at all" not in plain
    assert "quiet machine" not in "".join(lab11_report.steady_lines(win, "verdict ...: holds", load(0.0), SPEED))


def test_a_range_that_reaches_1_or_a_refused_verdict_gets_no_line():
    assert same_work_win()(steady([0.95, 1.02, 1.05, 0.99, 1.01, 1.03, 0.98, 1.04], load(0.0)), load(0.0)) is None
    busier = load(1.5)
    refused = steady([1.15, 1.2, 1.22, 1.26, 1.21, 1.19, 1.23, 1.24], busier)
    assert refused.verdict == measure.CANNOT_SEE and same_work_win()(refused, busier) is None


def test_the_section_prints_the_verdicts_own_thresholds_and_the_summary_does_not_repeat_the_verdict():
    source = cell("369c6a8e")
    assert "lab11_report.steady_lines(steady," in source and "lab11_report.plain_steady(steady)" in source
    assert "not even a clear win, once" not in cell("5951d863") and "two thresholds" in cell("5951d863")
    # learner s11r2h finding 1: the summary prints the verdict's plain sentence, not its 5-line outcome
    summary = cell("580fb5c4")
    assert "print(steady)" not in summary and "plain_steady(steady)" in summary and "printed_outcome" not in summary


def test_the_gpu_lines_that_differ_keep_the_launcher_line_between_srun_and_its_options():
    from lab_utils.labs.lab11.lesson import batch_script
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(cell("7c234aea"), {"batch_script": batch_script})
    lines = out.getvalue().splitlines()
    srun = next(i for i, line in enumerate(lines) if line.startswith("srun "))
    assert "python -m torch.distributed.run" in lines[srun + 1] and "--nnodes=" in lines[srun + 2]


def test_scontrols_fields_are_explained_after_the_cell_that_prints_them():
    """Learner s10m finding 10: the output shows `NumNodes=1` (the prose began with `1-1`) and `billing=1`, never said."""
    text = " ".join(cell("87dbfcc5").split())  # the words, whatever the line breaks
    assert all(term in text for term in ("`NumNodes=1`", "`1-1`", "`ReqB:S:C:T=0:0:*:*`", "The `mem=` in `TRES`",
                                         "no `--mem`", "`billing=1` is the job's *billing* weight"))
    assert text.index("`NumNodes=1`") < text.index("`1-1`")  # the form the output shows, first


def test_the_array_file_name_pattern_and_where_its_rows_go_are_said():
    """Learner s10m findings 8 and 10: `%A_%a` unexplained; 'lab 10's notebook does not show them' read three times."""
    text = " ".join(cell("f42d8dd7").split())
    assert "`%A` is the array's job id and `%a` the task's index" in text
    assert "These rows stay in `slurm/sweep/`, not in lab 10's report" in text


def test_lab_11s_prose_lines_fit_100_columns():
    """Learner s10m finding 11: markdown lines up to 198 characters."""
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    long = [(i, len(line)) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
            for line in c.source.splitlines() if len(line) > 100]
    assert not long, long


def test_the_chains_cpu_time_line_states_only_figures_and_the_prose_gives_the_theory():
    """Learner s10h: 'the CPU time is mostly a fresh Python importing torch' printed whatever the figures were."""
    assert "mostly a fresh Python" not in cell("l11-chain")
    assert "importing torch" in cell("l11-depend-md") and "Theory says" in cell("l11-depend-md")


def slurm_ahead():
    """Section 4's slurm_ahead (lab11 report)."""
    return lab11_report.slurm_ahead


SPEED = {"slurm": {"placed": "1 thread(s) on core(s) [0]"}, "launch": {"placed": "1 thread(s) on core(s) [0, 1]"}}


def test_a_median_favouring_slurm_without_a_win_prints_how_each_path_was_placed():
    ahead = steady([0.93, 1.15, 1.1, 0.97, 1.2, 1.02, 1.18, 1.05], load(0.0))
    assert ahead.ratio > 1 and ahead.low < 1
    line = slurm_ahead()(ahead, SPEED)
    assert "core(s) [0]" in line and "core(s) [0, 1]" in line and "session of its own" in line
    assert "does not measure" in line and "no win read" in line and "median step" not in line


def test_no_placement_line_for_a_median_favouring_launch_a_win_or_a_refusal():
    assert slurm_ahead()(steady([0.95, 0.97, 0.99, 1.01, 0.96, 0.98, 0.97, 0.99], load(0.0)), SPEED) is None
    assert slurm_ahead()(steady([1.15, 1.2, 1.22, 1.26, 1.21, 1.19, 1.23, 1.24], load(0.0)), SPEED) is None
    refused = steady([1.15, 1.2, 1.22, 1.26, 1.21, 1.19, 1.23, 1.24], load(1.5))
    assert slurm_ahead()(refused, SPEED) is None
    # learner s13r7h finding 3: cell 84 says the line prints where the verdict decided; a verdict that tested only a
    # weaker claim than theory's 10 % did not decide theory's, so no placement line
    restated = steady([0.85, 0.89, 1.08, 1.02, 0.95, 1.05, 1.01, 1.12], load(0.0))  # the quiet run's 1.01x, 0.89-1.08
    assert restated.ratio > 1 and restated.low < 1 and "restated" in restated.notes
    assert slurm_ahead()(restated, SPEED) is None


def test_the_summary_quotes_the_claim_tested_and_the_prose_promises_no_fixed_tolerance():
    restated = steady([0.9, 1.05, 1.1, 1.2, 0.95, 1.14, 1.0, 1.09], load(0.0))
    assert "tested as 'no worse by more than" in measure.printed_outcome(restated)
    prose = " ".join(cell("5951d863").split())
    assert "On a quiet machine that changes nothing" not in prose and "kept within 10 %" not in prose
    assert "the tolerance it tested" in prose and "wider tolerance" in " ".join(cell("e857f865").split())


def test_a_too_noisy_verdict_prints_one_line_of_thresholds_and_no_placement_paragraph():
    """Learner s12r3h findings 1 and 2: four thresholds (10 %, 30 %, 33 %, 'above 1.00') under a plain 'no verdict
    either way', then a placement paragraph explaining a difference the verdict called not there."""
    noisy = steady([0.9, 1.25, 0.95, 1.2, 1.02, 1.15, 0.92, 1.05], load(0.0))
    assert noisy.verdict == measure.UNDECIDED and "no verdict either way" in lab11_report.plain_steady(noisy)
    lines = lab11_report.steady_lines(noisy, str(noisy), load(0.0), SPEED)
    text = "\n".join(lines)
    assert len(lines) == 1 and "not distinguishable here" in lines[0] and "no verdict, the sentence above" in text
    assert "33%" not in text and "30%" not in text and "1.00" not in text and "core(s)" not in text
    assert slurm_ahead()(noisy, SPEED) is None
    decided = steady([1.01, 1.0, 1.02, 0.99, 1.01, 1.0, 1.02, 1.01], load(0.0))
    full = lab11_report.steady_lines(decided, str(decided), load(0.0), SPEED)
    assert full[0] == str(decided)  # a decided verdict keeps every detail line
    assert "lab11_report.steady_lines(steady," in cell("369c6a8e")
    assert "def same_work_win" not in cell("f1fa47cb") and "def slurm_ahead" not in cell("f1fa47cb")


def test_the_where_cells_messages_wrap_at_100_and_its_table_rows_stay_whole():
    """Learner s12r3h finding 7: the hang's message and 'first difference' lines were filled at 118 columns."""
    source = cell("l11-where")
    assert 'line if " | " in line else measure.lines.wrap(line)' in source and "118" not in source
    told = ("Slurm job 2544 made no progress for 3 s: every task waited in the same collective call, so it was "
            "cancelled\n0    | in a collective | all_reduce #3 [1] float32 | results/slurm/skip.py:19 | all_reduce #2 "
            "[1] float32\nfirst difference: rank 0 made all_reduce #2 at results/slurm/skip.py:19 (it failed: "
            "RuntimeError); rank 1 finished #1 and raised ValueError")
    shown = [line if " | " in line else measure.lines.wrap(line) for line in told.splitlines()]
    assert all(len(x) <= 100 for x in shown[0].splitlines() + shown[2].splitlines()) and shown[1] == told.splitlines()[1]


def test_a_too_noisy_verdicts_head_keeps_its_whole_workload_when_the_name_wraps():
    """Learner s12r4h finding 6: the quiet run printed 'verdict, Slurm vs launch, steady steps/s [CNN-3conv/synthetic28
    step, Slurm vs' and stopped: the head was the printed verdict's first line, cut inside the workload's bracket."""
    recorded = ("verdict, Slurm vs launch, steady steps/s [CNN-3conv/synthetic28 step, Slurm vs\n"
                "    launch]: not distinguishable here\n    1.02x (range 0.93-1.15 over 8 paired repeats)")
    head = lab11_report.verdict_head(recorded)
    assert head.endswith("launch]: not distinguishable here") and "1.02x" not in head
    assert lab11_report.verdict_head("verdict, a vs b [w]: holds\n    1.1x") == "verdict, a vs b [w]: holds"
    noisy = steady([0.9, 1.25, 0.95, 1.2, 1.02, 1.15, 0.92, 1.05], load(0.0))
    text = "\n".join(lab11_report.steady_lines(noisy, recorded, load(0.0), SPEED))
    assert "launch]: not distinguishable here" in text and "no verdict, the sentence above says why" in text


def test_the_trap_is_scaled_to_a_real_step_and_slurmstepd_is_defined_before_its_log():
    """Learner s12r4h findings 6 and 12: the trap's 'ms redone' argued the other way at a toy's millisecond steps;
    slurmstepd's log lines came a cell before the term was defined."""
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    sources = [c.source for c in nb.cells]
    fault = next(i for i, s in enumerate(sources) if "redone_s = at[fail_at_step] - at[0]" in s)
    assert "the trap costs more than the restart once a step takes over" in sources[fault]
    assert "at 1 s per step:" in sources[fault]
    first = next(i for i, s in enumerate(sources) if "slurmstepd" in s)
    assert first < fault and "the Slurm daemon that starts and watches" in " ".join(sources[first].split())


def test_the_first_screen_is_five_goals_and_side_topics_sit_behind_details():
    """Learner s13r5h findings 5, 6 and 7: 14 goals on the first screen, a c10d back-off paragraph before the hang
    checklist, an autogroups paragraph in the measured section, and lab 03's solution printed without a warning."""
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    head = nb.cells[0].source
    goals = head[head.index("**What you will learn**"):head.index("<details>")]
    assert sum(line.startswith("- ") for line in goals.splitlines()) <= 6
    md = [c.source for c in nb.cells if c.cell_type == "markdown"]
    hang = next(s for s in md if "How to find a hang like this" in s)
    assert hang.index("How to find a hang") < hang.index("<details>") < hang.index("Neither task gives up exactly")
    auto = next(s for s in md if "*autogroups*" in s)
    assert auto.index("<details>") < auto.index("*autogroups*") < auto.index("</details>")
    worker = next(s for s in md if "learner_code.from_notebook" in s)
    assert "if you have not solved lab 03's exercise yet" in " ".join(worker.split())


def test_the_workers_lines_fit_and_sprios_refusal_is_announced_before_it_prints():
    """Learner s13r5h findings 6 and 12: sprio's refusal printed raw, then explained; worker lines of 107-114."""
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    worker = next(c for c in nb.cells if c.cell_type == "code" and "lab03.source.splitlines()[:6]" in c.source)
    assert all(len(line) <= 100 for o in worker.outputs for line in o.get("text", "").splitlines())
    sprio = next(c.source for c in nb.cells if c.cell_type == "code" and "!sprio" in c.source)
    # learner s13r6h finding 9: under another plugin sprio refuses and sshare prints zeros: neither runs there
    assert sprio.index('if plugin != "priority/multifactor":') < sprio.index("!sprio")
    assert "sprio and sshare read only priority/multifactor, so this cell does not run them" in sprio


def test_exercise_1_says_when_its_port_formula_is_safe_beside_the_lessons_port_file():
    """Learner s13r6h finding 3: the lesson shares a free port through a file, exercise 1 uses 10000 + id % 10000."""
    text = " ".join(cell("l11-ex-md").split())
    assert "shared_free_port" in text and "It is safe only where nothing else holds that port" in text
    assert "(12345 and 22345 both get 12345)" in text
    assert 10000 + 12345 % 10000 == 10000 + 22345 % 10000 == 12345


def test_the_fault_logs_signals_are_explained_before_the_log_is_printed():
    """Learner s13r7h finding 4: the prose said rank 1 gets SIGKILL, the log showed task 0 and SIGTERM, explained only
    in the cell after the output."""
    before = " ".join(cell("7a3262cb").split())
    assert "What its log can show:** not rank 1's `SIGKILL`" in before and "surviving task (task 0) `SIGTERM`" in before
    assert "137: `SIGKILL`, 143: `SIGTERM`" in before and "SIGTERM" not in cell("f42d8dd7")
    assert "<details>" in cell("ca27fd45") and "torchrun --max-restarts" in cell("ca27fd45").split("<details>")[1]


def test_the_densest_markdown_cells_keep_one_claim_and_fold_their_detail():
    """Learner s13r7h finding 8: cells 23, 25, 48, 73 and 81 were 15-25 packed lines; each now keeps its claim above
    a <details> block, at most 12 lines of prose before it."""
    for cell_id in ("l11-pending-md", "677e0bf4", "ca27fd45", "l11-resources-md", "e857f865"):
        text = cell(cell_id)
        assert "<details>" in text, cell_id
        paragraphs = [p for p in text.split("<details>")[0].split("\n\n") if not p.startswith("#")]
        assert max(len(p.splitlines()) for p in paragraphs) <= 12, cell_id


def test_the_30_percent_cap_is_defined_where_section_4_uses_it():
    """Learner s15 finding 4: 'too noisy to test a cost up to 30%' with the course's cap defined nowhere in lab 11."""
    from lab_utils import measure
    text = " ".join(cell("e857f865").split())
    assert f"the course's **{measure.MAX_RESTATED:.0%} cap**".replace("%", " %") in text
    assert "only a clear win decides" in text and "README.md#results" in text


def test_the_node_failure_cell_says_the_fresh_step_once():
    """Learner s15 finding 5: cell 48 told the fresh-srun-step restart three times (prose, a bullet, a paragraph)."""
    text = " ".join(cell("ca27fd45").split())
    assert text.count("every Slurm cluster has") == 1 and text.count("--kill-on-bad-exit=1") == 1
    assert text.count("under `--requeue` resumes the same way") == 1
