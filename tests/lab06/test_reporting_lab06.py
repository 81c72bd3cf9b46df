"""Lab 06's reporting (lab_utils.labs.lab06.reporting) and the no-communication step, on fake figures (learner
s11r2e, lab 06 findings 1, 5, 6)."""
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from lab_utils import learner_code, measure, spec
from lab_utils.labs.lab06 import reporting, tensor_parallel

SIZES = [4096 * 4 ** k for k in range(8)]  # 4 KiB ... 64 MiB


def test_the_takeaway_says_where_the_ring_and_the_library_are_close_and_where_one_leads():
    leads = ["0.90x", "0.89x", "0.99x", "1.07x", "0.92x", "1.03x", "0.90x", "1.12x"]  # the quiet run's
    line = reporting.takeaway(SIZES, leads)
    assert line.startswith("the ring and dist.all_reduce within 10 % of each other (library lead 0.90x-1.10x) at 6 "
                           "of 8 sizes")
    assert line.endswith("; the library faster by more at 64 MiB (1.12x); the ring faster by more at 16 KiB (0.89x)")


def test_the_takeaway_says_a_tested_size_with_its_verdict_word_not_as_a_lead():
    """Learner s12r4e, lab 06 finding 1: 'the library faster by more at ... 64 MiB (1.12x)' above the verdict on 64 MiB
    'not distinguishable here': the size a verdict tests is said with the verdict's word, once."""
    leads = ["0.90x", "0.89x", "0.99x", "1.07x", "0.92x", "1.03x", "0.90x", "1.12x"]
    line = reporting.takeaway(SIZES, leads, {SIZES[-1]: measure.UNDECIDED})
    assert "at 6 of the 7 other sizes" in line and "faster by more at 64 MiB" not in line  # s13r5e: 7 of 8 rows
    assert line.endswith(f"; 64 MiB, which the verdict below tests: {measure.UNDECIDED} (lead 1.12x)")
    alone = reporting.takeaway(SIZES[-1:], leads[-1:], {SIZES[-1]: measure.HOLDS})
    assert alone == f"the ring against the library: 64 MiB, which the verdict below tests: {measure.HOLDS} (lead 1.12x)"
    refused = reporting.takeaway(SIZES[-1:], leads[-1:], {SIZES[-1]: measure.CANNOT_SEE})
    assert refused.endswith(measure.CANNOT_SEE) and "1.12" not in refused  # no figure beside a refusal


def test_the_takeaway_skips_refused_sizes_and_says_so():
    line = reporting.takeaway(SIZES[:3], ["1.01x", measure.N_M, "1.50x"])
    assert "at 1 of 2 sizes" in line and "library faster by more at 64 KiB (1.50x)" in line and "1 size(s) n/m" in line
    assert "no size's lead" in reporting.takeaway(SIZES[:2], [measure.N_M, measure.N_M])


def lesson(notebook):
    return types.SimpleNamespace(function=types.SimpleNamespace(__name__="stage_step"), cell=16, notebook=notebook)


def test_the_lab04_line_is_true_where_the_notebook_ran(tmp_path):
    solution = learner_code.COURSE / "solutions" / "04_model_parallel_pipeline.ipynb"
    built = reporting.lab04_source([lesson(solution)], cwd=tmp_path)  # build/outputs: no learner's copy there
    assert built.endswith(": the folder this run was made in held no 04_model_parallel_pipeline.ipynb of yours (run "
                          "here, the cell reads the one beside this notebook; these are lesson cells, no exercise of "
                          "yours)")  # learner s13r6e: 'of yours' read as missing work; s13r7e: and Lab 04?
    assert "no 04_model_parallel_pipeline.ipynb beside this notebook" not in built  # s15r9e: the reader has one
    assert "this run's folder" not in built and "solutions/" not in built  # learner s12r3e lab 06 finding 8
    assert reporting.lab04_source([lesson(solution)], cwd=learner_code.COURSE / "solutions").endswith(
        "from the course's solution of Lab 04")
    mine = reporting.lab04_source([lesson(tmp_path / "04_model_parallel_pipeline.ipynb")], cwd=tmp_path)
    assert mine.endswith("from your 04_model_parallel_pipeline.ipynb beside this notebook")


