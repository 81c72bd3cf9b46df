"""Lab 11's batch-script writers and Slurm-to-torch translation (its lesson cells), lab_utils.labs.lab11.slurm's helpers
(no Slurm needed), and learner_code.from_notebook."""
import os
import re
import subprocess
import sys
import time

import pytest

from lab_utils import learner_code
from lab_utils.labs.lab11 import slurm
from lab_utils.labs.lab11 import lesson as lab11


def srun_and_torchrun(script: str) -> str:
    """The srun command with its continuation lines, as one line."""
    return re.search(r"^srun .*?(?=\n\n|\Z)", script, re.S | re.M).group(0).replace("\\\n", " ")


@pytest.mark.parametrize("nodes", [1, 2])
def test_cpu_script_starts_one_torchrun_agent_per_node_with_c10d_on_the_first_node(nodes):
    script = lab11.batch_script("train.py", ["--epochs", "2"], nodes=nodes, tasks_per_node=2, cpus_per_task=1,
                                time_limit_min=5, partition="lab", python="python")
    assert f"#SBATCH --nodes={nodes}\n" in script
    assert re.search(r"^#SBATCH --ntasks-per-node=1\b", script, re.M)
    assert re.search(r"^#SBATCH --cpus-per-task=2\b", script, re.M)  # two processes of one core each per node
    assert "#SBATCH --partition=lab" in script and "#SBATCH --time=00:05:00" in script
    assert not re.search(r"^#SBATCH --gres", script, re.M) and re.search(r"^##SBATCH --gres=gpu:N", script, re.M)
    line = " ".join(srun_and_torchrun(script).split())
    assert line.startswith('srun --nodes="$SLURM_NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 python -m torch.distributed.run')
    assert '--nnodes="$SLURM_NNODES" --nproc-per-node=2' in line
    assert '--rdzv-backend=c10d --rdzv-endpoint="$head_addr:$port" --rdzv-id="$SLURM_JOB_ID"' in line
    assert line.endswith("train.py --epochs 2")
    assert 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert "--cpu-bind" not in line and not re.search(r"^export NCCL", script, re.M)


@pytest.mark.parametrize("nodes", [1, 2])
def test_gpu_script_asks_for_gpus_one_process_each_with_cores_bound_and_nccl(nodes):
    script = lab11.batch_script("train.py", nodes=nodes, gpus_per_node=4, cpus_per_task=8, python="python")
    assert f"#SBATCH --nodes={nodes}\n" in script
    assert re.search(r"^#SBATCH --gres=gpu:4\b", script, re.M)
    assert re.search(r"^#SBATCH --cpus-per-task=32\b", script, re.M)
    assert re.search(r"^export NCCL_DEBUG=WARN", script, re.M) and re.search(r"^export OMP_NUM_THREADS=8\b", script, re.M)
    line = " ".join(srun_and_torchrun(script).split())
    assert "--ntasks-per-node=1 --kill-on-bad-exit=1 --cpu-bind=cores" in line and "--nproc-per-node=4" in line


def test_script_is_valid_bash_and_refuses_nonsense():
    script = lab11.batch_script("my train.py", ["{\"a\": 1}"], max_restarts=1, one_host=True)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "--max-restarts=1" in script and "'my train.py'" in script and "export LAB_ONE_HOST=1" in script
    for bad in (dict(nodes=0), dict(tasks_per_node=-1), dict(gpus_per_node=-2), dict(cpus_per_task=1.5),
                dict(time_limit_min=0), dict(time_limit_min="5")):
        with pytest.raises(ValueError):
            lab11.batch_script("train.py", **bad)
        with pytest.raises(ValueError):
            lab11.restart_script("train.py", **bad)
    assert lab11.slurm_time(90) == "01:30:00" and "#SBATCH --time=01:30:00" in lab11.batch_script("t.py", time_limit_min=90)


def test_log_tail_hides_time_stamps_folders_and_the_host(tmp_path):
    import socket

    log = tmp_path / "job.out"
    log.write_text(f"submitit INFO (2026-01-02 03:04:05,678) - Loading {tmp_path}/x.pkl on {socket.gethostname()}\nlast\n")
    assert slurm.log_tail(log, folder=tmp_path) == f"submitit INFO - Loading {tmp_path.name}/x.pkl on <host>\nlast"
    assert slurm.log_tail(tmp_path / "none.out") == "(no log yet)"


