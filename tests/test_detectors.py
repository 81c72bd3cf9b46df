"""Each `[!]` detector: a planted impossible figure is flagged, a sound one is not."""
import math

import pytest

from lab_utils import detectors, measure, report


def test_speedup_above_device_count():
    assert detectors.is_impossible(detectors.above_device_count(2.3, 2)[0])  # 115 %: impossible for the same work
    assert not detectors.above_device_count(1.8, 2)
    assert not detectors.above_device_count(None, 2)
    assert detectors.is_impossible(measure.plausibility(speedup=2.3, devices=2)[0])


def test_a_speedup_just_over_the_device_count_is_noise_not_impossible():
    """Issue 52: lab 10 flagged 2.01x (a ratio of two medians, 101 %) and lab 09 one round of 2.18x on 2 workers as
    impossible; lab 00's rule makes noise a note. Within ABOVE_100_NOISE it is read as about 100 %."""
    for speedup in (2.01, 2.05, 2.18, 2.2):
        said = detectors.above_device_count(speedup, 2)
        assert len(said) == 1 and not detectors.is_impossible(said[0]) and "about 100 %" in said[0], said
    assert detectors.is_impossible(detectors.above_device_count(2.21, 2)[0])
    assert detectors.is_impossible(detectors.above_device_count(3.42, 2)[0])  # lab 00 under a 1-CPU quota
    assert "[!]" not in measure.flagged("2 workers", measure.plausibility(speedup=2.05, devices=2))


def test_a_slow_speedup_is_not_a_flag_and_noise_is_no_warning_at_all():
    assert measure.plausibility(speedup=0.4, devices=2) == []
    with pytest.raises(TypeError):
        measure.plausibility(spread=0.9)  # noise is one line per table (detectors.noise_line), not a warning


def test_degenerate_fit():
    assert detectors.degenerate_fit(-1e-12) and detectors.degenerate_fit(0.0) and detectors.degenerate_fit(float("nan"))
    assert not detectors.degenerate_fit(1e-10)


def test_allreduce_fit_refuses_a_negative_slope():
    sizes = [4096, 65536, 1 << 20]
    fit = report.fit_allreduce(sizes, [6.2e-3, 5e-3, 3.7e-3], 2)  # larger messages faster: no bandwidth here
    assert fit.flags and math.isinf(fit.bus_bandwidth) and "not measurable" in fit.describe()
    truth = report.AllReduceFit(50e-6, 2e9)
    sound = report.fit_allreduce(sizes, [truth.seconds(n, 2) for n in sizes], 2)
    assert not sound.flags and "GB/s" in sound.describe()


def test_more_work_less_time():
    assert detectors.more_work_less_time(1, 2e-3, 2, 1e-3)
    assert not detectors.more_work_less_time(1, 1e-3, 2, 1.5e-3)
    assert not detectors.more_work_less_time(1, 1e-3, 2, 0.99e-3, tolerance=0.05)  # within the tolerance
    assert report.batch_time_flags(1, 2e-3, 2, 1e-3)


def test_part_longer_than_whole():
    flags = detectors.part_longer_than_whole(3e-3, 2e-3, part="a forward", whole="the step")
    assert flags and detectors.impossible(flags) == flags and "; " not in flags[0]
    assert not detectors.part_longer_than_whole(1e-3, 2e-3, part="a forward", whole="the step")
    # medians 10 % apart whose repeats overlap (spreads 30 %): noise, not a contradiction
    assert not detectors.part_longer_than_whole(2.2e-3, 2e-3, part="a", whole="b", part_spread=0.3, whole_spread=0.3)


def test_saturated():
    assert detectors.saturated(200, 120)
    assert not detectors.saturated(200, 198)


def test_reverses_theory():
    reversed_ = measure.decide([0.5] * 5, claim="c", expected="A faster")
    holds = measure.decide([2.0] * 5, claim="c", expected="A faster")
    assert detectors.reverses_theory(reversed_) and not detectors.reverses_theory(holds)


def test_a_claim_that_holds_in_one_run_and_reverses_in_another_is_flagged():
    warnings = detectors.flipped(["holds", "not distinguishable here", "reversed"])
    assert len(warnings) == 1 and detectors.is_impossible(warnings[0])
    assert detectors.flipped([{"verdict": "reversed"}, {"verdict": "holds"}])
    assert not detectors.flipped(["holds", "holds", "not distinguishable here"])
    assert not detectors.flipped(["reversed", "not distinguishable here"])
    assert not detectors.flipped([])