def test_the_gap_is_split_into_measured_parts_beside_the_model():
    rounds = 7
    tp, ddp, local = np.full(rounds, 0.040), np.full(rounds, 0.022), np.full(rounds, 0.030)
    line = " ".join(reporting.gap_split({"tensor parallel": tp, "DDP": ddp, "tensor parallel, no communication": local},
                                        0.0047, "library", False, tp_model_s=0.0052).split())
    assert "took 18.0 ms longer than DDP's" in line
    assert line.startswith("tensor parallel's step took 18.0 ms longer than DDP's: 10.0 ms in its collectives, 8.0 ms "
                           "in its compute and copies (more than DDP's")  # the plain sentence first
    assert "not measured" not in line
    # learner s13r6e, lab 06 finding 4: one model figure, beside the measured one it models ('4.8 ms of the gap'
    # beside 'its own 5.3 ms' read as two answers to one question)
    assert ("of the 10.0 ms in its collectives, the alpha-beta model of dist.all_reduce explains 5.2 ms (52 %); the "
            "other 4.8 ms is waiting and Python work the model does not count") in line
    assert "4.7" not in line and "of the gap" not in line

    slower = " ".join(reporting.gap_split({"tensor parallel": tp, "DDP": ddp,
                                           "tensor parallel, no communication": np.full(rounds, 0.045)},
                                          0.0047, "library", False).split())
    assert "sees no time in the collectives" in slower and "23.0 ms more than DDP's" in slower and " -" not in slower
    refused = reporting.gap_split({"tensor parallel": tp, "DDP": ddp}, 0.0047, "library", True)
    assert refused.startswith("no step-time gap to split here")
    no_fit = " ".join(reporting.gap_split({"tensor parallel": tp, "DDP": ddp}, None, None, False).split())
    assert "no alpha-beta fit" in no_fit and "both refused" in no_fit and "4.7" not in no_fit


def test_a_refused_library_fit_falls_back_to_the_ring_s_and_says_so():
    """Learner s12r4e, lab 06 finding 5: the library's fit refused left 'how much the bytes explain' unsaid, while the
    ring's fit was accepted: the line turns the bytes into time with the ring's, and names it."""
    rounds = 7
    tp, ddp, local = np.full(rounds, 0.040), np.full(rounds, 0.022), np.full(rounds, 0.030)
    line = " ".join(reporting.gap_split({"tensor parallel": tp, "DDP": ddp, "tensor parallel, no communication": local},
                                        0.0047, "ring", False, tp_model_s=0.0052).split())
    assert "the alpha-beta model of the ring (dist.all_reduce's fit was refused above" in line
    assert "explains 5.2 ms (52 %); the other 4.8 ms" in line
    assert "model of dist.all_reduce" not in line and "no alpha-beta fit" not in line
    no_step = " ".join(reporting.gap_split({"tensor parallel": tp, "DDP": ddp}, 0.0047, "ring", False).split())
    assert "gives the collectives 4.7 ms of the gap" in no_step  # no no-op step: the model's share of the gap


def test_the_split_reads_the_table_s_medians_and_adds_up():
    """Learner s13r5e, lab 06 finding 2: the split said 1.7 ms of compute (paired rounds' median) under a table whose
    medians stood 0.2 ms apart: the split now reads the table's medians, so its parts add up to the gap."""
    tp = np.array([0.039, 0.050, 0.038, 0.041, 0.039, 0.036, 0.040])
    ddp = np.array([0.0211, 0.019, 0.030, 0.021, 0.022, 0.020, 0.0215])
    local = np.array([0.0213, 0.031, 0.018, 0.026, 0.019, 0.024, 0.021])
    line = " ".join(reporting.gap_split({"tensor parallel": tp, "DDP": ddp, "tensor parallel, no communication": local},
                                        0.0047, "library", False).split())
    gap, comm, rest = (np.median(tp) - np.median(ddp), np.median(tp) - np.median(local),
                       np.median(local) - np.median(ddp))
    assert f"took {gap * 1e3:.1f} ms longer" in line and f"{comm * 1e3:.1f} ms in its collectives" in line
    assert f"{rest * 1e3:.1f} ms in its compute and copies: within this run's noise" in line
    assert "need not add up" not in line and "from the medians in the table above" in line


