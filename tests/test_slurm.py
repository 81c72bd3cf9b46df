"""lab_utils.slurm's batch-script writer and helpers (no Slurm needed), and lessons.from_notebook."""
import os
import re
import subprocess
import sys

import pytest

from lab_utils import lessons, slurm


def srun_and_torchrun(script: str) -> str:
    """The srun command with its continuation lines, as one line."""
    return re.search(r"^srun .*?(?=\n\n|\Z)", script, re.S | re.M).group(0).replace("\\\n", " ")


@pytest.mark.parametrize("nodes", [1, 2])
def test_cpu_script_starts_one_torchrun_agent_per_node_with_c10d_on_the_first_node(nodes):
    script = slurm.batch_script("train.py", ["--epochs", "2"], nodes=nodes, tasks_per_node=2, cpus_per_task=1,
                                time_limit="5", partition="lab", python="python")
    assert f"#SBATCH --nodes={nodes}\n" in script
    assert re.search(r"^#SBATCH --ntasks-per-node=1\b", script, re.M)
    assert re.search(r"^#SBATCH --cpus-per-task=2\b", script, re.M)  # two processes of one core each per node
    assert "#SBATCH --partition=lab" in script and "#SBATCH --time=5" in script
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
    script = slurm.batch_script("train.py", nodes=nodes, gpus_per_node=4, cpus_per_task=8, python="python")
    assert f"#SBATCH --nodes={nodes}\n" in script
    assert re.search(r"^#SBATCH --gres=gpu:4\b", script, re.M)
    assert re.search(r"^#SBATCH --cpus-per-task=32\b", script, re.M)
    assert re.search(r"^export NCCL_DEBUG=WARN", script, re.M) and re.search(r"^export OMP_NUM_THREADS=8\b", script, re.M)
    line = " ".join(srun_and_torchrun(script).split())
    assert "--ntasks-per-node=1 --kill-on-bad-exit=1 --cpu-bind=cores" in line and "--nproc-per-node=4" in line


def test_script_is_valid_bash_and_refuses_nonsense():
    script = slurm.batch_script("my train.py", ["{\"a\": 1}"], max_restarts=1, one_host=True)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "--max-restarts=1" in script and "'my train.py'" in script and "export LAB_ONE_HOST=1" in script
    for bad in (dict(nodes=0), dict(tasks_per_node=-1), dict(gpus_per_node=-2), dict(cpus_per_task=1.5)):
        with pytest.raises(ValueError):
            slurm.batch_script("train.py", **bad)


def test_log_tail_hides_time_stamps_folders_and_the_host(tmp_path):
    import socket

    log = tmp_path / "job.out"
    log.write_text(f"submitit INFO (2026-01-02 03:04:05,678) - Loading {tmp_path}/x.pkl on {socket.gethostname()}\nlast\n")
    assert slurm.log_tail(log, folder=tmp_path) == f"submitit INFO - Loading {tmp_path.name}/x.pkl on <host>\nlast"
    assert slurm.log_tail(tmp_path / "none.out") == "(no log yet)"


def test_torch_environment_from_slurm_variables(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm, "first_node_address", lambda: "10.0.0.7")
    env = {"SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NNODES": "2", "SLURM_JOB_ID": "77"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "port-77").write_text("23456")  # what task 0 wrote
    got = slurm.torch_environment(tmp_path)
    assert (got.rank, got.world_size, got.local_rank, got.local_world_size, got.master_addr, got.master_port) == \
        (3, 4, 1, 2, "10.0.0.7", 23456)
    monkeypatch.setenv("SLURM_PROCID", "0")
    port = slurm.shared_free_port(tmp_path)
    assert (tmp_path / "port-77").read_text() == str(port) and port != 23456


def test_no_slurm_here_gives_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo
    assert slurm.find() is None
    assert slurm.SKIPPED == "skipped: no Slurm here (make cluster needs root; on a cluster, run this lab there)"


def test_lab03_worker_comes_from_its_notebook_and_travels_by_value():
    import cloudpickle

    lesson = lessons.from_notebook(lessons.notebook_path("03_ddp.ipynb", beside="/nonexistent"), "ddp_worker")
    assert lesson.notebook.parent.name == "solutions" and lesson.source.startswith("def ddp_worker(rank, world_size, cfg):")
    assert "DistributedSampler(" in lesson.source and "# 1. join the process group" in lesson.source  # comments kept
    assert "from torch.utils.data import DataLoader, DistributedSampler" in lesson.imports
    assert b"DistributedSampler" in cloudpickle.dumps(lesson.function)  # by value: its code travels with it
    with pytest.raises(LookupError, match="defines no function 'nothing_here'"):
        lessons.from_notebook(lesson.notebook, "nothing_here")


def test_lab03_worker_from_the_notebook_trains_like_lab03(tmp_path):
    from lab_utils import ddp, spec
    from lab_utils.launch import launch

    worker = lessons.from_notebook(lessons.notebook_path("03_ddp.ipynb", beside=tmp_path), "ddp_worker").function
    cfg = dict(data={"kind": "digits", "n_train": 128}, layers=spec.cnn2d_2layer_fullconnected_2layer(10), epochs=1,
               per_rank_batch=16, lr=0.05, warmup_steps=0, accumulation=1, seed=0, timeout_s=60, checkpoint=None)
    got = launch(worker, 2, args=(cfg,), timeout=120)
    want = launch(ddp.reference_worker, 2, args=(dict(cfg, evaluate=False),), timeout=120)
    assert abs(got[0]["weights"] - want[0]["weights"]).max() <= 1e-6