def test_torch_environment_from_slurm_variables(tmp_path, monkeypatch):
    monkeypatch.setattr(lab11, "first_node_address", lambda: "10.0.0.7")
    env = {"SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NNODES": "2", "SLURM_JOB_ID": "77"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "port-77").write_text("23456")  # what task 0 wrote
    got = lab11.torch_environment(tmp_path)
    assert (got.rank, got.world_size, got.local_rank, got.local_world_size, got.master_addr, got.master_port) == \
        (3, 4, 1, 2, "10.0.0.7", 23456)
    monkeypatch.setenv("SLURM_PROCID", "0")
    port = lab11.shared_free_port(tmp_path)
    assert (tmp_path / "port-77").read_text() == str(port) and port != 23456


def test_a_task_leaves_no_port_file_behind(tmp_path, monkeypatch):
    """Task 0 shares the rendezvous port through a file; once the worker has run, the file is removed (they piled up)."""
    monkeypatch.setattr(lab11, "first_node_address", lambda: "127.0.0.1")
    monkeypatch.setattr(lab11, "hold_process_groups", lambda: None)
    leaving = []
    monkeypatch.setattr(lab11.slurm, "exit_at_interpreter_exit", lambda: leaving.append(True))  # not in pytest's process
    monkeypatch.setattr(lab11.slurm, "place_task", lambda: {})
    for k, v in {"SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NNODES": "1",
                 "SLURM_JOB_ID": "78"}.items():
        monkeypatch.setenv(k, v)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME"):
        monkeypatch.setenv(k, "")  # export() sets them: restored after the test
    seen = []
    out = lab11.task(lambda rank, world, cfg: seen.append((tmp_path / "port-78").exists()) or {"done": True}, None, tmp_path)
    assert out["done"] and seen == [True] and not (tmp_path / "port-78").exists()
    assert leaving == [True]  # a task leaves without the teardown that can abort it at exit


@pytest.mark.parametrize("body, code", [("print('trained')", 0), ("print('trained'); raise ValueError('bad')", 1),
                                        ("print('trained'); import sys; sys.exit(3)", 3),  # review 11, item 7
                                        ("print('trained'); import sys; sys.exit('bad')", 1),
                                        ("print('trained'); import sys; sys.exit()", 0)])
def test_a_task_leaves_at_exit_without_teardown_and_with_its_exit_code(tmp_path, body, code):
    """The exit handler registered earlier (as C++'s teardown of a live process group, which aborted a task with
    SIGABRT at random) never runs; output is flushed; an uncaught exception still exits with 1."""
    flag = tmp_path / "teardown-ran"
    program = (f"import atexit, pathlib\natexit.register(lambda: pathlib.Path({str(flag)!r}).write_text('ran'))\n"
               "from lab_utils.labs.lab11 import slurm\nslurm.exit_at_interpreter_exit()\n"
               "slurm.exit_at_interpreter_exit()\n" + body + "\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert done.stdout == "trained\n" and not flag.exists(), (done.stdout, done.stderr)
    assert ("bad" in done.stderr) == (code == 1), done.stderr  # the traceback (or sys.exit's message) is printed


def test_no_slurm_here_gives_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo
    assert slurm.find_cluster() is None
    assert slurm.SKIPPED == "skipped: no Slurm here (make cluster needs root; on a cluster, run this lab there)"


def test_the_local_cluster_prints_the_whole_export_line_for_a_terminal(monkeypatch):
    here = slurm.Node("node1", "idle", 1, 6026, "(null)", "localhost", "127.0.0.1")
    local = slurm.Cluster("/var/tmp/lab-cluster/slurm.conf", ("lab",), "lab", (here,))
    lines = local.describe().splitlines()
    export = [line for line in lines if line.startswith("export SLURM_CONF=")]
    assert len(export) == 1 and export[0].endswith(" -m lab_utils cluster conf)"), lines  # a line to paste as it is
    assert not any("/tmp/" in line for line in lines), lines  # the same output on every machine: no path in it
    assert all(len(line) <= 100 for line in lines), lines  # learner s10m finding 11: 137 columns
    far = slurm.Cluster(None, ("lab",), "lab", (slurm.Node("n1", "idle", 1, 1, "", "n1.far", "10.0.0.1"),))
    assert "SLURM_CONF" not in far.describe()  # a real cluster's login node needs no export


def test_a_wrong_slurm_conf_is_named_instead_of_no_slurm_here(monkeypatch, tmp_path, capsys):
    fake = tmp_path / "sinfo"
    fake.write_text("#!/bin/sh\necho 'sinfo: error: s_p_parse_file: unable to read \"$SLURM_CONF\"' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere.conf"))
    assert slurm.find_cluster() is None
    said = capsys.readouterr().out
    assert "SLURM_CONF is set to" in said and "nowhere.conf (no such file)" in said and "unable to read" in said, said
    assert "Unset it" in said


