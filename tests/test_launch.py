"""Every promise of lab_utils.launch, on real rank processes over gloo on loopback."""
import os
import socket
import threading
import time

import pytest
import torch

import workers
from workers import alive
from lab_utils import launch as launch_mod
from lab_utils.launch import RankError, launch, launch_jobs


def test_values_come_back_in_rank_order_with_torchrun_environment():
    values = launch(workers.whoami_worker, 2, timeout=60)
    assert [v["rank"] for v in values] == [0, 1]
    assert [v["env"]["RANK"] for v in values] == ["0", "1"]
    assert all(v["env"]["WORLD_SIZE"] == "2" and v["env"]["MASTER_ADDR"] == "127.0.0.1" for v in values)
    assert all(v["sum_of_ranks"] == 1.0 for v in values)  # a real all_reduce happened
    assert all(v["backend"] == "gloo" and v["threads"] == 1 for v in values)  # CPU plan: one thread per rank
    if len(os.sched_getaffinity(0)) >= 2:  # not pinned: gloo's message thread must not share the rank's one core
        assert values[0]["cores"] == values[1]["cores"] == sorted(os.sched_getaffinity(0))
        pinned = launch(workers.whoami_worker, 2, timeout=60, pin_cores=True)  # asked for: a core of its own each
        assert len(pinned[0]["cores"]) == 1 and pinned[0]["cores"] != pinned[1]["cores"]


def test_ranks_start_from_a_fork_server_on_cpus_and_see_the_launchers_environment_as_it_is_now(monkeypatch, tmp_path):
    assert launch_mod.start_method(uses_gpus=True) == "spawn"  # nothing may fork a process that could hold CUDA
    assert launch_mod.start_method(uses_gpus=False) == "forkserver"

    def sees(rank, world_size):
        import sys

        return {"late": os.environ.get("LAB_SET_AFTER_THE_SERVER"), "cwd": os.getcwd(), "path": sys.path[0],
                "torch_preloaded": "torch._dynamo" in sys.modules, "parent": os.getppid()}

    launch(workers.whoami_worker, 1, timeout=60)  # the fork server is up before anything below changes
    monkeypatch.setenv("LAB_SET_AFTER_THE_SERVER", "yes")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    start = time.monotonic()
    values = launch(sees, 2, timeout=60)
    assert [v["late"] for v in values] == ["yes", "yes"] and {v["cwd"] for v in values} == {str(tmp_path)}
    assert {v["path"] for v in values} == {str(tmp_path)}
    server = launch_mod.fork_server_pid()
    assert server and {v["parent"] for v in values} == {server} and all(v["torch_preloaded"] for v in values)
    assert server in launch_mod.own_helpers()
    print(f"a 2-rank launch from the warm fork server took {time.monotonic() - start:.2f} s")


ORPHANS = """
import os, sys, time
from lab_utils.launch import launch


def sleeper(rank, world_size, folder):
    with open(os.path.join(folder, f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(300)


if __name__ == "__main__":
    launch(sleeper, 2, args=(sys.argv[1],), timeout=300)
"""


