"""lab_utils.labs.lab07.checkpoints and lab 07's sharded checkpoints: a resharded load that puts shards in the wrong order is
named (tensor, max |loaded - saved|) instead of a silent loss jump; a resume on another number of ranks is exact."""
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lab_utils.labs.lab07 import checkpoints
from lab_utils import data, spec
from lab_utils.launch import launch_jobs
from lab_utils.labs.lab07 import lesson as lab07  # lab 07's checkpoint worker, from its notebook

SMALL = (1, 8, 8)


# ---- the check, on plain arrays ----------------------------------------------------------------------------------

def weights():
    rng = np.random.default_rng(0)
    return {"0.weight": rng.normal(size=(4, 3)).astype(np.float32), "0.bias": rng.normal(size=4).astype(np.float32)}


def test_equal_weights_pass_and_rounding_passes_within_its_tolerance():
    saved = weights()
    assert checkpoints.weights_mismatch(saved, {k: v.copy() for k, v in saved.items()}) is None
    nudged = {k: v + 1e-7 for k, v in saved.items()}
    assert checkpoints.weights_mismatch(saved, nudged) is not None
    assert checkpoints.weights_mismatch(saved, nudged, tolerance=1e-5) is None


def test_swapped_shards_are_named_with_their_max_difference():
    saved = weights()
    loaded = dict(saved, **{"0.weight": np.concatenate([saved["0.weight"][2:], saved["0.weight"][:2]])})
    problem = checkpoints.weights_mismatch(saved, loaded, tolerance=1e-5)
    worst = float(np.abs(loaded["0.weight"] - saved["0.weight"]).max())
    assert problem is not None and "in 0.weight" in problem and f"{worst:.3g}" in problem
    assert "0.bias" not in problem


def test_nan_missing_and_reshaped_tensors_are_caught():
    saved = weights()
    assert "0.bias" in checkpoints.weights_mismatch(saved, dict(saved, **{"0.bias": saved["0.bias"] * np.nan}))
    assert "lack ['0.bias']" in checkpoints.weights_mismatch(saved, {"0.weight": saved["0.weight"]})
    assert "shape" in checkpoints.weights_mismatch(saved, dict(saved, **{"0.weight": saved["0.weight"].T}))


def test_repeats_and_skips_count_with_multiplicity():
    assert checkpoints.repeats_and_skips([0, 1, 2, 3], [3, 2, 1, 0]) == (0, 0)
    assert checkpoints.repeats_and_skips([0, 1, 1, 1], [0, 1, 2, 3]) == (2, 2)
    assert checkpoints.repeats_and_skips([0, 1], [0, 1, 2, 3, 4]) == (0, 3)


def test_epoch_order_is_distributed_samplers_permutation():
    sampler = torch.utils.data.DistributedSampler(range(10), num_replicas=1, rank=0, shuffle=True, seed=3)
    sampler.set_epoch(2)
    assert checkpoints.epoch_order(10, 3, 2) == list(sampler)


# ---- in real ranks ---------------------------------------------------------------------------------------------------

def load_worker(rank, world_size, job, swap):
    """Load lab 07's checkpoint into FSDP2 on these ranks; with `swap`, rank r takes rank 1 - r's shard of the largest
    weight (the mis-ordered layout of a wrong resharding). Returns the weights loaded and the loss they give."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = lab07.join_group()
    mesh = init_device_mesh(device.type, (world_size,))
    model = spec.build_torch(job.spec, job.input_shape, seed=job.seed)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=job.lr)
    model_state, optimizer_state = get_state_dict(model, optimizer)
    state: dict = {"model": model_state, "optimizer": optimizer_state, "samples": torch.tensor(0)}
    dcp.load(state, checkpoint_id=job.folder)
    largest = max(model_state, key=lambda name: model_state[name].numel())
    if swap:
        mine = model_state[largest].to_local()
        shards = [torch.empty_like(mine) for _ in range(world_size)]
        dist.all_gather(shards, mine)
        mine.copy_(shards[world_size - 1 - rank])
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    loaded = checkpoints.named_weights(model)
    with torch.no_grad():
        loss = float(F.cross_entropy(model(job.x[:8]), job.y[:8]))
    del model, optimizer
    lab07.leave_group()
    return {"loaded": loaded, "largest": largest, "loss": loss}


@pytest.fixture(scope="module")
def saved_and_loaded(tmp_path_factory):
    pictures = data.synthetic_split(32, 16, image_shape=SMALL, seed=0)
    job = lab07.CheckpointJob(spec.cnn2d_2layer_fullconnected_2layer(), SMALL, torch.from_numpy(pictures.x_train),
                              torch.from_numpy(pictures.y_train), steps=2, global_batch=8, lr=1e-2, seed=0,
                              folder=str(tmp_path_factory.mktemp("dcp")), save_at=1)
    save, right, swapped = launch_jobs([(lab07.checkpoint_worker, (job,)), (load_worker, (job, False)),
                                        (load_worker, (job, True))], 2, timeout=240)
    [one_rank] = launch_jobs([(lab07.checkpoint_worker, (replace(job, save_at=None, resume=True),))], 1, timeout=240)
    return job, save[0], right[0], swapped[0], one_rank[0]


def test_a_checkpoint_of_two_ranks_is_one_file_per_rank_plus_metadata(saved_and_loaded):
    job = saved_and_loaded[0]
    assert sorted(checkpoints.checkpoint_files(job.folder)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]


def test_a_right_load_equals_the_saved_weights(saved_and_loaded):
    _, save, right, _, _ = saved_and_loaded
    assert checkpoints.weights_mismatch(save["saved"], right["loaded"]) is None


def test_a_misordered_load_is_named_instead_of_a_silent_loss_jump(saved_and_loaded):
    _, save, right, swapped, _ = saved_and_loaded
    problem = checkpoints.weights_mismatch(save["saved"], swapped["loaded"], tolerance=1e-5)
    assert problem is not None and f"in {swapped['largest']}" in problem  # the tensor, by name
    worst = float(np.abs(swapped["loaded"][swapped["largest"]] - save["saved"][swapped["largest"]]).max())
    assert f"{worst:.3g}" in problem and worst > 1e-3
    assert swapped["loss"] != pytest.approx(right["loss"], abs=1e-4)  # the load itself raised nothing


def test_a_resume_on_one_rank_equals_the_uninterrupted_run(saved_and_loaded):
    _, save, _, _, one_rank = saved_and_loaded
    assert checkpoints.weights_mismatch(save["saved"], one_rank["loaded"]) is None
    assert sorted(one_rank["losses"]) == [1]
    assert one_rank["losses"][1] == pytest.approx(save["losses"][1], abs=1e-5)
    assert checkpoints.weights_mismatch(save["final"], one_rank["final"], tolerance=1e-5) is None
    assert checkpoints.weights_mismatch(save["saved"], save["final"], tolerance=1e-5) is not None  # it trained