def test_noise_is_one_line_per_table():
    printed = detectors.noise_line([0.1, 0.3, 0.5, None, 0.2])
    line = " ".join(printed.split())  # one line, wrapped at 100 columns when printed: its words read joined
    assert line.startswith("noise: 2 of 4 medians spread more than 25 %")  # learner s8f: no '4 medians with a spread (1 ...'
    assert line.endswith("read the medians only; 1 more median recorded no spread (not counted)"), line
    assert "read the medians only" in line
    assert detectors.noise_line([0.1, 0.3]).startswith("noise: 1 of 2 medians spread")  # all counted: nothing to add
    assert detectors.noise_line(s for s in (0.1, 0.3, None)).startswith("noise: 1 of 2 medians spread more")
    assert "the widest 50 %" in line  # named: lab 13's 'spread 2262 %' beside a row read as impossible
    assert detectors.noise_line([0.1, 0.2]) == ""
    # counted as the tables print them (learner s12r4e, lab 05 finding 1): 25.4 % prints '25%', not more than 25 %
    assert detectors.noise_line([0.254, 0.3, 0.4]).startswith("noise: 2 of 3 medians spread more than 25 %")
    assert detectors.noise_line([0.254, 0.1]) == "" and detectors.noise_line([0.256]).startswith("noise: 1 of 1")
    # learner s11h: 'read the medians only' above a column of paired speed-ups: may I read 1.10x? (lab 09)
    paired = " ".join(detectors.noise_line([0.1, 0.48], paired=True).split())
    assert "read the medians and the speed-ups only (medians of per-round ratios" in paired
    assert "speed-ups" not in detectors.noise_line([0.1, 0.48])
    # learner s6B, lab 06: "5841%" read as a bug; above 1000 % a spread is a bound, and the noise line says why
    assert detectors.spread_text(58.41) == ">1000%" and detectors.spread_text(0.5) == "50%"
    wide = " ".join(detectors.noise_line([58.41, 0.1]).split())
    assert "the widest >1000 %" in wide and "the slowest repeat took over 11x the fastest" in wide and "5841" not in wide
    burst = detectors.noise_line([9.94, 0.1])  # lab 10's all-reduce sweep (learner s10l, finding 6): say what 994 % is
    assert "above 100 %, the slowest repeat took over 10.9x the fastest: something held it up" in " ".join(burst.split())
    # learner s12r4f: '109 %: one repeat took over 1.09x its median' read as a 9 % slowdown: the bound is 2.09x the fastest
    assert "the slowest repeat took over 2.09x the fastest" in " ".join(detectors.noise_line([1.09, 0.1]).split())
    assert "took over" not in detectors.noise_line([0.97, 0.1])  # under 100 %: no repeat need have taken twice the median


def test_a_table_whose_rows_give_their_repeats_gets_a_noise_line_only_where_a_median_is_uncertain():
    # learners read 'noise: N of M medians spread more than 25 %' under nearly every quiet table as 'unreliable':
    # one slow repeat of 10 widens max - min past 25 %, but moves neither the median nor the middle half
    one_slow = [0.040, 0.041, 0.039, 0.040, 0.042, 0.040, 0.041, 0.040, 0.039, 0.080]  # range 100 %
    steady = [0.030, 0.031, 0.030, 0.029, 0.030, 0.031, 0.030, 0.030, 0.029, 0.030]
    assert detectors.noise_line([0.1, 1.0]) != ""  # the same table given its (max - min) spreads: the old line
    assert detectors.noise_line([one_slow, steady]) == ""
    assert detectors.noise_line(t for t in (tuple(one_slow), steady)) == ""  # tuples (Timing.times), a generator
    varied = [0.020, 0.030, 0.040, 0.050, 0.060, 0.045, 0.025, 0.055, 0.035, 0.040]  # middle half 44 % of median
    line = " ".join(detectors.noise_line([one_slow, steady, varied]).split())
    assert line.startswith("noise: 1 of 3 medians are uncertain: the middle half of their repeats spans more than "
                           "25 % of the median (the widest 44 %)"), line
    assert "read those medians as rough" in line and "a few slow repeats, which a median ignores" not in line
    assert detectors.kind_of(detectors.noise_line([varied])) is detectors.Kind.NOISE
    assert "speed-ups (medians of per-round ratios) are steadier" in " ".join(
        detectors.noise_line([varied], paired=True).split())
    # fewer than 4 repeats have no middle half: the table falls back to the (max - min) spread
    assert detectors.noise_line([[0.04, 0.08], steady]).startswith("noise: 1 of 2 medians spread more than 25 %")


def test_the_noise_line_wraps_at_100_columns_and_stays_a_noise_flag():
    """Learners (issue 51): noise lines of 150-250 characters in most labs; printed as they come, they fit now."""
    burst = detectors.noise_line([9.94, 0.1, None], "rows' medians")
    assert detectors.kind_of(burst) is detectors.Kind.NOISE and "\n    " in burst
    assert max(len(line) for line in burst.splitlines()) <= 100, burst
    assert measure.lines.wrap(burst) == burst  # a lab that wraps it again prints the same lines