def test_lab03_worker_comes_from_its_notebook_and_travels_by_value(tmp_path, monkeypatch):
    import cloudpickle

    lesson = learner_code.from_notebook(learner_code.notebook_path("03_ddp.ipynb", beside="/nonexistent"), "ddp_worker")
    assert lesson.notebook.parent.name == "solutions" and lesson.source.startswith("def ddp_worker(rank, world_size, cfg):")
    assert "DistributedSampler(" in lesson.source and "# 1. join the process group" in lesson.source  # comments kept
    assert "from torch.utils.data import DataLoader, DistributedSampler" in lesson.imports
    assert b"DistributedSampler" in cloudpickle.dumps(lesson.function)  # by value: its code travels with it
    with pytest.raises(LookupError, match="defines no function 'nothing_here'"):
        learner_code.from_notebook(lesson.notebook, "nothing_here")
    # run from the course's root (nbval in make test) or solutions/: the solution was the expected neighbour
    monkeypatch.chdir(learner_code.COURSE)
    assert "ddp_worker from the course's solutions/03_ddp.ipynb, cell " in " ".join(lesson.describe().split())
    # make outputs runs the solutions' kernels in build/outputs: its committed output is read by learners beside their
    # own 03 notebook, so no 'of yours' clause there (learner s12r4h)
    (learner_code.COURSE / "build" / "outputs").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(learner_code.COURSE / "build" / "outputs")
    assert "of yours" not in lesson.describe() and "solutions/03_ddp.ipynb" in lesson.describe()
    # run from elsewhere (a learner's folder without a 03 notebook): the output says why it is the solution
    monkeypatch.chdir(tmp_path)
    assert ("ddp_worker from the course's solutions/03_ddp.ipynb (no 03_ddp.ipynb of yours beside this notebook), cell "
            in " ".join(lesson.describe().split()))


def test_a_learners_copy_beside_the_notebook_is_taken_and_named(tmp_path):
    import shutil

    shutil.copy(learner_code.notebook_path("03_ddp.ipynb", beside="/nonexistent"), tmp_path / "03_ddp.ipynb")
    lesson = learner_code.from_notebook(learner_code.notebook_path("03_ddp.ipynb", beside=tmp_path), "ddp_worker")
    assert lesson.notebook.parent == tmp_path.resolve()
    assert "ddp_worker from 03_ddp.ipynb beside this notebook, cell " in " ".join(lesson.describe().split())


def test_lab03_worker_from_the_notebook_trains_like_lab03(tmp_path):
    from lab_utils import spec
    from lab_utils.launch import launch
    from lab_utils.labs.lab03.lesson import (DDPConfig, ddp_worker)  # the generated module: the same cell, imported, not read

    worker = learner_code.from_notebook(learner_code.notebook_path("03_ddp.ipynb", beside=tmp_path), "ddp_worker").function
    assert worker is not ddp_worker and worker.__module__ != ddp_worker.__module__
    cfg = DDPConfig(data={"kind": "digits", "n_train": 128}, layers=spec.cnn2d_2layer_fullconnected_2layer(10),
                    epochs=1, per_rank_batch=16, lr=0.05, warmup_steps=0, accumulation=1, seed=0, timeout_s=60,
                    checkpoint=None)
    got = launch(worker, 2, args=(cfg,), timeout=120)
    want = launch(ddp_worker, 2, args=(cfg,), timeout=120)
    assert abs(got[0]["weights"] - want[0]["weights"]).max() <= 1e-6