@pytest.mark.slow
def test_ranks_end_when_the_launcher_is_killed(tmp_path):
    """A killed kernel (SIGKILL: no clean-up runs) must not leave its ranks behind, though their parent is the
    fork server and not the kernel."""
    import subprocess
    import sys

    script = tmp_path / "launcher.py"
    script.write_text(ORPHANS)
    launcher = subprocess.Popen([sys.executable, str(script), str(tmp_path)])
    try:
        deadline = time.monotonic() + 180  # the ranks' start (torch's import) on a loaded machine
        while len(list(tmp_path.glob("rank*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in sorted(tmp_path.glob("rank*"))]
        assert len(pids) == 2 and all(alive(p) for p in pids)
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [alive(p) for p in pids] == [False, False]


def test_a_function_defined_in_the_test_module_namespace_travels_by_value():
    scale = 3.0  # captured by the closure: sent along with the function

    def notebook_like(rank, world_size, offset):
        import torch.distributed as dist

        with launch_mod.process_group(30):
            t = torch.tensor([rank * scale + offset])
            dist.all_reduce(t)
            return t.item()

    notebook_like.__module__ = "__main__"  # as if defined in a notebook cell: no module to import it from
    assert launch(notebook_like, 2, args=(1.0,), timeout=60) == [5.0, 5.0]


def test_jobs_run_in_the_same_ranks_each_with_a_fresh_port():
    first, second = launch_jobs([(workers.whoami_worker, ()), (workers.whoami_worker, ())], 2, timeout=60)
    assert [v["rank"] for v in first] == [0, 1] and [v["sum_of_ranks"] for v in second] == [1.0, 1.0]
    assert first[0]["port"] != second[0]["port"]


def test_a_failing_job_is_named():
    with pytest.raises(RankError, match=r"rank 1 failed: ValueError: rank 1 found a bad batch \(job 1 of 2\)"):
        launch_jobs([(workers.whoami_worker, ()), (workers.failing_worker, (1,))], 2, timeout=60)


def test_a_raising_rank_is_named_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        launch(workers.failing_worker, 2, args=(1,), timeout=60)
    assert info.value.rank == 1
    assert "ValueError: rank 1 found a bad batch" in str(info.value)
    assert "Traceback" in info.value.traceback_text and "failing_worker" in info.value.traceback_text
    assert time.monotonic() - start < 30  # the waiting rank 0 was stopped, not waited for


@pytest.mark.slow
def test_a_hanging_rank_times_out_and_everything_stops():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 8 s") as stopped:
        launch(workers.hanging_worker, 2, timeout=8)
    assert time.monotonic() - start < 8 + 6
    said = str(stopped.value).split("\n\nwhere each rank was")[0]  # the table under it is the table's own
    assert max(len(line) for line in f"TimeoutError: {said}".splitlines()) <= 100, said  # learners: 289 characters
    assert "for a peer that never comes waits forever" in " ".join(said.split())


@pytest.mark.slow
def test_a_collective_only_one_rank_calls_times_out_with_the_rule_and_no_build_path_or_address():
    with pytest.raises(RankError) as info:
        launch(workers.owner_only_broadcast_worker, 2, timeout=60)
    assert "every rank must call every collective" in info.value.hint.lower()
    assert "/" not in info.value.message and "127.0.0.1" not in info.value.message, info.value.message


def test_gloo_messages_lose_build_paths_and_network_addresses_and_are_cut_at_a_word():
    raw = ("RuntimeError: rank 2 is gone (sending to it failed: [/__w/pytorch/third_party/gloo/gloo/transport/tcp/"
           "pair.cc:553] Connection closed by peer [127.0.0.1]:5336. This is typically caused by a remote worker "
           "crashing.)")
    assert RankError(0, raw).message == ("RuntimeError: rank 2 is gone (sending to it failed: Connection closed by "
                                         "peer. This is typically caused by a remote worker crashing.)")
    assert launch_mod.sanitized("connect to [localhost]:29500 or 127.0.0.1:80 or [::1]:8080") == "connect to or or"
    assert "pair.cc" not in launch_mod.short_error(raw) and "5336" not in launch_mod.short_error(raw)
    assert launch_mod.short_error("word " * 30, 22) == "word word word word…"
    assert launch_mod.short_error(raw, sentences=1) == "RuntimeError: rank 2 is gone (sending to it failed: Connection closed by peer."


def test_a_rank_that_exits_without_an_exception_is_named():
    with pytest.raises(RankError, match=r"rank 1 failed: the process exited with code 3 without raising"):
        launch(workers.exiting_worker, 2, args=(3,), timeout=60)


def test_a_killed_rank_is_named_with_the_signal():
    with pytest.raises(RankError, match=r"rank 0 failed: the process was killed by signal SIGKILL"):
        launch(workers.exiting_worker, 1, args=(-9,), timeout=60)


def test_a_taken_port_is_retried(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        real = launch_mod.free_port
        # launch_jobs picks its port in the room it lives in
        monkeypatch.setattr("lab_utils.launch.jobs.free_port", lambda host="127.0.0.1": next(ports, None) or real(host))
        values = launch(workers.whoami_worker, 2, timeout=60)
    assert [v["rank"] for v in values] == [0, 1]


def test_a_given_busy_port_fails_naming_the_address():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RankError, match="EADDRINUSE|Address already in use"):
            launch(workers.whoami_worker, 2, timeout=30, port=taken.getsockname()[1])


@pytest.mark.parametrize("worker", [workers.children_worker, workers.daemon_worker])
def test_grandchildren_do_not_outlive_the_launch_even_in_a_session_of_their_own(worker):
    pids = launch(worker, 2, timeout=30)
    time.sleep(0.2)
    assert [alive(p) for p in pids] == [False, False]


def test_grandchildren_do_not_outlive_a_failed_launch(tmp_path):
    pids = []
    folder = str(tmp_path)

    def starts_then_fails(rank, world_size):
        import subprocess

        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        mine = f"{folder}/lab-launch-test-{rank}"
        with open(mine + ".part", "w") as f:
            f.write(str(child.pid))
        os.rename(mine + ".part", mine)
        # both ranks record their child before either fails: the first failure ends the other rank at once
        others = [f"{folder}/lab-launch-test-{r}" for r in range(world_size)]
        deadline = time.monotonic() + 20
        while not all(os.path.exists(p) for p in others) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("failed after starting a child")

    starts_then_fails.__module__ = "__main__"
    with pytest.raises(RankError):
        launch(starts_then_fails, 2, timeout=30)
    for rank in range(2):
        path = f"{folder}/lab-launch-test-{rank}"
        with open(path) as f:
            pids.append(int(f.read()))
        os.unlink(path)
    time.sleep(0.2)
    assert [alive(p) for p in pids] == [False, False]


def test_unsendable_objects_are_named_before_any_rank_starts():
    lock = threading.Lock()

    def uses_lock(rank, world_size):
        with lock:
            return rank

    with pytest.raises(ValueError, match=r"cannot send uses_lock to the ranks: it uses lock, a lock") as refused:
        launch(uses_lock, 1)
    # shown as 'ValueError: ...' every line fits 100 columns (learners, lab 03: one line of 270 characters)
    assert max(len(line) for line in f"ValueError: {refused.value}".splitlines()) <= 100, refused.value
    assert "\nFix: create it inside the worker instead" in str(refused.value)
    with open(__file__) as handle:
        with pytest.raises(ValueError, match=r"it uses args\[0\], an open file"):
            launch(workers.whoami_worker, 1, args=(handle,))


def test_bad_arguments_are_refused_before_spawning():
    with pytest.raises(ValueError, match="world_size must be a positive integer"):
        launch(workers.whoami_worker, 0)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        launch(workers.whoami_worker, 1, timeout=0)
    with pytest.raises(ValueError, match="no jobs to run"):
        launch_jobs([], 1)


def test_captured_stderr_holds_what_a_child_process_wrote():
    import subprocess
    import sys

    with launch_mod.captured_stderr() as captured:
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from the child')"])
    assert "from the child" in captured.text


def _writes_to_fd2(rank, world_size):
    import os

    os.write(2, f"rank {rank} wrote to fd 2\n".encode())
    return rank


def test_captured_stderr_holds_what_a_rank_forked_from_an_earlier_fork_server_wrote():
    launch(workers.whoami_worker, 1, timeout=60)  # the fork server starts here, with this process's fd 2
    with launch_mod.captured_stderr() as captured:
        launch(_writes_to_fd2, 2, timeout=60)
    assert "rank 0 wrote to fd 2" in captured.text and "rank 1 wrote to fd 2" in captured.text
    assert launch_mod.stderr.STDERR_FILE not in os.environ


def test_six_launches_leave_no_processes_and_no_descriptors():
    import psutil

    me = psutil.Process()
    launch(workers.whoami_worker, 1, timeout=60)  # warm-up: first-use imports and threads
    fds = me.num_fds()
    for _ in range(6):  # a descriptor leaked per launch would exceed the slack of 2
        launch(workers.whoami_worker, 2, timeout=60)
    leftovers = [p for p in me.children(recursive=True) if p.pid not in launch_mod.own_helpers()]
    assert leftovers == []  # multiprocessing's fork server and resource tracker are not ranks
    assert me.num_fds() <= fds + 2


def _session_and_group(rank, world_size):
    import os

    return [os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid()]


def test_a_rank_in_a_session_of_its_own_on_request():
    """lab 11's bench: launch's ranks share the launcher's session, unless asked to start one each (as Slurm's tasks)."""
    from lab_utils.launch import OWN_SESSION, launch

    assert launch(_session_and_group, 2, timeout=60) == [[False, True], [False, True]]
    assert launch(_session_and_group, 2, timeout=60, env={OWN_SESSION: "1"}) == [[True, True], [True, True]]


def test_free_ports_are_picked_below_the_oss_ephemeral_range_and_are_free(tmp_path, monkeypatch):
    """make test (beside learners): lab 03's jobs launched in turn hung at init_process_group, one rank past it: the
    ports picked up front for later jobs came from the OS's own range, which it hands out again (bind(0), gloo's
    connections) before the job starts. Ports now come from below that range, and are free when picked."""
    import socket

    from lab_utils.launch import environment

    low = environment.ephemeral_low()
    ports = {environment.free_port() for _ in range(20)}
    if low > environment.PICKED_FROM + 1000:
        assert all(environment.PICKED_FROM <= p < low for p in ports), (sorted(ports), low)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((environment.LOOPBACK, port))
    fake = tmp_path / "range"
    fake.write_text("1024\t60999\n")
    assert environment.ephemeral_low(str(fake)) == 1024
    assert environment.ephemeral_low(str(tmp_path / "missing")) == 0
    monkeypatch.setattr(environment, "ephemeral_low", lambda: 1024)  # no room below: the OS picks, as before
    assert environment.free_port() >= 1024


class _Repeating:
    """A random source that draws the same few ports again and again (a launch's later jobs drawn alike)."""

    def __init__(self, ports):
        self.ports, self.i = list(ports), 0

    def randrange(self, low, high):
        self.i += 1
        return self.ports[(self.i - 1) % len(self.ports)]


def test_a_launchs_later_jobs_ports_are_picked_by_rank_0_as_each_job_starts_and_differ(monkeypatch):
    """make test (beside learners): lab 07's 3-job launch hung in job 2, rank 0 in init_process_group and rank 1 timed
    out in its first collective. Two jobs given one port do exactly that (reproduced with launch_jobs): the later job's
    rank 1 joins the store rank 0 still holds from the earlier job; a port picked up front can also be taken by another
    launch before its job starts. Rank 0 now picks each later job's port as the job starts, unlike the earlier ones;
    the other ranks wait for it."""
    import random

    from lab_utils.launch import environment

    low = environment.ephemeral_low()
    if low <= environment.PICKED_FROM + 1000:
        pytest.skip("no room below the OS's ephemeral range here: the OS picks, and hands out different ports")
    first, other = environment.PICKED_FROM + 7, environment.PICKED_FROM + 11
    monkeypatch.setattr(random, "SystemRandom", lambda: _Repeating([first, first, first, other]))
    ports = [first, 0, 0]
    assert environment.job_port(ports, 0, rank=1) == first  # the first job's port: the launcher's
    waited: list[int] = []
    later = threading.Thread(target=lambda: waited.append(environment.job_port(ports, 1, rank=1)))
    later.start()
    time.sleep(0.05)
    assert later.is_alive() and not waited, "rank 1 must wait for rank 0's pick, not pick its own"
    assert environment.job_port(ports, 1, rank=0) == other  # the repeated draws of job 0's port are skipped
    later.join(5)
    assert waited == [other] and ports[1] == other
    assert environment.free_port(avoid={first, other}) not in (first, other)


def _rank_pair(rank, world_size):
    import torch.distributed as dist

    dist.init_process_group("gloo")
    out = [None] * world_size
    dist.all_gather_object(out, rank)
    dist.destroy_process_group()
    return out


def test_three_jobs_in_one_launch_each_join_their_own_group():
    """The same, end to end: three jobs in turn, each with a process group of its own, on the ports rank 0 picked."""
    from lab_utils.launch import launch_jobs

    assert launch_jobs([(_rank_pair, ())] * 3, 2, timeout=60) == [[[0, 1], [0, 1]]] * 3