def test_the_compute_and_the_model_share_are_said_as_measured():
    """A no-op step faster than DDP's is said as no extra compute cost; the model's share as measured."""
    assert "-0.8 ms in its compute and copies (no more than DDP's" in reporting.compute_sentence(-0.0008)
    noisy = reporting.compute_sentence(0.0002, (-0.004, 0.006))  # learner s13r5e: a 0.2 ms lead inside the noise
    assert "within this run's noise (paired rounds -4.0 to +6.0 ms)" in noisy and "more than DDP's" not in noisy
    assert "2.0 ms in its compute and copies (more than DDP's" in reporting.compute_sentence(0.002)
    assert "the other 7.3 ms is waiting" in reporting.model_share_sentence(0.0046, 0.0119)
    assert "explain them" in reporting.model_share_sentence(0.0115, 0.0119)
    assert "more than this run measured" in reporting.model_share_sentence(0.02, 0.0119)


def test_local_collectives_send_nothing_and_are_restored(tmp_path):
    import torch.distributed as dist

    saved = dist.all_reduce, dist.all_gather
    with tensor_parallel.local_collectives():  # no process group: a real collective would raise
        x = torch.arange(3.0)
        dist.all_reduce(x)
        parts = [torch.empty(3) for _ in range(2)]
        dist.all_gather(parts, x)
    assert torch.equal(x, torch.arange(3.0)) and all(torch.equal(p, x) for p in parts)
    assert (dist.all_reduce, dist.all_gather) == saved


def fake_runs(sizes, lead=1.0, rounds=7):
    """Rounds of each size: the library `lead` times faster than the ring, the time growing with the size."""
    rng = np.random.default_rng(0)
    runs = {}
    for s in sizes:
        ring = (1e-4 + s / 1e9) * rng.uniform(0.98, 1.02, rounds)
        runs[s] = {"ring": ring, "library": ring / lead * rng.uniform(0.99, 1.01, rounds)}
    medians = {n: [float(np.median(runs[s][n])) for s in sizes] for n in ("ring", "library")}
    spreads = {n: [measure.spread(runs[s][n]) for s in sizes] for n in ("ring", "library")}
    return runs, medians, spreads


def test_the_allreduce_table_says_its_takeaway_first_and_refuses_its_leads_on_a_busy_machine(capsys):
    from lab_utils import conditions

    sizes = SIZES[:4]
    runs, medians, spreads = fake_runs(sizes, lead=1.3)
    reporting.allreduce_table(sizes, runs, medians, spreads, conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0),
                              oversubscribed=False)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("the ring and dist.all_reduce within 10 % of each other (library lead 0.90x-1.10x) at 0")
    assert "the library faster by more at 4 KiB (1.2" in out[1] and "256 KiB (1.30x)" in out[1]
    header = next(line for line in out if line.split()[:1] == ["size"])
    # s12r4e: no spreads; s13r6e ('make it a 5'): no medians either, the figure draws them, the lead is the figure
    assert header.split() == ["size", "library", "lead"]
    assert not any(line.startswith("noise:") for line in out)  # the medians' noise is under details()
    rows = [line for line in out if line.strip().endswith("x") and "KiB" in line[:10]]
    assert len(rows) == 4 and rows[-1].split()[-1] == "1.30x"  # the table shows the figure the sentence reads
    assert all(len(line) <= 100 for line in out)
    reporting.allreduce_table(sizes, runs, medians, spreads, conditions.Load(60.0, 2, own=0.4, others=1.6, steal=0.0),
                              oversubscribed=False)
    busy = capsys.readouterr().out
    assert busy.startswith("the ring against the library: no size's lead could be read here")
    assert "1.30x" not in busy and measure.N_M in busy and max(map(len, busy.splitlines())) <= 100


