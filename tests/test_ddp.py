"""DDP in real gloo ranks on loopback: equivalence with one process, and each trap's effect."""
import subprocess
import sys

import numpy as np
import pytest
import torch

from lab_utils import checks, ddp
from lab_utils.launch import free_port, launch

SHORT = dict(global_batch=32, evaluate=False, seed=0)


@pytest.fixture(scope="module")
def traps():
    """One launch of 2 ranks training every configuration the tests look at."""
    configs = {
        "mean": ddp.DDPConfig(max_steps=3, return_weights=True, **SHORT),
        "sum": ddp.DDPConfig(max_steps=1, grad_reduction="sum", return_weights=True, **SHORT),
        "mean1": ddp.DDPConfig(max_steps=1, return_weights=True, **SHORT),
        "no sampler": ddp.DDPConfig(use_sampler=False, epochs=2, max_steps=1, **SHORT),
        "no set_epoch": ddp.DDPConfig(set_epoch=False, epochs=2, max_steps=1, **SHORT),
        "no_sync": ddp.DDPConfig(accumulation=2, max_steps=2, count_allreduces=True, return_weights=True, **SHORT),
        "sync": ddp.DDPConfig(accumulation=2, use_no_sync=False, max_steps=2, count_allreduces=True, return_weights=True, **SHORT),
        "bn": ddp.DDPConfig(batchnorm=True, max_steps=1, return_weights=True, **{**SHORT, "global_batch": 8}),
        "syncbn": ddp.DDPConfig(batchnorm=True, sync_bn=True, max_steps=1, return_weights=True, **{**SHORT, "global_batch": 8}),
        "small buckets": ddp.DDPConfig(bucket_cap_mb=0.01, max_steps=2, count_allreduces=True, **SHORT),
        "timed": ddp.DDPConfig(accumulation=2, use_no_sync=False, max_steps=5, time_allreduces=True, **SHORT),
    }
    runs = launch(ddp.train_worker, 2, args=(list(configs.values()),), timeout=180)
    return configs, {name: [rank[i] for rank in runs] for i, name in enumerate(configs)}


def test_ddp_equals_single_process_on_the_global_batch(traps):
    configs, runs = traps
    single = ddp.baseline_weights(configs["mean"], 2, steps=3)
    assert all(np.abs(r["weights"] - single).max() <= 1e-5 for r in runs["mean"])


def test_summed_gradients_take_world_size_times_the_step(traps):
    configs, runs = traps
    start = ddp.flat_weights(ddp.build_model(configs["sum"], (1, 8, 8)))
    ratio = np.linalg.norm(runs["sum"][0]["weights"] - start) / np.linalg.norm(runs["mean1"][0]["weights"] - start)
    assert ratio == pytest.approx(2.0, rel=1e-4)


def test_without_a_sampler_ranks_read_the_same_data(traps):
    _, runs = traps
    assert runs["no sampler"][0]["first_labels"][0] == runs["no sampler"][1]["first_labels"][0]
    assert runs["mean"][0]["first_labels"][0] != runs["mean"][1]["first_labels"][0]


def test_without_set_epoch_every_epoch_repeats_the_order(traps):
    _, runs = traps
    firsts = runs["no set_epoch"][0]["first_labels"]
    assert firsts[0] == firsts[1]


def test_no_sync_skips_all_reduces_with_the_same_result(traps):
    _, runs = traps
    a, b = runs["no_sync"][0], runs["sync"][0]
    assert a["allreduce_calls"] == 2 and b["allreduce_calls"] == 4
    assert np.abs(a["weights"] - b["weights"]).max() <= 1e-5


def test_synchronised_batchnorm_restores_equivalence_on_cpu(traps):
    configs, runs = traps
    single = ddp.baseline_weights(configs["bn"], 2, steps=1)
    assert max(np.abs(r["weights"] - single).max() for r in runs["syncbn"]) <= 1e-5
    assert max(np.abs(r["weights"] - single).max() for r in runs["bn"]) > 1e-3
    assert runs["syncbn"][0]["bn_running_mean"] == pytest.approx(runs["syncbn"][1]["bn_running_mean"])


