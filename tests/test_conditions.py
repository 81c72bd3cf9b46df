"""lab_utils.conditions: what else used the machine while a lab measured, and how the labs' tables and CSVs say so."""
import dataclasses
import os
import subprocess
import sys
import time

import pytest

from pathlib import Path

from lab_utils import conditions, hardware, measure, workloads
from lab_utils.conditions import Load, Sample


def test_load_between_two_samples_splits_the_machines_cpu_into_ours_others_and_steal():
    load = conditions.between(Sample(10.0, 100.0, 5.0, 3.0), Sample(12.0, 103.0, 5.2, 4.0), cores=2)
    assert (load.seconds, load.own, load.others) == (2.0, 0.5, 1.0) and load.steal == pytest.approx(0.1)
    assert load.busy and "other programs used 1.0 of 2 cores" in load.line() and "rerun" in load.line()
    assert load.note() and "; " not in load.note()[0]  # a results-row note, which flags splits at "; "
    quiet = conditions.between(Sample(0.0, 0.0, 0.0, 0.0), Sample(10.0, 19.0, 0.0, 18.5), cores=2)
    assert not quiet.busy and quiet.note() == [] and "rerun" not in quiet.line()
    # our own CPU can exceed what /proc/stat counted between two reads of different files: never negative others
    assert conditions.between(Sample(0.0, 0.0, 0.0, 0.0), Sample(1.0, 1.0, 0.0, 1.2), cores=2).others == 0.0


def test_a_program_outside_this_process_tree_is_counted_as_others():
    if conditions.sample() is None:
        pytest.skip("no /proc here: nothing to measure the machine with")
    # sh starts the burner and exits at once: the burner is no descendant of this process
    subprocess.run(["sh", "-c", f"{sys.executable} -c 'import time\nt = time.time()\nwhile time.time() - t < 3: pass' &"],
                   check=True)
    time.sleep(0.3)
    conditions.taken(reset=True)
    with conditions.measuring():
        time.sleep(1.5)
    load = conditions.taken(reset=True)
    assert load.others >= 0.5 and load.own < 0.2 and load.busy, load
    assert conditions.taken() is None  # reset: nothing measured since


def test_measuring_windows_add_up_weighted_by_their_length():
    conditions.taken(reset=True)
    conditions._WINDOWS.extend([Load(1.0, 2, 1.0, 0.0, 0.0), Load(3.0, 2, 0.0, 2.0, 0.0)])
    assert conditions.last_window() == Load(3.0, 2, 0.0, 2.0, 0.0)  # one measurement's own conditions (issue 51)
    load = conditions.taken(reset=True)
    assert (load.seconds, load.own, load.others) == (4.0, 0.25, 1.5)
    assert conditions.last_window() is None


def test_a_busy_machine_is_noted_in_the_rows_the_table_and_the_verdicts(monkeypatch, isolated_results):
    busy = Load(5.0, 2, 1.0, 0.6, 0.0)  # busy, but under measure.UNREADABLE_SHARE: a verdict is still decided
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy)
    verdict = measure.verdict([1.0] * 5, [2.0] * 5, claim="A vs B", expected="A faster", lab="00",
                              workload=workloads.FORWARD)
    assert verdict.notes == busy.note()[0] and busy.note()[0] in str(verdict)
    row = measure.Result(lab="00", framework="torch", strategy="single-device", world_size=1, device="cpu",
                         batch_size=8, samples_per_s=100.0, wall_s=0.08, workload="w")
    text = measure.record([row, row])
    text = " ".join(text.split())  # the machine line wraps at measure.lines.WIDTH
    assert busy.line() in text and text.count(busy.note()[0]) == 0  # one machine line, not a note per row
    assert all(busy.note()[0] in r.flags for r in measure.read_results(isolated_results))
    verdict.record()
    assert measure.read_verdicts(isolated_results)[0]["notes"] == busy.note()[0]


