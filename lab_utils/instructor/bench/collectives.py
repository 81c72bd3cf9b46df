"""`bench collectives`: lab 06's hand-built ring against the library's all-reduce, and the tensor-parallel layers.

The ring and the layers are lab 06's lesson code (lab_utils.lessons.lab06, generated from its notebook), imported inside
the functions that run them: `assign` starts without the generated modules."""
from __future__ import annotations

import copy
import json
import statistics

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ... import measure, report, spec
from ...tensor_parallel import course_batch, single_device_training

RING_BYTES = 4 << 20  # the benchmark's message: 4 MiB of float32




DIFF_KEYS = ("ring_max_abs_diff", "tp_conv_max_abs_diff", "tp_mlp_max_abs_diff", "tp_cnn_weights_max_abs_diff")


def bench(*, nbytes: int = RING_BYTES, repeats: int = 9, train_steps: int = 3, world_size: int = 2, seed: int = 0,
          timeout_s: float = 300.0) -> dict:
    """The hand-built ring against gloo's all-reduce (medians of interleaved repeats; a repeat lasts until the slower
    rank is done) and the tensor-parallel layers against unsplit ones, in one launch."""
    from ...launch import launch

    ranks = launch(reference_worker, world_size, args=(nbytes, repeats, train_steps, seed, timeout_s / 2),
                   timeout=timeout_s)
    ring = np.max([r["ring"] for r in ranks], axis=0)  # a repeat ends when its slowest rank is done
    library = np.max([r["library"] for r in ranks], axis=0)
    busbw = [report.bus_bandwidth(nbytes, t, world_size) / 1e9 for t in library]
    return {"benchmark": "collectives", "world_size": world_size, "backend": ranks[0]["backend"],
            "device": ranks[0]["device"], "nbytes": nbytes, "repeats": repeats,
            "ring_ms": round(1e3 * statistics.median(ring), 3), "ring_spread": round(measure.spread(ring), 3),
            "library_ms": round(1e3 * statistics.median(library), 3), "library_spread": round(measure.spread(library), 3),
            "ring_vs_library": round(statistics.median(library) / statistics.median(ring), 3),
            "ring_vs_library_spread": round(measure.spread(library / ring), 3),
            "busbw_gbps": round(statistics.median(busbw), 3), "busbw_spread": round(measure.spread(busbw), 3),
            **{key: max(r[key] for r in ranks) for key in DIFF_KEYS}}


def print_bench(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    n, mib = result["world_size"], result["nbytes"] / 2**20
    print(f"all-reduce of {mib:g} MiB over {n} ranks ({result['backend']}), median of {result['repeats']} interleaved "
          "repeats (spread = (max - min) / median)")
    for label, key in (("hand-built ring", "ring"), (f"{result['backend']} all_reduce", "library")):
        line = f"  {label:<16} {result[key + '_ms']:8.3f} ms  (spread {result[key + '_spread']:.2f})"
        print(line)
    print(f"  ring_vs_library = {result['backend']} time / ring time = {result['ring_vs_library']:.3f} (target >= 0.7)")
    print(f"  bus bandwidth of {result['backend']}'s all-reduce: 2 (N-1)/N x bytes / time = {result['busbw_gbps']:.3f} GB/s")
    for key in DIFF_KEYS:
        target = 1e-4 if key == "tp_cnn_weights_max_abs_diff" else 1e-5
        print(f"  {key:<28} {result[key]:.2e}  (target <= {target:g})")
    print(json.dumps(result))


# ---- the reference worker: lab 06's lesson code against unsplit computations (bench and GPU check) -----------------

def _max_diff(a, b) -> float:
    return max(float((x.detach().cpu().double() - y.detach().cpu().double()).abs().max()) for x, y in zip(a, b))


def _tp_conv_diff(device, seed: int) -> float:
    """Both conv splits against the unsplit conv: outputs, weight and input gradients (max |difference|)."""
    from ...lessons.lab06 import CopyToRanks, GatherChannels, SplitChannels, SumOverRanks, block, split_conv

    rank, world_size = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(seed)
    conv = spec.init_weights(nn.Conv2d(8, 8, 3, padding=1), seed)
    x, grad_y = torch.randn(4, 8, 10, 10, generator=gen), torch.randn(4, 8, 10, 10, generator=gen)
    x_ref = x.clone().requires_grad_(True)
    y_ref = conv(x_ref)
    y_ref.backward(grad_y)
    diffs = []
    for dim in (0, 1):
        part = split_conv(conv, rank, world_size, dim).to(device)
        xi = x.to(device, copy=True).requires_grad_(True)
        if dim == 0:
            y = GatherChannels.apply(part(CopyToRanks.apply(xi)))
        else:
            y = SumOverRanks.apply(part(SplitChannels.apply(xi))) + conv.bias.detach().to(device).view(1, -1, 1, 1)
        y.backward(grad_y.to(device))
        mine = block(8, rank, world_size)
        weight_ref = conv.weight.grad[mine] if dim == 0 else conv.weight.grad[:, mine]
        diffs.append(_max_diff([y, xi.grad, part.weight.grad], [y_ref, x_ref.grad, weight_ref]))
    return max(diffs)


def _tp_mlp_diff(device, seed: int) -> float:
    """The column/row pair, by hand and with torch.distributed.tensor.parallel, against the unsplit MLP."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from ...lessons.lab06 import ParallelClassifier

    rank, world_size = dist.get_rank(), dist.get_world_size()
    mlp = spec.init_weights(nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10)), seed)
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(seed))
    mlp(x).square().sum().backward()
    pair = ParallelClassifier(mlp[0], mlp[2], rank, world_size).to(device)  # the lesson's column/row pair
    y = pair(x.to(device))
    y.square().sum().backward()
    mine = slice(rank * 16 // world_size, (rank + 1) * 16 // world_size)
    by_hand = _max_diff([y, pair.fc1.weight.grad, pair.fc2.weight.grad],
                        [mlp(x), mlp[0].weight.grad[mine], mlp[2].weight.grad[:, mine]])
    mesh_device = "cuda" if str(device).startswith("cuda") and dist.get_backend() == "nccl" else "cpu"
    library = parallelize_module(_fresh(mlp, mesh_device), init_device_mesh(mesh_device, (world_size,)),
                                 {"0": ColwiseParallel(), "2": RowwiseParallel()})
    y_lib = library(x.to(mesh_device))
    y_lib.square().sum().backward()
    with_library = _max_diff([y_lib, library[0].weight.grad.full_tensor(), library[2].weight.grad.full_tensor()],
                             [mlp(x), mlp[0].weight.grad, mlp[2].weight.grad])
    return max(by_hand, with_library)


def _fresh(module: nn.Module, device) -> nn.Module:
    """A copy of `module` on `device` without gradients."""
    twin = copy.deepcopy(module).to(device)
    twin.zero_grad(set_to_none=True)
    return twin


def _tp_cnn_diff(device, steps: int, seed: int, batch_size: int = 32, lr: float = 0.05) -> float:
    """The course CNN trained tensor-parallel against the unsplit one trained on one device: max |weight difference|."""
    from ...lessons.lab06 import TensorParallelCNN

    model_spec, input_shape = spec.cnn2d_2layer_fullconnected_2layer(), (1, 28, 28)
    model = TensorParallelCNN(spec.build_torch(model_spec, input_shape, seed=seed), dist.get_rank(),
                              dist.get_world_size()).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        x, y = course_batch(batch_size, seed, step)
        optimizer.zero_grad()
        F.cross_entropy(model(x.to(device)), y.to(device)).backward()
        optimizer.step()
    reference, _ = single_device_training(model_spec, input_shape, batch_size, steps, lr, seed)
    return _max_diff(_gathered_state(model), reference)


# (name, dim along which the ranks' slices join) of lab 06's TensorParallelCNN, in spec.build_torch's parameter order
_SHARDS = (("conv1.weight", 0), ("conv1.bias", 0), ("conv2.weight", 0), ("conv2.bias", 0),
           ("classifier.fc1.weight", 0), ("classifier.fc1.bias", 0), ("classifier.fc2.weight", 1),
           ("classifier.bias", None))


def _gathered_state(model) -> list:
    """The whole model's parameters, in spec.build_torch's order, rebuilt from every rank's slices (all-gathered)."""
    params, state = dict(model.named_parameters()), []
    for name, dim in _SHARDS:
        t = params[name].detach().contiguous()
        if dim is None:  # not split: every rank holds all of it
            state.append(t)
            continue
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t)
        state.append(torch.cat(parts, dim=dim))
    return state


