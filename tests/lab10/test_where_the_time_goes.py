"""Lab 10's 'where the time goes' on a quiet run (issue 51, s10-f2): the all-reduce alone above the one in the DDP
step is the ranks' wake-up where the load cannot explain it (a note; the step's figure builds the ratio), and the
ratio is named for what it divides: the step's all-reduce wait over compute."""
import re
import nbformat

from lab_utils import detectors, report


def lab10_source() -> str:
    return "".join(c.source for c in nbformat.read("solutions/10_scaling_report.ipynb", 4).cells if c.cell_type == "code")


def test_an_allreduce_alone_slower_than_in_the_step_on_a_quiet_machine_is_a_note_naming_the_wake_up():
    # the committed quiet run (1a9c905): 1.79 ms alone, 0.81 ms in the DDP step, other programs on 0.0 of 2 cores
    said = report.allreduce_disagreement(1.79e-3, 0.81e-3, busy_cores=(0.0, 2))
    assert len(said) == 1 and not detectors.impossible(said) and "wake" in str(said[0]) and "2.2x" in str(said[0])


def test_the_same_gap_under_a_load_that_explains_it_still_refuses():
    assert detectors.impossible(report.allreduce_disagreement(1.79e-3, 0.81e-3, busy_cores=(1.5, 2)))
    assert detectors.impossible(report.allreduce_disagreement(1.79e-3, 0.81e-3))  # no load measured: as before


def test_the_ratio_is_named_all_reduce_wait_over_compute():
    source = lab10_source()
    assert "all-reduce wait / compute" in source and "transfer / compute" not in source  # one ratio (s11r2g)
    assert "communication / compute" not in source
    assert "busy_cores=ar_busy" in source


def test_half_the_batch_in_more_than_half_the_time_names_the_fixed_cost():
    """Learner s9j, cell 16: the digits CNN at batch 32 took 82 % of batch 64's time, unexplained."""
    from lab_utils.labs.lab10.lesson import fixed_cost_line

    said = fixed_cost_line("digits CNN", 32, 1.27e-3, 64, 1.55e-3)  # the learner's run
    assert "82% of batch 64's time" in said and "fixed cost of 0.99 ms per step" in said and "(78% of" in said
    said = fixed_cost_line("CNN-3conv", 128, 20.56e-3, 256, 50.20e-3)  # more than twice: no fixed cost to read
    assert "no fixed cost" in said


def test_the_amdahl_exercise_shows_a_multi_point_set_that_tells_the_fit_from_its_mistakes():
    """Learner s9j, exercise 2: on 2 cores the fit met one row. The cell after the check shows a synthetic set of four
    device counts; on it the right fit and the plausible wrong ones give different figures."""
    import ast
    import re

    import numpy as np

    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    demo = next(c.source for c in cells if c.cell_type == "code" and c.source.startswith("BIGGER = "))
    bigger = ast.literal_eval(re.match(r"BIGGER = (\[.*?\])", demo).group(1))
    assert sorted({n for n, _ in bigger}) == [2, 4, 8, 16]
    right = report.fit_serial_fraction(bigger)
    assert abs(right - 0.10) < 0.01  # the text says s = 0.10 plus noise
    own = [(1 / sp - 1 / n) / (1 - 1 / n) for n, sp in bigger]
    assert abs(np.mean(own) - right) > 3e-3 and abs(own[0] - right) > 3e-3  # the mean of own s, the first point
    assert "fit_serial_fraction(BIGGER)" in demo
    text = "".join(c.source for c in cells if c.cell_type == "markdown")
    assert "it projects the law, it cannot test it" in text