def test_launch_and_the_timers_count_as_measuring():
    from lab_utils.launch import launch

    conditions.taken(reset=True)
    measure.time_interleaved({"a": lambda: None}, warmup=0, repeats=2)
    launch(_rank, 1, timeout=60)
    load = conditions.taken(reset=True)
    if conditions.sample() is not None:
        assert load is not None and load.seconds > 0


def _rank(rank, world_size):
    return os.getpid()


# ---- throttling by a CPU quota: measured from cpu.stat, named as the cause ----------------------------------------

THROTTLED = Load(10.0, 2, 1.0, 0.0, 0.0, quota_cpus=1.0, throttled_share=0.71)
QUOTA_1 = hardware.CpuBudget(1.0, "cgroup quota", (hardware.CpuSource("affinity mask", 2.0, "2 cores in the affinity mask"),
                                                    hardware.CpuSource("cgroup quota", 1.0, "cgroup quota 100000/100000 us")))


def test_a_throttled_window_names_the_quota_and_what_to_do():
    assert THROTTLED.cause(workers=2) == ("this notebook may use 1.0 CPU (cgroup quota) and was throttled in 71 % of the "
                                          "window: 2 ranks share it: ask for cpu_limit >= 2 or run 1 rank")
    assert THROTTLED.cause().startswith("this notebook may use 1.0 CPU (cgroup quota) and was throttled in 71 %")
    assert THROTTLED.cause() in THROTTLED.line() and "throttled it in 71 % of its periods" in THROTTLED.line()
    assert THROTTLED.note() == [THROTTLED.cause()] and "; " not in THROTTLED.note()[0]
    assert not THROTTLED.busy  # a quota is not other programs: only the cause and the note say it


def test_a_quiet_window_has_no_cause_even_under_a_quota():
    under_quota = Load(10.0, 2, 0.9, 0.0, 0.0, quota_cpus=1.0, throttled_share=0.02)
    assert under_quota.cause() is None and under_quota.note() == []
    assert "rerun" not in under_quota.line() and "not this machine's quiet speeds" not in under_quota.line()
    assert Load(10.0, 2, 1.0, 0.0, 0.0).cause() is None


def test_other_programs_and_steal_are_causes_too_and_add_up_with_throttling():
    busy = Load(5.0, 2, 0.2, 1.7, 0.0)
    assert busy.cause() == "other programs used 1.7 of 2 cores"
    assert Load(5.0, 2, 0.2, 0.0, 0.5).cause() == "the hypervisor stole 0.5 of 2 cores"
    both = Load(5.0, 2, 1.0, 1.2, 0.0, quota_cpus=1.0, throttled_share=0.5)
    assert both.cause().startswith("this notebook may use 1.0 CPU") and "other programs used 1.2 of 2 cores" in both.cause()
    assert len(both.note()) == 1 and "; " not in both.note()[0] and "throttled in 50 %" in both.note()[0]


def test_between_counts_the_share_of_periods_throttled():
    first = Sample(0.0, 0.0, 0.0, 0.0, periods=100, throttled=10, throttled_s=1.0, quota_cpus=1.0, quota_source="cgroup quota")
    last = Sample(10.0, 10.0, 0.0, 9.0, periods=200, throttled=81, throttled_s=4.0, quota_cpus=1.0, quota_source="cgroup quota")
    load = conditions.between(first, last, cores=2)
    assert load.quota_cpus == 1.0 and load.throttled_share == pytest.approx(0.71) and load.throttled
    no_quota = conditions.between(Sample(0.0, 0.0, 0.0, 0.0, periods=0), Sample(1.0, 1.0, 0.0, 1.0, periods=0), cores=2)
    assert (no_quota.quota_cpus, no_quota.throttled_share, no_quota.cause()) == (None, 0.0, None)
    conditions.taken(reset=True)
    conditions._WINDOWS.extend([Load(1.0, 2, 1.0, 0.0, 0.0, 1.0, 0.0), Load(3.0, 2, 1.0, 0.0, 0.0, 1.0, 0.8)])
    assert conditions.taken(reset=True).throttled_share == pytest.approx(0.6)


