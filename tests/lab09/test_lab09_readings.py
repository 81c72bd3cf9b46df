"""Lab 09's readings of figures it measured twice or more (issue 51, learners s10k, s11h): every inversion of the
batch sweep tested, the batch-1 bound with its own range, batch-1 serving's capacity from its bursts and from the saturated grid, a larger batch that took
less time without a flag, padding read from one side, and the cells after the exercises after a kernel restart."""
import inspect
import json
from pathlib import Path

from lab_utils import measure
from lab_utils.labs.lab09 import serving
from lab_utils.labs.lab09.serving import candidates, grid
from lab_utils.labs.lab09.serving import sweep as sweep_module
from lab_utils.measure.timing import Timing
from lab_utils.skipping import Skipper, names_bound, names_used

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "solutions" / "09_inference_throughput.ipynb"


def timing(*ms):
    return Timing(tuple(m / 1e3 for m in ms), 1)


def test_every_inversion_of_theorys_order_is_tested_flagged_or_not():
    """Learner s11h finding 2: batch 2 gave fewer samples/s than batch 1 and batch 4 took less time than batch 2, no
    flag fired, and the dense-layer test that could explain it ran only under a flag."""
    sweep = {1: timing(1.34, 1.34, 1.34), 2: timing(2.80, 2.80, 2.80), 4: timing(2.71, 2.71, 2.71),
             8: timing(3.63, 3.63, 3.63)}
    assert serving.inversions([1, 2, 4, 8], sweep) == [(1, 2, "fewer samples/s"), (2, 4, "less time")]
    theory = {1: timing(1.0, 1.0), 2: timing(1.5, 1.5), 4: timing(2.5, 2.5)}  # more time, more samples/s: none
    assert serving.inversions([1, 2, 4], theory) == []
    level = {64: timing(15.0, 15.0), 128: timing(31.0, 31.0)}  # past the knee samples/s levels off: theory's too
    assert serving.inversions([64, 128], level, knee=64) == [] and serving.inversions([64, 128], level) != []
    source = "".join("".join(c["source"]) for c in cells())
    assert "serving.inversion_lines(model, batch_sweep, sweep, knee," in source
    assert "if flags and sweep[b].median < sweep[a].median" not in source  # no longer only under a flag
    assert "caches holding the weights, or a busy machine" not in source  # prose says theory; the run decides


def test_each_inversion_closes_with_its_gap_against_the_medians_spreads():
    """Learner s11r2h finding 2: 'this layer alone does not explain it', then nothing; a 4 % gap beside 23 % and 17 %
    spreads is read as noise, a gap beyond both spreads is not."""
    noisy = {1: Timing((1.5e-3, 1.75e-3, 2.0e-3), 1), 2: Timing((3.4e-3, 3.63e-3, 4.0e-3), 1)}
    assert round(serving.inversion_gap(noisy, 1, 2, "fewer samples/s"), 2) == 0.04
    line = serving.gap_reading(noisy, 1, 2, "fewer samples/s")
    assert "batch 2 vs 1: 4% fewer samples/s at the larger batch, in 2 of 3 paired rounds only" in " ".join(line.split())
    assert "noise can explain it" in " ".join(line.split()) and "repeatable" not in line
    steady = {2: timing(3.63, 3.63, 3.63), 4: timing(2.9, 2.9, 2.9)}
    line = serving.gap_reading(steady, 2, 4, "less time")
    assert line.startswith("batch 4 vs 2: 20% less time at the larger batch, in all 3 paired rounds")
    # learner s13r7h finding 3: a contradiction of theory in every round carries the legend's [!]
    assert "[!] against theory (a larger batch cannot take less time): batch 4 vs 2 in every round" in line
    assert serving.inversion_flags(steady, 2, 4, "less time") and not serving.inversion_flags(noisy, 1, 2,
                                                                                            "fewer samples/s")
    fewer = {1: timing(1.0, 1.0, 1.0), 2: timing(2.2, 2.1, 2.3)}  # fewer samples/s at batch 2 in every round
    assert "[!] against theory (samples/s grows with the batch)" in serving.gap_reading(fewer, 1, 2, "fewer samples/s")
    model = serving.wide_head_model(64, (1, 8, 8), seed=0)
    images = serving.request_images(8, (1, 8, 8))
    lines = serving.inversion_lines(model, [1, 2], noisy, 2, images=images, repeats=3, device="cpu")
    assert lines == [serving.gap_reading(noisy, 1, 2, "fewer samples/s")]  # noise: one line, no layer to time
    lines = serving.inversion_lines(model, [2, 4], steady, 4, images=images, repeats=3, device="cpu")
    # learner s13r5h finding 3: a repeatable pair is one sentence, its layers in it, and never 'unexplained'
    text = " ".join(lines[0].split())
    assert len(lines) == 1 and "in all 3 paired rounds  (flagged above)" in lines[0]  # said once per process
    assert "each layer alone at batch 2 and 4 (medians of 3 rounds): " in text
    assert ("in every round: its own kernel" in text) != ("no layer inverts in every round" in text)
    assert "unexplained" not in text
    near = {2: timing(3.6, 3.5, 3.7), 4: timing(3.4, 3.6, 3.3)}  # less time in 2 of 3 rounds, 6 % less: no flag
    assert serving.inversion_lines(model, [2, 4], near, 4, images=images, repeats=3, device="cpu",
                                   flags_of=[[], []]) == []
    assert len(serving.inversion_lines(model, [2, 4], near, 4, images=images, repeats=3, device="cpu",
                                       flags_of=[[], ["[!] x"]])) == 1
    assert all(len(x) <= 100 for line in lines + [line] for x in line.splitlines())