def test_the_speed_section_says_its_verdict_plainly_before_its_rows():
    import nbformat

    from lab_utils import conditions, workloads

    cells = nbformat.read("solutions/06_collectives_tensor_parallel.ipynb", 4).cells
    source = next(c.source for c in cells if "speed_ranks = launch(speed_worker" in c.source)
    assert source.index("measure.in_plain_words(ddp_vs_tp") < source.index("for name, times in step_times.items()")
    quiet = conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0)
    v = measure.decide([1.7, 1.6, 1.8, 1.75, 1.71, 1.5, 2.0], claim="DDP vs tensor parallel", expected="DDP faster",
                       workload=workloads.TP_VS_DDP, load=quiet)
    assert measure.in_plain_words(v, "DDP", "tensor parallel") == ("DDP: 1.71x the speed of tensor parallel (71 % faster; "
                                                            "range 1.50-2.00), as predicted")


def test_the_table_prints_the_lead_alone_so_no_median_contradicts_it(capsys):
    """Learner s13r6e, lab 06 finding 1: at 64 KiB the medians said the ring 2x faster, the lead 0.89x, and only one
    size carried a note saying which to trust: the table prints the paired lead alone (the figure draws the medians)."""
    from lab_utils import conditions

    ring, library = np.array([2, 3, 4, 1, 5]) * 1e-3, np.array([1.8, 2.7, 3.6, 10, 10]) * 1e-3  # paired: 1.11x
    runs = {4096: {"ring": ring, "library": library}}
    medians = {"ring": [float(np.median(ring))], "library": [float(np.median(library))]}  # 3 ms < 3.6 ms: the ring
    spreads = {"ring": [0.1], "library": [0.1]}
    reporting.allreduce_table([4096], runs, medians, spreads, conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0),
                              oversubscribed=False)
    out = capsys.readouterr().out
    # the paired lead is 1.11x, its range reaching across 1 (0.1 and 0.5 among the pairs): the cell says so instead
    assert "not dist." in out and "3.000" not in out and "3.600" not in out and "favour the other side" not in out, out


def test_details_are_the_halves_then_one_noise_line():
    """Learner s13r6e, lab 06 'make it a 5': the medians' noise and the halves after the results, within 100 columns;
    learner s13r7e, lab 06 finding 4: ~20 lines of caveats (the widest 935 %, 10.3x, the fit rules) around the table,
    the fit and the verdict: the halves' line, then one noise line (the fit rules are in the markdown)."""
    text = reporting.details({"ring": [0.3, 0.1], "library": [12.0, 0.2]}, "alpha and B fitted to the even ...")
    lines = text.splitlines()
    joined = " ".join(text.split())
    assert lines[0] == "alpha and B fitted to the even ..." and joined.endswith(
        "noise: 2 of 4 medians in the figure spread more than 25 % over their repeats (widest >1000 %): the table's "
        "leads pair rounds instead"), lines
    assert "slowest repeat took" not in joined and "a fit is refused" not in joined and "details:" not in joined
    assert max(map(len, lines)) <= 100 and joined.count("noise:") == 1
    quiet = reporting.details({"ring": [0.1], "library": [0.2]}, "")
    assert quiet == "noise: every median in the figure came from repeats within 25 %"


