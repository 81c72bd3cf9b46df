"""lab_utils.memory: exact byte counts, the formulas, flat shards, collective counting, the mixed-precision dtype,
activation checkpointing, the reference strategies in real ranks, the benchmark and the GPU check."""
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lab_utils import memory, spec
from lab_utils.labs.lab07 import bench as bench_memory
from lab_utils.labs.lab07 import gpu_check as gpu_memory
from lab_utils.launch import launch, launch_jobs
from lab_utils.labs.lab07 import lesson as lab07  # lab 07's flat buffers, from its notebook

SMALL = (1, 8, 8)


def course(input_shape=SMALL, seed=0):
    return spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), input_shape, seed=seed)


def trained(optimizer_factory):
    model = course()
    optimizer = optimizer_factory(model.parameters())
    F.cross_entropy(model(torch.rand(4, *SMALL)), torch.tensor([0, 1, 2, 3])).backward()
    optimizer.step()
    return model, optimizer


# ---- bytes held ------------------------------------------------------------------------------------------------------

def test_held_bytes_equal_the_formula_for_each_optimizer():
    psi = memory.parameter_count(spec.cnn2d_2layer_fullconnected_2layer(), SMALL)
    tensors = len(list(course().parameters()))
    for name, factory, extra in (("sgd", lambda p: torch.optim.SGD(p, lr=0.1), 0),
                                 ("momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 0),
                                 ("adam", lambda p: torch.optim.Adam(p), 4 * tensors)):  # Adam's step counters
        held = memory.held_bytes(*trained(factory))
        formula = memory.per_rank_bytes(psi, 1, "ddp", name)
        assert held == {**formula, "optimizer": formula["optimizer"] + extra}, name


def test_storage_bytes_count_a_shared_storage_once():
    base = torch.zeros(100)
    assert memory.storage_bytes([base, base[:10], base.view(10, 10)]) == 400


def test_saved_activations_count_each_byte_once_and_leave_parameters_out():
    layer = nn.Linear(10, 10)
    x = torch.rand(4, 10, requires_grad=True)
    with memory.SavedActivations(layer) as saved:
        h = x.exp()             # saves its output h (160 bytes)
        h.sin()                 # saves its input: the same h
        layer(h)                # saves h and the weight (a parameter)
    assert saved.bytes == 160
    with memory.SavedActivations() as without_model:
        layer(x.exp())
    assert without_model.bytes == 160 + 400  # with no model to exclude, the weight counts too


def test_saved_activations_by_dtype_add_up_and_show_what_autocast_leaves_wide():
    model = course((1, 28, 28))
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    with memory.SavedActivations(model) as saved, torch.autocast("cpu", dtype=torch.bfloat16):
        F.cross_entropy(model(x), y)
    by_dtype = saved.bytes_by_dtype
    assert sum(by_dtype.values()) == saved.bytes and list(by_dtype)[0] == "bfloat16"
    assert by_dtype["int64"] >= 8 * 8 * 16 * 14 * 14  # max pooling's indices: 8 bytes each, whatever the precision
    assert 0 < by_dtype["float32"] < 1024  # the loss's log-softmax (and the mean's scalar) stay float32


def test_saved_activations_count_only_the_bytes_of_a_slice():
    big = torch.rand(100, 10)
    weight = torch.rand(10, 10, requires_grad=True)
    with memory.SavedActivations() as saved:
        big[:4] @ weight  # the weight's gradient needs the slice (160 bytes), not the whole of `big`
    assert saved.bytes == 160


def test_checkpointing_every_block_keeps_only_each_block_input():
    model = course((1, 28, 28))
    blocks = memory.layer_blocks(model)
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    inputs, h = [], x
    with torch.no_grad():
        for block in blocks:
            inputs.append(h)
            h = block(h)
    counts = {}
    for chosen in ((), tuple(range(len(blocks)))):
        with memory.SavedActivations(model) as saved:
            loss = F.cross_entropy(lab07.forward_with_checkpoints(blocks, x, chosen), y)
        loss.backward()
        counts[chosen] = saved.bytes
    with memory.SavedActivations() as loss_only:
        F.cross_entropy(h.requires_grad_(), y)  # the loss, outside every block, saves what it saves anyway
    assert counts[tuple(range(len(blocks)))] == sum(t.numel() * 4 for t in inputs) + loss_only.bytes < counts[()]


def test_layer_blocks_cut_before_every_layer_with_weights():
    model = course((1, 28, 28))
    assert memory.block_names(model) == ["conv 1", "conv 2", "dense 1", "dense 2"]
    assert [len(b) for b in memory.layer_blocks(model)] == [3, 4, 2, 1]


# ---- formulas -----------------------------------------------------------------------------------------------------------

def test_per_rank_bytes_give_the_playbook_table_for_mixed_precision_adam():
    psi, n = 1200, 4
    total = {s: sum(memory.per_rank_bytes(psi, n, s, "adam", mixed=True).values()) for s in memory.SHARDED}
    assert total == {"ddp": 16 * psi, "zero1": 4 * psi + 12 * psi // n, "zero2": 2 * psi + 14 * psi // n,
                     "zero3": 16 * psi // n}


def test_a_count_that_does_not_split_evenly_is_padded():
    assert memory.shard_size(10, 3) == 4 and memory.padding(10, 3) == 2 and memory.padding(12, 3) == 0
    assert memory.per_rank_bytes(10, 3, "zero3", "momentum") == {"parameters": 16, "gradients": 16, "optimizer": 16}


@pytest.mark.parametrize("args, words", [((10, 2, "zero4", "adam"), "unknown strategy"),
                                         ((10, 2, "ddp", "lamb"), "unknown optimizer"),
                                         ((0, 2, "ddp", "adam"), "n_params >= 1")])
def test_per_rank_bytes_refuse_bad_input(args, words):
    with pytest.raises(ValueError, match=words):
        memory.per_rank_bytes(*args)


# ---- flat shards and owners ----------------------------------------------------------------------------------------------

def test_flat_buffers_make_parameters_and_gradients_views_into_padded_buffers():
    model, reference = course(), course()
    flat = lab07.flat_buffers(model, 3)
    assert flat.padding == memory.padding(flat.numel, 3) and len(flat.params) % 3 == 0
    assert all(p.untyped_storage().data_ptr() == flat.params.untyped_storage().data_ptr() for p in model.parameters())
    x, y = torch.rand(4, *SMALL), torch.tensor([0, 1, 2, 3])
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(reference(x), y).backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
    assert torch.equal(flat.grads[:flat.numel], expected) and not flat.grads[flat.numel:].any()
    flat.params[flat.shard(0)] += 1.0  # updating a shard updates the model
    assert torch.equal(next(model.parameters()).detach().flatten()[:3], next(reference.parameters()).detach().flatten()[:3] + 1)


def test_assign_owners_gives_the_largest_tensors_to_the_least_loaded_rank():
    assert memory.assign_owners([5, 100, 7, 60, 50], 2) == [0, 0, 0, 1, 1]  # 100 | 60, 50 | 7, 5 to rank 0
    assert memory.assign_owners([1, 1, 1], 4) == [0, 1, 2]


def test_cheapest_checkpoints_fits_the_budget_at_the_least_extra_time():
    assert lab07.choose_checkpoints([60, 50, 50], [10.0, 6.0, 6.0], 200, 100) == [1, 2]
    assert lab07.choose_checkpoints([30, 20], [1.0, 1.0], 100, 120) == []
    assert lab07.choose_checkpoints([10, 20], [1.0, 1.0], 100, 50) is None


# ---- mixed precision ----------------------------------------------------------------------------------------------------

def test_amp_dtype_picks_bfloat16_on_cpu_and_float16_on_gpu():
    assert memory.amp_dtype("cpu") == torch.bfloat16 and memory.amp_dtype("cuda") == torch.float16
    assert memory.amp_dtype("cuda", "bfloat16", gpu_capability=(9, 0)) == torch.bfloat16


def test_amp_dtype_refuses_what_the_hardware_lacks_and_names_the_alternative(monkeypatch):
    with pytest.raises(ValueError, match="compute capability 7.5.*amp_dtype='float16'"):
        memory.amp_dtype("cuda", "bfloat16", gpu_capability=(7, 5))
    monkeypatch.setattr(memory, "_cpu_has_float16", lambda: False)
    with pytest.raises(ValueError, match="no float16 arithmetic.*amp_dtype='bfloat16'"):
        memory.amp_dtype("cpu", "float16")
    monkeypatch.setattr(memory, "_cpu_has_float16", lambda: True)
    assert memory.amp_dtype("cpu", "float16") == torch.float16
    with pytest.raises(ValueError, match="16-bit float"):
        memory.amp_dtype("cpu", "float32")


# ---- in real ranks ----------------------------------------------------------------------------------------------------------

def test_lab07_strategies_equal_ddp_and_shard_memory_with_padding():
    """Lab 07's workers (lab_utils.labs.lab07.lesson), 3 ranks (oversubscribed on 2 cores: correct, slow): the course
    CNN's count does not split evenly."""
    from lab_utils.labs.lab07.bench import strategy_jobs

    model_spec = spec.cnn2d_2layer_fullconnected_2layer()
    jobs = strategy_jobs(("ddp", "zero1", "fsdp"), model_spec, world_size=3, steps=2, batch_per_rank=4)
    ddp, zero1, fsdp = launch_jobs(jobs, 3, timeout=240)
    psi = memory.parameter_count(model_spec)
    initial = memory.full_weights(spec.build_torch(model_spec, memory.INPUT_SHAPE, seed=0))
    assert float(abs(ddp[0]["weights"] - initial.numpy()).max()) > 1e-4
    assert all(float(abs(z["weights"] - d["weights"]).max()) <= 1e-5 for z, d in zip(zero1, ddp))
    assert all(float(abs(f["weights"] - d["weights"]).max()) <= 1e-4 for f, d in zip(fsdp, ddp))
    assert zero1[0]["padding"] == memory.padding(psi, 3) > 0
    assert zero1[0]["bytes"]["parameters"] == 4 * memory.shard_size(psi, 3) * 3  # the padded flat buffer
    assert max(r["bytes"]["optimizer"] for r in zero1) <= 8 * memory.shard_size(psi, 3) + 4
    assert max(r["bytes"]["parameters"] for r in fsdp) < 0.4 * ddp[0]["bytes"]["parameters"]
    assert zero1[0]["ring_bytes"] == pytest.approx(ddp[0]["ring_bytes"], rel=1e-3)
    assert fsdp[0]["ring_bytes"] / ddp[0]["ring_bytes"] == pytest.approx(1.5, rel=0.05)  # per-tensor padding


# ---- drawing, the benchmark, the GPU check ----------------------------------------------------------------------------

def test_draw_per_rank_draws_one_stacked_bar_per_row():
    import matplotlib

    matplotlib.use("Agg")
    ax = memory.draw_per_rank({"DDP · rank 0": {"parameters": memory.MIB, "gradients": 2 * memory.MIB},
                               "FSDP2 · rank 0": {"parameters": memory.MIB // 2}})
    assert [t.get_text() for t in ax.get_yticklabels()] == ["DDP · rank 0", "FSDP2 · rank 0"]
    assert ax.get_xlabel() == "MiB held by the rank"
    assert max(p.get_x() + p.get_width() for p in ax.patches) == pytest.approx(3.0)


@pytest.mark.slow
def test_bench_memory_ends_with_a_json_line(capsys):
    from lab_utils.instructor import cli

    capsys.readouterr()
    assert cli.main(["bench", "memory", "--repeats", "1"]) == 0  # in this process: torch and the fork server are warm
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["zero1_optimizer_bytes_ratio"] <= 0.55 and figures["fsdp_param_bytes_ratio"] <= 0.55
    assert figures["zero1_vs_ddp_max_abs_diff"] <= 1e-5 and figures["fsdp_vs_ddp_max_abs_diff"] <= 1e-4
    assert figures["checkpoint_activation_bytes_ratio"] < 1 and figures["checkpoint_time_ratio"] > 0
    assert set(figures["spread"]) >= {"checkpoint_time_ratio", "zero1_optimizer_bytes_ratio"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: gpu_check runs for real")
def test_gpu_check_says_it_skipped_without_a_gpu():
    assert gpu_memory.gpu_check() == {"memory": "skipped: no GPU"}


def test_amp_note_says_bfloat16_is_emulated_on_a_cpu_without_native_bf16():
    assert "emulates" in memory.amp_note("cpu", torch.bfloat16, features="avx2 fma")
    assert memory.amp_note("cpu", torch.bfloat16, features="avx2 avx512f avx512_bf16") == ""
    assert memory.amp_note("cuda", torch.float16, features="avx2") == ""
    assert memory.cpu_bf16_native("amx_tile amx_bf16") and not memory.cpu_bf16_native("avx2 avx512f")