def _ring_diff(comm_device, seed: int, sizes=(1, 13, 1001)) -> float:
    """The reference ring against the float64 sum of every rank's tensor, on sizes the world size does not divide."""
    from ...lessons.lab06 import ring_all_reduce, ring_step

    rank, world_size = dist.get_rank(), dist.get_world_size()
    worst = 0.0
    for n in sizes:
        inputs = [torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 7919 * r + n))
                  for r in range(world_size)]
        result = ring_all_reduce(inputs[rank].clone().to(comm_device), rank, world_size, ring_step)
        worst = max(worst, _max_diff([result], [sum(inputs)]))
    return worst


def _ring_vs_library(nbytes: int, repeats: int, comm_device) -> dict:
    """Seconds of each repeat of the ring and of dist.all_reduce on `nbytes` of float32, interleaved, each after a
    barrier."""
    from ...lessons.lab06 import ring_all_reduce, ring_step

    rank, world_size = dist.get_rank(), dist.get_world_size()
    start = torch.randn(max(1, nbytes // 4), generator=torch.Generator().manual_seed(rank)).to(comm_device)
    ring, library = start.clone(), start.clone()

    def reset(tensor):
        return lambda: (tensor.copy_(start), dist.barrier())

    timings = measure.time_interleaved({"ring": lambda: ring_all_reduce(ring, rank, world_size, ring_step),
                                        "library": lambda: dist.all_reduce(library)},
                                       warmup=2, repeats=repeats, device=comm_device,
                                       before={"ring": reset(ring), "library": reset(library)})
    return {name: list(t.times) for name, t in timings.items()}


def reference_worker(rank: int, world_size: int, nbytes: int, repeats: int, train_steps: int, seed: int = 0,
                     timeout_s: float = 60.0) -> dict:
    """Every reference check of the lab on this rank: the ring timed beside the library's all-reduce; the ring's and the
    tensor-parallel layers' differences from unsplit computations."""
    from ...launch import process_group

    with process_group(timeout_s) as ctx:
        device = torch.device(ctx.device)
        if device.type == "cuda":  # compare full float32 arithmetic, not TF32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        comm_device = device if ctx.backend == "nccl" else torch.device("cpu")  # gloo's send/recv take CPU tensors
        return {"backend": ctx.backend, "device": ctx.device, **_ring_vs_library(nbytes, repeats, comm_device),
                "ring_max_abs_diff": _ring_diff(comm_device, seed), "tp_conv_max_abs_diff": _tp_conv_diff(device, seed),
                "tp_mlp_max_abs_diff": _tp_mlp_diff(device, seed),
                "tp_cnn_weights_max_abs_diff": _tp_cnn_diff(device, train_steps, seed)}