# ---- part 3: the node failure, resumed by a fresh srun step --------------------------------------------------------

def test_restart_script_starts_a_fresh_srun_step_per_attempt():
    script = lab11.restart_script("resumable.py", ['{"a": 1}'], attempts=3, nodes=2, one_host=True, python="python")
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "set -e" not in script.replace("set -euo", "")  # a failed step must reach the loop
    loop = script[script.index("for attempt in $(seq 1 3); do"):]
    assert "export MASTER_PORT=" in loop  # a fresh port per attempt
    assert re.search(r'^  srun --nodes="\$SLURM_NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 \\\n    python '
                     r"resumable.py '\{\"a\": 1\}'$", loop, re.M)
    assert "torch.distributed.run" not in script and "exit 0" in loop and loop.rstrip().endswith("exit 1")
    assert re.search(r"^export GLOO_SOCKET_IFNAME=lo\b", script, re.M) and re.search(r"^export LAB_ONE_HOST=1", script, re.M)
    assert re.search(r"^export MASTER_ADDR=", script, re.M)
    gpu = lab11.restart_script("resumable.py", gpus_per_node=4, cpus_per_task=8, python="python")
    assert re.search(r"^#SBATCH --gres=gpu:4\b", gpu, re.M) and re.search(r"^#SBATCH --ntasks-per-node=4\b", gpu, re.M)
    assert "--cpu-bind=cores" in gpu and "GLOO_SOCKET_IFNAME" not in gpu
    with pytest.raises(ValueError):
        lab11.restart_script("resumable.py", attempts=0)


def test_rank_from_slurm(monkeypatch):
    for k, v in {"SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NNODES": "2"}.items():
        monkeypatch.setenv(k, v)
    assert lab11.ranks_from_slurm() == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert os.environ["RANK"] == "3"


def lab11_resumable_worker():
    """Lab 11's resumable worker, as its notebook's cell defines it (imports and def), sent by value."""
    import nbformat

    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "def resumable_worker(" in c.source)
    namespace = {"__name__": "lesson_lab11"}
    exec(compile(cell, "<lab 11>", "exec"), namespace)
    return namespace["resumable_worker"], namespace["imports"], cell[cell.index("def resumable_worker("):]


def fault_cfg(folder, **kw):
    from lab_utils import spec

    return dict(data={"kind": "digits", "n_train": 512}, layers=spec.cnn2d_2layer_fullconnected_2layer(10),
                per_rank_batch=16, lr=0.05, seed=0, timeout_s=30, steps=10, fail_at_step=7, checkpoint_every=3,
                checkpoint=str(folder / "checkpoint.pt"), progress=str(folder), **kw)


def uninterrupted_weights(worker, cfg):
    from lab_utils.launch import launch

    return launch(worker, 2, args=(dict(cfg, checkpoint_every=0, checkpoint="", progress="", fail_at_step=None),),
                  timeout=120)[0]["weights"]


@pytest.mark.slow
def test_a_killed_rank_resumes_from_the_checkpoint_to_the_uninterrupted_weights(tmp_path):
    """Lab 11's fault run without Slurm: the first launch loses rank 1 after step 7, the second resumes from step 6."""
    import json

    import numpy as np

    from lab_utils.launch import RankError, launch

    worker, _, _ = lab11_resumable_worker()
    cfg = fault_cfg(tmp_path)
    with pytest.raises(RankError):  # rank 1 killed, or rank 0 losing its peer: whichever the launcher sees first
        launch(worker, 2, args=(cfg,), timeout=120)
    resumed = launch(worker, 2, args=(cfg,), timeout=120)
    attempts = [json.loads((tmp_path / f"attempt-{a}.json").read_text()) for a in range(2)]
    assert attempts[0]["step"] == 7 and attempts[1]["resumed_from"] == 6 and resumed[0]["steps_here"] == 4
    assert float(np.abs(resumed[0]["weights"] - uninterrupted_weights(worker, cfg)).max()) <= 1e-6


