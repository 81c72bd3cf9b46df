"""Each `[!]` detector: a planted impossible figure is flagged, a sound one is not."""
import math

import pytest

from lab_utils import flags, measure, report


def test_speedup_above_device_count():
    assert flags.above_device_count(2.05, 2)  # 102 %: impossible for the same work
    assert not flags.above_device_count(1.8, 2)
    assert not flags.above_device_count(None, 2)
    assert measure.plausibility(speedup=2.05, devices=2)


def test_a_slow_speedup_is_not_a_flag_and_noise_is_no_warning_at_all():
    assert measure.plausibility(speedup=0.4, devices=2) == []
    with pytest.raises(TypeError):
        measure.plausibility(spread=0.9)  # noise is one line per table (flags.noise_line), not a warning


def test_degenerate_fit():
    assert flags.degenerate_fit(-1e-12) and flags.degenerate_fit(0.0) and flags.degenerate_fit(float("nan"))
    assert not flags.degenerate_fit(1e-10)


def test_allreduce_fit_refuses_a_negative_slope():
    sizes = [4096, 65536, 1 << 20]
    fit = report.fit_allreduce(sizes, [6.2e-3, 5e-3, 3.7e-3], 2)  # larger messages faster: no bandwidth here
    assert fit.flags and math.isinf(fit.bus_bandwidth) and "not measurable" in fit.describe()
    truth = report.AllReduceFit(50e-6, 2e9)
    sound = report.fit_allreduce(sizes, [truth.seconds(n, 2) for n in sizes], 2)
    assert not sound.flags and "GB/s" in sound.describe()


def test_more_work_less_time():
    assert flags.more_work_less_time(1, 2e-3, 2, 1e-3)
    assert not flags.more_work_less_time(1, 1e-3, 2, 1.5e-3)
    assert not flags.more_work_less_time(1, 1e-3, 2, 0.99e-3, tolerance=0.05)  # within the tolerance
    assert report.batch_time_flags(1, 2e-3, 2, 1e-3)


def test_saturated():
    assert flags.saturated(200, 120)
    assert not flags.saturated(200, 198)


def test_reverses_theory():
    reversed_ = measure.decide([0.5] * 5, claim="c", expected="A faster")
    holds = measure.decide([2.0] * 5, claim="c", expected="A faster")
    assert flags.reverses_theory(reversed_) and not flags.reverses_theory(holds)


def test_a_claim_that_holds_in_one_run_and_reverses_in_another_is_flagged():
    warnings = flags.flipped(["holds", "not distinguishable here", "reversed"])
    assert len(warnings) == 1 and flags.is_impossible(warnings[0])
    assert flags.flipped([{"verdict": "reversed"}, {"verdict": "holds"}])
    assert not flags.flipped(["holds", "holds", "not distinguishable here"])
    assert not flags.flipped(["reversed", "not distinguishable here"])
    assert not flags.flipped([])


def test_noise_is_one_line_per_table():
    line = flags.noise_line([0.1, 0.3, 0.5, None, 0.2])
    assert line.startswith("noise: 2 of 4 medians spread more than 25 %") and "read the medians only" in line
    assert flags.noise_line([0.1, 0.2]) == ""
    assert flags.count("a\n  [!] x\nb [!] y\n") == 2


def test_contradicting_figures():
    assert "contradict each other" in flags.contradicts_reference(900, 30000)[0]
    assert not flags.contradicts_reference(30000, 33000) and not flags.contradicts_reference(None, 33000)
    assert "7.3x apart" in flags.disagree(2.69e-3, 0.37e-3)[0] and not flags.disagree(0.5e-3, 0.37e-3)


def test_only_detector_warnings_are_flags_the_rest_are_plain_notes():
    impossible = (flags.above_device_count(2.2, 2) + flags.degenerate_fit(-1.0) + flags.more_work_less_time(1, 2, 2, 1)
                  + flags.saturated(200, 100) + flags.contradicts_reference(900, 30000) + flags.disagree(3, 1)
                  + flags.reverses_theory(measure.decide([0.5] * 5, claim="c", expected="A faster")))
    assert len(impossible) == 7 and all(flags.is_impossible(w) for w in impossible)
    caveats = measure.plausibility(oversubscribed=True, other_framework="TensorFlow") + [
        "saturated", "2 of 3 runs diverged", "the load generator sent requests 600 ms late (median)"]
    assert not any(flags.is_impossible(w) for w in caveats)
    row_flags = "; ".join(caveats[:1] + impossible[:1] + ["repeats spread by 40% of the median: noisy"])
    assert flags.impossible(row_flags) == impossible[:1] and flags.notes(row_flags) == caveats[:1]
    text = measure.flagged("fig", caveats)
    assert "[!]" not in text and "(note: " in text
    assert measure.flagged("fig", caveats + impossible[:1]).count("[!]") == 1


