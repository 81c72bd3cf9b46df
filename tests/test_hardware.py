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
    with pytest.raises(ValueError, match=r"world_size=9 is impossible.*at most 8 ranks"):
        hardware.plan(9, CPU_ONLY)


def test_device_for_rank_checks_range():
    p = hardware.plan(2, CPU_ONLY)
    assert p.device(1) == "cpu"
    with pytest.raises(ValueError, match="rank 2 is outside 0..1"):
        p.device(2)


def test_describe_says_what_and_why():
    text = hardware.plan(2, FOUR_GPUS).describe()
    assert "backend nccl" in text and "rank 1 -> cuda:1" in text and "why:" in text


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
    assert hardware.launch_limit(None, 180) == 270 and capsys.readouterr().out == "every launch may run up to 270 s\n"