def test_flag_count_reads_lines():
    assert detectors.count("a\n  [!] x\nb [!] y\n") == 2


def test_contradicting_figures():
    assert "contradict each other" in detectors.contradicts_reference(900, 30000)[0]
    assert not detectors.contradicts_reference(30000, 33000) and not detectors.contradicts_reference(None, 33000)
    assert "7.3x apart" in detectors.disagree(2.69e-3, 0.37e-3)[0] and not detectors.disagree(0.5e-3, 0.37e-3)


def test_only_detector_warnings_are_flags_the_rest_are_plain_notes():
    impossible = (detectors.above_device_count(2.3, 2) + detectors.degenerate_fit(-1.0)
                  + detectors.more_work_less_time(1, 2, 2, 1) + detectors.saturated(200, 100)
                  + detectors.contradicts_reference(900, 30000) + detectors.disagree(3, 1)
                  + detectors.reverses_theory(measure.decide([0.5] * 5, claim="c", expected="A faster")))
    assert len(impossible) == 7 and all(detectors.is_impossible(w) for w in impossible)
    caveats = measure.plausibility(oversubscribed=True, other_framework="TensorFlow") + [
        "saturated", "2 of 3 runs diverged", "the load generator sent requests 600 ms late (median)"]
    assert not any(detectors.is_impossible(w) for w in caveats)
    row_flags = caveats[:1] + impossible[:1] + [detectors.Flag(detectors.Kind.NOISE, "repeats spread by 40 %: noisy")]
    assert detectors.impossible(row_flags) == impossible[:1] and detectors.notes(row_flags) == caveats[:1]
    assert detectors.impossible("; ".join(impossible)) == []  # joined text is one plain string: a note, never split
    text = measure.flagged("fig", caveats)
    assert "[!]" not in text and "\n    note: " in text  # too long for the figure's line: under it (learner s9i)
    assert measure.flagged("fig", caveats[-1:]) == f"fig  (note: {caveats[-1]})"  # a short one stays beside it
    assert measure.flagged("fig", caveats + impossible[:1]).count("[!]") == 1


def test_a_table_of_impossible_rows_gets_one_flag_line():
    per_row = [[], detectors.more_work_less_time(2048, 3e-3, 16384, 2e-4), [],
               detectors.more_work_less_time(4096, 3e-3, 16384, 2e-4)]
    line = detectors.one_line(per_row, ["1,024", "2,048", "3,072", "4,096"], "sizes")
    assert len(line) == 1 and line[0].startswith("sizes 2,048 (marked *)") and detectors.is_impossible(line[0])
    assert line[0].endswith("(and 1 more like it, marked * too: 4,096)")
    assert detectors.one_line([[], []], ["a", "b"]) == []


def test_two_kinds_of_impossible_rows_get_one_line_each_and_the_rows_a_star():
    above = detectors.above_device_count(2.3, 2)
    less = detectors.more_work_less_time(2, 5e-3, 4, 4e-3, what="images")
    per_row = [above, [], less, above + less, tuple(above)]
    lines = detectors.one_line(per_row, ["a", "b", "c", "d", "e"])
    assert len(lines) == 2
    assert lines[0].startswith("rows a (marked *)") and "2 more like it, marked * too: d, e)" in lines[0]
    assert detectors.ABOVE_100 in lines[0]
    assert lines[1].startswith("rows c (marked *)") and detectors.LESS_TIME in lines[1] and "too: d)" in lines[1]
    assert [detectors.marked(f) for f in per_row] == [" *", "", " *", " *", " *"]
    assert detectors.marked(["more ranks or threads than cores: oversubscribed"]) == ""


def test_the_record_table_flags_only_impossible_rows():
    row = dict(lab="09", framework="torch", strategy="serving", variant="batch-1", workload="w", world_size=1,
               device="cpu", batch_size=1, samples_per_s=100.0, wall_s=1.0, repeats=3, spread=0.5)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        text = measure.record([measure.Result(**row, flags="saturated"),
                               measure.Result(**{**row, "variant": "x"}, flags=detectors.saturated(200, 100)[0])], d)
    assert text.count("[!]") == 1 and "note: saturated" in text and "noise: 2 of 2" in text