@pytest.mark.slow
@pytest.mark.skipif(slurm.find_cluster() is None, reason=slurm.SKIPPED)
def test_the_fault_job_on_slurm_resumes_in_a_fresh_step_to_the_uninterrupted_weights(tmp_path):
    """For real on the cluster (`make cluster`): one job, a task killed, the second srun step resumes; equal weights."""
    import inspect
    import json

    import numpy as np

    worker, imports, source = lab11_resumable_worker()
    main = ("\n\nif __name__ == '__main__':\n    from lab_utils.labs.lab11 import slurm\n    from lab_utils.launch import "
            "hold_process_groups\n    env = ranks_from_slurm()\n    slurm.place_task()\n    hold_process_groups()\n"
            "    cfg = json.loads(sys.argv[1])\n    out = resumable_worker(int(env['RANK']), int(env['WORLD_SIZE']), cfg)\n"
            "    if env['RANK'] == '0':\n        np.save(Path(cfg['progress']) / 'weights.npy', out['weights'])\n"
            "    slurm.exit_now()\n")
    (tmp_path / "resumable.py").write_text(imports + "\n\n" + source + "\n\n" + inspect.getsource(lab11.ranks_from_slurm) + main)
    cfg = fault_cfg(tmp_path)
    cluster = slurm.find_cluster()
    script = lab11.restart_script(tmp_path / "resumable.py", [json.dumps(cfg)], nodes=2, time_limit_min=3,
                                  output=str(tmp_path / "job.out"), one_host=cluster.one_host)
    (tmp_path / "job.sbatch").write_text(script)
    final = slurm.wait(slurm.sbatch(tmp_path / "job.sbatch"), 120, say=lambda line: None)
    log = slurm.log_tail(tmp_path / "job.out", 20)
    assert final[0]["JobState"] == "COMPLETED", log
    assert "attempt 1 failed" in log and "attempt 2 completed" in log, log
    attempts = [json.loads((tmp_path / f"attempt-{a}.json").read_text()) for a in range(2)]
    assert attempts[0]["step"] == 7 and attempts[1]["resumed_from"] == 6
    diff = float(np.abs(np.load(tmp_path / "weights.npy") - uninterrupted_weights(worker, cfg)).max())
    assert diff <= 1e-6


def test_without_machine_paths_hides_the_folder_and_the_interpreter(tmp_path):
    text = lab11.batch_script(tmp_path / "train.py", output=str(tmp_path / "x-%j.out"))
    got = slurm.without_machine_paths(text, tmp_path)
    assert str(tmp_path) not in got and sys.executable not in got and f"{tmp_path.name}/train.py" in got
    on_a_node = slurm.without_machine_paths(f"0: node1 task 0 of 2 python in {sys.prefix}\n", tmp_path)
    assert on_a_node == "0: node1 task 0 of 2 python in .venv\n"


def test_waiting_for_a_timed_job_stats_files_and_asks_the_scheduler_rarely(tmp_path, monkeypatch):
    import threading

    from submitit.slurm.slurm import SlurmJob

    asked = []
    monkeypatch.setattr(slurm.jobs, "job_info", lambda job_id: asked.append(job_id) or [{"JobState": "RUNNING"}])
    job = SlurmJob(folder=str(tmp_path), job_id="7", tasks=(0, 1))
    results = [job.task(i).paths.result_pickle for i in range(2)]
    timer = threading.Timer(0.5, lambda: [p.write_bytes(b"x") for p in results])
    timer.start()
    slurm.wait_for_results(job, timeout=10, check_every=0.2, poll=0.05)
    assert all(p.exists() for p in results) and 1 <= len(asked) <= 3  # every 0.2 s at most, not every poll
    monkeypatch.setattr(slurm.jobs, "job_info", lambda job_id: [{"JobState": "FAILED"}, {"JobState": "COMPLETED"}])
    slurm.wait_for_results(SlurmJob(folder=str(tmp_path), job_id="8", tasks=(0,)), timeout=10, check_every=0.1)
    cancelled = []
    monkeypatch.setattr(slurm.jobs, "job_info", lambda job_id: [{"JobState": "PENDING"}])
    monkeypatch.setattr(slurm.jobs, "cancel", cancelled.append)
    with pytest.raises(TimeoutError, match="wrote no results within 0.3 s, so it was cancelled"):
        slurm.wait_for_results(SlurmJob(folder=str(tmp_path), job_id="9", tasks=(0,)), timeout=0.3, check_every=0.1)
    assert cancelled == ["9"]


