"""The verdict rule: paired repeats decide a comparison; noise gives 'not distinguishable here', never a confident
wrong answer."""
import csv
import random
import re
import statistics
from pathlib import Path

import pytest

from lab_utils import hardware, measure, workloads
from lab_utils.measure import lines as printed


def flat(v) -> str:
    """A printed verdict's words on one line (its layout, lines.stacked, wraps them at lines.WIDTH)."""
    return " ".join(str(v).split())

HW = hardware.HardwareReport("h", 2, (), "3.11", "2.13.0", "2.21.0", cpu_model="Test CPU", physical_cores=2,
                             cpu_features="avx2 fma")


def test_spread_is_one_rule():
    assert measure.spread([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert measure.spread([5.0]) == 0.0 and measure.spread([]) == 0.0
    assert measure.spread([0.0, 0.0, 0.0]) == 0.0
    assert measure.Timing((1.0, 2.0, 3.0), 0).spread == measure.spread([1.0, 2.0, 3.0])


def test_alternating_rounds():
    assert measure.alternating_rounds("AB", 3) == list("ABBAAB")
    assert measure.numbered_rounds({"A": 1, "B": 2}, 2) == [(0, "A"), (0, "B"), (1, "B"), (1, "A")]


def test_paired_ratios_are_a_advantage_over_b_in_each_pair():
    assert measure.paired_ratios([1.0, 2.0], [2.0, 3.0]) == [2.0, 1.5]  # times: B's over A's
    assert measure.paired_ratios([4.0, 3.0], [2.0, 3.0], higher_is_better=True) == [2.0, 1.0]  # rates: A's over B's
    assert measure.paired_ratios(measure.Timing((1.0,), 0), measure.Timing((3.0,), 0)) == [3.0]
    with pytest.raises(ValueError, match="as many of A as of B"):
        measure.paired_ratios([1.0], [1.0, 2.0])


def test_a_tables_paired_median_is_the_verdicts_figure_not_the_ratio_of_medians():
    a, b = [1.0, 1.0, 3.0, 3.0, 3.0], [2.0, 2.0, 2.0, 6.0, 6.0]  # medians 3 and 2 (1.50x); every pair says 2x or 0.67x
    v = measure.verdict(a, b, claim="A vs B", expected="A faster", timed=False)
    assert measure.paired_median(a, b) == v.ratio == 2.0 != statistics.median(b) / statistics.median(a)
    # the other orientation of an odd number of pairs is the exact inverse: a table may print either, with its name
    assert measure.paired_median(b, a) == 1 / v.ratio
    assert measure.paired_median([200.0, 300.0, 90.0], [100.0] * 3, higher_is_better=True) == 2.0


def test_clear_win_holds_and_clear_loss_is_reversed():
    a = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0]
    b = [2 * t for t in a]  # B twice as slow in every round
    v = measure.verdict(a, b, claim="A vs B", expected="A faster")
    assert v.verdict == "holds" and v.ratio == pytest.approx(2.0) and v.low > 1
    w = measure.verdict(b, a, claim="B vs A", expected="B faster")
    assert w.verdict == "reversed" and w.high < 1
    assert "[!]" in str(w) and "[!]" not in str(v)


def test_rates_are_oriented_the_other_way():
    assert measure.verdict([200.0] * 5, [100.0] * 5, claim="c", expected="A faster",
                           higher_is_better=True).verdict == "holds"


def test_pairs_that_cross_are_not_distinguishable():
    a = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    b = [1.3, 0.8, 1.4, 0.7, 1.2, 0.9, 1.35]  # B sometimes slower, sometimes faster
    v = measure.verdict(a, b, claim="crossing", expected="A faster")
    assert v.verdict == "not distinguishable here" and v.low < 1 < v.high


def test_too_few_pairs_or_too_small_an_effect_decide_nothing():
    assert measure.verdict([1.0] * 3, [2.0] * 3, claim="c", expected="A faster").verdict == "not distinguishable here"
    assert measure.verdict([1.0] * 9, [1.02] * 9, claim="c", expected="A faster").verdict == "not distinguishable here"


def test_a_small_effect_says_the_rule_that_decided_it():
    """Learner s13r6d, lab 13: 1.021x, range 1.004-1.06, read 'not distinguishable here' with no word of the 5 % rule."""
    v = measure.verdict([1.0] * 9, [1.02] * 9, claim="A vs B", expected="A faster")
    assert v.verdict == measure.UNDECIDED and f"within {measure.MIN_EFFECT:.0%} of 1" in str(v)
    assert "whole range lies above 1" in str(v)
    slower = measure.verdict([1.02] * 9, [1.0] * 9, claim="A vs B", expected="A faster")
    assert "whole range lies below 1" in str(slower)
    crossing = measure.verdict([1.0] * 7, [1.3, 0.8, 1.4, 0.7, 1.2, 0.9, 1.35], claim="c", expected="A faster")
    assert f"within {measure.MIN_EFFECT:.0%}" not in str(crossing)  # the range itself decided: no rule to name
    assert f"within {measure.MIN_EFFECT:.0%}" not in str(measure.verdict([1.0] * 9, [1.2] * 9, claim="c",
                                                                         expected="A faster"))


def test_pure_noise_is_almost_never_a_confident_answer():
    rng = random.Random(0)
    decided = 0
    for _ in range(400):
        a = [rng.lognormvariate(0, 0.3) for _ in range(7)]
        b = [rng.lognormvariate(0, 0.3) for _ in range(7)]
        decided += measure.verdict(a, b, claim="noise", expected="A faster").verdict != "not distinguishable here"
    assert decided / 400 < 0.05  # the range covers the median at >= 90 %, and each side needs the whole range


def test_range_is_order_statistics_of_the_sign_test():
    low, high, coverage = measure.ratio_range([5, 1, 4, 2, 3])
    assert (low, high) == (1, 5) and coverage == pytest.approx(1 - 2 / 32)
    low, high, coverage = measure.ratio_range(range(1, 10))  # n=9: second smallest to second largest
    assert (low, high) == (2, 8) and coverage >= 0.9


def test_unpaired_repeats_are_refused():
    with pytest.raises(ValueError, match="paired"):
        measure.verdict([1.0, 2.0], [1.0], claim="c", expected="e")


def test_verdicts_csv_has_the_fingerprint(tmp_path):
    v = measure.verdict([1.0] * 5, [2.0] * 5, claim="A vs B", expected="A faster", lab="02",
                        workload=workloads.SWEEP_3CONV)
    assert v.record(tmp_path, HW) is v
    measure.decide([0.5] * 5, claim="C vs D", expected="C faster", lab="02",
                   workload=workloads.SWEEP_3CONV.name).record(tmp_path, HW)
    rows = list(csv.DictReader((tmp_path / "verdicts.csv").open()))
    assert [r["verdict"] for r in rows] == ["holds", "reversed"]
    assert rows[0]["lab"] == "02" and rows[0]["cpu_model"] == "Test CPU" and rows[0]["cpu_features"] == "avx2 fma"
    for column in ("claim", "workload", "expected", "direction", "ratio", "low", "high", "repeats"):
        assert rows[0][column]
    assert [r["workload"] for r in rows] == [workloads.SWEEP_3CONV.name] * 2
    assert measure.read_results(tmp_path) == []  # verdicts.csv is not a results CSV
    assert len(measure.read_verdicts(tmp_path)) == 2


def test_a_verdict_needs_its_lab_and_its_workload_to_be_recorded(tmp_path):
    with pytest.raises(ValueError, match="lab"):
        measure.verdict([1.0] * 5, [2.0] * 5, claim="c", expected="e", workload=workloads.PIPELINE).record(tmp_path, HW)
    with pytest.raises(ValueError, match="names no workload: pass workload="):
        measure.verdict([1.0] * 5, [2.0] * 5, claim="c", expected="e", lab="04").record(tmp_path, HW)
    assert not (tmp_path / measure.VERDICTS_CSV).exists()


def test_a_verdict_names_its_registered_workload_on_its_line_and_refuses_an_unknown_one():
    v = measure.verdict([1.0] * 5, [2.0] * 5, claim="1F1B vs GPipe, M=8", expected="1F1B faster",
                        workload=workloads.PIPELINE)
    assert str(v).startswith("verdict, 1F1B vs GPipe, M=8 [CNN-2conv/synthetic28 pipeline step]: holds\n    2.00x (")
    assert measure.verdict([1.0] * 5, [2.0] * 5, claim="c", expected="e", workload=workloads.PIPELINE.name).workload \
        == v.workload == workloads.PIPELINE.name
    with pytest.raises(KeyError, match="course CNN.{0,4} is not a registered workload.*REGISTRY.*CNN-3conv/synthetic28 step"):
        measure.verdict([1.0] * 5, [2.0] * 5, claim="c", expected="e", workload="course CNN")
    stray = workloads.Workload("cnn2d_2layer_fullconnected_2layer", "synthetic", 28, "pipeline step", batch=64)
    with pytest.raises(KeyError, match="not the registered workload of its name"):  # a registered name, other fields
        measure.decide([2.0] * 5, claim="c", expected="e", workload=stray)
    unseen = measure.decide([2.0] * 5, claim="c", expected="e", workload=workloads.PIPELINE)
    unseen = __import__("dataclasses").replace(unseen, verdict=measure.CANNOT_SEE, reason="busy")
    assert str(unseen) == ("verdict, c [CNN-2conv/synthetic28 pipeline step]: cannot be seen here\n    predicted: e\n"
                           "    why: busy")
    # the prediction once (learner s8f), and no figure beside the refusal (learner s9f)


def test_a_verdict_whose_sides_ran_two_workloads_names_both_and_one_that_both_ran_once():
    both = measure.decide([1.2] * 5, claim="float32 step, course CNN vs wide CNN", expected="e",
                          workload=(workloads.PRECISION, workloads.PRECISION_WIDE.name))
    assert both.workload == f"{workloads.PRECISION.name} & {workloads.PRECISION_WIDE.name}"
    assert workloads.verdict_names(both.workload) == [workloads.PRECISION.name, workloads.PRECISION_WIDE.name]
    assert measure.decide([1.2] * 5, claim="c", expected="e", workload=[workloads.PS_DIGITS] * 2).workload == \
        workloads.PS_DIGITS.name
    with pytest.raises(ValueError, match="the two its sides ran"):
        measure.decide([1.2] * 5, claim="c", expected="e", workload=[workloads.PS_DIGITS] * 3)


def test_an_older_verdicts_csv_without_the_workload_column_still_reads_and_takes_new_rows(tmp_path):
    old = [c for c in measure.VERDICT_COLUMNS if c != "workload"]
    path = tmp_path / measure.VERDICTS_CSV
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([old, ["2026-01-01T00:00:00+00:00", "02", "A vs B"] + ["1"] * (len(old) - 3)])
    assert [(r["claim"], r["workload"]) for r in measure.read_verdicts(tmp_path)] == [("A vs B", "")]
    measure.decide([2.0] * 5, claim="C vs D", expected="e", lab="04", workload=workloads.PIPELINE).record(tmp_path, HW)
    assert [(r["claim"], r["workload"]) for r in measure.read_verdicts(tmp_path)] == [
        ("A vs B", ""), ("C vs D", workloads.PIPELINE.name)]


def test_no_worse_than_claims():
    same = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]
    v = measure.verdict(same, [1.0] * 6, claim="1F1B vs GPipe", expected="1F1B no slower", no_worse_than=0.10)
    assert v.verdict == "holds"  # equal times: the claim of no extra cost holds (a directional claim would not)
    assert measure.verdict(same, [1.0] * 6, claim="c", expected="A faster").verdict == "not distinguishable here"
    assert measure.verdict([0.8] * 6, [1.0] * 6, claim="c", expected="A no slower",
                           no_worse_than=0.10).verdict == "holds"  # A faster is no slower
    slow = measure.verdict([1.5] * 6, [1.0] * 6, claim="c", expected="A no slower", no_worse_than=0.10)
    assert slow.verdict == "reversed" and "[!]" in str(slow)
    crossing = measure.verdict([1.0, 1.3, 0.9, 1.25, 1.0, 1.3], [1.0] * 6, claim="c", expected="A no slower",
                               no_worse_than=0.10)
    assert crossing.verdict == "not distinguishable here"
    assert measure.verdict([1.0] * 4, [1.0] * 4, claim="c", expected="e", no_worse_than=0.1).verdict != "holds"