def test_a_flag_is_said_in_full_once_and_points_back_after():
    measure.forget()
    above = detectors.above_device_count(2.3, 2)
    first = measure.flagged("speedup 2.30x", above)
    again = measure.flagged("summary: 2.30x", above)
    assert first.count("[!]") == 1 and "[!]" not in again and detectors.AS_ABOVE in again
    table = measure.table_lines([above, []], ["2 ranks", "1 rank"])
    assert table == [f"rows 2 ranks (marked *): {detectors.AS_ABOVE}"]
    other = detectors.more_work_less_time(2, 5e-3, 4, 4e-3, what="images")
    assert measure.table_lines([other], ["batch 4"])[0].startswith("[!] rows batch 4 (marked *)")
    assert detectors.flag_text("a", "b") == "[!] a; b" and detectors.count(f"x\n{detectors.flag_text('a')}") == 1
    measure.forget()
    assert measure.flagged("speedup 2.10x", above).count("[!]") == 1


def test_one_quantity_measured_twice_is_flagged_only_beyond_both_spreads():
    from lab_utils import detectors

    assert detectors.measured_twice(100.0, 0.05, 108.0, 0.05, what="x", first_name="lab 01", second_name="lab 03") == []
    # 1.5x apart, spreads of 5 %: the ranges 97.5-102.5 and 146-154 do not meet
    said = detectors.measured_twice(100.0, 0.05, 150.0, 0.05, what="1 process x 1 thread", first_name="lab 01",
                                    second_name="lab 03")
    assert len(said) == 1 and detectors.is_impossible(said[0]) and "1.50x apart" in said[0] and "; " not in said[0]
    assert "lab 01" in said[0] and "lab 03" in said[0]
    # the same 1.5x, but repeats that spread 60 % each: their ranges meet (70-130 and 105-195), nothing said
    assert detectors.measured_twice(100.0, 0.6, 150.0, 0.6, what="x", first_name="a", second_name="b") == []
    assert detectors.measured_twice(100.0, None, 150.0, None, what="x", first_name="a", second_name="b")
    assert detectors.measured_twice(0.0, None, 150.0, None, what="x", first_name="a", second_name="b") == []


def test_a_figure_measured_under_another_condition_is_a_note_up_to_twice_apart():
    """Lab 05's loop in a launched process (OpenMP threads sleep at once) ran 0.60x Lab 01's: its lab predicts a gap
    of no fixed size, so the pair is a note naming the condition; beyond 2x no condition explains it: [!]."""
    why = "launched: its idle OpenMP threads sleep at once"
    said = detectors.measured_twice(28886, 0.03, 17256, 0.03, what="x", first_name="lab 01", second_name="lab 05",
                                    condition=why)
    assert len(said) == 1 and not detectors.is_impossible(said[0]) and why in said[0] and "1.67x apart" in said[0]
    far = detectors.measured_twice(28886, 0.03, 13000, 0.03, what="x", first_name="a", second_name="b", condition=why)
    assert len(far) == 1 and detectors.is_impossible(far[0]) and why in far[0] and "more than 2x" in far[0]
    assert detectors.measured_twice(100.0, 0.05, 110.0, 0.05, what="x", first_name="a", second_name="b",
                                    condition=why) == []  # within 25 %: they agree, whatever the condition
    marked = detectors.condition(why)
    assert detectors.notes([marked]) == [marked] and detectors.conditions_of([marked, "other"]) == [marked]
    assert not detectors.is_impossible(marked)


# --- issue 46: the load artefacts a busy machine printed as findings, each made here and flagged -----------------

def test_lab_03_two_threads_at_a_quarter_of_one_thread_flag_the_summary_built_on_them(monkeypatch):
    # "2 DDP ranks 0.90x one thread, 3.95x one process with 2 threads": the 2 threads ran at 0.23x one thread
    monkeypatch.setattr(measure.plausible, "measured_cause", lambda *a, **k: None)  # nothing measured: a [!]
    rates = {"1 process x 1 thread": 1000.0, "2 ranks, DDP": 900.0, "1 process x 2 threads": 230.0}
    base = rates["1 process x 1 thread"]
    flags = {name: measure.plausibility(speedup=rate / base, devices=2, threads=2 if "threads" in name else None)
             for name, rate in rates.items() if name != "1 process x 1 thread"}
    assert flags["2 ranks, DDP"] == []  # 0.90x for two ranks is slow, not impossible
    said = flags["1 process x 2 threads"]
    assert said and detectors.impossible(said) == said and "0.23x one thread" in said[0] and "; " not in said[0]
    measure.forget()
    line = measure.flagged(f"2 DDP ranks {900 / base:.2f}x one thread, {900 / 230:.2f}x one process with 2 threads",
                           flags["2 ranks, DDP"] + flags["1 process x 2 threads"])
    assert "3.91x one process with 2 threads" in line and detectors.FLAG in line
    assert not measure.plausibility(speedup=0.6, devices=2, threads=2)  # a slow split, not a wait