def test_the_fit_says_where_each_term_dominates_in_one_line_per_side(capsys):
    """Learner s13r6e, lab 06 'make it a 5': one line per side, 'latency below X KiB, bandwidth above' (the lesson the
    table exists for), no repeated definition of the crossover."""
    from lab_utils import conditions

    sizes = SIZES[:6]
    medians = {name: [2 * 100e-6 + s / 1.5e9 for s in sizes] for name in ("ring", "library")}
    reporting.fit_report(sizes, medians, 2, "gloo", conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("where each term of the alpha-beta fit") and len(out) == 3, out
    assert out[1].split()[:4] == ["ring", "latency", "below", "293"] and "(alpha = 100 us per step)" in out[1]
    assert "bandwidth above (B = 1.50 GB/s)" in out[1] and max(map(len, out)) <= 100


def test_a_flag_on_a_median_names_its_column(capsys):
    """Learner s12r4e, lab 06 finding 4: '16 KiB took less time (0.277 ms) than 4 KiB (0.595 ms)' did not say it read
    the dist.all_reduce column (the ring's was monotone there)."""
    from lab_utils import conditions

    sizes = SIZES[:2]
    ring = {4096: np.full(5, 0.2e-3), 16384: np.full(5, 0.25e-3)}
    library = {4096: np.full(5, 0.6e-3), 16384: np.full(5, 0.28e-3)}  # more bytes, half the time
    runs = {s: {"ring": ring[s], "library": library[s]} for s in sizes}
    medians = {"ring": [0.2e-3, 0.25e-3], "library": [0.6e-3, 0.28e-3]}
    spreads = {"ring": [0.05, 0.05], "library": [0.05, 0.05]}
    reporting.allreduce_table(sizes, runs, medians, spreads, conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0),
                              oversubscribed=False)
    out = " ".join(capsys.readouterr().out.split())
    assert "dist.all_reduce's median: 16 KiB took less time" in out, out
    assert "the ring's median:" not in out


def test_a_noisy_win_says_how_it_was_decided_in_one_plain_line():
    """Learner s13r5e, lab 06 finding 1: 'holds', 'too noisy to test a cost up to 30%' and 'these pairs scatter by
    14.6%, too much to test a cost of 10%' under one verdict: one line with the word and figure, one saying why only a
    win could decide, and no 30 % or 10 % to decode."""
    from lab_utils import conditions, workloads

    quiet = conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0)
    v = measure.decide([1.08, 1.43, 1.17, 1.12, 1.3, 1.2, 1.15], claim="dist.all_reduce vs the ring, 65536 KiB",
                       expected="the library no slower", no_worse_than=0.10, workload=workloads.ALLREDUCE_SIZES,
                       load=quiet)
    assert v.verdict == measure.HOLDS and reporting.SCATTER in v.notes
    text = reporting.verdict_brief(v)
    lines = text.splitlines()
    joined = " ".join(text.split())
    assert joined.startswith("verdict, dist.all_reduce vs the ring, 65536 KiB [") and len(lines) <= 4  # two lines, wrapped
    assert "holds as predicted at 1.17x (range 1.08-1.43 over 7 paired repeats)" in joined
    assert ("dist.all_reduce faster over the whole paired range at this size; the pairs scatter by 15.0 %, so "
            "only a cost above 3x that (45 %) would stand out: only a win could decide") in joined
    assert "30%" not in joined and "10%" not in joined and max(map(len, lines)) <= 100
    said = reporting.plain_verdict(v, "dist.all_reduce", "the ring")
    assert said.startswith("dist.all_reduce: 1.17x the speed of the ring") and "scatter" not in said
    undecided = measure.decide([0.9, 1.43, 1.17, 1.12, 1.3, 1.2, 1.15], claim="dist.all_reduce vs the ring, 64 KiB",
                               expected="the library no slower", no_worse_than=0.10, load=quiet)
    # learner s13r6e, lab 06 finding 2: undecided on noisy pairs: word and figure, then one plain line (no 30 %
    # hedge, no second note)
    brief = reporting.verdict_brief(undecided)
    summary = reporting.plain_verdict(undecided, "dist.all_reduce", "the ring")  # the summary: no note repeated
    assert "too noisy to decide" in summary and "scatter" not in summary and "30%" not in summary
    # learner s13r7e, lab 06 finding 5: the word first, then the figure; no parentheses inside parentheses
    assert summary == ("too noisy to decide: dist.all_reduce 1.17x the speed of the ring (range 0.90-1.43); "
                       "predicted: the library no slower"), summary
    assert " ".join(brief.split()).startswith(f"verdict, dist.all_reduce vs the ring, 64 KiB: {measure.UNDECIDED} at "
                                              "1.17x (range 0.90-1.43 over 7 paired repeats)")
    assert "not a clear win for dist.all_reduce (the range reaches 0.90x, below 1)" in " ".join(brief.split())
    assert len(brief.splitlines()) <= 4
    # learner s13r7e, lab 06 finding 1: the markdown's 30 % and this run's figure, each named for what it is
    assert "a cost must exceed 68 % to stand out here, past the rule's 30 % limit" in " ".join(brief.split()), brief
    assert max(map(len, brief.splitlines())) <= 100
    reversed_ = measure.decide([0.5, 0.51, 0.5, 0.52, 0.5, 0.49, 0.51], claim="dist.all_reduce vs the ring, 64 KiB",
                               expected="the library no slower", no_worse_than=0.10, load=quiet)
    assert "tested as 'no worse by more than 10%'" in reporting.verdict_brief(reversed_)  # the whole block
    ddp = measure.decide([1.7, 1.6, 1.8, 1.75, 1.71, 1.5, 2.0], claim="DDP vs tensor parallel", expected="DDP faster",
                         workload=workloads.TP_VS_DDP, load=quiet)
    assert reporting.verdict_brief(ddp).count("\n") <= 1 and "holds as predicted at 1.71x" in reporting.verdict_brief(ddp)