def test_runs_whose_verdicts_hold_and_reverse_are_told_apart(tmp_path):
    from lab_utils.instructor.course import stability

    def run(name, ratios_by_claim):
        folder = tmp_path / name / "results"
        for claim, ratios in ratios_by_claim.items():
            measure.decide(ratios, claim=claim, expected="A faster", lab="02",
                           workload=workloads.SWEEP_3CONV).record(folder)
        return folder

    win, loss, cross = [1.3, 1.4, 1.35, 1.5, 1.32], [0.7, 0.75, 0.72, 0.71, 0.74], [0.9, 1.2, 0.95, 1.1, 1.0]
    one = run("one", {"A vs B": win, "C vs D": win})
    two = run("two", {"A vs B": cross, "C vs D": loss})
    three = run("three", {"A vs B": loss})
    assert stability.main([str(one), str(two)]) == 1  # C vs D: holds, then reversed
    claims = {c.claim: c for c in stability.compare_runs([one, two, three])}
    assert claims["A vs B"].contradicts and not stability.compare_runs([one, two])[0].contradicts  # A vs B: holds, n.d.
    assert claims["C vs D"].runs[2] is None
    text = stability.claims_table(list(claims.values()), ["one", "two", "three"])
    assert "2 contradicted" in text and "n.d. " in text
    assert stability.main([str(one)]) == 2


def test_stability_shows_ranges_puts_a_restated_claim_beside_its_claim_and_marks_ranges_that_do_not_overlap(tmp_path):
    """Issue 52: a run that restated a claim's tolerance was a line of its own, so 8 claims of two runs were never
    compared. Now one line per claim: each run's cell says the cost it tested, and the line that the claims differ."""
    from lab_utils.instructor.course import stability

    def run(name, ratios, **claim):
        folder = tmp_path / name / "results"
        measure.decide(ratios, claim="A vs B", expected="A no slower", lab="05", workload=workloads.STEP_DIGITS_TF,
                       **claim).record(folder)
        return folder

    quiet_one = run("one", [1.10, 1.12, 1.11, 1.13, 1.12, 1.14, 1.11, 1.12], no_worse_than=0.10)
    quiet_two = run("two", [1.20, 1.22, 1.25, 1.21, 1.24, 1.23, 1.26, 1.22], no_worse_than=0.10)
    busy = run("busy", [1.0, 1.12, 0.85, 1.06, 1.10, 0.90, 1.03, 1.08], no_worse_than=0.10)  # low < 1 / 1.10
    notes = measure.read_verdicts(busy)[-1]["notes"]
    assert "restated" in notes  # the busy run tested a weaker claim
    cost = re.search(r"no worse by more than (\d+)%'", notes).group(1)
    claims = stability.compare_runs([quiet_one, quiet_two, busy])
    assert len(claims) == 1
    claim = claims[0]
    assert all(claim.runs) and claim.restated and claim.tested[:2] == ("", "")
    assert claim.ranges_apart  # quiet one's and quiet two's ranges
    text = stability.claims_table(claims, ["one", "two", "busy"])
    assert "[1.1" in text and "ranges do not overlap" in text, text
    assert f"<={cost}%" in text and "the runs tested different claims" in text
    assert "1 with ranges that do not overlap" in text and "1 tested as different claims" in text
    same = stability.compare_runs([quiet_one, quiet_two])[0]
    assert not same.restated and "different claims" not in stability.claims_table([same], ["one", "two"])


def test_a_tolerance_finer_than_the_pairs_can_resolve_is_restated_and_said():
    tight = [1.0, 0.99, 1.01, 1.0, 0.995]
    assert measure.decide(tight, claim="c", expected="e", no_worse_than=0.10).notes == ""  # resolvable: as claimed
    barely = [0.966, 1.0, 1.035, 1.0, 0.99]  # 3 x their scatter is 10.3 %: as claimed, not "10 % and more, not 10 %"
    assert measure.ratio_scatter(barely) * measure.RESOLVE > 0.10
    kept = measure.decide(barely, claim="c", expected="e", no_worse_than=0.10)
    assert kept.notes == "" and kept.holds_from == pytest.approx(1 / 1.10)
    noisy = [0.90, 0.96, 1.06, 0.98, 0.94]  # scatter (1.06 - 0.90) / 2 / 0.96 = 8 %: it can tell 25 %, not 10 %
    said = measure.decide(noisy, claim="A vs B", expected="e", no_worse_than=0.10)
    assert said.verdict == measure.HOLDS and "restated" in said.notes and "25%" in said.notes
    assert "restated" in str(said) and "; " not in said.notes
    # a ratio below 1 can hold a no-worse-than claim: the line says from where, and which side a ratio above 1 favours
    assert said.holds_from == pytest.approx(1 / 1.25, abs=0.02) and "above 1 means" not in str(said)
    assert "above 1 favours A;" in str(said)
    assert f"holds while the whole range lies above {said.holds_from:.2f}" in str(said)
    # issue 51: the claim's own terms come before its threshold (learners read "10 % ... above 0.80" as a bug)
    line = str(said)
    assert line.index("tested as 'no worse by more than 25%'") < line.index(f"above {said.holds_from:.2f}")
    assert "tested as 'no worse by more than 10%'" in str(kept)
    plain = measure.decide(tight, claim="c", expected="e")
    assert plain.holds_from is None and "above 1 means e" in str(plain)
    as_claimed = measure.decide(noisy, claim="c", expected="e", no_worse_than=0.30)  # coarse enough already
    assert as_claimed.verdict == measure.HOLDS and as_claimed.notes == ""
    scattered_win = [2.1, 1.2, 2.0, 2.1, 1.3, 2.2, 2.07]  # lab 06's library all-reduce: 2x faster, pairs scatter 20 %+
    won = measure.decide(scattered_win, claim="c", expected="e", no_worse_than=0.05)
    assert won.low > 1 and won.verdict == measure.HOLDS and "above 1" in won.notes
    scattered_tie = [0.7, 1.3, 1.0, 0.8, 1.25]
    assert measure.decide(scattered_tie, claim="c", expected="e", no_worse_than=0.05).verdict == measure.UNDECIDED
    worse = measure.decide([0.5, 0.55, 0.6, 0.52, 0.58], claim="c", expected="e", no_worse_than=0.10)
    assert worse.verdict == measure.REVERSED  # twice as slow is beyond any tolerance these pairs could resolve