def test_lab_02_one_device_on_two_threads_at_005x_is_flagged_with_the_measured_cause():
    said = detectors.more_threads_slower(0.05, 2, cause="other programs used 1.7 of 2 cores",
                                         what="one device on one thread")
    assert said and "0.05x one device on one thread" in said[0] and "other programs used 1.7 of 2 cores" in said[0]
    assert "noise" not in said[0]  # a measured cause replaces the usual suspects
    assert "noise" in detectors.more_threads_slower(0.05, 2)[0]  # nothing measured: the usual suspects
    # issue 51: the measured load explains the wait, so it is a note, not a `[!]`; with nothing measured it is one
    assert not detectors.impossible(said) and detectors.impossible(detectors.more_threads_slower(0.05, 2))
    assert not detectors.more_threads_slower(0.9, 2) and not detectors.more_threads_slower(0.3, 1)


def test_lab_02_dataparallel_at_117x_against_068_077x_in_the_sweep_is_a_contradiction():
    said = detectors.outside_neighbours(1.17, [0.68, 0.74, 0.77], what="DataParallel", where="at batch 256 (launched)")
    assert said and detectors.CONTRADICT in said[0] and detectors.impossible(said) == said
    assert not detectors.outside_neighbours(0.85, [0.68, 0.74, 0.77], what="DataParallel", where="at batch 256")
    assert detectors.outside_neighbours(0.3, [0.68, 0.77], what="DataParallel", where="at batch 256")


def test_lab_02_neighbours_contradiction_names_the_measured_quota_not_a_guess():
    # issue 46, under a real 1-CPU quota: "DataParallel 1.06x ... against 0.69x" blamed "the machine was busy" only
    cause = "this notebook may use 1.0 CPU (cgroup quota), less than the 2 devices it ran side by side"
    said = detectors.outside_neighbours(1.06, [0.69], what="DataParallel", where="at batch 256", cause=cause)
    assert said and "(measured while this notebook may use 1.0 CPU (cgroup quota), less than the 2 devices" in said[0]
    assert "; " not in said[0] and detectors.impossible(said) == said
    assert "the machine was busy" in detectors.outside_neighbours(1.06, [0.69], what="a", where="b")[0]  # none measured


def test_lab_09_batch_1_serving_above_its_own_forward_bound_is_flagged():
    # batch-1 serving answered 41 requests/s; the forward pass alone allows 28/s
    said = detectors.above_bound(41, 28, what="batch-1 serving answered", bound_name="what the forward pass alone allows")
    assert said and detectors.ABOVE_BOUND in said[0] and "1.46x" in said[0] and detectors.impossible(said) == said
    assert not detectors.above_bound(29, 28, what="a", bound_name="b")  # within 10 %: the two medians' noise
    assert not detectors.above_bound(20, 28, what="a", bound_name="b")


def test_lab_11_slurm_148x_faster_than_launch_is_no_cost_claim_that_holds():
    # "Slurm vs launch": the same work, two launchers; 1.48x faster with the whole range above 1 read "holds ... no
    # cost at all"
    v = measure.decide([1.40, 1.45, 1.48, 1.50, 1.55, 1.47, 1.52, 1.46], claim="Slurm vs launch, steady steps/s",
                       expected="Slurm no more than 10 % slower than launch", no_worse_than=0.10, lab="11",
                       same_work=True)
    assert detectors.same_work_faster(v) and v.verdict == measure.CANNOT_SEE and "no cost" not in v.verdict
    measure.forget()
    text = " ".join(str(v).split())  # printed wrapped at measure.lines.WIDTH
    assert measure.CANNOT_SEE in text and detectors.FLAG in text and detectors.SAME_WORK in text
    sound = measure.decide([1.02, 1.05, 1.03, 1.08, 1.04], claim="Slurm vs launch", expected="Slurm no more than 10 % "
                           "slower", no_worse_than=0.10, lab="11", same_work=True)
    assert not detectors.same_work_faster(sound) and sound.verdict == measure.HOLDS
    assert not detectors.same_work_faster(measure.decide([1.5] * 5, claim="c", expected="A faster"))  # a speed claim
    # DDP 1.5x DataParallel: two strategies, not one started two ways; a win is theirs to have, no flag
    ddp = measure.decide([1.5] * 6, claim="DDP vs DataParallel", expected="DDP no slower", no_worse_than=0.2)
    assert ddp.verdict == measure.HOLDS and detectors.FLAG not in str(ddp)


def test_a_summary_built_on_two_rows_says_their_common_note_once():
    note = "more ranks or threads than cores: oversubscribed, so this is no speed measurement"
    line = measure.flagged("2 DDP ranks 1.11x one thread, 4.44x one process with 2 threads", [note, note])
    assert line.count(note) == 1