@pytest.mark.parametrize("cgroup, stat_file, stat, seconds", [
    ("1:cpu:/g\n", "sys/fs/cgroup/cpu/g/cpu.stat", "nr_periods 923\nnr_throttled 659\nthrottled_time 44000000000\n", 44.0),
    ("0::/g\n", "sys/fs/cgroup/g/cpu.stat", "usage_usec 5\nnr_periods 923\nnr_throttled 659\nthrottled_usec 44000000\n", 44.0),
])
def test_throttling_reads_the_quota_groups_cpu_stat_v1_and_v2(tmp_path, cgroup, stat_file, stat, seconds):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    group = (tmp_path / stat_file).parent
    group.mkdir(parents=True)
    (tmp_path / stat_file).write_text(stat)
    if cgroup.startswith("0::"):
        (group / "cpu.max").write_text("100000 100000\n")
    else:
        (group / "cpu.cfs_quota_us").write_text("100000\n")
        (group / "cpu.cfs_period_us").write_text("100000\n")
    assert conditions.throttling(tmp_path) == (923, 659, seconds, 1.0)
    (tmp_path / stat_file).write_text("nr_periods lots\n")  # malformed: nothing counted, nothing raised
    assert conditions.throttling(tmp_path) == (0, 0, 0.0, None)
    assert conditions.throttling(tmp_path / "nowhere") == (0, 0, 0.0, None)


def test_speedup_visible_says_why_n_workers_cannot_beat_one_here():
    assert conditions.speedup_visible(2, QUOTA_1) == ("this notebook may use 1.0 CPU (cgroup quota): 2 ranks share one "
                                                     "CPU's time, so they cannot beat one")
    half = hardware.CpuBudget(0.5, "CPU_LIMIT", (hardware.CpuSource("CPU_LIMIT", 0.5, "CPU_LIMIT=0.5 in the environment"),))
    assert "may use 0.5 CPU (CPU_LIMIT)" in conditions.speedup_visible(2, half)
    two = hardware.CpuBudget(2.0, "affinity mask", (hardware.CpuSource("affinity mask", 2.0, "2 cores"),))
    assert conditions.speedup_visible(2, two) is None and conditions.speedup_visible(1, QUOTA_1) is None
    busy = Load(5.0, 2, 0.2, 1.7, 0.0)
    assert conditions.speedup_visible(2, two, busy) == ("other programs used 1.7 of 2 cores on average over the 5.0 s "
                                                        "this measured, 0.3 free on average: too few for 2 ranks to run "
                                                        "side by side all along, so no speedup over one can be read "
                                                        "from this run")
    # learner s10a: "2 threads share the 1.2 left" beside rates 1.69x apart; the reason states the measured mean and
    # its window, never a share the workers had all along, which a ratio above the free cores would refute
    lab00 = conditions.speedup_visible(2, two, Load(2.4, 2, 1.0, 0.8, 0.0), what="threads")
    assert "share the" not in lab00 and "1.2 free on average" in lab00 and "over the 2.4 s" in lab00, lab00
    assert "(0.2 s)" in Load(0.2, 2, 1.0, 0.0, 0.0).line()  # a short window never reads as "(0 s)"
    assert conditions.speedup_visible(2, two, Load(5.0, 2, 1.9, 0.1, 0.0)) is None
    # issue 46: lab 00's "2 threads vs 1 thread" said "2 ranks share one CPU's time"; threads are named threads
    assert "2 threads share one CPU's time" in conditions.speedup_visible(2, QUOTA_1, what="threads")
    assert "too few for 2 devices" in conditions.speedup_visible(2, two, busy, what="devices")
    said = measure.as_result("0.49x", workers=2, load=busy, what="threads")
    assert said.startswith("not measurable here: ") and "too few for 2 threads" in said and said.endswith(f"({measure.UNREAD})")
    # issue 51 (lab 05): no ratio beside a reason that rules it out ("cannot beat one ... 1.48x" read as a contradiction)
    assert "0.49" not in said and "cannot beat one" not in conditions.speedup_visible(2, two, busy)