def test_ratio_scatter_is_half_the_pairs_range_over_their_median():
    assert measure.ratio_scatter([1.0, 1.0, 1.0, 1.0, 1.0]) == 0.0
    assert measure.ratio_scatter([0.9, 1.0, 1.1, 1.0, 1.0]) == pytest.approx(0.1)


# --- issue 46: a CPU quota or a busy machine decides 'cannot be seen here', with its reason and its conditions -----

from lab_utils import conditions, detectors  # noqa: E402
from lab_utils.measure import verdicts  # noqa: E402

QUOTA = conditions.Load(60.0, 2, own=1.0, others=0.1, steal=0.0, quota_cpus=1.0, throttled_share=0.71,
                        quota_source="cgroup quota")
BUSY = conditions.Load(60.0, 2, own=0.3, others=1.7, steal=0.0)
QUIET = conditions.Load(60.0, 2, own=1.9, others=0.05, steal=0.0)


def under(monkeypatch, load, cpus=2.0, source="affinity mask"):
    monkeypatch.setattr(verdicts, "run_conditions", lambda: load)
    monkeypatch.setattr(conditions.hardware, "cpu_budget", lambda: hardware.CpuBudget(cpus, source, ()))


def test_two_ranks_under_a_one_cpu_quota_cannot_be_seen_here_never_reversed(monkeypatch, tmp_path):
    under(monkeypatch, QUOTA, cpus=1.0, source="cgroup quota")
    v = measure.decide([0.92, 0.90, 0.93, 0.91, 0.94], claim="2 DDP ranks vs 1 thread", expected="2 ranks faster",
                       lab="03", workers=2, workload=workloads.LAUNCHED_3CONV)  # what a 1-CPU quota gives: 0.92x
    assert v.verdict == measure.CANNOT_SEE and "1.0 CPU (cgroup quota)" in v.reason and "2 ranks" in v.reason
    assert v.notes.startswith(f"{measure.CANNOT_SEE}: ") and v.notes.endswith(QUOTA.note()[0])  # the condition kept
    text = str(v)
    assert "reversed" not in text and measure.CANNOT_SEE in text and "cgroup quota" in text
    assert detectors.FLAG not in text  # not an impossible figure: the reason says why
    row = measure.read_verdicts(measure.write_verdict(v, tmp_path))[-1]
    assert row["verdict"] == measure.CANNOT_SEE and "1.0 CPU (cgroup quota) and was throttled in 71 %" in row["notes"]


def test_a_busy_machine_makes_any_timed_comparison_not_measurable_and_an_accuracy_keeps_its_verdict(monkeypatch):
    under(monkeypatch, BUSY)
    v = measure.decide([1.5] * 6, claim="DDP vs DataParallel", expected="DDP faster", lab="02")
    assert v.verdict == measure.CANNOT_SEE and "other programs used 1.7 of 2 cores" in v.reason
    accuracy = measure.decide([1.01, 1.0, 1.02, 1.0, 1.01], claim="Hogwild vs sync, final accuracy", lab="08",
                              expected="Hogwild within 5 %", no_worse_than=0.05, timed=False)
    assert accuracy.verdict == measure.HOLDS and "other programs used 1.7" in accuracy.notes  # decided, noted
    line = measure.as_result("2 DDP ranks 0.90x one thread")
    assert line.startswith("not measurable here: other programs used 1.7 of 2 cores") and "0.90x" not in line


def test_a_verdict_that_cannot_be_seen_prints_its_prediction_and_no_figure(monkeypatch):
    """A refused verdict says what was predicted (so the learner knows what a quiet rerun tests) and no ratio: lab
    12's 'record on vs off' once printed 1.21x with no direction; labs 06, 07 and 13 then printed 'the load's figure,
    not a result: 3.54x' beside two medians of 2.77x (learner s9f, findings 3-4): one figure disowned beside another."""
    under(monkeypatch, BUSY)
    cost = measure.decide([1.3, 0.6, 1.21, 0.9, 1.5, 0.44, 1.72], claim="record on vs off", expected="the record "
                          "costs under 2 %", no_worse_than=0.02, lab="12")
    slower = measure.decide([1.5] * 6, claim="DDP vs DataParallel", expected="DDP faster", lab="02")
    for v, said in ((cost, "record on vs off: cannot be seen here predicted: the record costs under 2 %"),
                    (slower, "DDP vs DataParallel: cannot be seen here predicted: DDP faster")):
        assert v.verdict == measure.CANNOT_SEE and said in flat(v), str(v)
        assert not re.search(r"\d\.\d\dx", str(v)) and "range" not in str(v), str(v)  # no figure, no range
    assert (cost.ratio, slower.ratio) == (1.21, 1.5)  # recorded (verdicts.csv), not printed


def test_a_busy_machine_verdict_is_short_lines_that_name_the_load_once_and_what_to_do(monkeypatch):
    """Issue 51 (learners s9a, s9f, labs 06, 07, 13): a refused verdict printed ~560-760 characters on one line, then
    two lines with 'the load's figure, not a result: 3.54x' beside medians of 2.77x. Now the claim and its prediction
    and 'cannot be seen here' first, then (indented) the load once and what to do; no figure, nothing about a claim
    tested; every line within lines.WIDTH (learner s9i: 250-450 characters on one line)."""
    busy = conditions.Load(60.0, 2, own=0.4, others=1.5, steal=0.0)
    cases = {"mixed": ([0.85, 0.62, 1.09, 0.9, 0.8], {}),
             "noisy cost": ([3.24, 0.92, 5.67, 3.0, 4.0, 2.0, 1.5], {"no_worse_than": 0.10}),
             "one way": ([5.39, 1.51, 26.37, 4.0, 7.0], {}),
             "same work": ([1.2, 1.1, 1.3, 1.25, 1.15], {"no_worse_than": 0.05, "same_work": True}),
             "extra work": ([1.2, 1.1, 1.3, 1.25, 1.15], {"no_worse_than": 0.05, "extra_work": True})}
    for name, (pairs, extra) in cases.items():
        v = measure.decide(pairs, claim="bfloat16 autocast vs float32, course CNN train step", load=busy,
                           expected="bfloat16 faster (half the bytes)", workload=workloads.PRECISION, **extra)
        lines = str(v).splitlines()
        assert v.verdict == measure.CANNOT_SEE and max(map(len, lines)) <= printed.WIDTH, (name, lines)
        head = next(i for i, x in enumerate(lines) if x.endswith("cannot be seen here"))  # the claim may wrap
        assert lines[0].startswith("verdict, bfloat16") and lines[head + 1].startswith(f"{printed.HANG}predicted: "), lines
        assert lines[head + 2].startswith(f"{printed.HANG}why: other programs used"), lines
        assert all(x.startswith(printed.HANG) for x in lines[1:]), lines  # the cause under the claim, indented
        assert flat(v).endswith(" why: other programs used 1.5 of 2 cores while it was measured. "
                                "Rerun with nothing else running"), (name, lines)
        assert "predicted: bfloat16 faster (half the bytes) why:" in flat(v), lines  # the prediction a rerun tests
        assert str(v).count("1.5 of 2 cores") == 1 and "steal" not in str(v), name  # the load, once
        assert not re.search(r"\d\.\d\dx|range|pairs", str(v)), (name, str(v))  # no figure of any kind
        for unreadable_words in ("conditions', not the claim's", "cannot tell a cost", "a cost would have to",
                                 "only a win", "restated", "theirs as much", "not a result"):
            assert unreadable_words not in flat(v), (name, unreadable_words)
        assert f"{v.ratio:.2f}" not in str(v) and v.verdict_cells()["ratio"] == v.ratio  # recorded, not printed
    assert "1.5 of 2 cores" in v.notes and measure.verdicts.RULE in v.outcome()  # recorded and summarised in full