def test_the_sweep_is_read_against_theorys_gain():
    """Learner s12r4h finding 6: no line read the sweep against cell 5's claim (a batch of b costs much less than
    b batches of one)."""
    sweep = {1: timing(1.77), 2: timing(3.56), 4: timing(3.36), 128: timing(31.2)}
    line = serving.gain_line([1, 2, 4, 128], sweep, 128)
    assert "batch 128 took 17.6x batch 1's time for 128x the samples, so 7.3x the samples/s" in " ".join(line.split())
    # learner s13r7h finding 4: 'against theory' read as a failure where the line confirms theory
    assert line.startswith("theory says a batch of b costs much less than b batches of one; measured:")
    source = "".join("".join(c["source"]) for c in cells())
    assert "serving.gain_line(batch_sweep, sweep, knee)" in source


def test_a_pair_inverted_in_every_round_is_never_read_as_noise():
    """Learner s12r3h finding 2: the note said 'in all 5 rounds: repeatable, not noise' and the line under it 'a gap
    of 11% against spreads of 27% and 20%: noise alone can explain it' for the same pair; the rounds decide."""
    wide = {2: timing(3.0, 4.0, 5.0, 3.9, 3.92), 4: timing(2.9, 3.5, 4.5, 3.48, 3.6)}  # spreads > gap, every round
    assert serving.sweep_flags(2, wide[2], 4, wide[4])[0].text.find("repeatable") >= 0
    line = serving.gap_reading(wide, 2, 4, "less time")
    assert "not noise" in " ".join(line.split()) and "noise alone" not in line


def test_a_flat_stretch_below_the_knee_is_named_and_an_inverted_pair_is_not():
    rates = [500, 510, 1000, 990]
    assert "from batch 1 to 2 (500 -> 510/s)" in serving.flat_line([1, 2, 4, 8], rates, 8)
    assert serving.flat_line([1, 2, 4, 8], [500, 1000, 2000, 1990], 8) is None


