"""Lab 11's Slurm tasks: where every task waits (the per-task hang table), a sharded checkpoint resumed on another
number of nodes, and a run that leaves no files named after its jobs. The cluster tests need `make cluster` (or a real
Slurm cluster) and say so when skipped."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from lab_utils import learner_code
from lab_utils.labs.lab11 import slurm
from lab_utils.labs.lab11 import lesson as lab11

NO_CLUSTER = slurm.find_cluster() is None


def notebook_cell(cell_id: str) -> str:
    """The source of one cell of lab 11's solution notebook, by its id."""
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def skip_script() -> str:
    """The task script of the notebook's hang demo (a task skips a collective, or raises), as the notebook writes it."""
    return re.search(r'skip_py\.write_text\("""(.*?)"""\)', notebook_cell("l11-where"), re.S).group(1)


def line_of(script: str, text: str) -> int:
    """The 1-based number of the script's line that holds `text`."""
    return next(i for i, line in enumerate(script.splitlines(), 1) if text in line)


# ---- the files a run leaves --------------------------------------------------------------------------------------

# what one run of the lab left in results/slurm/ before it cleaned up (the committed run's job ids: 171 to 200)
A_RUN = ["by-hand-171.out", "chain.out", "chain.pt", "ddp_train.csv", "ddp_train.py", "hang-195-0.out",
         "hang-195-1.out", "hang-195.out", "hello-172.out", "hello.sbatch", "hello_by_hand.sbatch", "oom-196.out",
         "overrun-182.out", "port-183", "port-184.tmp", "requeue.out", "skip-201.out", "where-201-0.json",
         "sweep-186_0.out", "sweep-186_1.out", "dcp-203.pt", "torchrun-184.out", "by-hand-99.out",
         "submitit/183_0_log.out", "submitit/183_submitted.pkl", "submitit/200_1_result.pkl", "fault/attempt-0.json",
         "sweep/task-0/lab11.csv"]


def test_the_files_named_after_this_runs_jobs_are_removed_and_nothing_else(tmp_path):
    for name in A_RUN:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "submitit/.submission_file_6f87eb.sh").symlink_to(tmp_path / "submitit/465_submission.sh")  # dangling
    (tmp_path / "submitit/.submission_file_0a1b2c.sh").symlink_to(tmp_path / "submitit/99_submission.sh")
    removed = slurm.remove_job_files(tmp_path, since=171)
    kept = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() or p.is_symlink())
    assert sorted(removed) == sorted(
        ["by-hand-171.out", "hang-195-0.out", "hang-195-1.out", "hang-195.out", "hello-172.out", "oom-196.out",
         "overrun-182.out", "port-183", "port-184.tmp", "skip-201.out", "where-201-0.json", "sweep-186_0.out",
         "sweep-186_1.out", "dcp-203.pt", "torchrun-184.out", "submitit/183_0_log.out", "submitit/183_submitted.pkl",
         "submitit/200_1_result.pkl", "submitit/.submission_file_6f87eb.sh"])
    # an earlier run's log (job 99) is not this run's; scripts, checkpoints, results and sub-folders stay
    assert kept == sorted(["by-hand-99.out", "chain.out", "chain.pt", "ddp_train.csv", "ddp_train.py", "hello.sbatch",
                           "hello_by_hand.sbatch", "requeue.out", "fault/attempt-0.json", "sweep/task-0/lab11.csv",
                           "submitit/.submission_file_0a1b2c.sh"])
    assert slurm.job_files(tmp_path, since=171) == [] and slurm.remove_job_files(tmp_path / "none", since=1) == []


@pytest.mark.slow
@pytest.mark.skipif(NO_CLUSTER, reason=slurm.SKIPPED)
def test_the_by_hand_job_and_the_clean_up_cell_leave_no_job_file_behind(tmp_path, monkeypatch):
    """The notebook's own cells run in a kernel: the hand-written script, its submission, the clean-up at the end."""
    from nbclient import NotebookClient

    setup = textwrap.dedent(f"""\
        import os
        from pathlib import Path
        from lab_utils.labs.lab11 import slurm
        cluster, timeout_s = slurm.find_cluster(), 120
        jobs = Path({str(tmp_path / "slurm")!r}); jobs.mkdir()
        by_hand = os.path.relpath(jobs / "hello_by_hand.sbatch")""")
    cells = [setup, notebook_cell("9f3c371e"), notebook_cell("e0069acd"),
             "before = sorted(p.name for p in jobs.iterdir())", notebook_cell("l11-clean")]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    monkeypatch.setenv("PYTHONPATH", str(Path(lab11.__file__).parents[3]))  # the kernel imports this lab_utils
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    said = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    job = re.search(r"job (\d+) has ended; its output file, first-by-hand-\1\.out", said).group(1)
    assert f"in job {job}" in said  # the job's own output was read before the file went
    assert sorted(p.name for p in (tmp_path / "slurm").iterdir()) == ["hello_by_hand.sbatch"]
    assert slurm.job_files(tmp_path / "slurm", since=0) == []