def test_a_refused_speedup_that_beats_the_free_cores_says_the_load_was_not_steady():
    # learner s6B, lab 05: 2 workers ran 1.55x one while the refusal said only 0.6 core was left
    busy = Load(5.0, 2, 0.6, 1.4, 0.0)
    said = measure.as_result("1.55x", workers=2, load=busy, what="workers", ratio=1.55)
    assert said.startswith("not measurable here: ") and "was not steady" in said and "0.6 free core" in said
    assert "1.55" not in said  # still no ratio beside the refusal
    assert "not steady" not in measure.as_result("0.95x", workers=2, load=busy, what="workers", ratio=0.95)
    assert measure.as_result("1.55x", workers=2, load=Load(5.0, 2, 1.9, 0.1, 0.0), ratio=1.55) in (
        "1.55x", measure.as_result("1.55x", workers=2, load=Load(5.0, 2, 1.9, 0.1, 0.0)))  # read: nothing added


def test_an_impossible_speedup_names_the_quota_or_the_busy_machine_as_its_cause(monkeypatch):
    from lab_utils import detectors

    monkeypatch.setattr(conditions, "taken", lambda reset=False: THROTTLED)
    flags = measure.plausibility(speedup=3.42, devices=2)
    assert len(flags) == 1 and detectors.ABOVE_100 in flags[0] and "noise" not in flags[0]
    assert "the baseline was slowed: this notebook may use 1.0 CPU (cgroup quota) and was throttled in 71 %" in flags[0]
    assert "; " not in flags[0] and "[!]" in measure.flagged("2 threads vs 1 thread: 3.42x", flags)
    monkeypatch.setattr(conditions, "taken", lambda reset=False: Load(5.0, 2, 0.3, 1.6, 0.0))
    assert "the baseline was slowed: other programs used 1.6 of 2 cores" in measure.plausibility(speedup=3.4, devices=2)[0]
    monkeypatch.setattr(conditions, "taken", lambda reset=False: Load(5.0, 2, 1.9, 0.0, 0.0))
    assert "(noise, another job" in measure.plausibility(speedup=3.4, devices=2)[0]  # quiet: the cause is unknown
    assert measure.plausibility(speedup=1.8, devices=2) == []


def test_a_flag_under_a_quota_names_it_when_other_programs_held_the_cores_before_it_could_throttle(monkeypatch):
    # issue 46, under a real 1-CPU quota on a loaded machine: lab 00's and lab 02's "2 threads at 0.49x / 0.02x one
    # thread" named only the other programs (throttled in 0 % of periods), not the quota that gave 2 threads 1 CPU
    from lab_utils import detectors

    busy_under_quota = Load(5.0, 2, 0.4, 1.6, 0.0, quota_cpus=1.0, throttled_share=0.0)
    assert busy_under_quota.cause(2, "threads") == ("this notebook may use 1.0 CPU (cgroup quota), less than the 2 "
                                                    "threads it ran side by side, and other programs used 1.6 of 2 cores")
    assert busy_under_quota.cause() == "other programs used 1.6 of 2 cores"  # one worker: the quota is no cause
    assert busy_under_quota.cause(1) == busy_under_quota.cause()
    quiet_under_quota = Load(5.0, 2, 0.9, 0.0, 0.0, quota_cpus=1.0, throttled_share=0.02)
    assert quiet_under_quota.cause(2) is None  # not throttled and nothing else ran: the quota slowed nothing
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy_under_quota)
    flags = measure.plausibility(speedup=0.02, devices=1, threads=2)
    # the measured load explains the wait: a note that names it, not a `[!]` (issue 51: "[!]" beside its own cause)
    assert len(flags) == 1 and not detectors.impossible(flags) and "waited for cores held elsewhere" in flags[0]
    assert "(this notebook may use 1.0 CPU (cgroup quota), less than the 2 threads it ran side by side, and" in flags[0]
    assert "noise" not in flags[0]
    above = measure.plausibility(speedup=3.42, devices=2)
    assert "the baseline was slowed: this notebook may use 1.0 CPU (cgroup quota), less than the 2 devices" in above[0]
    assert all("; " not in f for f in flags + above)
    # lab 03's "baseline 474 samples/s is 0.39x lab 01's" guessed "another framework or job": it names what was measured
    off = measure.plausibility(baseline_rate=474, reference_rate=1213)
    assert len(off) == 1 and "(measured while other programs used 1.6 of 2 cores)" in off[0] and "framework" not in off[0]


