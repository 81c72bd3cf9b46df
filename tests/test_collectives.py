"""Lab 06's room: drawing from real tensors, bytes on the wire, the tensor-parallel plan; the bench of lab 06's lesson code."""
import json

import matplotlib
import numpy as np
import pytest
import torch
import torch.distributed as dist

from lab_utils import collectives, spec
from lab_utils.labs.lab06 import tensor_parallel
from lab_utils.instructor import cli
from lab_utils.labs.lab06 import bench as bench_collectives
from lab_utils.labs.lab06 import gpu_check as gpu_collectives
from lab_utils.launch import launch, process_group
from lab_utils.labs.lab06.lesson import pipeline_traffic, ring_all_reduce, ring_step  # lab 06's, from its notebook

matplotlib.use("Agg")
COURSE_CNN, SHAPE = spec.cnn2d_2layer_fullconnected_2layer(), (1, 28, 28)


def test_contributors_read_the_rank_digits():
    assert collectives.contributors(4) == [0]
    assert collectives.contributors(40) == [1]
    assert collectives.contributors(404) == [0, 2]
    assert collectives.contributors(0) == []


def test_describe_collective_shows_each_rank_before_and_after():
    text = collectives.describe_collective("all-reduce", [np.array([1.0, 2.0]), np.array([10.0, 20.0])],
                                           [np.array([11.0, 22.0])] * 2)
    assert text.splitlines() == ["all-reduce", "  rank 0: [1 2]    ->  [11 22]", "  rank 1: [10 20]  ->  [11 22]"]


def test_drawings_are_made_from_the_tensors():
    before, after = [np.arange(1.0, 5.0) * 10 ** r for r in range(2)], [np.array([11.0, 22.0, 33.0, 44.0])] * 2
    fig = collectives.draw_collectives({"all-reduce": {"before": before, "after": after}})
    assert len(fig.axes) == 2
    traces = [[np.arange(1.0, 8.0) * 10 ** r] * 3 for r in range(3)]
    trace = collectives.draw_ring_trace(traces, ["a", "b", "c"])
    assert len(trace.axes) == 3
    # learner s9a: five panels side by side printed the digits at about 5 pt; stacked, they keep a readable size
    digits = [t for ax in trace.axes for t in ax.texts]
    assert len(digits) == 3 * 3 * 7 and min(t.get_fontsize() for t in digits) >= 9
    assert trace.get_size_inches()[0] <= 8 and "partial sum" in trace._suptitle.get_text()
    assert collectives.chunk_boundaries(7, 3) == [3, 5]


def test_ring_bytes_follow_the_formulas():
    assert collectives.ring_bytes_sent("all-reduce", 1000, 4) == 1500
    assert collectives.ring_bytes_sent("all-gather", 1000, 4) == 750
    assert collectives.ring_bytes_sent("reduce-scatter", 1000, 2) == 500
    assert collectives.ring_bytes_sent("send", 1000, 8) == 1000
    with pytest.raises(ValueError, match="unknown collective"):
        collectives.ring_bytes_sent("gossip", 1, 2)


def test_the_course_cnn_plan_splits_every_layer_with_weights():
    plan = tensor_parallel.tensor_parallel_plan(COURSE_CNN, SHAPE)
    assert [(p.how, p.size) for p in plan if p.how] == [("output channels", 16), ("output channels", 32),
                                                         ("output features (column parallel)", 64),
                                                         ("input features (row parallel)", 64)]
    assert tensor_parallel.check_tensor_parallel(COURSE_CNN, SHAPE, 4) == plan
    unpaired = tensor_parallel.tensor_parallel_plan(spec.cnn2d_3layer_fullconnected_3layer(), SHAPE)
    assert [p.how for p in unpaired if p.kind == "dense"] == ["output features (column parallel)",
                                                              "input features (row parallel)", ""]


def test_a_split_that_does_not_divide_names_the_layer_and_the_valid_sizes():
    with pytest.raises(ValueError, match=r"layer 0 \(conv2d.*16 channels.*3 ranks.*\[1, 2, 4, 8, 16\]"):
        tensor_parallel.check_tensor_parallel(COURSE_CNN, SHAPE, 3)


def test_more_ranks_than_channels_is_refused():
    with pytest.raises(ValueError, match="world_size=32 is larger than layer 0"):
        tensor_parallel.check_tensor_parallel(COURSE_CNN, SHAPE, 32)
    with pytest.raises(ValueError, match="positive integer"):
        tensor_parallel.check_tensor_parallel(COURSE_CNN, SHAPE, 0)