def test_a_verdict_prints_its_outcome_first_and_its_figure_under_it_within_the_width():
    """Learner s9i (labs 02, 04): 'verdict, 1F1B vs GPipe, M=8 [...], too noisy to test a cost up to 30%: only a win
    could decide (predicted: ...): 1.06x (...) -> not distinguishable here', 300-450 characters on one line, read
    three times. The claim and its outcome lead; the claim tested, the figure with its range and the note follow,
    indented; no line is wider than lines.WIDTH; the words are the same."""
    noisy = measure.decide([1.13, 0.95, 1.48, 1.04, 1.30, 0.99, 1.20], claim="1F1B vs GPipe, M=8", timed=False,
                           expected="1F1B at most 10 % slower", no_worse_than=0.10, workload=workloads.PIPELINE)
    lines = str(noisy).splitlines()
    assert lines[0] == f"verdict, 1F1B vs GPipe, M=8 [{workloads.PIPELINE.name}]: not distinguishable here"
    assert max(map(len, lines)) <= printed.WIDTH and all(x.startswith(printed.HANG) for x in lines[1:]), lines
    said = flat(noisy)
    assert said.index("too noisy to test") < said.index("1.13x (above 1 favours 1F1B") < said.index("note: ")
    assert "range 0.95-1.48 over 7 paired repeats)" in said
    plain = measure.decide([1.5] * 6, claim="DDP vs DataParallel", expected="DDP faster", timed=False)
    assert str(plain) == ("verdict, DDP vs DataParallel: holds\n"
                          "    1.50x (above 1 means DDP faster; range 1.50-1.50 over 6 paired repeats)")


def test_a_noisy_verdicts_note_follows_its_figure_in_plain_words():
    """Issue 51: 'this machine cannot tell a cost below 221% here (a cost must exceed 3x the pairs' scatter to stand
    out from it)' and the restated note made quiet-machine verdict lines 540-700 characters long."""
    noisy = measure.decide([1.13, 0.95, 1.48, 1.04, 1.30, 0.99, 1.20], claim="c", expected="A no slower",
                           no_worse_than=0.10, timed=False)
    restated = measure.decide([0.98, 0.90, 1.05, 1.0, 0.85, 0.95, 1.02, 1.10], claim="c", expected="A no slower",
                              no_worse_than=0.10, timed=False)
    for v in (noisy, restated):
        lines = str(v).splitlines()
        figure = next(i for i, x in enumerate(lines) if "paired repeats)" in x)
        note = " ".join(" ".join(lines[figure + 1:]).split())
        assert "(note:" not in str(v) and lines[figure + 1].startswith(f"{printed.HANG}note: "), str(v)
        assert len(note) <= 220 and f"{measure.RESOLVE:g}x that scatter" in note, note
        assert max(map(len, lines)) <= printed.WIDTH, lines
    assert "a cost would have to exceed" in noisy.notes and "only a win could decide" in flat(noisy)
    from lab_utils.instructor.course import stability
    assert stability.restated_as({"notes": noisy.notes}) == stability.WIN_ONLY  # the instructor's table reads it
    assert "the claim tested is 'no worse by more than" in restated.notes and "a noisier run tests a weaker" in restated.notes


def test_a_busy_machine_refusal_is_said_once_per_cell_then_pointed_to(monkeypatch):
    """Learner s9i, lab 02: on a busy machine 'the same refusal paragraph repeated about 8 times', three in a row in
    its summary cell. In a notebook the load and what to do are said once per cell; a later busy refusal in that cell
    is one line pointing to it; the next cell says it in full again; outside IPython every one is in full."""
    busy = conditions.Load(60.0, 2, own=0.4, others=1.5, steal=0.0)
    first, second = (measure.decide([0.85, 0.62, 1.09, 0.9, 0.8], claim=f"claim {i}", expected="A faster", load=busy)
                     for i in (1, 2))
    assert RERUN_WORDS in flat(first) and RERUN_WORDS in flat(second)  # a script, a test: no cell, each in full
    cell = {"n": 1}
    monkeypatch.setattr(printed, "_cell", lambda: cell["n"])
    full, later = str(first), str(second)
    assert RERUN_WORDS in " ".join(full.split()) and "1.5 of 2 cores" in full
    assert later == f"verdict, claim 2 (A faster): cannot be seen here: {printed.LOAD_ABOVE}"  # one short line
    assert str(first).endswith(printed.LOAD_ABOVE)  # printed again in the same cell: the load was said above
    cell["n"] = 2  # the next cell: the load is said again, in full
    assert RERUN_WORDS in flat(second)
    cell["n"] = 3  # a table's refusal (measure.short_lines) says the load: the verdict under it points to it
    measure.short_lines(f"{measure.NOT_MEASURABLE}, rows a; b: other programs used 1.5 of 2 cores while it was "
                        f"measured: {measure.verdicts.RERUN}")
    assert str(first).endswith(printed.LOAD_ABOVE)
    assert first.outcome().startswith(f"{measure.NOT_MEASURABLE}: other programs used 1.5")  # recorded in full
    cell["n"] = 4
    assert measure.printed_outcome(first).startswith(f"{measure.NOT_MEASURABLE}: other programs used 1.5")
    assert measure.printed_outcome(second) == f"{measure.NOT_MEASURABLE}: {printed.LOAD_ABOVE}"


RERUN_WORDS = "Rerun with nothing else running"


def test_a_refused_comparison_of_two_n_worker_sides_says_so_and_restates_no_claim(monkeypatch):
    # learner s8e, lab 02: DDP vs DataParallel 'cannot be seen here ... so no speedup over one can be read', and a
    # 'restated: ... the claim tested is ...' note on a verdict that tested nothing
    under(monkeypatch, conditions.Load(30.0, 2, own=0.3, others=1.2, steal=0.0))
    pairs = [0.8, 1.1, 0.95, 1.2, 0.85, 1.05]
    v = measure.decide(pairs, claim="DDP vs DataParallel (gloo)", expected="DDP no slower", lab="02", workers=2,
                       no_worse_than=0.05, against_one=False)
    assert v.verdict == measure.CANNOT_SEE and "too few for 2 ranks" in v.reason
    assert "speedup over one" not in v.reason and "neither side's speed" in v.reason
    assert "restated" not in v.notes and "restated" not in str(v) and "claim tested" not in str(v)
    one = measure.decide(pairs, claim="2 ranks vs 1", expected="2 ranks faster", lab="03", workers=2)
    assert "no speedup over one can be read" in one.reason  # N against one keeps its words
    # learner s8e, lab 02: '2 ranks share the 0.9 left' said of DataParallel's devices (threads in one process)
    devices = measure.decide(pairs, claim="DataParallel vs one device", expected="slower", lab="02", workers=2,
                             what="devices")
    assert "too few for 2 devices" in devices.reason and "ranks" not in devices.reason


def test_a_busy_machine_does_not_hide_a_large_factor_that_every_pair_shows(monkeypatch):
    under(monkeypatch, BUSY)
    pairs = [2.85, 3.4, 5.81, 4.1, 3.0, 4.6, 3.9]  # lab 12's DETAIL cost on a busy machine: every pair 2.85-5.81x
    v = measure.decide(pairs, claim="OFF vs DETAIL", expected="DETAIL slower", lab="12")
    assert v.verdict == measure.HOLDS and not v.reason, v
    assert "every one of 7 pairs favours one side by more than 2x" in v.notes and "other programs used 1.7" in v.notes
    reversed_ = measure.decide([1 / r for r in pairs], claim="OFF vs DETAIL", expected="OFF slower", lab="12")
    assert reversed_.verdict == measure.REVERSED
    # one pair within the factor: the busy machine may explain it, no verdict
    assert measure.decide(pairs[:-1] + [1.8], claim="c", expected="e", lab="12").verdict == measure.CANNOT_SEE
    # a CPU budget too small for the ranks still rules a speed-up out, however large
    under(monkeypatch, BUSY, cpus=1.0, source="cgroup quota")
    assert measure.decide(pairs, claim="2 ranks vs 1", expected="2 ranks faster", lab="03",
                          workers=2).verdict == measure.CANNOT_SEE


def test_on_a_quiet_unlimited_machine_verdicts_and_summaries_are_unchanged(monkeypatch):
    under(monkeypatch, QUIET)
    v = measure.decide([1.5] * 6, claim="2 ranks vs 1", expected="2 ranks faster", lab="03", workers=2)
    assert v.verdict == measure.HOLDS and v.notes == "" and v.reason == ""
    assert measure.as_result("1.50x", workers=2) == "1.50x"
    under(monkeypatch, None)  # nothing measured at all: nothing to rule out
    assert measure.decide([0.5] * 5, claim="c", expected="A faster", workers=2).verdict == measure.REVERSED


def test_a_verdict_names_a_quota_that_did_not_throttle_too(monkeypatch):
    calm_quota = conditions.Load(60.0, 2, own=0.5, others=0.0, steal=0.0, quota_cpus=4.0, throttled_share=0.0)
    under(monkeypatch, calm_quota, cpus=4.0, source="cgroup quota")
    v = measure.decide([1.5] * 6, claim="2 ranks vs 1", expected="2 ranks faster", lab="03", workers=2)
    assert v.verdict == measure.HOLDS and v.notes == "measured under a cgroup quota of 4.0 CPUs, throttled in 0 % of its periods"