def test_the_fit_says_how_far_alpha_and_b_move_between_halves_of_the_rounds():
    """Learner s13r5e, lab 06 finding 8: every median spread over 25 %, yet alpha and B were printed unqualified."""
    sizes = SIZES[:4]
    alpha, bw = 100e-6, 1.5e9

    def times(scale):
        return np.array([2 * alpha + s / bw * scale for s in sizes])

    runs = {s: {name: np.array([times(k)[i] for k in (1.0, 1.2, 1.0, 1.2, 1.1, 1.2)]) for name in ("ring", "library")}
            for i, s in enumerate(sizes)}
    line = " ".join(reporting.fit_halves(sizes, runs, 2).split())
    assert line.startswith("alpha and B fitted to the even and to the odd rounds alone: ring alpha")
    assert "alpha 100-100 us, B 1.25-1.50 GB/s" in line and "read alpha and B within these ranges" in line
    short = {s: {name: v[:3] for name, v in r.items()} for s, r in runs.items()}
    assert reporting.fit_halves(sizes, short, 2) == ""  # too few rounds to halve
    # learner s15r9e, lab 06 finding 4: the ring's fit refused, the library's read: its trust range still printed
    library_only = " ".join(reporting.fit_halves(sizes, runs, 2, {"ring": False, "library": True}).split())
    assert "dist.all_reduce alpha 100-100 us" in library_only and "ring alpha" not in library_only
    assert reporting.fit_halves(sizes, runs, 2, {"ring": False, "library": False}) == ""


def test_leads_past_ten_percent_say_whether_their_range_clears_noise():
    """Learner s13r7e, lab 06 finding 2: the ring 1.3x faster at 1 MiB, above the fitted crossover, against the
    prose and unremarked: each lead past 10 % says whether its paired range reaches across 1."""
    sizes = [4096, 65536, 1 << 20, 64 << 20]
    leads = ["0.87x", "1.19x", "0.77x", "1.14x"]
    noisy = {4096: (0.6, 1.2), 65536: (0.9, 1.5), 1 << 20: (0.5, 1.1), 64 << 20: (0.91, 1.72)}
    line = reporting.takeaway(sizes, leads, {64 << 20: measure.UNDECIDED}, noisy)
    # learner s15r9e, lab 06 finding 4: a lead whose paired range reaches across 1 prints no figure
    assert "not distinguishable here at 4 KiB, 64 KiB, 1 MiB (a median lead past 10 %, but its paired range " \
           "reaches across 1)" in line, line
    assert "0.77x" not in line and "1.19x" not in line and "0.87x" not in line and "faster by more" not in line
    assert "1024 KiB" not in line and "64 MiB, which the verdict below tests" in line
    clear = reporting.takeaway(sizes, leads, {64 << 20: measure.UNDECIDED}, {**noisy, 1 << 20: (0.6, 0.9)})
    assert "the ring faster by more at 1 MiB (0.77x)" in clear and "not distinguishable here at 4 KiB, 64 KiB" in clear
    assert reporting.lead_cell("2.48x", (0.9, 3.1)) == "not dist." and reporting.lead_cell("2.48x", (1.2, 3.1)) == \
        "2.48x" and reporting.lead_cell("1.05x", (0.9, 1.2)) == "1.05x"
    assert "paired range" not in reporting.takeaway(sizes, ["1.01x", "0.95x", "1.02x", "1.14x"],
                                                    {64 << 20: measure.UNDECIDED}, noisy)