def traffic_worker(rank, world_size):
    with process_group(30):
        with collectives.count_traffic() as traffic:
            dist.all_reduce(torch.ones(100))
            parts = [torch.empty(10) for _ in range(world_size)]
            dist.all_gather(parts, torch.ones(10))
            request = dist.isend(torch.ones(5), (rank + 1) % world_size)
            dist.recv(torch.empty(5), (rank - 1) % world_size)
            request.wait()
        ring = ring_all_reduce(torch.arange(7.0) * (rank + 1), rank, world_size, ring_step)
        return {"sent": traffic.sent, "by": traffic.by_collective(), "ring": ring, "restored": dist.all_reduce is not None}


def test_count_traffic_counts_what_a_rank_sends_and_the_ring_sums():
    ranks = launch(traffic_worker, 2, timeout=60)
    assert ranks[0]["sent"] == 400 + 40 + 20
    assert ranks[0]["by"] == {"all-reduce": [1, 400.0], "all-gather": [1, 40.0], "send": [1, 20.0]}
    assert all(np.array_equal(r["ring"], np.arange(7.0) * 3) for r in ranks)


def test_traffic_counts_the_buffers_of_collectives_inside_phases_and_ring_passes():
    def worker(rank, world_size):
        import torch.distributed as dist

        from lab_utils.launch import process_group

        with process_group(30):
            comm = collectives.Traffic()
            dist.all_reduce(torch.ones(10))  # outside any phase: not counted
            with comm.phase("a"):
                dist.all_reduce(torch.ones(10))
                dist.all_gather_single(torch.empty(8), torch.ones(4))
            with comm.phase("b"):
                dist.reduce_scatter_single(torch.empty(4), torch.ones(8))
            return {"table": comm.table(), "ring": comm.ring_bytes(), "restored": dist.all_reduce.__name__}

    ranks = launch(worker, 2, timeout=60)
    assert ranks[0]["table"] == {"a all-reduce": {"calls": 1, "bytes": 40}, "a all-gather": {"calls": 1, "bytes": 32},
                                 "b reduce-scatter": {"calls": 1, "bytes": 32}}
    assert ranks[0]["ring"] == 2 * 40 + 32 + 32


def pipeline_traffic_worker(rank, world_size, batch_size):
    with process_group(30) as ctx:
        return pipeline_traffic(batch_size, 0, ctx.device, split=(2,), micro_batches=4)


def test_pipeline_traffic_counts_one_activation_send_forward_and_one_gradient_send_back_per_micro_batch():
    from lab_utils.labs.lab04 import pipeline

    ranks = launch(pipeline_traffic_worker, 2, args=(16,), timeout=60)
    boundary = pipeline.stage_input_shape(COURSE_CNN, SHAPE, (2,), 1)
    message = 4 * int(np.prod(boundary)) * 4  # a micro-batch of 4 images, float32
    assert ranks[0] == ranks[1] == {"send": [4, 4.0 * message]}


@pytest.mark.slow
def test_pipeline_traffic_on_more_ranks_than_stages_says_one_stage_per_rank():
    from lab_utils.launch import RankError

    with pytest.raises(RankError, match="makes 2 stages, but 3 ranks run: one stage per rank"):
        launch(pipeline_traffic_worker, 3, args=(16,), timeout=60)


def test_lab06_conv_worker_names_the_collective_of_each_pass():
    """Lab 06's table of a split convolution's traffic: each pass names the collective it ran (a Call is indexed by
    name: its first field is the phase, not the collective)."""
    from lab_utils.labs.lab06.lesson import conv_worker

    ranks = launch(conv_worker, 2, args=(spec.preset(bench_collectives.MODEL), bench_collectives.INPUT_SHAPE, 0),
                   timeout=60)
    named = {split: (ranks[0][split]["forward"][1], ranks[0][split]["backward"][1]) for split in ranks[0]}
    assert named == {"output channels": ("all-gather", "all-reduce"), "input channels": ("all-reduce", "all-gather")}


def test_bench_reports_every_figure_with_tiny_sizes():
    result = bench_collectives.bench(nbytes=1 << 16, repeats=2, train_steps=1, timeout_s=120)
    for key in ("ring_vs_library", "ring_vs_library_spread", "busbw_gbps", "busbw_spread", "ring_ms", "library_ms",
                *bench_collectives.DIFF_KEYS):
        assert key in result
    assert result["tp_conv_max_abs_diff"] <= 1e-5 and result["tp_mlp_max_abs_diff"] <= 1e-5
    assert result["tp_cnn_weights_max_abs_diff"] <= 1e-4 and result["ring_max_abs_diff"] <= 1e-9
    json.dumps(result)


def test_bench_is_on_the_command_line():
    args = cli.parser().parse_args(["bench", "collectives", "--repeats", "2"])
    assert (args.name, args.repeats, args.world_size) == ("collectives", 2, 2)


def test_gpu_check_says_why_it_skips():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check runs for real in the GPU job")
    assert set(gpu_collectives.gpu_check().values()) == {"skipped: no GPU"}