def test_batch_1_capacity_is_one_figure_with_its_forward_pass_said_once_and_flagged_only_past_its_fastest_pass():
    """Learner s13r6h findings 1-2: four figures for batch-1 serving's capacity (498 bound, 553 bursts, 600 sweep,
    654 saturated) and its forward pass 'timed three times'; the bursts are the lab's figure, the sweep's pass the
    bound, and a second line says what the pass leaves out, or, above the sweep's median, that the passes scatter."""
    from types import SimpleNamespace as NS
    source = "".join("".join(c["source"]) for c in cells())
    assert "bound_runs" not in source and "forward_1_figures" not in source
    assert "serving.capacity_report(\n    capacity_runs, sweep[1], n_burst, earlier=[mode_timings[1][\"inference_mode\"]])" \
        in source
    sweep1 = timing(1.67, 1.67, 1.6, 1.7, 1.57)  # the quiet run's sweep: 599/s at the median, 637/s at the fastest pass
    lines, flags, bound, base = serving.capacity_report([NS(achieved_rps=r) for r in (527, 580)], sweep1, 240)
    text = " ".join(" ".join(lines).split())
    assert not flags and base == 553.5 and round(bound) == 599 and len(lines) == 2
    assert text.startswith("batch-1 serving's capacity: 554 requests/s (median of 2 bursts of 240, spread 10%): the "
                           "lab's figure; section Measure's loads are multiples of it")
    assert "its forward pass alone, the sweep's 1.67 ms, allows 599/s: the server's own work per request" in text
    assert "the other 8%" in text and "498" not in text and "back to back" not in text
    lines, flags, bound, base = serving.capacity_report([NS(achieved_rps=r) for r in (620, 630)], sweep1, 240)
    text = " ".join(" ".join(lines).split())
    assert not flags and base == 625 and "above the 599/s its forward pass alone allows at the sweep's median" in text
    assert "within its fastest batch-1 pass's 637/s: the passes scatter that much, so no flag" in text
    assert "4%" not in text  # one sentence on two rates, not also their gap
    lines, flags, bound, base = serving.capacity_report([NS(achieved_rps=r) for r in (700, 710)], sweep1, 240)
    assert flags and base == bound and "not the flagged capacity" in "".join(lines)
    # a faster pass in the modes' run widens the range: what the lab timed, never a flag on a capacity within it
    lines, flags, _, _ = serving.capacity_report([NS(achieved_rps=r) for r in (700, 710)], sweep1, 240,
                                                 earlier=[timing(2.5, 1.4, 2.6)])
    assert not flags and "fastest batch-1 pass's 714/s" in " ".join(" ".join(lines).split())
    assert all(len(x) <= 100 for line in lines for x in line.splitlines())


def test_the_modes_timing_of_the_batch_1_pass_is_said_only_where_it_disagrees_with_the_sweeps():
    """Learner s13r6h finding 2: '1.67, 2.52, 2.01 ms ... 51% apart ... one figure' for one pass."""
    assert serving.forward_1_note(timing(1.75, 1.6, 2.0), timing(1.99, 1.9, 2.2)) is None  # 14%, within 23%
    line = serving.forward_1_note(timing(1.67, 1.6, 1.9), timing(2.52, 2.1, 2.9))
    text = " ".join(line.split())
    assert "timed the same pass at 2.52 ms, 51% from the sweep's, beyond the widest spread of their repeats (32%)" \
        in text and "the sweep's as the lab's figure" in text
    assert all(len(x) <= 100 for x in line.splitlines())


def test_the_capacity_measured_twice_agrees_or_is_flagged_never_called_a_bound():
    said, flags = serving.capacity_agreement(529, 0.07, 577, 0.29)  # the learner's run: within the spreads
    assert not flags and said.startswith("saturated, it answered as fast as it can: 577/s is its capacity measured a "
                                         "second time, against the bursts' 529/s: ")
    assert said.endswith("the lab keeps the bursts'") and "at most" not in said
    from lab_utils import detectors
    assert "they agree: 9% apart, within the scatter of their rounds (7%, 29%)" in said
    said, flags = serving.capacity_agreement(595, 0.05, 736, 0.04)  # learner s12r4h: 24% apart, called 'agree'
    assert not flags and "agree" not in said and "24% apart, close enough: more than their rounds scatter" in said
    assert "within the 25% two runs minutes apart may differ (no flag)" in said
    assert "too noisy" in serving.agreement_words(500, 0.6, 700, 0.6)  # ranges overlap, 40% apart: no 'agree'
    said, flags = serving.capacity_agreement(563, 0.16, 417, 0.21)  # a busy run: apart, under another condition
    assert [detectors.kind_of(f) for f in flags] == [detectors.Kind.NOTE] and "see the note" in said
    assert "one by one" in flags[0]
    said, flags = serving.capacity_agreement(563, 0.02, 200, 0.02)  # beyond what the condition explains: [!]
    assert detectors.kind_of(flags[0]) is detectors.Kind.CONTRADICT and "see the flag" in said


