import dataclasses
from pathlib import Path

import pytest

from lab_utils import hardware

CPU_ONLY = hardware.HardwareReport("laptop", 2, (), "3.11", "2.13.0", "2.21.0")
ONE_GPU = hardware.HardwareReport("ws", 8, (hardware.GPU(0, "G", 24.0),), "3.11", "2.13.0", "2.21.0")
FOUR_GPUS = hardware.HardwareReport("srv", 32, tuple(hardware.GPU(i, "G", 80.0) for i in range(4)), "3.11", "2.13.0", "-")


def test_cpu_only_plan_gives_each_rank_one_thread_over_gloo():
    p = hardware.plan(2, CPU_ONLY)
    assert p.backend == "gloo"
    assert p.devices == ("cpu", "cpu")
    assert p.threads_per_rank == 1
    assert not p.uses_gpus
    assert "no GPU" in p.reason and "oversubscribed" not in p.reason


def test_more_cpu_ranks_than_cores_run_but_warn():
    p = hardware.plan(4, CPU_ONLY)
    assert p.backend == "gloo" and len(p.devices) == 4
    assert "oversubscribed" in p.reason


def test_ranks_share_one_gpu_over_gloo_because_nccl_refuses_duplicates():
    p = hardware.plan(3, ONE_GPU)
    assert p.backend == "gloo"
    assert p.devices == ("cuda:0",) * 3
    assert "Duplicate GPU" in p.reason


def test_one_gpu_per_rank_uses_nccl():
    p = hardware.plan(4, FOUR_GPUS)
    assert p.backend == "nccl"
    assert p.devices == ("cuda:0", "cuda:1", "cuda:2", "cuda:3")
    assert p.threads_per_rank is None


def test_more_ranks_than_gpus_round_robin():
    assert hardware.plan(6, FOUR_GPUS).devices == ("cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0", "cuda:1")


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_invalid_world_size_is_refused(bad):
    with pytest.raises(ValueError, match="world_size must be a positive integer"):
        hardware.plan(bad, CPU_ONLY)


def test_impossible_world_size_names_the_limit():
    with pytest.raises(ValueError, match=r"(?s)world_size=9 is impossible.*at most 8 ranks"):
        hardware.plan(9, CPU_ONLY)


def test_device_for_rank_checks_range():
    p = hardware.plan(2, CPU_ONLY)
    assert p.device(1) == "cpu"
    with pytest.raises(ValueError, match="rank 2 is outside 0..1"):
        p.device(2)


def test_describe_says_what_and_why():
    text = hardware.plan(2, FOUR_GPUS).describe()
    assert "backend nccl" in text and "rank 1 -> cuda:1" in text and "why:" in text
    cpu = hardware.plan(2, hardware.detect()).describe()  # learners: 'why: no GPU ...' lines of 110 characters
    assert max(len(line) for line in text.splitlines() + cpu.splitlines()) <= 100, cpu


def test_detect_reports_this_machine():
    hw = hardware.detect()
    assert hw.cpu_count >= 1
    assert hw.torch_version.startswith("2.")
    assert "CPU cores" in hw.describe()
    assert hw.gpu_names == "; ".join(g.name for g in hw.gpus)
    assert hardware.plan(1, hw).world_size == 1


def test_package_version_of_missing_package():
    assert hardware.package_version("surely-not-installed-package-xyz") == "not installed"


def test_launch_timeouts_grow_with_how_slowly_this_machine_computes(monkeypatch):
    from lab_utils import hardware

    real = hardware.slowness(repeats=3)
    assert 1.0 <= real <= hardware.MAX_SLOWNESS
    monkeypatch.setattr(hardware, "_reference_work", lambda: 3 * hardware.REFERENCE_WORK_S)
    assert hardware.slowness() == 3.0 and hardware.launch_timeout(120) == 360
    monkeypatch.setattr(hardware, "_reference_work", lambda: 100 * hardware.REFERENCE_WORK_S)
    assert hardware.launch_timeout(120) == 120 * hardware.MAX_SLOWNESS  # capped: a stuck rank is still stopped
    monkeypatch.setattr(hardware, "_reference_work", lambda: 0.1 * hardware.REFERENCE_WORK_S)
    assert hardware.launch_timeout(120) == 120  # a faster machine keeps the reference's timeouts