@pytest.mark.slow
def test_bench_cluster_says_skipped_without_slurm_and_measures_with_it(monkeypatch, tmp_path):
    from lab_utils.labs.lab11 import bench

    with monkeypatch.context() as m:
        m.setattr(slurm, "find_cluster", lambda: None)
        assert bench.cluster(repeats=1) == {"benchmark": "cluster", "skipped": slurm.SKIPPED}
    if slurm.find_cluster() is None:
        pytest.skip("no Slurm cluster here (make cluster): the measuring half needs one")
    figures = bench.cluster(repeats=1, steps=4)
    assert figures["steps"] == 4 and len(figures["slurm_steps_per_s_runs"]) == 1
    assert len(figures["own_session_steps_per_s_runs"]) == 1 and len(figures["verdicts"]) == 3
    assert all(v["verdict"] == "not distinguishable here" for v in figures["verdicts"])  # one pair decides nothing
    assert figures["slurm_vs_local_steps"] == pytest.approx(figures["slurm_steps_per_s"] / figures["launch_steps_per_s"],
                                                            rel=0.01)
    assert 0 < figures["submit_to_first_step_s"] < 120
    # the start-up splits in order: the task's process exists, then its worker starts, then its first step
    assert 0 < figures["submit_to_process_s"] <= figures["submit_to_worker_s"] <= figures["submit_to_first_step_s"]


# ---- lab 11's scripts activate the course's environment; the helpers its by-hand cells wait with --------------------

def test_scripts_activate_the_environment_and_pass_cores_to_srun():
    for make in (lab11.batch_script, lab11.restart_script):
        script = make("train.py", activate="/opt/venv/bin/activate", python="python")
        assert re.search(r"^source /opt/venv/bin/activate$", script, re.M), script
        assert script.index("source /opt/venv") < script.index("srun ")
        assert re.search(r"^export SRUN_CPUS_PER_TASK=\$SLURM_CPUS_PER_TASK\b", script, re.M)
        assert "module load" in script and subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
        assert "source " not in make("train.py", python="python")  # no environment named: none activated


def test_waiting_for_a_job_file_and_its_number(tmp_path):
    import threading

    path = tmp_path / "progress"
    threading.Timer(0.2, lambda: path.write_text("3")).start()
    assert slurm.wait_for_file(path, 5) == "3"
    threading.Timer(0.2, lambda: path.write_text("9")).start()
    assert slurm.wait_for_file(path, 5, at_least=8) == "9"
    with pytest.raises(TimeoutError, match="did not appear .or not reach 100."):
        slurm.wait_for_file(path, 0.3, at_least=100)


@pytest.mark.skipif(slurm.find_cluster() is None, reason=slurm.SKIPPED)
def test_sacct_reads_the_cluster_records_or_says_why_not():
    reason = slurm.accounting()
    if reason is not None:
        assert reason.startswith("sacct") and ("disabled" in reason or "does not answer" in reason)
        pytest.skip(reason)
    out = slurm.command(["sbatch", "--parsable", "--time=1", "--output=/dev/null", "--wrap", "exit 3"])
    job = out.strip().split(";")[0]
    slurm.wait(job, 60, say=lambda line: None)
    assert slurm.settled([job]) == {job: "FAILED"}


