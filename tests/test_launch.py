"""Every promise of lab_utils.launch, on real spawned processes over gloo on loopback."""
import os
import socket
import time

import pytest

from lab_utils import ddp, launch as launch_mod
from lab_utils.launch import RankError, launch


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_values_come_back_in_rank_order_with_torchrun_environment():
    values = launch(ddp.whoami_worker, 2, timeout=60)
    assert [v["rank"] for v in values] == [0, 1]
    assert [v["env"]["RANK"] for v in values] == ["0", "1"]
    assert all(v["env"]["WORLD_SIZE"] == "2" and v["env"]["MASTER_ADDR"] == "127.0.0.1" for v in values)
    assert all(v["sum_of_ranks"] == 1.0 for v in values)  # a real all_reduce happened
    assert all(v["backend"] == "gloo" and v["threads"] == 1 for v in values)  # CPU plan: one thread per rank
    if len(os.sched_getaffinity(0)) >= 2:
        assert len(values[0]["cores"]) == 1 and values[0]["cores"] != values[1]["cores"]  # a core of its own


def test_core_sets_are_disjoint_and_fit():
    from lab_utils.launch import core_sets

    n = len(os.sched_getaffinity(0))
    sets = core_sets(n, 1)
    assert len(sets) == n and set().union(*sets) == os.sched_getaffinity(0)
    assert core_sets(n + 1, 1) is None and core_sets(1, n + 1) is None


def test_a_raising_rank_is_named_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        launch(ddp.failing_worker, 2, args=(1,), timeout=60)
    assert info.value.rank == 1
    assert "ValueError: rank 1 found a bad batch" in str(info.value)
    assert "Traceback" in info.value.traceback_text and "failing_worker" in info.value.traceback_text
    assert time.monotonic() - start < 30  # the waiting rank 0 was stopped, not waited for


def test_a_hanging_rank_times_out_and_everything_stops():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 8 s"):
        launch(ddp.hanging_worker, 2, timeout=8)
    assert time.monotonic() - start < 8 + 6


def test_a_rank_that_exits_without_an_exception_is_named():
    with pytest.raises(RankError, match=r"rank 1 failed: the process exited with code 3 without raising"):
        launch(ddp.exiting_worker, 2, args=(3,), timeout=60)


def test_a_taken_port_is_retried(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        real = launch_mod.free_port
        monkeypatch.setattr(launch_mod, "free_port", lambda host="127.0.0.1": next(ports, None) or real(host))
        values = launch(ddp.whoami_worker, 2, timeout=60)
    assert [v["rank"] for v in values] == [0, 1]


def test_a_given_busy_port_fails_with_an_explanation():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises((RankError, TimeoutError)) as info:
            launch(ddp.whoami_worker, 2, timeout=30, port=taken.getsockname()[1])
    if isinstance(info.value, RankError):
        assert "port" in str(info.value).lower() or "address" in str(info.value).lower()


def test_grandchildren_do_not_outlive_the_launch():
    pids = launch(ddp.children_worker, 1, timeout=30)
    time.sleep(0.2)
    assert not alive(pids[0])


def test_notebook_defined_worker_gets_an_explanation():
    import __main__

    def worker(rank, world_size):
        return rank

    worker.__module__, worker.__qualname__ = "__main__", "notebook_only_worker"
    __main__.notebook_only_worker = worker  # picklable here, missing in the spawned process
    try:
        with pytest.raises(RankError) as info:
            launch(worker, 1, timeout=60)
    finally:
        del __main__.notebook_only_worker
    assert "Can't get attribute 'notebook_only_worker'" in str(info.value)
    assert "importable module" in info.value.hint


def test_a_killed_rank_is_named_with_the_signal():
    with pytest.raises(RankError, match=r"rank 0 failed: the process was killed by signal SIGKILL"):
        launch(ddp.exiting_worker, 1, args=(-9,), timeout=60)


def test_unpicklable_worker_and_bad_arguments_are_refused_before_spawning():
    with pytest.raises(ValueError, match="top level of an importable module"):
        launch(lambda rank, ws: rank, 1)
    with pytest.raises(ValueError, match="world_size must be a positive integer"):
        launch(ddp.whoami_worker, 0)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        launch(ddp.whoami_worker, 1, timeout=0)


def test_ten_launches_leave_no_processes_and_no_descriptors():
    import psutil

    me = psutil.Process()
    launch(ddp.whoami_worker, 1, timeout=60)  # warm-up: first-use imports and threads
    fds = me.num_fds()
    for _ in range(10):
        launch(ddp.whoami_worker, 2, timeout=60)
    leftovers = [p for p in me.children(recursive=True) if "resource_tracker" not in " ".join(p.cmdline())]
    assert leftovers == []  # multiprocessing's one shared resource tracker is not a rank
    assert me.num_fds() <= fds + 2