def test_whether_a_warning_is_impossible_follows_its_kind_not_its_wording():
    above = detectors.above_device_count(2.3, 2)[0]
    reworded = detectors.Flag(above.kind, "two ranks beat two devices' worth of work")  # no phrase of the old wording
    assert detectors.is_impossible(reworded) and measure.flagged("x", [reworded]).count("[!]") == 1
    assert measure.table_lines([[reworded]], ["a"]) == [f"rows a (marked *): {detectors.AS_ABOVE}"]  # said above
    measure.forget()
    assert measure.table_lines([[reworded]], ["a"])[0].startswith("[!] rows a (marked *)")
    assert detectors.one_line([[reworded]], ["a"])[0].kind is above.kind
    assert not detectors.is_impossible(str(above))  # the same words as a plain string: a note
    assert detectors.notes([str(above)]) == [str(above)] and detectors.marked([str(above)]) == ""
    assert detectors.note("busy").kind is detectors.Kind.NOTE and detectors.kind_of("x") is detectors.Kind.NOTE
    assert detectors.Kind.NOISE.severity < detectors.Kind.NOTE.severity < detectors.Kind.CONTRADICT.severity
    with pytest.raises(TypeError, match="detectors.Kind"):
        detectors.Flag("[!]", "text")


def test_a_flag_keeps_its_kind_when_pickled_to_another_process():
    import pickle
    flag = detectors.saturated(200, 100)[0]
    back = pickle.loads(pickle.dumps(flag))
    assert back == flag and back.kind is detectors.Kind.SATURATED and isinstance(back, detectors.Flag)


def test_one_quantity_measured_twice_is_concluded_either_way():
    """Lab 02 printed 'the hot spot measured 1,334 samples/s, the sweep 1,588' with neither a flag nor a conclusion."""
    assert "agree: 19% apart" in detectors.twice_agree(1334, 0.1, 1588, 0.1)
    noisy = detectors.twice_agree(2950, 1.08, 1254, 0.44)  # lab 02 printed "they agree" for these, 135 % apart
    assert noisy.startswith("cannot be compared here: 135% apart") and "agree:" not in noisy, noisy
    assert detectors.twice_agree(1000, 0.05, 2000, 0.05) is None
    assert detectors.measured_twice(1000, 0.05, 2000, 0.05, what="x", first_name="a", second_name="b")


def test_a_fit_that_misses_its_own_points_by_more_than_the_factor_is_flagged():
    assert detectors.fit_misses([1.0, 2.0], [1.0, 1.1], ["a", "b"]) == []  # 1.8x: within the factor
    said = detectors.fit_misses([1.0, 0.004], [1.0, 0.001], ["a", "b"])  # 4x above the line, as in a busy lab 06
    assert len(said) == 1 and detectors.is_impossible(said[0]) and "b 4 ms against 1" in said[0]
    assert detectors.fit_misses([0.0005], [0.002], ["c"])  # below the line by as much is as far off


def test_an_efficiency_just_above_100_percent_is_printed_above_100():
    """A run printed 'efficiency 100%, above 100 %' for 2.004x on 2 devices."""
    said = str(detectors.above_device_count(2.004, 2)[0])
    assert "efficiency 100.2%" in said
    assert "efficiency 100.5%" in str(detectors.above_device_count(2.01, 2)[0])
    assert "efficiency 150%" in str(detectors.above_device_count(3.0, 2)[0])



def test_a_cost_claim_whose_costlier_side_came_out_faster_gets_a_note_not_a_saving():
    """Lab 12 printed 'record on vs off ... 1.14x ... above 1 favours record on' and never said that the record,
    which adds work, cannot make the step faster."""
    faster = measure.decide([1.14, 0.84, 2.62, 1.20, 1.10, 1.30, 0.95], claim="record on vs off",
                            expected="the record costs under 2 %", no_worse_than=0.02, lab="12", extra_work=True)
    measure.forget()
    [said] = detectors.extra_work_faster(faster, measure.MIN_EFFECT)
    assert detectors.kind_of(said) is detectors.Kind.NOTE and "record on ran 1.14x faster" in said
    text = str(faster)
    assert "not a saving" in text and "above 1 means record on was faster, below 1 that it cost time" in text
    assert "favours record on" not in text
    measure.forget()
    cost = measure.decide([0.97, 0.99, 1.01, 0.98, 1.02, 0.96, 1.00], claim="record on vs off",
                          expected="the record costs under 2 %", no_worse_than=0.02, extra_work=True)
    assert detectors.extra_work_faster(cost, measure.MIN_EFFECT) == []  # around 1, or a cost: nothing to explain
    measure.forget()
    plain = measure.decide([1.14, 1.2, 1.1, 1.3, 1.15], claim="DDP vs DataParallel", expected="DDP no slower",
                           no_worse_than=0.2)
    assert detectors.extra_work_faster(plain, measure.MIN_EFFECT) == []  # two strategies: a win is theirs to have
    measure.forget()