def test_settled_waits_for_sacct_to_record_the_jobs_own_name(monkeypatch):
    """Before slurmdbd has a job's full record, sacct may name it 'allocation': settled waits for the real name."""
    names = iter(["5|allocation", "5|allocation", "5|hello"])

    def fake(cmd, timeout=None):
        if cmd[:2] == ["scontrol", "show"]:
            return "JobId=5 JobName=hello UserId=root(0) JobState=COMPLETED"
        if "JobID,State" in cmd:
            return "5|COMPLETED"
        return next(names)

    monkeypatch.setattr(slurm.sacct, "command", fake)
    assert slurm.settled(["5"], poll=0.01) == {"5": "COMPLETED"}
    with pytest.raises(StopIteration):
        next(names)  # it read the names until the real one came


def test_sacct_durations_read_as_seconds():
    assert slurm.seconds("00:03.004") == pytest.approx(3.004) and slurm.seconds("01:02:03") == 3723
    assert slurm.seconds("1-00:00:01") == 86401 and slurm.seconds("00:00:00") == 0


def test_process_started_at_is_when_a_fresh_process_started():
    before = time.time()
    said = subprocess.run([sys.executable, "-c", "import time; from lab_utils.labs.lab11 import slurm; "
                           "print(slurm.process_started_at(), time.time())"], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    started, printed_at = map(float, said.stdout.split())
    assert before - 0.05 <= started <= printed_at, (before, started, printed_at)  # /proc counts in 0.01 s ticks
    assert slurm.process_started_at() < before  # this test's own process started earlier


def test_the_export_line_names_the_course_python_a_terminal_in_the_course_folder_has(tmp_path):
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("")
    assert slurm.course_python(str(venv / "python"), tmp_path) == ".venv/bin/python"
    assert slurm.course_python("/usr/bin/python3", tmp_path) == "python"  # a conda or system Python: on PATH
    elsewhere = slurm.Cluster("/home/me/my-slurm.conf", ("lab",), "lab",
                              (slurm.Node("node1", "idle", 1, 6026, "(null)", "localhost", "127.0.0.1"),))
    assert "export SLURM_CONF=/home/me/my-slurm.conf" in elsewhere.describe().splitlines()  # a learner's own path


BUSY = "other programs used 1.4 of 2 cores"


def test_a_busy_machine_is_named_as_the_cause_of_low_efficiency_only_where_a_job_reads_low():
    """Learner s10d finding 1: 'so efficiency reads low' was printed under 101 %, 93 % and 94 %."""
    high = {"1": (3.0, 3.0, 1), "2": (3.0, 2.8, 1), "3": (3.0, 2.9, 1)}
    said = "\n".join(slurm.efficiency_reading(high, BUSY))
    assert "still no job read under 90%" in said and "can explain" not in said and BUSY in said
    low = {**high, "3": (5.0, 2.9, 1)}
    said = "\n".join(slurm.efficiency_reading(low, BUSY))
    assert "can explain the efficiency under 90% of job(s) 3" in said and "still" not in said
    quiet = "\n".join(slurm.efficiency_reading(low, None))
    assert "quiet" in quiet and "waiting for a core" not in quiet


def test_efficiency_over_100_is_said_only_when_the_figures_show_it_and_names_the_cores_not_rounding():
    """Learner s10d finding 3, s10m finding 5: efficiencies read on whole seconds (124 %, '±15 %'); the elapsed time
    is now the script's own, so above 100 % means more cores than given, and no line blames whole seconds."""
    even = "\n".join(slurm.efficiency_reading({"1": (3.0, 2.9, 1), "2": (3.0, 2.8, 1)}, None))
    assert "above 100" not in even and "whole seconds" not in even
    over = "\n".join(slurm.efficiency_reading({"1": (2.61, 2.9, 1), "2": (3.05, 2.8, 1)}, None))
    flat = " ".join(over.split())
    assert "above 100 % (job(s) 1)" in flat and "more cores than it was given" in flat and "whole" not in flat
    assert all(len(line) <= 100 for line in over.splitlines()), over
    # review 11, item 8: a job whose script time is missing fell back to whole seconds: that, not more cores
    ids = {"1234567": (2.0, 2.9, 1), "1234568": (3.05, 2.8, 1), "1234569": (2.61, 2.9, 1)}
    said = slurm.efficiency_reading(ids, BUSY, rounded={"1234567"})
    text = " ".join("\n".join(said).split())
    assert "above 100 % (job(s) 1234569): more CPU time" in text and "(job(s) 1234567): no time of the batch" in text
    assert "whole seconds" in text and "1234567, " not in text, text
    assert all(len(line) <= 100 for line in "\n".join(said).splitlines()), said
    assert all(line.startswith("    ") for one in said for line in one.splitlines()[1:]), said  # continuations indent


def test_script_times_reads_the_lines_a_batch_script_appended(tmp_path):
    """chain.sbatch appends `JOBID START END` (date +%s.%N) at its end: the job's run time to the millisecond."""
    times = tmp_path / "chain.times"
    times.write_text("1758 1765000000.125000000 1765000002.735000000\n1759 1765000003,5 1765000006,0\nbroken line\n")
    got = slurm.script_times(times)
    assert set(got) == {"1758", "1759"} and abs(got["1758"] - 2.61) < 1e-6 and abs(got["1759"] - 2.5) < 1e-6
    assert slurm.script_times(tmp_path / "none") == {}


def test_the_terminal_shows_no_control_bytes_nor_their_caret_echo():
    """Learner s10d finding 2: salloc's last line read '^@salloc: Relinquishing job allocation 1133'."""
    said = ["salloc: Granted job allocation 7\r", "\x00^@salloc: Relinquishing job allocation 7"]
    assert slurm.terminal_lines(said) == "salloc: Granted job allocation 7\nsalloc: Relinquishing job allocation 7"


def _orphan_burner(env: dict) -> int:
    """A process that burns about 1 s of CPU and exits, started by sh so it is no descendant of this one; its pid."""
    code = "import time\nwhile time.process_time() < 1.0: pass"
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c '{code}' >/dev/null 2>&1 & echo $!"], check=True,
                         capture_output=True, text=True, env={**os.environ, **env}).stdout
    return int(out.strip())