def test_a_larger_batch_faster_by_less_than_the_flags_margin_gets_a_line():
    sweep = {2: timing(3.67, 3.67, 3.67), 4: timing(3.42, 3.42, 3.42), 8: timing(4.0, 4.0, 4.0)}
    lines = serving.unflagged_less_time([2, 4, 8], sweep, [[], [], []])
    assert len(lines) == 1 and "batch 4 took less time than batch 2" in lines[0] and "not flagged" in lines[0]
    assert serving.unflagged_less_time([2, 4, 8], sweep, [[], ["a flag"], []]) == []  # the flag says it
    # review 11, item 5: one line, no hard break; the cell wraps it to 100 columns; 'within' is computed
    wide = {64: timing(12.50, 12.50, 12.50), 128: timing(12.34, 12.34, 12.34)}
    said = serving.unflagged_less_time([64, 128], wide, [[], []])
    assert len(said) == 1 and "\n" not in said[0] and "within the 10% by which two medians may differ" in said[0]
    assert all(len(line) <= 100 for line in measure.lines.wrap(said[0]).splitlines())
    same = serving.unflagged_less_time([2, 4], {2: timing(3.092), 4: timing(3.088)}, [[], []])  # a scratch run
    assert "(3.088 vs 3.092 ms, 0.1% less)" in same[0], same  # not '3.09 vs 3.09 ms, 0% less'
    beyond = serving.unflagged_less_time([64, 128], {64: wide[64], 128: timing(10.0, 10.0, 10.0)}, [[], []])
    assert "20% less" in beyond[0] and "within" not in beyond[0], beyond
    source = "".join("".join(c["source"]) for c in cells())
    assert "serving.sweep_table(batch_sweep, sweep)" in source  # the table's report, with the lines below it
    assert "unflagged_less_time(batch_sweep, sweep, flags_of, skip=repeatable)" in inspect.getsource(sweep_module)
    # learner s13r5h finding 3: 'within the 10%, so not flagged' then 'repeatable, not noise' for one pair: the
    # table's line is left to the pair's one sentence (inversion_lines) where every round shows it
    assert serving.unflagged_less_time([2, 4, 8], sweep, [[], [], []], skip={(2, 4)}) == []
    steady = {2: timing(4.73, 4.7, 4.8), 4: timing(4.35, 4.3, 4.4)}
    assert serving.repeatable_pairs([2, 4], steady) == {(2, 4)}
    assert not any("took less time" in line for line in serving.sweep_table([2, 4], steady)[0])
    mixed = {2: timing(4.73, 4.2, 4.8), 4: timing(4.35, 4.3, 4.4)}  # not in every round: the table says it
    assert serving.repeatable_pairs([2, 4], mixed) == set()
    assert any("not flagged" in line for line in serving.sweep_table([2, 4], mixed)[0])


def test_the_sweep_table_flags_a_larger_batch_that_took_less_time_and_says_a_smaller_lead():
    """serving.sweep_table (issue 51: the table left the notebook's cell), on made-up medians."""
    sweep = {1: timing(1.3, 1.3, 1.3), 2: timing(2.9, 2.9, 2.9), 4: timing(2.8, 2.8, 2.8), 8: timing(2.0, 2.1, 2.0)}
    lines, flags = serving.sweep_table([1, 2, 4, 8], sweep)
    assert lines[0].split() == ["batch", "ms", "per", "batch", "forward", "samples/s", "spread"] and len(flags) == 4
    assert flags[0] == [] and flags[3] and not flags[2]  # 8 took 29 % less than 4: flagged; 4 under 2 by 3 %: not
    assert not any("batch 4 took less time than batch 2" in line for line in lines)  # every round: inversion_lines
    assert all(len(x) <= 100 for line in lines for x in line.splitlines())
    assert serving.forward_twice_line(timing(15.0, 15.1), timing(15.1, 15.2), 64) is None


def cells():
    return json.loads(LAB.read_text())["cells"]


def test_padding_is_read_from_the_unpadded_side_in_the_table_as_in_its_verdict():
    source = inspect.getsource(candidates)  # the candidates' report moved out of the notebook (issue 51)
    assert 'ref.update({f"batch {n}": f"batch {n} padded to {bucket(n)}"' in source
    assert "(eager: padding only adds rows)" in source and "no recompile to avoid" not in source
    assert any("serving.read_candidates(opt, pad_sizes=pad_sizes" in "".join(c["source"]) for c in cells())