def test_the_fit_reads_the_medians_the_table_does_not_flag():
    """A quiet-machine wake-up at one small size (16 KiB 0.878 ms between 0.23 and 0.27) marked that size '*' and then
    refused the whole fit for missing it: the fit now leaves the flagged medians out."""
    source = lab10_source()
    assert "kept = [i for i, flags in enumerate(ar_flags) if not flags]" in source
    assert 'report.fit_allreduce(fit_on["sizes"], fit_on["seconds"], world_size)' in source
    sizes = [1024 << k for k in range(11)]
    seconds = [0.228e-3, 0.233e-3, 0.232e-3, 0.232e-3, 0.878e-3, 0.273e-3, 0.383e-3, 0.306e-3, 0.305e-3, 0.421e-3,
               0.467e-3]  # lab 10's sweep in a scratch run, 1 KiB to 1 MiB
    flags = report.allreduce_flags(sizes, seconds, [1.0] * len(sizes), busy_cores=(0.1, 2))
    kept = [i for i, f in enumerate(flags) if not f]
    assert kept == [i for i in range(len(sizes)) if i != 4]
    everything = report.fit_allreduce(sizes, seconds, 2)
    assert not everything.readable(everything.contradictions(sizes, seconds, 2))
    unflagged = report.fit_allreduce([sizes[i] for i in kept], [seconds[i] for i in kept], 2)
    assert unflagged.readable(unflagged.contradictions([sizes[i] for i in kept], [seconds[i] for i in kept], 2))


def test_a_long_footnote_wraps_and_the_two_labs_table_uses_footnotes():
    """Learner s9j, lab 10 cell 12: the one-workload-two-labs note was one line of about 450 characters."""
    from lab_utils.report import compared

    note = "CNN-3conv/synthetic28 step, batch 256, 1 rank(s) was measured twice by two labs' runs 62 s apart " * 4
    wrapped = compared.textwrap.fill(f"[1] {note}", compared.FLAG_WIDTH, subsequent_indent="    ",
                                     break_on_hyphens=False, break_long_words=False)
    assert max(len(line) for line in wrapped.splitlines()) <= compared.FLAG_WIDTH
    assert "this_host=hw.host, short=True) if shared else" in lab10_source()
    assert "break_long_words=False)" in open(compared.__file__).read()


def test_a_median_section_model_calls_suspect_carries_its_note_into_every_figure_built_on_it():
    """Learner s10l, lab 10 finding 4: cell 18 called CNN-3conv's batch-256 median suspect, then the fixed cost, the
    ratio and compute+AR were built on it with no note."""
    from lab_utils.labs.lab10.lesson import suspect_note

    flags = report.batch_time_flags(128, 20.61e-3, 256, 62.07e-3)  # the quiet run: 3.0x the time for 2x the images
    said = suspect_note("CNN-3conv", flags)
    assert len(said) == 1 and not detectors.impossible(said) and "suspect" in str(said[0])
    assert suspect_note("CNN-3conv", report.batch_time_flags(128, 20.61e-3, 256, 41.0e-3)) == []  # proportional
    assert suspect_note("CNN-3conv", report.batch_time_flags(128, 20.61e-3, 256, 5.0e-3)) == []  # [!]: divides nothing
    source = lab10_source()
    assert "suspect[name] = suspect_note(name, flags)" in source
    assert "+ suspect[name])" in source  # the ratio's basis, which the summary repeats
    assert 'suspect["CNN-3conv"]' in source  # compute+AR
    assert re.search(r"spread=max\(compute\[\(name, small\)\]\.spread, compute\[\(name, batch\)\]\.spread\)\)\),\s*"
                     r"suspect\[name\]\)\)", source)  # the fixed-cost line


def _ddp_row(lab, rate, spread, base_rate, base_spread, workload="CNN-3conv/synthetic28 step"):
    """One lab's DDP row at batch 256 on 2 ranks, beside its own lab's one-process baseline."""
    from lab_utils import measure

    def row(strategy, ranks, samples, spr):
        return measure.Result(lab=lab, framework="torch", strategy=strategy, world_size=ranks, device="cpu",
                              batch_size=256, samples_per_s=samples, wall_s=1.0, workload=workload, threads=1,
                              spread=spr)
    return report.Compared(row("ddp", 2, rate, spread), row("single-device", 1, base_rate, base_spread))