def test_the_real_quota_throttles_two_spinners_and_the_window_says_so(tmp_path):
    """As root on cgroup v1: two spinning processes in a group with a 0.1-CPU quota are throttled, and a measuring
    window inside that group reads the quota, the throttled share and names them as its cause."""
    top = Path("/sys/fs/cgroup/cpu")
    if os.geteuid() != 0 or not (top / "cpu.stat").exists() or not os.access(top, os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    if hardware.cpu_budget().cpus < 2:
        pytest.skip("this process has less than 2 CPUs already: the quota would not be what limits it")
    group = top / f"lab_test_throttle_{os.getpid()}"
    group.mkdir()
    spin = "import time\nt = time.time()\nwhile time.time() - t < 10: pass"  # ends by itself, whatever happens
    code = (f"import subprocess, sys, time\nfrom lab_utils import conditions\nSPIN = {spin!r}\n"
            "spin = [subprocess.Popen([sys.executable, '-c', SPIN]) for _ in range(2)]\n"
            "time.sleep(0.3)\n"
            "with conditions.measuring():\n    time.sleep(1.5)\n"
            "[p.kill() for p in spin]\n[p.wait() for p in spin]\n"
            "load = conditions.taken()\nprint(load.quota_cpus, load.quota_source, load.throttled_share, load.own, sep='|')\n"
            "print(load.cause(workers=2))")
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("10000")  # 0.1 CPU: throttled even when others load the machine
        procs = group / "cgroup.procs"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                             preexec_fn=lambda: procs.write_text(str(os.getpid())))
    finally:
        group.rmdir()
    first, cause = out.stdout.splitlines()
    quota, source, share, own = first.split("|")
    assert (quota, source) == ("0.1", "cgroup quota") and float(own) <= 0.2, out.stdout  # the quota holds the tree
    if float(own) >= 0.08:  # the spinners got their CPU time (a machine loaded beyond 10 processes a core may not)
        assert float(share) > 0.2 and cause.startswith("this notebook may use 0.1 CPU (cgroup quota) and was throttled")
        assert "2 ranks share it: ask for cpu_limit >= 2 or run 1 rank" in cause


# ---- graceful beside classmates: threads fitted to the CPU free at a lab's start, passive waiting in ranks ----------

TWO_CORES = hardware.CpuBudget(2.0, "affinity mask", (hardware.CpuSource("affinity mask", 2.0, "2 cores in the affinity mask"),))


@pytest.mark.parametrize("others, budget, free", [(0.1, TWO_CORES, 2), (1.0, TWO_CORES, 1), (0.3, TWO_CORES, 1),
                                                  (2.5, TWO_CORES, 1), (0.0, QUOTA_1, 1)])
def test_free_cpus_are_the_cores_minus_others_use_within_the_budget(monkeypatch, others, budget, free):
    readings = iter([Sample(0.0, 0.0, 0.0, 0.0), Sample(1.0, others, 0.0, 0.0)])
    monkeypatch.setattr(conditions, "sample", lambda: next(readings))
    monkeypatch.setattr(conditions.os, "cpu_count", lambda: 2)
    assert conditions.free_cpus(0.0, budget) == free