def test_a_table_of_impossible_rows_gets_one_flag_line():
    per_row = [[], flags.more_work_less_time(2048, 3e-3, 16384, 2e-4), [], flags.more_work_less_time(4096, 3e-3, 16384, 2e-4)]
    line = flags.one_line(per_row, ["1,024", "2,048", "3,072", "4,096"], "sizes")
    assert len(line) == 1 and line[0].startswith("sizes 2,048, 4,096 (marked *)") and flags.is_impossible(line[0])
    assert flags.one_line([[], []], ["a", "b"]) == []


def test_two_kinds_of_impossible_rows_get_one_line_each_and_the_rows_a_star():
    above = flags.above_device_count(2.1, 2)
    less = flags.more_work_less_time(2, 5e-3, 4, 4e-3, what="images")
    per_row = [above, [], less, above + less, "; ".join(above)]
    lines = flags.one_line(per_row, ["a", "b", "c", "d", "e"])
    assert len(lines) == 2
    assert lines[0].startswith("rows a, d, e (marked *)") and "2 more like it" in lines[0] and flags.ABOVE_100 in lines[0]
    assert lines[1].startswith("rows c, d (marked *)") and flags.LESS_TIME in lines[1]
    assert [flags.marked(f) for f in per_row] == [" *", "", " *", " *", " *"]
    assert flags.marked(["more ranks or threads than cores: oversubscribed"]) == ""


def test_the_record_table_flags_only_impossible_rows():
    row = dict(lab="09", framework="torch", strategy="serving", variant="batch-1", workload="w", world_size=1,
               device="cpu", batch_size=1, samples_per_s=100.0, wall_s=1.0, repeats=3, spread=0.5)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        text = measure.record([measure.Result(**row, flags="saturated"),
                               measure.Result(**{**row, "variant": "x"}, flags=flags.saturated(200, 100)[0])], d)
    assert text.count("[!]") == 1 and "note: saturated" in text and "noise: 2 of 2" in text


def test_a_flag_is_said_in_full_once_and_points_back_after():
    flags.forget()
    above = flags.above_device_count(2.1, 2)
    first = measure.flagged("speedup 2.10x", above)
    again = measure.flagged("summary: 2.10x", above)
    assert first.count("[!]") == 1 and "[!]" not in again and flags.AS_ABOVE in again
    table = flags.table_lines([above, []], ["2 ranks", "1 rank"])
    assert table == [f"rows 2 ranks (marked *): {flags.AS_ABOVE}"]
    other = flags.more_work_less_time(2, 5e-3, 4, 4e-3, what="images")
    assert flags.table_lines([other], ["batch 4"])[0].startswith("[!] rows batch 4 (marked *)")
    flags.forget()
    assert measure.flagged("speedup 2.10x", above).count("[!]") == 1


def test_one_quantity_measured_twice_is_flagged_only_beyond_both_spreads():
    from lab_utils import flags

    assert flags.measured_twice(100.0, 0.05, 108.0, 0.05, what="x", first_name="lab 01", second_name="lab 03") == []
    # 1.5x apart, spreads of 5 %: the ranges 97.5-102.5 and 146-154 do not meet
    said = flags.measured_twice(100.0, 0.05, 150.0, 0.05, what="1 process x 1 thread", first_name="lab 01",
                                second_name="lab 03")
    assert len(said) == 1 and flags.is_impossible(said[0]) and "1.50x apart" in said[0] and "; " not in said[0]
    assert "lab 01" in said[0] and "lab 03" in said[0]
    # the same 1.5x, but repeats that spread 60 % each: their ranges meet (70-130 and 105-195), nothing said
    assert flags.measured_twice(100.0, 0.6, 150.0, 0.6, what="x", first_name="a", second_name="b") == []
    assert flags.measured_twice(100.0, None, 150.0, None, what="x", first_name="a", second_name="b")
    assert flags.measured_twice(0.0, None, 150.0, None, what="x", first_name="a", second_name="b") == []