def test_a_labs_set_up_prints_its_plan_and_the_launch_limit(monkeypatch, capsys):
    from lab_utils import hardware

    hw = hardware.detect()
    assert hardware.show_plan(2, hw) == hardware.plan(2, hw)
    assert capsys.readouterr().out == hardware.plan(2, hw).describe() + "\n"
    assert hardware.launch_limit(45) == 45 and capsys.readouterr().out == "every launch may run up to 45 s\n"
    monkeypatch.setattr(hardware, "slowness", lambda: 1.5)
    # learner s9a: 268 s in lab 06 and 155 s in lab 07 minutes apart, with nothing saying why: the factor is printed
    assert hardware.launch_limit(None, 180) == 270 and capsys.readouterr().out == (
        "every launch may run up to 270 s\n    (180 s on the course's machine x 1.50: this machine measured 1.50x slower "
        "just now;\n    a busy moment measures slower)\n")
    # learners s9i, s9j: 'x 1.00: this machine measured that much slower' read as a contradiction: worded by the factor
    monkeypatch.setattr(hardware, "slowness", lambda: 1.0)
    assert hardware.launch_limit(None, 120) == 120
    printed = capsys.readouterr().out
    assert printed == (  # learner s13r5h: '120 s (120 s on the course's machine ...)' printed one figure twice
        "every launch may run up to 120 s, as on the course's machine\n    (this machine measured as fast as the "
        "course's just now; a busy moment measures slower)\n")
    assert max(len(line) for line in printed.splitlines()) <= 100  # learner s10j: a 170-character line
    assert "slower" not in hardware.speed_words(1.004) and "0.80" in hardware.speed_words(0.8)
    assert "1.25x faster" in hardware.speed_words(0.8) and "2.00x slower" in hardware.speed_words(2.0)


# ---- the CPU this process really has (cpu_budget) on fake /proc and /sys trees ------------------------------------

def _tree(tmp_path, cgroup: str | None, files: dict, mountinfo: str | None = None):
    """A fake root: proc/self/cgroup, proc/self/mountinfo and cgroup files (a value None makes a folder: unreadable)."""
    if cgroup is not None:
        (tmp_path / "proc/self").mkdir(parents=True)
        (tmp_path / "proc/self/cgroup").write_text(cgroup)
    if mountinfo is not None:
        (tmp_path / "proc/self/mountinfo").write_text(mountinfo)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.mkdir()
        else:
            path.write_text(text)
    return tmp_path


def test_v2_nested_groups_take_the_smallest_quota_up_to_the_root(tmp_path):
    root = _tree(tmp_path, "0::/hub/user/kernel\n", {"sys/fs/cgroup/hub/cpu.max": "300000 100000\n",
                                                     "sys/fs/cgroup/hub/user/cpu.max": "100000 100000\n",
                                                     "sys/fs/cgroup/hub/user/kernel/cpu.max": "max 100000\n",
                                                     "sys/fs/cgroup/other/cpu.max": "10000 100000\n"})
    budget = hardware.cpu_budget(root, environ={}, mask_cores=4)
    assert (budget.cpus, budget.source, budget.whole(), budget.limited_by_quota) == (1.0, "cgroup quota", 1, True)
    assert budget.describe() == ("1.0 CPU: cgroup quota 100000/100000 us (set on a parent group); "
                                 "4 cores in the affinity mask")
    assert budget.notes == ()