@pytest.mark.slow
def test_under_a_real_one_cpu_quota_a_two_rank_verdict_cannot_be_seen_here():
    """As root on cgroup v1: in a group with a 1-CPU quota (JupyterHub's cpu_limit: 1), a 2-workers verdict and its
    summary line say why the comparison cannot be seen here, naming the quota."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    top = Path("/sys/fs/cgroup/cpu")
    if os.geteuid() != 0 or not (top / "cpu.stat").exists() or not os.access(top, os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    if hardware.cpu_budget().cpus < 2:
        pytest.skip("this process has less than 2 CPUs already: the quota would not be what limits it")
    group = top / f"lab_test_verdict_{os.getpid()}"
    group.mkdir()
    code = ("from lab_utils import measure\n"
            "v = measure.decide([0.92, 0.90, 0.93, 0.91, 0.94], claim='2 DDP ranks vs 1 thread', lab='03', workers=2,\n"
            "                   expected='2 ranks faster')\n"
            "print(v.verdict)\nprint(v.reason)\nprint(measure.as_result('0.92x one thread', workers=2))")
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("100000")
        procs = group / "cgroup.procs"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                             preexec_fn=lambda: procs.write_text(str(os.getpid())))
    finally:
        group.rmdir()
    verdict, reason, line = out.stdout.splitlines()
    assert verdict == measure.CANNOT_SEE and reason.startswith("this notebook may use 1.0 CPU (cgroup quota)"), out.stdout
    assert line.startswith("not measurable here: this notebook may use 1.0 CPU (cgroup quota)") and "0.92x" not in line


def test_too_few_pairs_decide_nothing_whatever_the_conditions(monkeypatch):
    under(monkeypatch, BUSY)
    v = measure.decide([0.9], claim="Slurm vs launch", expected="no slower", no_worse_than=0.1, workers=2)
    assert v.verdict == measure.UNDECIDED and "other programs used 1.7" in v.notes  # undecided, its condition noted


def test_a_tolerance_above_the_restatable_one_as_given_is_tested_as_given_and_restated_past_it_decides_nothing():
    # a prediction's own tolerance (lab 02: DDP's all-reduce share of a step) is its claim: tested as it is
    v = measure.decide([0.98, 1.0, 1.02, 0.99, 1.01], claim="c", expected="A no slower", no_worse_than=0.35,
                       timed=False)
    assert v.verdict == measure.HOLDS and v.holds_from == pytest.approx(1 / 1.35) and "restated" not in v.notes, v
    # restated past MAX_RESTATED by the pairs' own scatter: a claim that weak says nothing, so only a win decides
    v = measure.decide([0.6, 1.5, 0.8, 1.3, 0.7, 1.4], claim="c", expected="A no slower", no_worse_than=0.35,
                       timed=False)
    assert v.verdict == measure.UNDECIDED and "so only a win could decide" in v.notes, v
    won = measure.decide([1.3, 2.0, 1.4, 1.9, 1.5, 1.8], claim="c", expected="A no slower", no_worse_than=0.10,
                         timed=False)  # too noisy to test 10 %, but every pair a win
    assert won.verdict == measure.HOLDS and "no cost at all" in won.notes, won


def test_stability_compares_a_claim_per_workload_and_joins_an_older_run_that_named_none(tmp_path):
    from lab_utils.instructor.course import stability

    def run(name, workload, ratios=(1.3, 1.4, 1.35, 1.5, 1.32), claim="A vs B"):
        folder = tmp_path / name / "results"
        measure.decide(list(ratios), claim=claim, expected="A faster", lab="07", workload=workload).record(folder, HW)
        return folder

    old = run("old", workloads.PRECISION)
    rows = measure.read_verdicts(old)
    columns = [c for c in measure.VERDICT_COLUMNS if c != "workload"]  # the file as it was before the column
    with (old / measure.VERDICTS_CSV).open("w", newline="") as handle:
        csv.writer(handle).writerows([columns] + [[r[c] for c in columns] for r in rows])
    new = run("new", workloads.PRECISION)
    claims = stability.compare_runs([old, new])
    assert [(c.claim, c.workload, all(c.runs)) for c in claims] == [("A vs B", workloads.PRECISION.name, True)]
    wide = run("wide", workloads.PRECISION_WIDE, ratios=(0.7, 0.75, 0.72, 0.71, 0.74))  # the same words, another model
    claims = stability.compare_runs([new, wide])
    assert sorted(c.workload for c in claims) == sorted([workloads.PRECISION.name, workloads.PRECISION_WIDE.name])
    assert not any(c.contradicts for c in claims)  # holds on one model, reversed on another: no contradiction
    text = stability.claims_table(claims, ["new", "wide"])
    assert f"07 A vs B [{workloads.PRECISION_WIDE.name}]" in text and "0 contradicted" in text


def test_a_verdict_that_cannot_be_seen_carries_no_note_stating_a_result(monkeypatch):
    """Lab 04's 1F1B verdict read 'cannot be seen here' beside its own note 'the whole range lies above 1: no cost at
    all': the verdict and its note said two things."""
    under(monkeypatch, BUSY)
    v = measure.decide([1.30, 1.45, 1.38, 1.52, 1.41, 1.60], claim="1F1B vs GPipe", expected="1F1B no slower",
                       no_worse_than=0.05, workers=2)
    assert v.verdict == measure.CANNOT_SEE, v
    assert "no cost at all" not in v.notes and "these conditions make that no result" in v.notes, v.notes
    assert "no cost at all" not in str(v)


def test_a_tolerance_the_pairs_cannot_resolve_says_how_it_follows_from_their_scatter():
    """A learner read 'these pairs scatter by 14%: this machine cannot tell a cost below 41%' and could not see how
    14 % became 41 %."""
    v = measure.decide([0.7, 1.0, 1.3, 0.8, 1.2, 0.9, 1.1], claim="c", expected="A no slower", no_worse_than=0.12,
                       timed=False)
    assert f"{measure.RESOLVE:g}x the pairs' scatter" in v.notes or f"{measure.RESOLVE:g}x that scatter" in v.notes, v.notes


def test_a_summary_carries_the_verdicts_outcome_never_a_bare_ratio(monkeypatch):
    under(monkeypatch, BUSY)  # every pair above 2x: the verdict holds although the machine was busy
    held = measure.decide([5.5, 4.9, 6.1, 5.2, 5.8], claim="async vs sync, straggler x4", expected="async faster",
                          lab="08")
    assert held.verdict == measure.HOLDS and "5.50x (range" in held.outcome() and "-> holds (" in held.outcome()
    assert "every one of 5 pairs favours one side" in held.outcome()  # the condition it was decided under, carried
    assert measure.NOT_MEASURABLE not in held.outcome()  # as_result would have refused the same figure
    refused = measure.decide([1.5, 1.4, 1.6, 1.5, 1.3], claim="2 workers vs 1", expected="2 faster", lab="09")
    text = refused.outcome()
    assert text.startswith("not measurable here: other programs used 1.7 of 2 cores") and measure.UNREAD in text
    assert "-> " not in text and "1.50" not in text  # no ratio beside the reason that rules it out (issue 51)


@pytest.mark.parametrize("ratios", [[0.95, 1.0, 1.04, 1.0, 0.99, 1.02], [0.93, 0.99, 1.05, 1.0, 0.97],
                                    [0.95, 1.0, 1.035, 1.01, 0.99]])
def test_a_restated_tolerance_and_its_threshold_print_the_same_claim(ratios):
    """Lab 04 printed "no worse by more than 12%: it holds while the whole range lies above 0.90" (11.7 % restated):
    1/1.12 is 0.89, as lab 05 printed for the same 12 %. The tolerance is restated up to a whole percent."""
    said = measure.decide(ratios, claim="A vs B", expected="e", no_worse_than=0.05)
    assert "restated" in said.notes
    percent = int(re.search(r"no worse by more than (\d+)%'", str(said)).group(1))
    assert said.holds_from == pytest.approx(1 / (1 + percent / 100))
    assert f"lies above {1 / (1 + percent / 100):.2f}" in str(said)


def test_a_paired_figure_is_read_on_a_busy_machine_only_when_every_round_is_beyond_the_load():
    # learner s6B, lab 09: "3.90x (ratio of the medians)" printed with no verdict and no word on the busy machine
    read = measure.as_paired_result("3.90x", [4.08, 3.72], load=BUSY)
    assert read.startswith("3.90x, read although the machine was busy") and "every one of 2 rounds" in read
    refused = measure.as_paired_result("1.60x", [2.4, 1.2], load=BUSY)
    assert refused.startswith(measure.NOT_MEASURABLE) and "1.60" not in refused
    quiet = conditions.Load(60.0, 2, own=1.9, others=0.05, steal=0.0)
    assert measure.as_paired_result("1.60x", [2.4, 1.2], load=quiet) == "1.60x"