def test_the_cells_after_the_exercises_say_skipped_after_a_restart_instead_of_a_name_error():
    """A learner who restarts the kernel, runs the parameters and setup cells, then an exercise and its check, runs the
    cells after it: each reads the lab's runs, and the setup's Skipper turns it into a 'skipped' line."""
    code = [(i, "".join(c["source"])) for i, c in enumerate(cells()) if c["cell_type"] == "code"]
    setup = code[0][1] + "\n" + code[1][1]
    assert "skip_cells_needing(serving.MEASURED_NAMES" in setup
    first_exercise = next(i for i, s in code if "### BEGIN SOLUTION" in s)
    namespace = dict.fromkeys(names_bound(setup))
    namespace.update(dict.fromkeys(n for _, s in code if "### BEGIN SOLUTION" in s for n in names_bound(s)))
    namespace.update(dict.fromkeys(dir(__builtins__)))
    after = [s for i, s in code if i > first_exercise and "### BEGIN SOLUTION" not in s
             and not s.lstrip().startswith("check(")]
    uses = [s for s in after if names_used(s) & serving.MEASURED_NAMES]
    assert len(uses) >= 3  # the exercises' own runs (batcher, broken, grid), then the record and the summary
    for source in uses:
        replaced = Skipper(serving.MEASURED_NAMES, serving.RESTART_REASON, namespace, serving.RESTART_HEAD).source(source)
        out = {}
        exec(replaced.replace("print(", "said = (", 1), {}, out)  # what the cell prints instead
        assert out["said"].startswith("skipped: this kernel has not run the sections above"), replaced[:200]
        assert all(len(line) <= 100 for line in out["said"].splitlines())
    full = dict(namespace, **dict.fromkeys(serving.MEASURED_NAMES))  # the notebook run from the top: nothing skipped
    assert all(Skipper(serving.MEASURED_NAMES, "", full).source(s) == s for s in uses)


def test_a_widened_allowance_names_the_claims_cost_beside_the_one_tested():
    """Learner s15r9h: the cell said 'a cost of 10 %', the line 'less than the 15% the claim allows'."""
    noisy = measure.decide([0.90, 0.99, 0.93, 0.97, 0.95, 0.92, 0.98], claim="static vs dynamic=True torch.compile",
                           expected="static no slower", no_worse_than=0.10, timed=False)
    tested = 1 / noisy.holds_from - 1
    assert noisy.verdict == measure.HOLDS and noisy.high < 1 and f"{tested:.0%}" != "10%"
    said = serving.allowance_outcome(noisy, "static", 0.10)
    assert f"less than the {tested:.0%} these pairs can resolve (the claim allows 10%;" in said
    assert "the claim allows 10%" in serving.allowed_cost(noisy, "static", 0.10)


def test_a_no_worse_than_verdict_that_holds_below_1_says_the_cost_is_within_the_allowance():
    """Learner s11h finding 5: 'static vs dynamic=True: 0.98x (range 0.97-0.999) -> holds', static slower every round."""
    slower = measure.decide([0.97, 0.98, 0.975, 0.985, 0.99], claim="static vs dynamic=True torch.compile",
                            expected="static no slower", no_worse_than=0.10, timed=False)
    assert slower.verdict == measure.HOLDS and slower.high < 1
    said = serving.allowed_cost(slower, "static")
    assert "static was slower here" in said and "less than the 10% the claim allows" in said
    # learner s11r2h finding 10: the line leads with the plain reading and prints no 4-digit range end
    # one figure, one sentence: '2% slower' beside '0.98x' was the same figure twice
    assert serving.allowance_outcome(slower, "static") == ("0.98x (range 0.97 to 0.99) -> holds: static slower in "
                                                           "every pair, but by less than the 10% the claim allows")
    assert serving.allowance_outcome(slower, "static", 0.10) == serving.allowance_outcome(slower, "static")
    level = measure.decide([0.97, 1.02, 0.99, 1.01, 1.0], claim="c", expected="e", no_worse_than=0.10, timed=False)
    assert serving.allowed_cost(level, "static") == ""  # the range reaches 1: not slower here
    assert serving.allowance_outcome(level, "static") == measure.printed_outcome(level)
    near = measure.decide([0.97, 0.98, 0.975, 0.9997, 0.99, 0.985], claim="c", expected="e", no_worse_than=0.10,
                          timed=False)
    assert near.high < 1 and "to just below 1)" in serving.allowance_outcome(near, "static")
    faster = measure.decide([1.2, 1.22, 1.25, 1.21, 1.23], claim="c", expected="e", timed=False)
    assert serving.allowed_cost(faster, "static") == ""
    assert 'allowance_outcome(static_vs_dynamic, "static", STATIC_COST)' in inspect.getsource(candidates)