def test_the_training_check_says_how_many_steps_equal_one_device_and_whether_the_loss_fell():
    """Learner walk, lab 06: four losses that did not fall left it open whether tensor parallel trains at all; the
    check prints the step-by-step equality and the first and last loss, and says whether it fell."""
    fell = reporting.training_lines([2.28, 2.3, 1.25], [2.28, 2.3, 1.2500001])
    assert fell.splitlines() == ["losses equal to one device's within 1e-5, step by step: 3 of 3 steps",
                                 "loss at step 1: 2.280; at step 3: 1.250: it fell by 45 %"]
    flat = reporting.training_lines([2.28, 2.31, 2.3], [2.28, 2.4, 2.3])
    assert "2 of 3 steps" in flat and flat.endswith("it did not fall") and "fell by" not in flat
    with pytest.raises(ValueError, match="3 tensor-parallel losses against 2"):
        reporting.training_lines([2.3, 2.2, 2.1], [2.3, 2.2])


def test_the_course_batches_teach_one_task_so_the_single_device_loss_falls():
    """Each step's batch comes from the same class patterns (a new seed per step drew new patterns, which no model
    can learn across steps): the lesson's 25 steps at its learning rate lower the loss; step 0's batch is unchanged."""
    x0, y0 = tensor_parallel.course_batch(32, 0)
    from lab_utils import data
    x, y = data.synthetic_images(32, image_shape=(1, 28, 28), seed=0)
    assert torch.equal(x0, torch.from_numpy(x)) and torch.equal(y0, torch.from_numpy(y))
    x3, _ = tensor_parallel.course_batch(32, 0, step=3)
    assert x3.shape == x0.shape and not torch.equal(x3, x0)  # a new batch each step
    model_spec = spec.preset("cnn2d_2layer_fullconnected_2layer")
    _, losses = tensor_parallel.single_device_training(model_spec, (1, 28, 28), 32, 25, 0.04, 0)
    assert losses[-1] < 0.8 * losses[0], losses


def test_one_fit_refused_and_one_read_says_the_one_rule_once(capsys):
    """Learner s15r9e, lab 06 finding 4: the ring's fit refused, the library's B read, from the same noisy sweep."""
    from lab_utils import conditions

    sizes = [4096 * 4 ** k for k in range(6)]
    line = [2 * 100e-6 + s / 1.5e9 for s in sizes]  # alpha 100 us, B 1.5 GB/s, N = 2
    bent = [t * (8.0 if i == 2 else 1.0) for i, t in enumerate(line)]  # one median far off any straight line
    quiet = conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0)
    _, _, read = reporting.fit_report(sizes, {"ring": bent, "library": line}, 2, "gloo", quiet)
    out = " ".join(capsys.readouterr().out.split())
    assert read == {"ring": False, "library": True}, out
    assert out.count("one rule for both fits") == 1 and "misses one of its own medians by more than 2x" in out
    reporting.fit_report(sizes, {"ring": line, "library": line}, 2, "gloo", quiet)
    assert "one rule" not in capsys.readouterr().out  # both read: nothing to reconcile