def fit_threads_beside(monkeypatch, others: float) -> tuple[str, int]:
    """(fit_threads' line, the threads it set) on 2 cores while other programs use `others` of them; torch's thread
    count is put back afterwards."""
    import torch

    readings = iter([Sample(0.0, 0.0, 0.0, 0.0), Sample(1.0, others, 0.0, 0.0)])
    monkeypatch.setattr(conditions, "sample", lambda: next(readings))
    monkeypatch.setattr(conditions.os, "cpu_count", lambda: 2)
    before = torch.get_num_threads()
    try:
        return conditions.fit_threads(0.0, TWO_CORES), torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_fit_threads_sets_torchs_intra_op_threads_and_says_why(monkeypatch):
    said, threads = fit_threads_beside(monkeypatch, 1.0)  # a classmate's burner: 1 of 2 cores
    assert threads == 1
    assert " ".join(said.split()) == ("torch intra-op threads: 1, one per CPU free now: this notebook may use 2.0 "
                                      "CPUs: 2 cores in the affinity mask, but other programs used 1.0 of 2 cores "
                                      "while it looked, leaving 1.0 free")
    assert max(len(line) for line in said.splitlines()) <= 100  # learners: one line of 183 characters
    idle, _ = fit_threads_beside(monkeypatch, 0.0)  # learner s11a, lab 01 cell 2: 'but ... used 0.0' read oddly
    assert "mask, and other programs used 0.0 of 2 cores" in " ".join(idle.split()), idle


def test_fit_threads_says_why_it_runs_one_thread_when_others_hold_every_core(monkeypatch):
    # learner s8c: 'torch intra-op threads: 1 (this notebook may use 2.0 CPUs ..., other programs used 2.0 of 2
    # cores)' read as a contradiction: the line says what is left free, and that one thread runs even with none
    said, threads = fit_threads_beside(monkeypatch, 2.0)
    assert threads == 1
    assert " ".join(said.split()).endswith("other programs used 2.0 of 2 cores while it looked, leaving 0.0 free "
                                           "(at least 1 thread runs)"), said


def test_ranks_wait_passively_unless_the_user_chose_a_policy(monkeypatch):
    from lab_utils.launch import rank_environment

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert rank_environment(0, 2, 1234, 1)["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert "OMP_WAIT_POLICY" not in rank_environment(0, 2, 1234, 1)  # the launcher's environment carries ACTIVE


def test_rows_and_verdicts_measured_under_a_throttling_quota_say_so(monkeypatch, isolated_results):
    monkeypatch.setattr(conditions, "taken", lambda reset=False: THROTTLED)
    verdict = measure.verdict([1.0] * 5, [2.0] * 5, claim="A vs B", expected="A faster", lab="00")
    assert THROTTLED.cause() in verdict.notes
    row = measure.Result(lab="00", framework="torch", strategy="single-device", world_size=1, device="cpu",
                         batch_size=8, samples_per_s=100.0, wall_s=0.08, workload="w")
    text = measure.record([row])
    assert THROTTLED.line() in " ".join(text.split()) and "cgroup quota" in text
    assert all(THROTTLED.note()[0] in r.flags for r in measure.read_results(isolated_results))


def test_a_self_checks_launches_are_no_measuring_window(monkeypatch):
    """Lab 05's record read the load over its exercise 3 check's worker launches too, and warned under figures
    measured before them (learner s8)."""
    from types import SimpleNamespace

    from lab_utils.exercises import core

    def run(answer, inputs):
        with conditions.measuring():  # what launch does around its ranks
            time.sleep(0.05)
        return answer(inputs)

    fake = SimpleNamespace(cases=lambda rng: 1, run=run)
    monkeypatch.setattr(core, "get", lambda name: fake)
    monkeypatch.setattr(core, "_unwritten", lambda answer, name: False)
    conditions.taken(reset=True)
    try:
        core._checked(lambda x: x, 0)
    except Exception:  # the fake exercise has no reference to compare with: only the windows matter here
        pass
    assert conditions.taken(reset=True) is None
    with conditions.measuring():  # outside a check a launch still counts
        time.sleep(0.05)
    if conditions.sample() is not None:
        assert conditions.taken(reset=True) is not None


def test_a_row_recorded_with_its_refusal_keeps_its_own_load_and_not_the_records_mean(monkeypatch, isolated_results):
    """Lab 10 showed lab 09's refused worker row with two loads, 'other programs used 1.0' (its own launch) and 'measured
    while other programs used 1.3' (the record's whole-run mean), on adjacent lines (learner s8)."""
    busy = Load(5.0, 2, 0.5, 1.3, 0.0)
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy)
    refused = "not measurable here: other programs used 1.0 of 2 cores while this measured"
    row = measure.Result(lab="09", framework="torch", strategy="single-device", world_size=1, device="cpu",
                         batch_size=8, samples_per_s=100.0, wall_s=0.08, workload="w")
    text = measure.record([row, dataclasses.replace(row, world_size=2, flags=(refused,))])
    plain, refused_row = measure.read_results(isolated_results)
    assert busy.note()[0] in plain.flags and busy.line() in " ".join(text.split())
    assert [str(f) for f in refused_row.flags] == [refused]