def _burned_as_own(job_ids: set, env: dict) -> float:
    """CPU seconds counted as this notebook's own over a window in which an orphan burner with `env` ran and ended."""
    from lab_utils import conditions

    with conditions.counting_as_own(slurm.job_processes(job_ids), every=0.05):
        first = conditions.sample()
        pid = _orphan_burner(env)
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.05)
        last = conditions.sample()
    load = conditions.between(first, last)
    return load.own * load.seconds


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc here")
def test_the_processes_of_the_notebooks_own_slurm_jobs_count_as_its_own_not_other_programs():
    # slurmstepd starts a job's tasks, not the notebook: counted by the job id in their environment, even once ended
    assert _burned_as_own({"987654"}, {"SLURM_JOB_ID": "987654"}) >= 0.7
    assert _burned_as_own({987650}, {"SLURM_JOB_ID": "987651", "SLURM_ARRAY_JOB_ID": "987650"}) >= 0.7  # array task
    # another job's processes, or a set still empty, stay other programs'
    assert _burned_as_own({"987654"}, {"SLURM_JOB_ID": "111"}) < 0.3
    assert _burned_as_own(set(), {"SLURM_JOB_ID": "987654"}) < 0.3


def test_cpus_per_task_is_per_task_in_the_lesson_and_in_exercise_2():
    """One task per process: --cpus-per-task is a process's cores in the restart script and exercise 2 alike; the
    torchrun agent, one task holding all of a node's processes, asks for their cores together."""
    def cpus(script):
        return int(re.search(r"^#SBATCH --cpus-per-task=(\d+)", script, re.M).group(1))
    per_process = lab11.restart_script("resumable.py", gpus_per_node=4, cpus_per_task=8, python="python")
    request = {"job_name": "a", "nodes": 2, "tasks_per_node": 4, "cpus_per_task": 8, "mem_gb": 64, "minutes": 90,
               "gpus_per_node": 4}
    assert cpus(per_process) == cpus(lab11.sbatch_header(request)) == 8
    assert re.search(r"^#SBATCH --ntasks-per-node=4\b", per_process, re.M)
    agent = lab11.batch_script("train.py", nodes=2, gpus_per_node=4, cpus_per_task=8, python="python")
    assert cpus(agent) == 32 and re.search(r"^#SBATCH --ntasks-per-node=1\b", agent, re.M)