def test_one_setup_timed_by_two_labs_the_fit_reads_the_row_whose_speedup_moves_least():
    """Learner s10l, lab 10 findings 1 and 3: the fit picked lab 02's DDP row over lab 03's by 'the lower lab'; the
    rule is now stated and measured: the smaller spread (the row's plus its baseline's) wins the tie."""
    from lab_utils.labs.lab10.lesson import one_configuration, speedups_apart, spread_said

    lab02 = _ddp_row("02", 7142.0, 0.30, 4638.0, 0.20, "CNN-3conv/synthetic28 step, launched ranks")
    lab03 = _ddp_row("03", 9764.0, 0.05, 5139.0, 0.04)
    assert one_configuration([lab02, lab03])[0] == [lab03]
    assert one_configuration([lab03, lab02])[0] == [lab03]  # not the order, nor the lower lab
    steadier02 = _ddp_row("02", 7142.0, 0.02, 4638.0, 0.02, "CNN-3conv/synthetic28 step, launched ranks")
    assert one_configuration([steadier02, lab03])[0] == [steadier02]
    unknown = _ddp_row("02", 7142.0, None, 4638.0, 0.02)
    assert one_configuration([unknown, lab03])[0] == [lab03] and spread_said(unknown) == "unknown"
    assert spread_said(lab03) == "9.0 %"
    assert speedups_apart(lab02, lab03) == "differ within their spreads"  # 1.54x +- 0.38 reaches 1.90x - 0.09
    narrow02 = _ddp_row("02", 7142.0, 0.10, 4638.0, 0.10)
    assert speedups_apart(narrow02, lab03) == "disagree beyond their spreads"  # 1.54x +- 0.15 vs 1.90x +- 0.09
    assert speedups_apart(lab02, _ddp_row("03", 7800.0, 0.05, 5139.0, 0.04)) == "differ within their spreads"
    source = lab10_source()
    from lab_utils.labs.lab10 import readout  # the fit's report moved there (issue 51: plumbing out of the cell)
    fits = open(readout.__file__).read()
    assert "then the lower lab" not in source + fits and "rule: the fit reads the row whose speedup moves least" in fits
    assert "readout.amdahl_fits(\n    compared, hw.host, (amdahl_rows, one_configuration" in source
    assert "fitted is best or fitted in report.same_setup(best, mine)" in source  # the summary quotes the fit's row


def test_the_sweeps_fit_at_the_same_bytes_is_a_cross_check_of_the_steps_figure():
    """Learner s11g, finding 1: lab 06's sweep put 55 kB near 0.26 ms, this lab's launch 1.51 ms, with no line; learner
    s13r6g, finding 1: 162 % from the step beside 27 % from the fit, the choice left to the learner. The step's figure
    is the lab's; the fit's is one cross-check line (the time alone is on the share line under it)."""
    from lab_utils.labs.lab10.lesson import fit_cross_check

    # learner s13r6g, finding 1: one figure, the step's; the fit's is a cross-check that says how far, and why
    said = fit_cross_check(0.30e-3, 1.80e-3, 6.43)
    assert said == ("cross-check: the sweep's fit gives 0.30 ms for these bytes, 6.0x below the step's: its small "
                    "sizes' medians spread up to 643% over their repeats, so at these bytes it is an order of "
                    "magnitude (above 100 %); the step's figure is the lab's")
    # learner s15, finding 1: 'order of magnitude' is the word above 100 % only; above 25 % the figure is rough
    assert "so at these bytes it is rough (above 25 %)" in fit_cross_check(0.30e-3, 1.80e-3, 0.5)
    assert "launches (lab 06)" in fit_cross_check(0.3e-3, 1.8e-3, 0.10)  # tight spreads: the launch, not noise
    assert fit_cross_check(1.2e-3, 1.8e-3, 6.0).endswith("within 2x of the step's: one figure")
    source = lab10_source()
    assert "fit_cross_check(fit.seconds(grad_bytes[name], world_size)" in source and "(16 << 20) // max(1, int(nbytes))" in source


def test_every_verdict_line_names_its_prediction_where_the_direction_does_not():
    """Learner s11g, finding 3: 'holds' beside 0.96x with only 'above 1 favours DDP' read as a contradiction."""
    from lab_utils.labs.lab10.lesson import prediction_said

    no_worse = {"expected": "DDP no slower than DataParallel by more than its all-reduce",
                "direction": "above 1 favours DDP"}
    assert prediction_said(no_worse) == "; predicted: DDP no slower than DataParallel by more than its all-reduce"
    faster = {"expected": "DDP faster (it sends fewer bytes per step)",
              "direction": "above 1 means DDP faster (it sends fewer bytes per step)"}
    assert prediction_said(faster) == ""  # the direction says it already: once is enough
    assert prediction_said({"expected": "", "direction": ""}) == ""  # an older row without one
    assert "+ prediction_said(v)" in lab10_source()