def test_threads_that_waited_for_a_busy_machine_read_as_a_note_not_an_impossibility():
    """Learner s6C read lab 10's note '... so this figure is no speed' as a [!]."""
    [said] = detectors.more_threads_slower(0.46, 2, cause="other programs used 1.2 of 2 cores")
    assert detectors.kind_of(said) is detectors.Kind.NOTE and "no speed" not in said
    assert "measures that wait, not what 2 threads can do" in said and "noted, not an impossible figure" in said


def test_a_figure_above_a_model_that_leaves_out_a_cost_in_its_favour_is_a_note():
    """Lab 08 flagged async/sync 2.77x at 1.26x its free-message model as 'above its own upper bound', though the model
    leaves out sync's idle time while the server works, which favours async: a note naming it, not `[!]`."""
    said = detectors.above_model(2.773, 2.204, what="async/sync at x4", model_name="the free-message model",
                                 left_out="sync's idle time while the server works")
    assert len(said) == 1 and not detectors.is_impossible(said[0])
    assert "1.26x the free-message model" in said[0] and "sync's idle time while the server works" in said[0]
    assert detectors.above_model(2.6, 2.204, what="a", model_name="b", left_out="c") == []  # within 25 %
    assert detectors.above_model(1.0, 0.0, what="a", model_name="b", left_out="c") == []


def test_one_quantity_measured_three_times_is_judged_pair_by_pair():
    """Lab 09's batch-64 forward: 26.43 ms (modes), 22.70 ms (sweep), 17.77 ms (candidates). Only the sweep-candidates
    pair was compared (1.28x, flagged) while the widest pair (1.49x) never was: every pair, one rule."""
    three = [("the modes' run", 26.43, 0.05), ("the sweep", 22.70, 0.06), ("the candidates' run", 17.77, 0.05)]
    flags = detectors.measured_several(three, what="the batch-64 forward", unit="ms")
    assert len(flags) == 2 and all(detectors.is_impossible(f) for f in flags)
    assert any("1.49x apart" in f and "the modes' run" in f and "the candidates' run" in f for f in flags)
    assert detectors.several_agree(three) is None
    close = [("a", 20.0, 0.05), ("b", 22.0, 0.05), ("c", 23.0, 0.05)]
    assert detectors.measured_several(close, what="x", unit="ms") == []
    assert detectors.several_agree(close).startswith("the widest pair (a, c): they agree: 15% apart")


def test_lab_02_neighbours_contradiction_says_when_the_measured_load_is_too_small_and_which_figure_is_the_labs():
    # learner s8c: '1.55x ... against 1.00-1.20x ... (measured while other programs used 0.4 of 2 cores)' blamed a
    # load too small to move a ratio 1.29x, and did not say which figure to believe
    cause = "other programs used 0.4 of 2 cores"
    small = detectors.outside_neighbours(1.55, [1.0, 1.2], what="DataParallel", where="at batch 256", cause=cause,
                                         busy_cores=(0.4, 2), lab_figure="the sweep's")
    assert "2 / (2 - 0.4) = 1.25x" in small[0] and "too little to explain the 1.29x gap" in small[0]
    assert "the lab's figures are the sweep's" in small[0] and "; " not in small[0] and detectors.impossible(small) == small
    large = detectors.outside_neighbours(1.55, [1.0, 1.2], what="DataParallel", where="at batch 256", cause=cause,
                                         busy_cores=(1.2, 2))
    assert "2 / (2 - 1.2) = 2.50x" in large[0] and "enough to explain the 1.29x gap" in large[0]
    below = detectors.outside_neighbours(0.6, [1.0, 1.2], what="DataParallel", where="at batch 256", cause=cause,
                                         busy_cores=(0.4, 2))
    assert "the 1.67x gap" in below[0]  # measured below the neighbours: the gap is the lowest one over it


def test_lab_02_neighbours_contradiction_on_a_quiet_run_names_the_load_measured_not_a_busy_machine():
    # a run with 0.2 of 2 cores used by others (below 'busy') printed '(one of the two tables was measured while the
    # machine was busy)', a cause nothing measured
    said = detectors.outside_neighbours(2.14, [0.94, 1.28], what="DataParallel", where="at batch 256",
                                        busy_cores=(0.2, 2))
    assert "measured while other programs used 0.2 of 2 cores" in said[0] and "machine was busy" not in said[0]
    assert "too little to explain the 1.67x gap" in said[0]