def test_the_prose_gives_theory_for_compile_against_bf16_and_for_keras_against_torch_eager():
    """Learner s11h findings 6 and 7: compile's small gain unexplained; TF eager 1.6x faster than torch eager."""
    prose = " ".join(next("".join(c["source"]) for c in cells() if c.get("id") == "3b68aaff").split())
    assert "compiling leaves as it is" in prose and "halving the bytes every multiply reads" in prose
    assert "Keras's eager time is not compared with torch's" in prose and "oneDNN" in prose


def test_the_grid_and_the_candidates_table_are_followed_by_a_short_take_away_and_details_come_last():
    """Learner s13r5h 'what would make it a 5': a 3-line take-away after the grid and after the optimisation table;
    finding 11: the TF section's prose could be half as long."""
    for first in ("How to read the curves.", "What each candidate can gain, in theory"):  # learner s15r9h: not "why less"
        prose = next("".join(c["source"]) for c in cells() if c["cell_type"] == "markdown" and first in "".join(c["source"]))
        assert prose.startswith("> **Take away.**") and prose.index("**Details") > prose.index("> **Take away.**")
        take_away = [line for line in prose.splitlines() if line.startswith(">")]
        ours = prose.split("## Exercises")[0].split("### TensorFlow")[0]
        assert len(take_away) <= 6 and all(len(line) <= 104 for line in ours.splitlines())
    tf = next("".join(c["source"]) for c in cells() if c.get("id") == "3b68aaff")
    assert len(tf[tf.index("### TensorFlow"):].splitlines()) <= 18  # was 25 lines


def test_the_tables_with_paired_speed_ups_say_they_may_be_read_and_the_grid_prints_each_loads_rates_once():
    """Learner s11h findings 2 and 6: 'read the medians only' above paired ratios; grid rows of 110-115 columns."""
    source = "".join("".join(c["source"]) for c in cells())
    assert source.count(", paired=True)") == 2  # the modes' and TensorFlow's tables; the candidates' below
    assert "noise_line((t.times for t in opt.values()), paired=True)" in inspect.getsource(candidates)
    assert "out.append(rows[0].load_line())" in inspect.getsource(grid) and "serving.grid_table(grid)" in source