# ---- where every task waits ----------------------------------------------------------------------------------------

def run_task(tmp_path, body: str, env: dict) -> subprocess.Popen:
    """A Python process standing for a Slurm task (SLURM_* set by hand), running `body`."""
    return subprocess.Popen([sys.executable, "-c", body], env={**os.environ, **env, "PYTHONPATH": os.getcwd()},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_task_answers_usr1_with_its_record_and_refuses_when_usr1_was_not_blocked_first(tmp_path):
    env = {"SLURM_JOB_ID": "77", "SLURM_PROCID": "1"}
    task = run_task(tmp_path, textwrap.dedent(f"""\
        import signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})
        import time
        from lab_utils.labs.lab11 import slurm
        slurm.answer_where_asked({str(tmp_path)!r})
        time.sleep(60)
        """), env)
    try:
        path = tmp_path / "where-77-1.json"
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline and task.poll() is None:
            time.sleep(0.05)
        first = json.loads(path.read_text())
        assert first["answers"] == 1 and first["count"] == 0 and first["calls"] == []
        task.send_signal(signal.SIGUSR1)  # what `scancel --signal=USR1` does to each task
        while json.loads(path.read_text())["answers"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        answer = json.loads(path.read_text())
        assert answer["answers"] == 2 and task.poll() is None  # answered, and still running
        assert any(frame[2] == "<module>" for frame in answer["stack"])  # the main thread's stack: at its sleep
    finally:
        task.kill()
        task.communicate()
    # a thread started before USR1 was blocked (numpy's BLAS starts one when imported, where it has 2 cores or more)
    late = run_task(tmp_path, "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                    f"from lab_utils.labs.lab11 import slurm\nslurm.answer_where_asked({str(tmp_path)!r})",
                    {"SLURM_JOB_ID": "78", "SLURM_PROCID": "0"})
    _, err = late.communicate(timeout=120)
    assert late.returncode == 1 and "before USR1 was blocked" in err and "pthread_sigmask" in err, err


def test_the_table_is_per_task_and_a_stall_needs_two_same_answers():
    call = {"seq": 3, "op": "all_reduce", "shapes": [[1]], "dtype": "float32", "where": ["skip.py", 19, "<module>"],
            "state": "in progress"}
    done = dict(call, seq=2, state="completed")
    waiting = {"calls": [done, call], "count": 3, "stack": [], "line": ["skip.py", 19, "<module>"]}
    other = {"calls": [done, dict(call, op="barrier", shapes=[], dtype="", where=["skip.py", 20, "<module>"])],
             "count": 3, "stack": [], "line": ["skip.py", 20, "<module>"]}
    table = slurm.where_table({0: waiting, 1: other, 2: None})
    assert table.splitlines()[1].startswith("task | state")
    assert re.search(r"^2 +\| no answer", table, re.M)
    assert "rank 0 is in all_reduce #3 at skip.py:19; rank 1 is in barrier #3 at skip.py:20" in table
    assert slurm.where._stuck({0: waiting, 1: other}, {0: waiting, 1: other})
    assert not slurm.where._stuck({}, {0: waiting, 1: other})  # asked once: no stall yet
    moved = dict(other, count=4, calls=[done, dict(call, seq=4)])
    assert not slurm.where._stuck({0: waiting, 1: other}, {0: waiting, 1: moved})  # task 1 went on
    computing = dict(other, calls=[done])  # not in a collective: the task may be computing
    assert not slurm.where._stuck({0: waiting, 1: computing}, {0: waiting, 1: computing})


def skip_job(tmp_path, bug: str) -> tuple[int, str]:
    """The notebook's hang demo as a 2-node job in tmp_path: its job id and its script's text."""
    script = skip_script()
    (tmp_path / "skip.py").write_text(script)
    one_host = slurm.find_cluster().one_host
    (tmp_path / "skip.sbatch").write_text("\n".join([
        "#!/bin/bash", *lab11.sbatch_lines(job_name="test-skip", nodes=2, ntasks_per_node=1, time=lab11.slurm_time(2),
                                           output=tmp_path / "skip-%j.out"),
        f"export PYTHONPATH={os.getcwd()}",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_ADDR=$(scontrol show node \"$head_node\" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')",
        f"export MASTER_PORT={lab11.free_port_command(sys.executable)}",
        *(["export GLOO_SOCKET_IFNAME=lo"] if one_host else []),
        f"srun {sys.executable} {tmp_path / 'skip.py'} {tmp_path} {bug}", ""]))
    job = int(slurm.command(["sbatch", "--parsable", str(tmp_path / "skip.sbatch")]).strip().split(";")[0])
    return job, script


@pytest.mark.slow
@pytest.mark.skipif(NO_CLUSTER, reason=slurm.SKIPPED)
def test_a_task_that_skips_a_collective_gets_the_hang_table_naming_task_collective_and_line(tmp_path):
    job, script = skip_job(tmp_path, "skip")
    with pytest.raises(slurm.JobHung) as hung:
        slurm.wait_or_explain(job, 150, tmp_path, 2, say=lambda line: None)
    reduce_at, barrier_at = line_of(script, "dist.all_reduce(total)"), line_of(script, "dist.barrier()")
    table = hung.value.table
    assert re.search(rf"^0 +\| in a collective +\| all_reduce #3 \[1\] float32 +\| \S*skip.py:{reduce_at} ", table, re.M), table
    assert re.search(rf"^1 +\| in a collective +\| barrier #3 +\| \S*skip.py:{barrier_at} ", table, re.M), table
    assert re.search(rf"first difference: rank 0 is in all_reduce #3 at \S*skip.py:{reduce_at}; rank 1 is in barrier #3 "
                     rf"at \S*skip.py:{barrier_at}: the ranks called different collectives", table), table
    assert "made no progress" in str(hung.value) and slurm.wait(job, 60, say=lambda line: None)[0]["JobState"] == "CANCELLED"


@pytest.mark.slow
@pytest.mark.skipif(NO_CLUSTER, reason=slurm.SKIPPED)
def test_a_task_that_raises_is_named_with_its_line_and_traceback_and_the_other_is_asked(tmp_path):
    job, script = skip_job(tmp_path, "raise")
    with pytest.raises(slurm.TaskFailed) as failed:
        slurm.wait_or_explain(job, 150, tmp_path, 2, say=lambda line: None)
    table = failed.value.table
    assert re.search(rf"^1 +\| raised ValueError +\| - +\| \S*skip.py:{line_of(script, 'raise ValueError')} ", table, re.M), table
    assert re.search(r"^0 +\| (in a collective|raised \w+) ", table, re.M), table  # asked, or failed on its own
    assert failed.value.tracebacks[1].strip().endswith("ValueError: task 1 cannot read its batch")
    assert str(failed.value).startswith(f"task 1 of job {job} raised ValueError")


# ---- a sharded checkpoint resumed on another number of nodes -------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(NO_CLUSTER, reason=slurm.SKIPPED)
def test_a_dcp_checkpoint_of_2_nodes_resumes_on_1_node_to_the_uninterrupted_run(tmp_path):
    import torch

    from lab_utils import data, spec
    from lab_utils.labs.lab07 import checkpoints
    from lab_utils.labs.lab07.lesson import CheckpointJob

    split = data.load_split({"kind": "digits", "n_train": 256})
    x, y = split.datasets()[0].tensors
    job = CheckpointJob(spec.cnn2d_2layer_fullconnected_2layer(10), split.image_shape, x, y, steps=6, global_batch=32,
                        lr=1e-3, seed=0, folder=str(tmp_path / "dcp"), save_at=3)
    torch.save(job, tmp_path / "job.pt")
    (tmp_path / "task.py").write_text(f"import sys\nsys.path.insert(0, {os.getcwd()!r})\n"
                                      "from lab_utils.labs.lab11.lesson import dcp_task\n\ndcp_task(*sys.argv[1:])\n")
    (tmp_path / "dcp.sbatch").write_text(lab11.restart_script(
        tmp_path / "task.py", [tmp_path / "job.pt", tmp_path], attempts=1, nodes=2, time_limit_min=3,
        output=str(tmp_path / "dcp-%j.out"), one_host=slurm.find_cluster().one_host))
    first = slurm.sbatch(tmp_path / "dcp.sbatch")
    second = slurm.sbatch(tmp_path / "dcp.sbatch", "--nodes=1", f"--dependency=afterok:{first}")
    for job_id in (first, second):
        ended = slurm.wait(job_id, 180, say=lambda line: None)[0]
        assert ended["JobState"] == "COMPLETED", slurm.log_tail(tmp_path / f"dcp-{job_id}.out", 20)
    whole, resumed = (torch.load(tmp_path / f"dcp-{j}.pt", weights_only=False) for j in (first, second))
    assert (whole["world_size"], resumed["world_size"]) == (2, 1)
    assert sorted(checkpoints.checkpoint_files(job.folder)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(resumed["losses"]) == [3, 4, 5]  # resumed at the global sample index 3 * 32, not at step 0
    assert checkpoints.weights_mismatch(whole["saved"], resumed["loaded"]) is None
    assert checkpoints.weights_mismatch(whole["final"], resumed["final"], tolerance=1e-5) is None
    assert max(abs(resumed["losses"][s] - whole["losses"][s]) for s in resumed["losses"]) <= 1e-5