def test_a_ratio_built_on_a_median_whose_repeats_spread_beyond_100_percent_carries_a_note():
    # learner s8e, lab 10: one rank's compute of 1.06 ms spread 309 % and became 'communication / compute 114 %' unnoted
    said = detectors.noisy_basis(3.09, "one rank's compute of 1.06 ms")
    assert len(said) == 1 and detectors.notes(said) and not detectors.impossible(said)
    assert "1.06 ms" in str(said[0]) and "309 %" in str(said[0]) and "order of magnitude" in str(said[0])
    assert detectors.noisy_basis(0.31, "x") == [] and detectors.noisy_basis(1.0, "x") == []
    assert detectors.noisy_basis(None, "x") == [] and detectors.noisy_basis(float("nan"), "x") == []


def test_a_figure_measured_twice_prints_as_the_tables_do():
    """Learner s10a, lab 01 cell 42: '[!] ... 3.804e+04 ... by lab 05 and 5.236e+04 by lab 01' where notes print
    5,979: one format for a figure, whichever line carries it."""
    from lab_utils import detectors

    flag = detectors.measured_twice(38040, 0.05, 52356, 0.05, what="the run", first_name="lab 05",
                                    second_name="lab 01")
    assert flag and "38,040 samples/s by lab 05 and 52,356 by lab 01" in str(flag[0]) and "e+0" not in str(flag[0])
    assert detectors.figure_text(5979.2) == "5,979" and detectors.figure_text(0.6812) == "0.6812"


def test_lab_02_neighbours_contradiction_on_a_machine_nobody_else_used_says_so_plainly():
    # learner s10j: 'a mean load that can move a ratio by about 2 / (2 - 0.0) = 1.00x if it all fell on one side: too
    # little to explain the 1.35x gap unless it came in bursts' was unreadable when the load was nil
    said = detectors.outside_neighbours(2.21, [0.79, 1.64], what="DataParallel", where="at batch 256",
                                        busy_cores=(0.02, 2))
    assert "the machine was quiet, other programs using 0.0 of 2 cores, so load does not explain the 1.35x gap" in said[0]
    assert "2 / (2 - 0.0)" not in said[0] and "bursts" not in said[0] and "; " not in said[0]


def test_the_middle_half_line_says_whether_a_wide_spread_is_a_few_slow_repeats():
    # learner s13r5d, labs 04 and 13 finding 1: spreads of 54-366 % on a quiet machine, with nothing saying why; the
    # middle half of the repeats (the quartiles) shows whether a few slow repeats made the spread or all of them vary
    from lab_utils import detectors
    few_slow = [0.040, 0.041, 0.039, 0.040, 0.042, 0.040, 0.041, 0.080]  # spread 100 %, one slow repeat
    line = detectors.middle_half_line({"naive": few_slow, "gpipe M=8": [0.035, 0.036, 0.036, 0.037, 0.035]})
    assert "spans at most" in line and "a few slow repeats, so the medians stand" in line, line
    assert "(naive's)" in line, line  # the widest is named
    varied = detectors.middle_half_line({"naive": [0.020, 0.030, 0.040, 0.050, 0.060, 0.045]})
    assert "vary throughout: read the medians as rough" in varied and "stand" not in varied, varied
    assert detectors.middle_half_line({"naive": [0.04, 0.05]}) == ""  # too few repeats for quartiles
    assert abs(detectors.middle_spread([1.0, 1.0, 1.0, 1.0, 9.0]) - 0.0) < 1e-9  # one outlier moves no quartile


def test_spread_reading_gives_each_word_with_its_one_threshold():
    """Learner s15, lab 10 finding 1: 'rough' at 25 % and a 100 % note beside it; one word per threshold, named."""
    assert detectors.spread_reading(0.74) == "rough (above 25 %)"
    assert detectors.spread_reading(1.01) == "an order of magnitude (above 100 %)"
    assert detectors.spread_reading(0.254) == ""  # prints as 25 %: not above it
    assert detectors.spread_reading(0.2) == "" and detectors.spread_reading(None) == ""
    assert detectors.spread_reading(float("nan")) == ""


def test_a_table_whose_rows_stand_says_so_without_claiming_narrow_spreads():
    """A row with one slow repeat in 10 stands (noise_line says nothing); the fallback line names the middle half,
    not the whole spread, which that slow repeat took past 25 %."""
    rows = [[1.0] * 9 + [3.0], [2.0, 2.1, 1.9, 2.0, 2.05, 1.95]]
    assert detectors.noise_line(rows) == ""
    line = detectors.medians_stand_line()
    assert line.startswith("noise: every median above stands") and "middle half" in line and "25 %" in line
    assert "came from repeats within" not in line