def test_one_workload_two_labs_says_what_it_compares_and_prints_the_gap_of_the_rows_both_labs_timed():
    """Learner s11g, finding 4: every lab 03 row n/m after a paragraph promising a comparison. The section's first
    sentence says no speedup is read across the labs; the configurations both timed print their gap."""
    from types import SimpleNamespace as R
    from lab_utils.labs.lab10.lesson import timed_by_both

    def c(lab, strategy, ranks, threads, rate, variant=""):
        return R(row=R(lab=lab, strategy=strategy, world_size=ranks, threads=threads, samples_per_s=rate,
                       variant=variant))

    shared = [c("01", "single-process", 1, 1, 5866, "1 process x 1 thread"), c("01", "single-process", 1, 2, 10895),
              c("03", "single-process", 1, 1, 6402, "1 process x 1 thread"), c("03", "ddp", 2, 1, 10173)]
    lines = timed_by_both(shared)
    assert lines == ["single-process 1 process x 1 thread, timed by both: 5,866 (lab 01) vs 6,402 (lab 03) "
                     "samples/s, 1.09x apart"]  # a configuration only one lab timed has no gap
    # learner s11r2g: the footnote said '1.26x apart', this line '20% apart' for the same two rates: one figure
    prose = next(x.source for x in nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
                 if x.source.startswith("### One workload, two labs"))
    assert "print `n/m`" in prose.split("\n\n")[1]  # no speedup read across the two labs
    # learner s12r4g: the rows' notes said 'within the 2x the condition above allows'; the lab stated no 2x rule
    assert "up to **2x** apart" in prose and "25 %" in prose


def test_the_summary_names_the_best_setup_with_every_labs_figure_when_two_labs_timed_it():
    """Learner s11g, finding 6: 'best plausible data-parallel setup here 1.59x' (lab 03) above the same setup's 1.69x
    (lab 02): the setup is the best, and each lab's figure is listed on a line of its own, the fit's row named."""
    source = lab10_source()
    assert "timed by {1 + len(twins)} labs, highest speedup first" in source and "for c in ranked:" in source
    assert '"; the row Amdahl\'s fit reads" if c is fitted' in source


def test_the_loss_curves_line_reads_the_last_steps_mean_and_counts_the_steps_below_the_baseline():
    """Learner s12r4g, finding 7: 'final loss 1.015 (one process 0.489)' was one spiky step, while the summed run lay
    below the correct one for most of steps 18-62; the markdown said only 'early on'."""
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    code = next(c.source for c in cells if c.cell_type == "code" and "mean loss of the last" in c.source)
    assert "losses[-1]" not in code and "np.mean(losses[-last:])" in code and "below one process's on" in code
    prose = next(c.source for c in cells if c.source.startswith("The correct DDP curve lies on top"))
    assert "early on" not in prose and "the line above counts them" in prose


def test_the_tables_legend_lists_the_marks_a_learner_meets_and_moves_the_rest_to_details():
    """Learner s12r4g, finding 13: two long legends (cell 5 ~15 lines, cell 11 nine bullets), several about marks a
    quiet run never prints; the legend now has four bullets, the rarer marks behind a Details paragraph."""
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    legend = next(c.source for c in cells if c.source.startswith("What the table shows:"))
    rows = [line for line in legend.splitlines() if line.startswith("| ") and not line.startswith("| mark")]
    # learner s15r9g: the bullets and the two words' paragraph became one table, a row per mark or word
    assert [r.split(" | ")[0] for r in rows] == ["| `-`", "| `note:`", "| `noise:`", "| `~`", "| `n/m`, `[!]`",
                                                 "| **Rough**", "| **An order of magnitude**"], rows
    assert legend.index("Details:") > legend.index(rows[-1])
    # learner s13r7g, finding 7: a legend for marks the run never printed; they explain themselves where they appear
    assert "`[n]` is a note over 200" not in legend and "explain themselves where they appear" in legend
    assert not any("marked `*`" in c.source for c in cells if c.cell_type == "markdown")
    first = next(c.source for c in cells if c.source.startswith("A lab run twice appends its rows twice"))
    assert len(first.splitlines()) <= 6 and "**efficiency**" in first