def test_a_busy_machine_refusal_points_to_the_one_statement_of_the_rule():
    # learner s6B: the threshold for "too busy to read" had to be inferred by comparing labs
    from pathlib import Path

    said = measure.unreadable(None, BUSY)
    assert said and verdicts.RULE in said
    heading = verdicts.RULE.split("'")[1]
    assert f"**{heading}.**" in (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_stability_marks_a_run_that_fell_back_to_no_cost_at_all(tmp_path):
    """The session-6 reading: lab 08's run whose pairs scattered 32 % tested 'no cost at all' (too noisy to test a
    cost) and the table called it 'as claimed' beside a run that tested 14 %."""
    from lab_utils.instructor.course import stability

    def run(name, ratios):
        folder = tmp_path / name / "results"
        measure.decide(ratios, claim="A vs B", expected="A no slower", lab="08", workload=workloads.STEP_DIGITS_TF,
                       no_worse_than=0.10).record(folder)
        return folder

    tight = run("tight", [1.0, 0.99, 1.01, 1.0, 0.995, 1.0])
    wild = run("wild", [1.6, 1.2, 1.9, 1.4, 2.3, 1.5])  # scatter far above MAX_RESTATED, every pair above 1: a win
    assert "too much to test a cost" in measure.read_verdicts(wild)[-1]["notes"]
    claim = stability.compare_runs([tight, wild])[0]
    assert claim.tested == ("", stability.WIN_ONLY) and claim.restated
    text = stability.claims_table([claim], ["tight", "wild"])
    assert "win only" in text and stability.WIN_ONLY in text and "as claimed" in text
    assert "no cost at all" not in text and "<=0%" not in text  # learner s8f: never worded as a stronger claim


def test_a_range_end_is_printed_with_the_decimals_that_show_its_side_of_1_and_of_the_threshold():
    # learner s7: "range 1.00-1.94 -> not distinguishable" (its low end 0.9998), "range 0.85-0.95" against "it holds
    # while the whole range lies above 0.85" (0.8465 against 0.8475)
    from lab_utils.measure.verdicts import Verdict

    near_one = Verdict("A vs B", "A faster", 1.83, 0.9998, 1.94, measure.UNDECIDED, 9)
    assert "range 0.9998-1.94 over 9" in flat(near_one) and "(range 0.9998-1.94)" in near_one.outcome()
    near_floor = Verdict("sync vs async", "no slower", 0.87, 0.8465, 0.95, measure.UNDECIDED, 9, holds_from=0.8475)
    assert "lies above 0.848" in flat(near_floor) and "range 0.847-0.95 over 9" in flat(near_floor)
    plain = Verdict("A vs B", "A faster", 1.1, 1.04, 1.2, measure.HOLDS, 9)
    assert "range 1.04-1.20 over 9" in flat(plain)


def test_an_upper_bound_claim_is_read_from_the_candidates_side():
    """'A slower than B' and 'A ahead by at most x' are decided from A's side, the figure a table and a plot print
    (issue 51: lab 02 drew DataParallel at 0.51x beside a verdict of one device 1.95x)."""
    slower = [0.5, 0.52, 0.48, 0.55, 0.51]
    v = measure.decide(slower, claim="DataParallel vs one device", expected="DataParallel slower", upper=True)
    assert v.verdict == measure.HOLDS and v.ratio == pytest.approx(0.51) and v.low < v.high < 1
    assert "below 1 means DataParallel slower" in str(v) and "above 1 means" not in str(v)
    assert measure.decide([1 / r for r in slower], claim="c", expected="A slower", upper=True).verdict == measure.REVERSED
    assert measure.decide([0.97, 1.02, 0.99, 1.01, 1.0], claim="c", expected="A slower",
                          upper=True).verdict == measure.UNDECIDED
    ahead = [1.1, 1.05, 1.2, 1.15, 1.0]  # async over sync: ahead, by less than the 30 % allowed
    bound = measure.decide(ahead, claim="async vs sync", expected="async ahead by at most its idle share",
                           no_worse_than=0.30, upper=True)
    assert bound.verdict == measure.HOLDS and bound.holds_from == pytest.approx(1.30)
    assert "it holds while the whole range lies below 1.30" in str(bound)
    far = measure.decide([1.6, 1.7, 1.65, 1.8, 1.75], claim="c", expected="e", no_worse_than=0.10, upper=True)
    assert far.verdict == measure.REVERSED
    restated = measure.decide(ahead, claim="c", expected="e", no_worse_than=0.05, upper=True)
    assert "'ahead by no more than 28%'" in restated.notes and "cost" not in restated.notes
    with pytest.raises(ValueError):
        measure.decide(ahead, claim="c", expected="e", upper=True, same_work=True)


def test_a_restated_verdict_leads_with_the_claim_it_tested():
    """The line and the outcome lead with the claim tested; the prediction follows, marked restated weaker (issue 51:
    'Hogwild within 5 % ... tested as 10 % -> holds' read as 'within 5 %: holds')."""
    noisy = [0.91, 0.97, 1.07, 0.99, 0.95]
    said = measure.decide(noisy, claim="Hogwild vs sync", expected="Hogwild within 5 %", no_worse_than=0.05)
    line = str(said)
    assert line.startswith("verdict, Hogwild vs sync: holds\n    tested as 'no worse by more than 25%' (predicted: "
                           "Hogwild within 5 %; restated weaker, see the"), line
    assert said.outcome().startswith("tested as 'no worse by more than 25%': ")
    kept = measure.decide([1.0, 0.99, 1.01, 1.0, 0.995], claim="c", expected="e", no_worse_than=0.10)
    assert "(predicted: e)\n" in str(kept) and "restated" not in str(kept)


def test_a_tables_paired_figure_is_n_m_where_the_run_refuses_it_and_the_line_under_it_says_why():
    # lab 09's table printed 'bf16 autocast 1.80x' above a verdict that refused it on a busy run (learner s8)
    ratios = [1.9, 1.8, 1.7, 2.1, 1.6]
    assert measure.table_ratio(ratios, QUIET) == "1.80x" and measure.n_m_line(QUIET) == ""
    assert measure.table_ratio(ratios, BUSY) == "n/m"
    assert measure.n_m_line(BUSY).startswith("n/m: not measurable here: other programs used 1.7 of 2 cores")
    assert measure.table_ratio([2.5, 3.0, 2.8, 2.6, 4.0], BUSY) == "2.80x"  # every round beyond 2x: read, as verdicts do
    assert measure.table_ratio([2.5, 3.0, 1.9, 2.6, 4.0], BUSY) == "n/m"


def test_a_recorded_verdict_says_which_side_of_1_means_what(tmp_path):
    """Lab 10 reprints recorded verdicts: an upper-bound claim's '0.50x -> holds' needs its side (issue 51)."""
    measure.decide([0.5, 0.52, 0.48, 0.55, 0.51], claim="DataParallel vs one device", expected="DataParallel slower",
                   lab="02", workload=workloads.SWEEP_3CONV.name, upper=True).record(tmp_path, HW)
    measure.decide([1.2, 1.1, 1.3, 1.25, 1.15], claim="ring vs library", expected="no slower", lab="06",
                   workload=workloads.SWEEP_3CONV.name, no_worse_than=0.10).record(tmp_path, HW)
    directions = [row["direction"] for row in measure.read_verdicts(tmp_path)]
    assert directions == ["below 1 means DataParallel slower", "above 1 favours ring"]


def test_noise_loosens_an_upper_bound_and_never_tightens_it():
    """An upper bound on A's lead restated by noisy pairs tests a larger lead, past MAX_RESTATED too (issue 51: lab 08
    printed 'async ahead by at most 26 %' as 'tested as not ahead at all ... below 1.00', a stronger claim)."""
    noisy = [1.12, 0.87, 1.49, 1.0, 1.3]  # async over sync: range 0.87-1.49, scatter far above MAX_RESTATED / 3
    v = measure.decide(noisy, claim="async vs sync", expected="async ahead by at most 26 %", no_worse_than=0.26,
                       upper=True, timed=False)
    assert v.holds_from > 1 + measure.MAX_RESTATED and v.holds_from > v.high  # loosened beyond the cap, not to 1
    assert v.verdict == measure.HOLDS and "not ahead at all" not in str(v)
    assert f"tested as 'ahead by no more than {v.holds_from - 1:.0%}'" in str(v) and "restated weaker" in str(v)
    assert "so no verdict" not in v.notes and "a noisier run tests a weaker claim" in v.notes
    far = measure.decide([2.6, 2.9, 3.1, 2.7, 4.5], claim="c", expected="e", no_worse_than=0.26, upper=True, timed=False)
    assert far.verdict != measure.HOLDS  # a lead beyond even the loosened bound never holds
    capped = measure.decide([1 / r for r in noisy], claim="c", expected="A no slower", no_worse_than=0.26, timed=False)
    assert capped.holds_from == 1.0 and "so only a win could decide" in capped.notes  # a cost claim keeps its cap (only a win decides)


def test_pairs_too_noisy_for_a_cost_claim_say_so_and_never_word_it_as_a_stronger_claim():
    """Issue 51 (learner s8f, lab 04): pairs scattering 19.7 % printed 1F1B vs GPipe as 'tested as no cost at all', a
    stronger claim than the predicted 'at most 10 % slower', beside the rule 'a noisier run tests a weaker claim'."""
    noisy = [1.13, 0.95, 1.48, 1.04, 1.30, 0.99, 1.20]  # range crosses 1, scatter far above MAX_RESTATED / RESOLVE
    v = measure.decide(noisy, claim="1F1B vs GPipe", expected="1F1B at most 10 % slower", no_worse_than=0.10,
                       timed=False)
    line, outcome = str(v), v.outcome()
    assert v.verdict == measure.UNDECIDED and v.holds_from == 1.0  # only a win could decide, and none came
    for text in (line, outcome):
        assert "no cost at all" not in text and "tested as" not in text, text
        assert f"too noisy to test a cost up to {measure.MAX_RESTATED:.0%}" in text and "only a win could decide" in text
    assert "so no verdict" not in v.notes and "so only a win could decide" in v.notes  # the note says what the line says
    won = measure.decide([1.6, 1.2, 1.9, 1.4, 2.3, 1.5], claim="c", expected="A at most 10 % slower", no_worse_than=0.10,
                         timed=False)
    assert won.verdict == measure.HOLDS and "tested as no cost at all" not in str(won)  # a win holds, worded as a win


def test_a_verdict_reads_its_pairs_under_the_load_it_is_given(monkeypatch):
    """Lab 05's 2 workers vs 1 were timed in a launch: the verdict reads them under that launch's load, not under the
    mean of every window since the last record (issue 51, learner s8f, lab 05 finding 3)."""
    under(monkeypatch, QUIET)
    ratios = [1.45, 1.40, 1.50, 1.42, 1.48, 1.44]
    assert measure.decide(ratios, claim="2 workers vs 1", expected="2 faster", workers=2).verdict == measure.HOLDS
    busy = measure.decide(ratios, claim="2 workers vs 1", expected="2 faster", workers=2, load=BUSY)
    assert busy.verdict == measure.CANNOT_SEE and "other programs used 1.7" in busy.notes, busy
    mirrored = measure.verdict([1.0] * 6, ratios, claim="c", expected="e", workers=2, load=BUSY, upper=True,
                               no_worse_than=0.1)
    assert mirrored.verdict == measure.CANNOT_SEE  # the upper-bound mirror reads the same load


def test_a_refused_comparison_of_two_n_rank_setups_names_its_own_comparison_and_says_its_prediction_once(monkeypatch):
    """Lab 03's 1 bucket vs 3 (both 2 ranks) was refused with 'no speedup over one can be read', the wording of N
    ranks against one, and said its prediction twice (issue 51, learner s8f, lab 03 finding 4)."""
    under(monkeypatch, BUSY)
    expected = "one bucket faster: no core is free"
    v = measure.decide([1.14, 0.93, 1.47, 1.1, 1.2, 1.05], claim="1 bucket vs 3 buckets", expected=expected,
                       workers=2, between="1 and 3 buckets")
    assert v.verdict == measure.CANNOT_SEE and "no difference between 1 and 3 buckets can be read" in v.reason
    assert "speedup over one" not in str(v) and str(v).count(expected) == 1, str(v)
    n_vs_one = measure.decide([1.4] * 6, claim="2 ranks vs 1", expected="2 ranks faster", workers=2)
    assert "no speedup over one can be read" in n_vs_one.reason  # N against one keeps its wording


def test_a_seeded_accuracy_verdict_names_no_load_but_an_untimed_one_that_load_can_move_does(monkeypatch):
    """Lab 03's linear-scaling verdict compares seeded runs' accuracies, the same on a busy machine: no load note
    (learner s8f, lab 03 finding 5); lab 08's asynchronous accuracies depend on timing, so theirs keeps it."""
    under(monkeypatch, BUSY)
    seeded = measure.verdict([0.85, 0.86, 0.84, 0.85, 0.86], [0.80, 0.81, 0.79, 0.80, 0.82], claim="lr x 2 vs lr",
                             expected="lr x 2 more accurate", higher_is_better=True, timed=False, seeded=True)
    assert seeded.verdict == measure.HOLDS and "other programs used" not in seeded.notes, seeded.notes
    timing_moved = measure.verdict([0.85, 0.86, 0.84, 0.85, 0.86], [0.80, 0.81, 0.79, 0.80, 0.82], claim="async",
                                   expected="async more accurate", higher_is_better=True, timed=False)
    assert "other programs used 1.7" in timing_moved.notes
    timed = measure.verdict([1.0] * 5, [1.3] * 5, claim="t", expected="A faster", seeded=True, workers=2)
    assert "other programs used 1.7" in timed.notes  # seeded says nothing about a timed figure


def test_the_n_vs_one_load_check_reads_the_n_sides_rate_over_ones(monkeypatch):
    """Learner s9c, lab 10 finding 5: lab 13's 'data parallel vs spatial' (2 ranks each side, 3.15x) and 'one device
    vs spatial' (one over N, 24.6x) were read as 2 ranks over one, so a quiet machine refused data parallel with 'the
    rates measured give 2 ranks more than the 2.0 free core(s) allow' while it ran SLOWER than one process."""
    import nbformat

    under(monkeypatch, conditions.Load(30.0, 2, own=1.9, others=0.0, steal=0.0))
    n_vs_n = [3.1, 1.9, 3.3, 2.9, 3.2, 3.0]  # data parallel over spatial, both 2 ranks: no rate over one in it
    wrong = measure.decide(n_vs_n, claim="dp vs spatial", expected="dp faster", lab="13", workers=2)
    assert wrong.verdict == measure.CANNOT_SEE and "more than the 2.0 free core" in wrong.reason  # the bug, as read
    right = measure.decide(n_vs_n, claim="dp vs spatial", expected="dp faster", lab="13", workers=2, against_one=False)
    assert right.verdict == measure.HOLDS and not right.reason, right
    one_over_n = [1.9, 2.4, 2.6, 2.3, 2.5]  # one device over 2 ranks (A is the one): 2 ranks ran at 0.4x of one
    assert measure.decide(one_over_n, claim="one vs spatial", expected="one faster", lab="13",
                          workers=2).verdict == measure.CANNOT_SEE  # read as 2.3x of one: refused, wrongly
    one = measure.decide(one_over_n, claim="one vs spatial", expected="one faster", lab="13", workers=2, one_is_a=True)
    assert one.verdict == measure.HOLDS and not one.reason, one
    beyond = measure.decide([1 / r for r in (2.6, 1.9, 2.9, 2.7, 2.8)], claim="one vs spatial", expected="one faster",
                            lab="13", workers=2, one_is_a=True)  # 2 ranks at 2.7x one on 2 free cores: still refused
    assert beyond.verdict == measure.CANNOT_SEE and "not steady" in beyond.reason, beyond
    cell = next(c.source for c in nbformat.read(Path(__file__).parents[1] / "solutions" /
                                                "13_spatial_parallelism.ipynb", 4).cells
                if c.cell_type == "code" and "verdicts[name, a, b] = measure.verdict(" in c.source)
    assert 'against_one="one device" in (a, b), one_is_a=a == "one device"' in cell  # lab 13 says which side is N


def test_in_ipython_the_load_is_said_once_per_cell_executed():
    """The 'already said' state follows IPython's execution count: two refused verdicts in one cell print the load
    once, the next cell prints it again (run in a child process: an IPython shell in pytest's would stay)."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent('''
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        shell.run_cell("from lab_utils import conditions, measure\\n"
                       "busy = conditions.Load(60.0, 2, own=0.4, others=1.5, steal=0.0)\\n"
                       "v = [measure.decide([0.85, 0.62, 1.09, 0.9, 0.8], claim=f'c{i}', expected='e', load=busy)"
                       " for i in (1, 2)]", store_history=True)
        shell.run_cell("print(v[0]); print(v[1])", store_history=True)
        shell.run_cell("print('---'); print(v[1])", store_history=True)
    ''')
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    first, second = out.stdout.split("---\n")
    assert first.count(RERUN_WORDS) == 1 and first.rstrip().endswith(f"cannot be seen here: {printed.LOAD_ABOVE}"), out
    assert second.count(RERUN_WORDS) == 1 and printed.LOAD_ABOVE not in second, out


def test_flagged_never_breaks_the_labs_own_line_only_its_warnings():
    """Learner s10f, lab 08 cells 35/56: a long table row with no flag printed its last column on a line of its own."""
    from lab_utils.measure import lines

    row = "async x4 " + "  ".join(f"{i:>8,}" for i in range(14))  # longer than lines.WIDTH
    assert len(row) > lines.WIDTH and measure.flagged(row, []) == row
    flagged = measure.flagged(row, [detectors.note("the same work ran 3x faster " * 6)]).splitlines()
    assert flagged[0] == row and all(line.startswith(lines.HANG) for line in flagged[1:]), flagged
    assert max(len(line) for line in flagged[1:]) <= lines.LONGEST


def test_an_upper_bound_claim_reads_the_n_workers_rate_over_ones_from_the_right_side(monkeypatch):
    """Learner s10e, lab 02 cell 29: 'DataParallel slower than one device' (upper=True) at 0.5x was refused as '2
    devices more than the 1.5 free cores allow': the mirror claim read one device's 2x lead as the 2 devices' rate."""
    busy = conditions.Load(30.0, 2, own=1.5, others=0.5, steal=0.0)
    dp_over_one = [0.50, 0.52, 0.48, 0.51, 0.49, 0.53]  # 2 devices at half one device's speed
    v = measure.decide(dp_over_one, claim="DataParallel vs one device", expected="DataParallel slower", lab="02",
                       workers=2, what="devices", upper=True, load=busy)
    assert "free core(s) allow" not in (v.reason or ""), v.reason
    too_fast = measure.decide([1.8, 1.85, 1.75, 1.9, 1.8, 1.85], claim="DataParallel vs one device",
                              expected="DataParallel slower", lab="02", workers=2, what="devices", upper=True,
                              load=busy)  # 2 devices at 1.8x one on 1.5 free cores: that one is refused
    assert too_fast.verdict == measure.CANNOT_SEE and "free core(s) allow" in too_fast.reason, too_fast


def test_a_predictions_own_tolerance_above_the_restating_cap_is_tested_as_it_is():
    """Learner s10j (lab 02 cell 34): 'DDP no slower than DataParallel by more than its all-reduce' (54 % of a step)
    read 0.69x, range 0.67-0.72, from pairs scattering 3.7 %, as 'only a win could decide' and 'not distinguishable':
    the 54 % was the prediction's, not a restatement, and the whole range lies above 1 / 1.54."""
    pairs = [0.69, 0.68, 0.70, 0.67, 0.71, 0.69, 0.72, 0.68]
    v = measure.decide(pairs, claim="DDP vs DataParallel", expected="DDP no slower by more than its all-reduce",
                       lab="02", no_worse_than=0.54, timed=False)
    assert v.verdict == measure.HOLDS and v.holds_from == pytest.approx(1 / 1.54), v
    assert "only a win could decide" not in str(v) and "restated" not in v.notes, v
    beyond = measure.decide([0.60, 0.62, 0.61, 0.63, 0.60, 0.62], claim="DDP vs DataParallel", expected="x", lab="02",
                            no_worse_than=0.54, timed=False)  # 1.64x slower: past the predicted 54 %
    assert beyond.verdict != measure.HOLDS, beyond
    noisy = measure.decide([0.5, 1.6, 0.7, 1.4, 0.9, 1.2, 0.6, 1.5], claim="c", expected="x", lab="02",
                           no_worse_than=0.10, timed=False)  # restated past 30 %: only a win decides, as before
    assert noisy.holds_from == 1.0 and noisy.verdict != measure.HOLDS, noisy


def test_a_claim_too_weak_to_test_says_why_in_plain_words():
    # learner s10j: 'past the 30% the course restates a claim to' was opaque
    v = measure.decide([0.7, 1.3, 0.9, 1.2, 0.8, 1.1, 1.0], claim="c", expected="e", no_worse_than=0.05, timed=False,
                       seeded=True)
    assert "more than the 30% the course tests, so only a win could decide" in v.notes
    assert "restates a claim to" not in v.notes and "only a win could decide" in v.notes


def test_a_claim_whose_whole_range_clears_its_stated_margin_is_not_restated_weaker():
    """Learner s11d, lab 04 finding 6: '1F1B vs GPipe: holds, tested as no worse by more than 23%' with its range
    1.005-1.16 wholly above 1 / 1.10: the claim as stated (10 %) holds, so it is tested and printed as stated."""
    clears = [1.005, 1.16, 1.09, 1.02, 1.12, 1.07, 1.10, 1.04, 1.01, 1.15]  # scatter 7 %: 3x it is 22 %, past 10 %
    assert measure.ratio_scatter(clears) * measure.RESOLVE > 0.15
    v = measure.decide(clears, claim="A vs B", expected="A no slower", no_worse_than=0.10, timed=False)
    assert v.verdict == measure.HOLDS and "restated" not in v.notes and v.holds_from == pytest.approx(1 / 1.10)
    assert "tested as 'no worse by more than 10%'" in str(v) and "restated weaker" not in str(v), str(v)
    # the same scatter with its low end below 1 / 1.10: the stated claim is not shown, so the weaker one is tested
    below = [r - 0.12 for r in clears]
    w = measure.decide(below, claim="A vs B", expected="A no slower", no_worse_than=0.10, timed=False)
    assert w.low < 1 / 1.10 and "restated" in w.notes and "restated weaker" in str(w), str(w)
    # an upper bound (decided on the mirror) keeps the same rule: a range wholly inside the stated bound is as stated
    inside = [1 / r for r in clears]
    u = measure.decide(inside, claim="A vs B", expected="A ahead by at most 10 %", no_worse_than=0.10, upper=True,
                       timed=False)
    assert u.verdict == measure.HOLDS and "restated" not in u.notes, str(u)


def test_an_extra_work_cost_claim_too_noisy_to_test_prints_its_own_threshold_and_no_win():
    """Learner s11f, lab 12 finding 1: 'record on vs off' (extra_work: record on does the step and more) printed
    'only a win could decide' and 'holds while the whole range lies above 1.00' for a claim of 'under 2 %'. A win of
    the side doing more work is noise, so these pairs decide nothing, and the threshold printed is the claim's, 0.98."""
    noisy = [1.04, 0.54, 1.64, 0.9, 1.2, 0.7, 1.3]  # the quiet run's scatter (52.7 %)
    v = measure.decide(noisy, claim="record on vs off", expected="the record costs under 2 %", no_worse_than=0.02,
                       extra_work=True, timed=False)
    text, outcome = flat(v), v.outcome()
    assert v.verdict == measure.UNDECIDED and v.holds_from == pytest.approx(1 / 1.02)
    assert "lies above 0.98" in text and "above 1.00" not in text
    for said in (text, outcome):
        assert "only a win" not in said and f"test a cost up to {measure.MAX_RESTATED:.0%}: {measure.NO_DECISION}" in said
    won = measure.decide([1.6, 1.5, 1.9, 1.4, 2.3, 1.5, 0.6], claim="c", expected="A costs under 2 %", no_worse_than=0.02,
                         extra_work=True, timed=False)
    assert won.verdict == measure.UNDECIDED  # a wide range above 1 from the side doing more work decides nothing


def test_a_cost_claims_threshold_says_it_is_one_over_one_plus_the_cost():
    """Learner s11r2g, lab 08: "no worse by more than 8%" beside "lies above 0.93": a learner reads 8 % worse as 0.92
    and the range's 0.92 as on the limit; the threshold names its source, 1/1.08."""
    said = measure.decide([0.96, 0.92, 0.97, 0.95, 0.96], claim="A vs B", expected="e", no_worse_than=0.05)
    assert "no worse by more than 8%'" in str(said)
    assert "lies above 0.93 (= 1/1.08);" in " ".join(str(said).split())
    upper = measure.decide([1.05, 1.1, 1.08, 1.07, 1.06], claim="A vs B", expected="e", no_worse_than=0.3, upper=True)
    assert "(= 1/" not in str(upper)  # an upper bound is the lead itself, 1 + lead


def test_a_verdicts_figure_has_the_decimals_of_its_range():
    """Learner s12r3f, lab 12 finding 1: '1.00x ... range 0.998-0.998' printed the figure outside its own range."""
    v = measure.decide([0.9979] * 21, claim="record on vs off", expected="the record costs under 2 %",
                       no_worse_than=0.02, extra_work=True, load=None, timed=False)
    text = str(v)
    assert "0.998x" in text and "1.00x" not in text and "range 0.998-0.998" in text, text
    plain = measure.decide([1.21, 1.3, 1.25, 1.22, 1.28], claim="a vs b", expected="a faster", load=None, timed=False)
    assert f"{plain.ratio:.2f}x (" in str(plain)  # two decimals where the range needs no more


def test_the_readme_states_the_minimum_effect_the_verdicts_use():
    """Learner s13r6d: the 5 % rule decided verdicts while no page a learner reads stated it."""
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    assert f"at least {round(measure.MIN_EFFECT * 100)} % from 1, `measure.MIN_EFFECT`" in readme


def test_medians_beside_a_verdict_are_said_once_with_both_numbers():
    """Learner s13r6e (lab 05 finding 1, lab 06 finding 6): a table's medians gave 1.55x beside a verdict's 1.25x and
    only a generic 'each median comes from other rounds' line explained it: the line names both figures."""
    from lab_utils import conditions, measure

    quiet = conditions.Load(60.0, 2, own=0.4, others=0.0, steal=0.0)
    v = measure.decide([1.25, 1.17, 1.68, 1.2, 1.3, 1.22, 1.4], claim="a vs b", expected="a faster", load=quiet)
    line = measure.medians_beside(v, 1.5478, [0.69, 0.26])
    assert line.startswith("the two medians give 1.55x, the verdict 1.25x") and "spreads 69 % and 26 %" in line
    assert line.endswith("the comparison's figure is the verdict's")
    assert measure.medians_beside(v, 1.2514) == ""  # printed alike: nothing to explain