def test_the_candidates_report_reads_made_up_timings_in_the_tables_order(tmp_path):
    """serving.read_candidates (issue 51: the report left the notebook's cell): the table, the shares, the baseline's
    three runs, padding and bf16, on fake timings; recorded verdicts go to tmp_path."""
    from lab_utils import conditions, workloads  # noqa: F401  (workloads: the registered names the verdicts use)
    quiet = conditions.Load(seconds=10.0, cores=2, own=1.0, others=0.0, steal=0.0)
    base = timing(15.0, 15.2, 15.1, 15.3, 15.0)
    opt = {"eager fp32 (baseline)": base, "bf16 autocast": timing(8.7, 8.8, 8.7, 8.9, 8.7),
           "channels_last": timing(12.5, 12.6, 12.5, 12.7, 12.4),
           "torch.compile": timing(13.4, 13.5, 13.4, 13.6, 13.4),
           "torch.compile dynamic=True": timing(13.1, 13.2, 13.1, 13.3, 13.1),
           "batch 40": timing(10.2, 10.3, 10.2, 10.3, 10.2), "batch 40 padded to 64": timing(14.4, 14.5, 14.4, 14.5, 14.3)}
    read = serving.read_candidates(opt, pad_sizes=(40,), bucket=lambda n: -(-n // 32) * 32, max_batch=64, device="cpu",
                                   earlier=[("the modes' run", timing(17.9, 18.0, 17.8)),
                                            ("the sweep", timing(17.3, 17.2, 17.4))],
                                   results_dir=tmp_path, load=quiet)
    text = "\n".join(read.lines)
    assert text.splitlines()[0].startswith("candidate") and "batch 40 padded to 64" in text
    assert text.splitlines()[0].split()[1] == "requests"  # learner s13r5h: a "batch" column read 40 for 64 rows
    flat = " ".join(text.split())
    assert "-> holds: static slower in every pair, but by less than the 10% the claim allows" in flat
    # one quantity, one figure: the earlier runs' timings of the same forward are said by their gap only
    assert ("the baseline, the batch-64 forward: 15.10 ms, the table's figure; the modes' run and the sweep timed it "
            "too, all within 19% of each other (runs minutes apart may differ by 25%)") in flat
    assert "17.90" not in flat and "17.30" not in flat
    assert set(read.shares) == {"channels_last", "torch.compile", "torch.compile dynamic=True"}
    assert 40 in read.pad_verdicts and read.bf16_verdict is not None and "fp16 autocast and CUDA graphs" in text
    assert set(read.flags) == set(opt) and read.speedups["batch 40"] > 1.3
    assert all(len(x) <= 100 for x in text.splitlines())


def test_the_five_percent_rule_is_read_before_the_output_it_decides():
    """Learner s12r3h finding 4: '1.05x (range 1.05-1.06) -> not distinguishable here' printed, its 5 % rule came
    only in the markdown after the output."""
    nb = cells()
    rule = next(i for i, c in enumerate(nb) if c["cell_type"] == "markdown" and "within 5 % of it" in " ".join("".join(c["source"]).split()))
    shares = next(i for i, c in enumerate(nb) if c["cell_type"] == "code" and "read_candidates(" in "".join(c["source"]))
    assert rule < shares


def test_the_summarys_flag_sits_on_the_capacity_line_alone():
    """Learner s12r3h finding 6: '(flagged above)' hung under two lines, batch-1's rate and the dynamic batcher's."""
    source = next("".join(c["source"]) for c in cells() if c.get("id") == "4e0247d2")
    call = source[source.index('print(measure.flagged(f"  batch-1 serving\'s capacity: '):]
    call = call[:call.index("capacity_flags + capacity_twice")]
    assert "\\n" not in call and "p99" not in call
    assert measure.flagged("  batch-1 serving answered about 638 requests/s", ["(flagged above)"]).count("\n") == 0


def test_the_grid_says_how_few_requests_each_p99_rests_on():
    """Learner s12r3h finding 5: p99 from ~110 requests per round (its one or two slowest), never said."""
    from types import SimpleNamespace as NS
    grid_ = {("batch-1", "low"): NS(runs=(NS(requests=108), NS(requests=112))),
             ("max_wait=0ms", "low"): NS(runs=(NS(requests=108), NS(requests=112))),
             ("batch-1", "high"): NS(runs=(NS(requests=598), NS(requests=604)))}
    line = " ".join(serving.p99_depth_line(grid_, 0.4).split())
    assert "about 110 requests per round at the low load (its 2 slowest)" in line
    assert "about 601 requests per round at the high load (its 7 slowest)" in line and "longer than 0.4 s" in line
    assert all(len(x) <= 100 for x in serving.p99_depth_line(grid_, 0.4).splitlines())
    assert "serving.p99_depth_line(grid, run_s)" in "".join("".join(c["source"]) for c in cells())


def test_batch_1_at_the_high_load_reads_its_backlog_and_its_capacity_a_second_time_only_when_saturated():
    """Cell 39's report of batch-1 at the high load, moved to lab_utils (issue 51: a cell shows the lesson)."""
    from types import SimpleNamespace as NS
    sat = NS(arrived_rps=1494, offered_rps=1512, achieved_rps=603, saturated=True, p99_ms=419, spread_rps=0.12)
    lines, twice = serving.batch1_high_lines(638, 0.15, sat, 1512, 0.4)
    text = " ".join(" ".join(lines).split())
    assert "offered 1512/s it answered 603/s (saturated: True), p99 419 ms" in text
    assert "its queue grew by about 356 requests over the 0.4 s run" in text
    assert "its capacity measured a second time, against the bursts' 638/s: they agree: 6% apart" \
        in text and not twice
    kept = NS(arrived_rps=600, offered_rps=610, achieved_rps=598, saturated=False, p99_ms=9, spread_rps=0.05)
    lines, twice = serving.batch1_high_lines(638, 0.15, kept, 610, 0.4)
    assert len(lines) == 1 and "queue grew" not in lines[0] and "twice" not in lines[0] and twice == []
    far = NS(arrived_rps=1494, offered_rps=1512, achieved_rps=200, saturated=True, p99_ms=900, spread_rps=0.02)
    assert serving.batch1_high_lines(638, 0.02, far, 1512, 0.4)[1]  # the two capacities contradict: flagged
    assert all(len(x) <= 100 for line in lines for x in line.splitlines())


def test_the_knee_line_places_max_batch_against_the_knee():
    """Learner s13r5h finding 4: the knee at 64 = max_batch, with no word linking the two."""
    source = "".join("".join(c["source"]) for c in cells())
    assert "at_knee = \"that batch\" if knee == max_batch else" in source and "is {at_knee}" in source


def test_the_modes_table_says_why_its_medians_and_its_paired_speed_up_disagree():
    """Learner s13r7h finding 1: no_grad 1.881 vs train 2.141 ms (14 % apart) beside a '1.00x' speed-up, explained
    only 20 cells later; a line under the table now says which figure to read and why, where the two disagree."""
    apart = {1: {"train mode": timing(2.0, 2.6, 1.9, 2.2), "no_grad": timing(2.0, 2.6, 1.9, 1.8)}}
    from lab_utils import conditions
    quiet = conditions.Load(seconds=1.0, cores=2, own=1.0, others=0.0, steal=0.0)
    line = serving.medians_apart_line(apart, quiet)
    busy = conditions.Load(seconds=1.0, cores=2, own=1.0, others=1.5, steal=0.0)
    assert serving.medians_apart_line(apart, busy) is None  # the column reads n/m there: no figure to prefer
    assert "batch 1 no_grad: 1.08x from the medians, 1.00x paired" in " ".join(line.split())
    assert "read the speed-up column" in line and all(len(x) <= 100 for x in line.splitlines())
    alike = {64: {"train mode": timing(16.0, 16.2, 16.1), "no_grad": timing(15.9, 16.1, 16.0)}}
    assert serving.medians_apart_line(alike, quiet) is None
    source = "".join(cells()[9]["source"])
    assert "serving.medians_apart_line(mode_timings, mode_load)" in source


def test_channels_last_is_read_against_the_image_layers_share_of_the_time():
    """Learner s13r7h finding 6: 'channels_last can gain at most the convolutions' share' with that share unprinted."""
    layers = {"conv2d 1->16": {64: timing(3.0)}, "relu #1": {64: timing(1.0)}, "flatten #1": {64: timing(0.0)},
              "dense 1568x2048": {64: timing(6.0)}}
    line = " ".join(serving.conv_share_line(layers, 64, 1.25).split())
    assert "take 40% of the batch-64 forward's time" in line and "saved 20% of the forward: within that share" in line
    over = serving.conv_share_line(layers, 64, 2.0)  # saved 50 % > 40 %: theory's bound broken
    assert "[!] more than that share" in over and all(len(x) <= 100 for x in over.splitlines())
    assert "not read here" in serving.conv_share_line(layers, 64, None)
    assert "serving.conv_share_line(" in "".join(cells()[31]["source"])


def test_the_demos_arrival_count_is_set_against_the_count_expected():
    """Learner s13r7h finding 5: '# about 40 requests' beside 101 arrived, and 101 against about 124 expected left to
    the learner; the line prints the expected count and its square-root scatter."""
    source = "".join(cells()[16]["source"])
    assert "were expected, give or take {(demo_rate * demo_s) ** 0.5:.0f}" in source
    assert "about 40 requests" not in "".join(cells()[15]["source"])


def test_a_candidate_the_table_read_is_not_taken_for_refused():
    """Learner s13r8h finding 1: the notebook asked `"channels_last" in read.refused`, true on every run (each
    candidate has an entry, empty when read), so the share line always said channels_last was not read."""
    read = serving.CandidatesRead(speedups={"channels_last": 1.21, "bf16 autocast": 1.7},
                                  refused={"channels_last": [], "bf16 autocast": ["not measurable here: busy"]})
    assert read.speedup_read("channels_last") == 1.21
    assert read.speedup_read("bf16 autocast") is None and read.speedup_read("torch.compile") is None
    source = next("".join(c["source"]) for c in cells() if "conv_share_line(" in "".join(c["source"]))
    assert 'read.speedup_read("channels_last")' in source and "in read.refused" not in source


def test_the_headline_cell_prints_the_comparisons_outcome_first():
    """Learner s15r9h: the headline cell's one outcome came last, under 5 lines of figures: it leads now."""
    source = next("".join(c["source"]) for c in cells() if "headline setting" in "".join(c["source"]))
    assert source.index("serving.summary_lines(") < source.index('f"headline setting:')
    assert source.index("serving.summary_lines(") < source.index("serving.batch1_high_lines(")