def test_the_fixed_cost_line_says_rough_when_a_median_it_reads_is_noisy():
    """Learner s12r4g, finding 9: 'digits CNN batch 32: 0.90 ms, spread 91 %' built a fixed cost with no note."""
    from lab_utils.labs.lab10.lesson import fixed_cost_line
    rough = fixed_cost_line("digits CNN", 32, 0.90e-3, 64, 1.26e-3, spread=0.91)
    assert "fixed cost of 0.54 ms" in rough and rough.endswith(
        "; rough (above 25 %): a median it reads spread 91% over its repeats")  # the threshold named (learner s15)
    wild = fixed_cost_line("digits CNN", 32, 0.90e-3, 64, 1.26e-3, spread=1.5)
    assert wild.endswith("; an order of magnitude (above 100 %): a median it reads spread 150% over its repeats")
    assert "; rough" not in fixed_cost_line("digits CNN", 32, 0.90e-3, 64, 1.26e-3, spread=0.2)


def test_no_unsourced_anchor_is_printed_beside_measured_projections():
    """Learner s12r4g, finding 11: the 'anchor' column (~1.8, 3.2-3.4) was 'a guide, not a measurement, and not one
    this course can source': printed beside measured figures, it invited the comparison the lab then disclaimed."""
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    source = "\n".join(c.source for c in cells)
    assert "anchor" not in source and "3.2-3.4" not in source and "rule of thumb" not in source


def test_the_fixed_cost_is_read_through_the_smallest_batch_timed():
    """Learner s13r7g, finding 9: a line through batches 128 and 256 gave 0.09 ms while batch 32 took 6.40 ms against
    T/8 = 5.30 ms: the line runs through the smallest batch timed, where a fixed cost shows most."""
    from lab_utils.labs.lab10.lesson import fixed_cost_line
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    code = next(c.source for c in cells if c.cell_type == "code" and "fixed_cost_line(\n" in c.source)
    assert "small = min(n for m, n in compute if m == name)" in code and "half = batch" not in code
    said = fixed_cost_line("CNN-3conv", 32, 6.40e-3, 256, 42.40e-3)
    assert "a fixed cost of 1.26 ms per step (20% of batch 32's step)" in said


def test_the_legend_defines_rough_and_order_of_magnitude_once_with_the_thresholds_the_code_applies():
    """Learner s15, finding 1: 'rough' at 25 % in one line and a 100 % note in another, neither word defined: the
    legend defines each word once, with the threshold detectors applies."""
    from lab_utils import detectors
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    legend = next(c.source for c in cells if c.source.startswith("What the table shows:"))
    flat = " ".join(legend.split())
    assert f"| **Rough** | a figure's line | above {detectors.NOISY_SPREAD:.0%}".replace("%", " %") in flat
    assert f"| **An order of magnitude** | a figure's line | above {detectors.NOISY_BASIS:.0%}".replace("%", " %") in flat
    assert "| mark | where | what it says |" in legend  # a legend table, a row per mark (learner s15r9g)
    defined = [c.source for c in cells if c.cell_type == "markdown" and "**Rough**" in c.source]
    assert len(defined) == 1
    assert detectors.spread_reading(0.3).startswith("rough") and detectors.spread_reading(1.2).startswith("an order")


def test_the_sweep_section_leads_with_its_fit_line_before_the_medians():
    """Learner s15, finding 3: the sweep's one figure (the fit, or its refusal) came after 15 rows, a [!], a '~' line
    and the noise line; it now leads, the table of medians under it."""
    cells = nbformat.read("solutions/10_scaling_report.ipynb", 4).cells
    code = next(c.source for c in cells if c.cell_type == "code" and "fit = report.fit_allreduce(fit_on" in c.source)
    fit_line = code.index('print(measure.flagged(measure.short_lines(f"fit: {fit.describe(world_size)}"), fit_flags))')
    assert fit_line < code.index("""print(f"{'bytes':>10}""") < code.index("detectors.noise_line(sweep[")
    assert '" (* marks one the fit leaves out):" if len(kept) < len(ar_flags)' in code  # true only when it does