def test_smaller_buckets_mean_more_all_reduces(traps):
    _, runs = traps
    small = runs["small buckets"][0]
    assert small["allreduce_calls"] / small["optimizer_steps"] > 1  # the default 25 MB bucket makes one call per step


def test_all_reduce_time_is_measured_per_optimizer_step(traps):
    _, runs = traps
    for rank in runs["timed"]:
        spans, steps = rank["allreduce_seconds"], rank["step_seconds"]
        assert len(spans) == len(steps) == 5 and rank["allreduce_calls"] == 10  # two micro-batches, both synced
        assert all(0 < span < step for span, step in zip(spans, steps))
        assert rank["allreduce_ms"] == pytest.approx(1e3 * float(np.median(spans[3:])))
    untimed = runs["small buckets"][0]
    assert untimed["allreduce_seconds"] == [] and untimed["allreduce_ms"] is None


def test_state_dict_prefix_helpers():
    model = ddp.build_model(ddp.DDPConfig(), (1, 8, 8))
    prefixed = {"module." + k: v for k, v in model.state_dict().items()}
    assert ddp.strip_module_prefix(prefixed).keys() == model.state_dict().keys()
    ddp.load_state_dict_tolerant(model, prefixed)
    ddp.load_state_dict_tolerant(model, model.state_dict())


def test_config_errors_are_explained():
    with pytest.raises(ValueError, match="does not split evenly over 3 ranks"):
        ddp.DDPConfig(global_batch=64).per_rank_batch(3)
    with pytest.raises(ValueError, match="lr_scaling must be"):
        ddp.DDPConfig(lr_scaling="sqrt").scaled_lr(2)
    with pytest.raises(ValueError, match="dataset must be"):
        ddp.datasets_for(ddp.DDPConfig(dataset="mnist"))
    assert ddp.lr_factor(0, ddp.DDPConfig(lr_scaling="linear", warmup_steps=4), 2) == 0.5
    assert ddp.lr_factor(4, ddp.DDPConfig(lr_scaling="linear", warmup_steps=4), 2) == 1.0


@pytest.mark.parametrize("n, world_size", [(10, 3), (7, 4), (2, 5), (100, 1)])
def test_shard_indices_cover_everything_once(n, world_size):
    shares = [ddp.shard_indices(n, r, world_size) for r in range(world_size)]
    assert sorted(i for s in shares for i in s) == list(range(n))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_setup_outside_a_launcher_says_how_to_start(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(RuntimeError, match="start this worker with lab_utils.launch or torchrun"):
        ddp.setup()


def test_exercise_checks_pass_references_and_fail_bugs():
    def average_gradients(model, world_size):
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world_size

    def summing(model, world_size):
        for p in model.parameters():
            dist.all_reduce(p.grad)

    assert checks.check_average_gradients(average_gradients)
    result = checks.check_average_gradients(summing)
    assert not result and "divide by world_size" in result.hint
    assert checks.check_shard(ddp.shard_indices)
    assert not checks.check_shard(lambda n, rank, ws: list(range(n)))

    def run_epochs(sampler, loader, model, optimizer, epochs):
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for _ in loader:
                pass

    def broken_run_epochs(sampler, loader, model, optimizer, epochs):
        for epoch in range(epochs):
            for _ in loader:
                pass

    assert checks.check_epoch_loop(run_epochs, lambda lr, ws: lr * ws)
    assert "set_epoch" in checks.check_epoch_loop(broken_run_epochs, lambda lr, ws: lr * ws).hint
    assert "linear scaling" in checks.check_epoch_loop(run_epochs, lambda lr, ws: lr).hint


def test_the_same_training_runs_under_torchrun():
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}",
               "-m", "lab_utils.torchrun_train", "--epochs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    # the ranks' own errors come first in stderr, torchrun's summary last: show both
    assert done.returncode == 0, done.stderr[:3000] + "\n...\n" + done.stderr[-1500:]
    assert '"world_size": 2' in done.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: ranks sharing a GPU over gloo are not exercised")
def test_ranks_share_the_gpu_over_gloo():
    ranks = launch(ddp.whoami_worker, 2, timeout=120)
    assert all(r["device"].startswith("cuda") for r in ranks)