def test_a_row_noted_with_its_verdicts_load_keeps_that_one_load(monkeypatch, isolated_results):
    """Lab 10 showed lab 09's worker row with its verdict's 'other programs used 0.4' and the record's 0.7 (s8d)."""
    busy = Load(5.0, 2, 0.5, 1.4, 0.0)
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy)
    own = "lab 09's verdict on this pair: 1.20x -> holds (measured while other programs used 0.4 and steal 0.0 of 2 cores)"
    row = measure.Result(lab="09", framework="torch", strategy="single-device", world_size=1, device="cpu",
                         batch_size=8, samples_per_s=100.0, wall_s=0.08, workload="w")
    measure.record([row, dataclasses.replace(row, world_size=2, flags=(own,))])
    plain, noted = measure.read_results(isolated_results)
    assert busy.note()[0] in plain.flags and [str(f) for f in noted.flags] == [own]


def test_n_workers_beyond_the_free_cores_are_not_read_in_a_verdict_or_a_summary(monkeypatch):
    """Lab 09's 2 workers held at 1.80x while others used 0.4 of 2 cores (1.6 free); lab 05 refused 1.41x on 1.3 free:
    one rule (learner s8d)."""
    monkeypatch.setattr(measure.verdicts, "run_conditions", lambda: Load(5.0, 2, 1.5, 0.4, 0.0))
    beyond = measure.decide([1.8, 1.75, 1.85, 1.78, 1.82], claim="2 workers vs 1", expected="2 faster", workers=2)
    assert beyond.verdict == measure.CANNOT_SEE and "1.6 free core" in beyond.reason and "not steady" in beyond.reason
    within = measure.decide([1.5, 1.45, 1.55, 1.48, 1.52], claim="2 workers vs 1", expected="2 faster", workers=2)
    assert within.verdict == measure.HOLDS
    said = measure.as_result("1.80x", workers=2, load=Load(5.0, 2, 1.5, 0.4, 0.0), what="workers", ratio=1.8)
    assert said.startswith("not measurable here: ") and "1.80" not in said and said.count("not steady") == 1
    assert measure.as_result("1.50x", workers=2, load=Load(5.0, 2, 1.5, 0.4, 0.0), ratio=1.5) == "1.50x"


def test_the_load_line_says_each_cause_once_and_a_short_window_in_tenths():
    """Learner s10e (lab 02 cell 13): '(0 s)' for a 0.3 s window, and 'other programs used 0.4 of 2 cores' twice."""
    busy = conditions.Load(0.3, 2, 1.0, 0.8, 0.0)
    line = busy.line()
    assert "(0.3 s)" in line and line.count("other programs used 0.8 of 2 cores") == 1, line
    assert "not this machine's quiet speeds: rerun with nothing else running" in line, line
    assert "(27 s)" in conditions.Load(27.2, 2, 1.0, 0.8, 0.0).line()
    # learner s11a, lab 00 cell 18: 'the hypervisor stole 0.0' had no unit
    assert "the hypervisor stole 0.0 cores" in conditions.Load(0.2, 2, 1.0, 0.0, 0.0).line()