def test_v1_follows_proc_self_cgroup_through_mountinfo_to_its_own_group(tmp_path):
    mountinfo = ("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
                 "32 31 0:29 /docker /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n")
    root = _tree(tmp_path, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n",
                 {"sys/fs/cgroup/cpu,cpuacct/abc/cpu.cfs_quota_us": "150000\n",
                  "sys/fs/cgroup/cpu,cpuacct/abc/cpu.cfs_period_us": "100000\n",
                  "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                  "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, mountinfo)
    budget = hardware.cpu_budget(root, environ={}, mask_cores=2)
    assert (budget.cpus, budget.whole()) == (1.5, 1)
    assert budget.describe() == "1.5 CPUs: cgroup quota 150000/100000 us; 2 cores in the affinity mask"
    version, group, quota = hardware.quota_group(root)
    assert (version, group, quota) == (1, root / "sys/fs/cgroup/cpu,cpuacct/abc", 1.5)


def test_v1_without_mountinfo_uses_the_usual_mount_point(tmp_path):
    root = _tree(tmp_path, "2:cpu:/lab\n", {"sys/fs/cgroup/cpu/lab/cpu.cfs_quota_us": "100000",
                                             "sys/fs/cgroup/cpu/lab/cpu.cfs_period_us": "100000"})
    budget = hardware.cpu_budget(root, environ={}, mask_cores=2)
    assert budget.describe() == "1.0 CPU: cgroup quota 100000/100000 us; 2 cores in the affinity mask"
    assert budget.source == "cgroup quota" and budget.limited_by_quota


@pytest.mark.parametrize("files, said", [
    ({"sys/fs/cgroup/k/cpu.max": "max 100000"}, "no cgroup CPU quota"),
    ({"sys/fs/cgroup/k/cpu.max": "lots 100000"}, "malformed cgroup cpu.max 'lots 100000': assumed no quota"),
    ({"sys/fs/cgroup/k/cpu.max": "0 100000"}, "malformed"),
    ({"sys/fs/cgroup/k/cpu.max": ""}, "malformed"),
    ({"sys/fs/cgroup/k/cpu.max": None}, "could not read cpu.max"),
])
def test_a_quota_of_max_a_malformed_or_unreadable_file_is_noted_and_the_mask_stands(tmp_path, files, said):
    budget = hardware.cpu_budget(_tree(tmp_path, "0::/k\n", files), environ={}, mask_cores=2)
    assert (budget.cpus, budget.source, budget.limited_by_quota) == (2.0, "affinity mask", False)
    assert any(said in note for note in budget.notes), budget.notes


def test_v1_malformed_quota_and_a_missing_period_are_survived(tmp_path):
    root = _tree(tmp_path, "1:cpu:/a/b\n", {"sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us": "abc\n",
                                             "sys/fs/cgroup/cpu/a/b/cpu.cfs_period_us": "100000\n",
                                             "sys/fs/cgroup/cpu/a/cpu.cfs_quota_us": "50000\n"})
    budget = hardware.cpu_budget(root, environ={}, mask_cores=2)
    assert budget.cpus == 2.0 and any("malformed cgroup cpu.cfs_quota_us 'abc'" in n for n in budget.notes)


def test_no_cgroup_files_at_all_leave_the_mask(tmp_path):
    budget = hardware.cpu_budget(tmp_path, environ={}, mask_cores=3)
    assert (budget.cpus, budget.whole(), budget.notes) == (3.0, 3, ())
    assert budget.describe() == "3.0 CPUs: 3 cores in the affinity mask"


def test_a_quota_above_the_cores_does_not_limit(tmp_path):
    root = _tree(tmp_path, "0::/k\n", {"sys/fs/cgroup/k/cpu.max": "400000 100000"})
    budget = hardware.cpu_budget(root, environ={}, mask_cores=2)
    assert (budget.cpus, budget.source, budget.limited_by_quota) == (2.0, "affinity mask", False)
    assert "cgroup quota 400000/100000 us" in budget.describe()


@pytest.mark.parametrize("value, cpus, whole, noted", [("0.5", 0.5, 1, False), ("1", 1.0, 1, False),
                                                       ("abc", 4.0, 4, True), ("0", 4.0, 4, True),
                                                       ("-2", 4.0, 4, True), ("nan", 4.0, 4, True)])
def test_cpu_limit_from_the_environment(tmp_path, value, cpus, whole, noted):
    budget = hardware.cpu_budget(tmp_path, environ={"CPU_LIMIT": value}, mask_cores=4)
    assert (budget.cpus, budget.whole()) == (cpus, whole)
    assert budget.limited_by_quota == (not noted)
    assert bool(budget.notes) == noted and (not noted or f"CPU_LIMIT={value!r}" in budget.notes[0])
    if not noted:
        assert budget.source == "CPU_LIMIT" and budget.describe().startswith(f"{cpus} CPU: CPU_LIMIT={value}")


def test_slurm_counts_only_inside_an_allocation(tmp_path):
    outside = hardware.cpu_budget(tmp_path, environ={"SLURM_CPUS_PER_TASK": "1"}, mask_cores=8)
    assert outside.cpus == 8.0
    per_task = hardware.cpu_budget(tmp_path, environ={"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "3",
                                                      "SLURM_CPUS_ON_NODE": "6"}, mask_cores=8)
    assert (per_task.cpus, per_task.source) == (3.0, "Slurm") and "SLURM_CPUS_PER_TASK=3" in per_task.describe()
    on_node = hardware.cpu_budget(tmp_path, environ={"SLURM_JOB_ID": "7", "SLURM_CPUS_ON_NODE": "6"}, mask_cores=8)
    assert on_node.cpus == 6.0 and "SLURM_CPUS_ON_NODE=6" in on_node.describe()
    # the smallest of all wins, and the describe() puts it first
    both = hardware.cpu_budget(tmp_path, environ={"SLURM_JOB_ID": "7", "SLURM_CPUS_ON_NODE": "6", "CPU_LIMIT": "2"},
                               mask_cores=8)
    assert both.source == "CPU_LIMIT" and both.describe().startswith("2.0 CPUs: CPU_LIMIT=2")


QUOTA_1 = hardware.CpuBudget(1.0, "cgroup quota", (hardware.CpuSource("affinity mask", 2.0, "2 cores in the affinity mask"),
                                                    hardware.CpuSource("cgroup quota", 1.0, "cgroup quota 100000/100000 us")))


def test_the_rank_plan_and_the_fingerprint_follow_the_quota(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_budget", lambda *a, **k: QUOTA_1)
    assert hardware.usable_cpu_count() == 1
    hw = hardware.detect()
    assert hw.cpu_count == 1 and "2 usable" not in hw.fingerprint()
    assert "1 usable by this process (its CPU time: 1.0 CPU: cgroup quota 100000/100000 us" in hw.fingerprint()
    assert "oversubscribed" in hardware.plan(2, hw).reason


def test_a_quota_slows_ranks_but_does_not_lower_how_many_can_start(monkeypatch):
    # issue 46: under a real 1-CPU quota lab 08's check of average_and_apply (4 workers + 1 server) raised "world_size=5
    # is impossible here: this machine has 1 CPU core(s)" and failed the solution: the quota takes no core away
    monkeypatch.setattr(hardware, "cpu_budget", lambda *a, **k: QUOTA_1)
    hw = hardware.detect()
    assert hardware.rank_limit(hw) == (2, 8)
    assert len(hardware.plan(5, hw).devices) == 5 and "oversubscribed" in hardware.plan(5, hw).reason
    with pytest.raises(ValueError, match=r"has 2 CPU core\(s\); use at most 8 ranks \(ideally <= 1\)"):
        hardware.plan(9, hw)
    assert hardware.rank_limit(CPU_ONLY) == (2, 8)  # no quota: the report's cores, whatever this machine has


def test_the_real_v1_quota_of_a_child_cgroup(tmp_path):
    """As root, on a cgroup v1 machine: a child python in a group with a 1-CPU quota reports 1.0 CPU, the quota."""
    import os
    import subprocess
    import sys

    top = Path("/sys/fs/cgroup/cpu")
    if os.geteuid() != 0 or not (top / "cpu.cfs_quota_us").exists() or not os.access(top, os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    if hardware.cpu_budget().cpus < 2:
        pytest.skip("this process has less than 2 CPUs already: a 1-CPU quota would not be what limits it")
    group = top / f"lab_test_{os.getpid()}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("100000")
        procs = group / "cgroup.procs"
        code = ("from lab_utils.hardware import cpu_budget\nb = cpu_budget()\n"
                "print(b.cpus, b.source, b.limited_by_quota, sep='|')\nprint(b.describe())")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                             preexec_fn=lambda: procs.write_text(str(os.getpid())))
        first, described = out.stdout.splitlines()
        assert first == "1.0|cgroup quota|True"
        assert described.startswith("1.0 CPU: cgroup quota 100000/100000 us")
    finally:
        group.rmdir()
    assert not group.exists()


def test_the_rank_limit_says_where_its_number_comes_from():
    """A learner read 'use at most 8 ranks' on 2 cores and could not tell where the 8 came from."""
    with pytest.raises(ValueError, match=rf"(?s){hardware.MAX_RANKS_PER_CORE} ranks per core.*Ideally one rank per core"):
        hardware.plan(100, CPU_ONLY)


def test_a_cpu_plan_says_how_its_ranks_sit_on_the_cores_in_short_lines():
    """Learner s10a, lab 00 cell 12: '4 rank(s) use 4 of 2 core(s)' read as a typo, in a 320-character line."""
    four = hardware.plan(4, CPU_ONLY).describe()
    assert "4 ranks share the 2 cores" in four and "4 of 2" not in four and "rank(s)" not in four.split("why:")[1], four
    assert "2 ranks use 2 of the 2 cores" in hardware.plan(2, CPU_ONLY).describe()
    assert "1 rank uses 1 of the 2 cores" in hardware.plan(1, CPU_ONLY).describe()
    assert all(len(line) <= 116 for line in four.splitlines()) and "oversubscribed" in four, four


def test_an_impossible_world_size_is_said_in_lines_a_notebook_shows_whole():
    """Learner s10i, lab 00 cell 16: the world_size=100 ValueError printed as one ~420-character line."""
    for hw in (CPU_ONLY, hardware.HardwareReport("big", 128, (), "3.11", "2", "-")):
        with pytest.raises(ValueError) as err:
            hardware.plan(100_000, hw)
        printed = f"ValueError: {err.value}"  # as lab 00 prints it
        assert len(printed.splitlines()) >= 4 and max(len(line) for line in printed.splitlines()) < 100, printed
        said = " ".join(line.strip() for line in printed.splitlines())
        for meaning in (f"world_size=100000 is impossible here", f"has {hw.cpu_count} CPU core(s); use at most "
                        f"{4 * hw.cpu_count} ranks", "ranks per core, enough to show what oversubscribing does",
                        "their timeouts fire", "Ideally one rank per core (or GPU): only that many compute at once"):
            assert meaning in said, said


def test_the_bf16_line_names_only_the_features_this_cpu_has():
    """Learner s12r3a, lab 00 finding 2: 'native (avx512_bf16 / AMX)' read as 'AMX present' without amx_bf16."""
    def line(features):
        hw = dataclasses.replace(CPU_ONLY, cpu_features=features)
        return next(x for x in hw.fingerprint().splitlines() if x.startswith("bf16 on CPU"))
    assert line("avx2 avx512_bf16") == "bf16 on CPU: native (avx512_bf16)"
    assert line("avx512_bf16 amx_bf16") == "bf16 on CPU: native (amx_bf16, avx512_bf16)"
    assert line("avx2 fma").startswith("bf16 on CPU: emulated")
