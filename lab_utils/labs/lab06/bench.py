"""`bench collectives`: lab 06's hand-built ring against the library's all-reduce, and the tensor-parallel layers.

The workers are lab 06's lesson code (lab_utils.labs.lab06.lesson, generated from its notebook): the ring timed beside the
library (timing_worker), the ring against the exact sum (ring_check_worker), both splits of a convolution (conv_worker),
the tensor-parallel CNN trained (tp_train_worker)."""
from __future__ import annotations

import json
import statistics

import numpy as np
import torch

from ... import hardware, measure, report, spec
from ...compare import max_abs_diff
from .tensor_parallel import course_batch, single_device_training
from . import lesson as lab06
from .lesson import conv_problem

RING_BYTES = 4 << 20  # the benchmark's message: 4 MiB of float32
MODEL, INPUT_SHAPE = "cnn2d_2layer_fullconnected_2layer", (1, 28, 28)  # lab 06's CNN
TP_BATCH, TP_LR = 32, 0.05  # the tensor-parallel training check: images per step, SGD learning rate
RING_SIZES = (1, 13, 1001)  # the ring's check: sizes the world size does not divide, in float64
DIFF_KEYS = ("ring_max_abs_diff", "tp_conv_max_abs_diff", "tp_mlp_max_abs_diff", "tp_cnn_weights_max_abs_diff")


def full_float32() -> None:
    """Run before a rank starts: on a GPU, compare full float32 arithmetic, not TF32."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def lesson_checks(world_size: int, nbytes: int, repeats: int, train_steps: int, seed: int, timeout_s: float) -> dict:
    """One launch of lab 06's workers and the reference checks: per repeat, the ring's and the library's seconds (the
    slower rank's); the largest difference of each check from the unsplit computation."""
    from ...launch import launch_jobs

    model_spec = spec.preset(MODEL)
    timing, ring, conv, trained, classifier = launch_jobs(
        [(lab06.timing_worker, ([nbytes], repeats)),
         (lab06.ring_check_worker, (RING_SIZES, seed, torch.float64)),
         (lab06.conv_worker, (model_spec, INPUT_SHAPE, seed)),
         (lab06.tp_train_worker, (model_spec, INPUT_SHAPE, train_steps, TP_BATCH, TP_LR, seed)),
         (lab06.classifier_worker, (model_spec, INPUT_SHAPE, seed, TP_BATCH, {"by hand": lab06.SumOverRanks}))],
        world_size, timeout=timeout_s, prepare=full_float32)
    reference, _ = single_device_training(model_spec, INPUT_SHAPE, TP_BATCH, train_steps, TP_LR, seed)
    ranks = hardware.plan(world_size)  # where the ranks ran: what hardware.rank_device told each of them
    return {"backend": ranks.backend, "device": ranks.devices[0],
            **{name: np.max([r[nbytes][name] for r in timing], axis=0) for name in ("ring", "library")},
            "ring_max_abs_diff": max(r["worst"]["ring vs exact"] for r in ring),
            "tp_conv_max_abs_diff": _conv_diff(conv, model_spec, seed),
            "tp_mlp_max_abs_diff": _classifier_diff(classifier, model_spec, seed, TP_BATCH),
            "tp_cnn_weights_max_abs_diff": _max_diff(lab06.unshard([r["shards"] for r in trained]), reference)}


def bench(*, nbytes: int = RING_BYTES, repeats: int = 9, train_steps: int = 3, world_size: int = 2, seed: int = 0,
          timeout_s: float = 300.0) -> dict:
    """The hand-built ring against the library's all-reduce (medians of interleaved repeats; a repeat lasts until the
    slower rank is done) and the tensor-parallel layers against unsplit ones, in one launch."""
    checks = lesson_checks(world_size, nbytes, repeats, train_steps, seed, timeout_s)
    ring, library = checks["ring"], checks["library"]
    busbw = [report.bus_bandwidth(nbytes, t, world_size) / 1e9 for t in library]
    return {"benchmark": "collectives", "world_size": world_size, "backend": checks["backend"],
            "device": checks["device"], "nbytes": nbytes, "repeats": repeats,
            "ring_ms": round(1e3 * statistics.median(ring), 3), "ring_spread": round(measure.spread(ring), 3),
            "library_ms": round(1e3 * statistics.median(library), 3), "library_spread": round(measure.spread(library), 3),
            "ring_vs_library": round(statistics.median(library) / statistics.median(ring), 3),
            "ring_vs_library_spread": round(measure.spread(library / ring), 3),
            "busbw_gbps": round(statistics.median(busbw), 3), "busbw_spread": round(measure.spread(busbw), 3),
            **{key: checks[key] for key in DIFF_KEYS}}


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


# ---- lab 06's lesson code against unsplit computations (bench and GPU check) ---------------------------------

def _max_diff(a, b) -> float:
    """The largest max_abs_diff over pairs of tensors or arrays."""
    return max(max_abs_diff(x, y) for x, y in zip(a, b))


def _conv_diff(conv_ranks, model_spec, seed: int) -> float:
    """conv_worker's two splits against the unsplit convolution: outputs, input gradients, the ranks' weight gradients
    put back together."""

    conv, x, grad_y = conv_problem(model_spec, INPUT_SHAPE, seed)
    x.requires_grad_(True)
    y = conv(x)
    y.backward(grad_y)
    worst = 0.0
    for name, dim in (("output channels", 0), ("input channels", 1)):
        got = [r[name] for r in conv_ranks]
        weight_grad = np.concatenate([g["w_grad"] for g in got], axis=dim)
        worst = max(worst, _max_diff([g["y"] for g in got] + [g["x_grad"] for g in got] + [weight_grad],
                                     [y] * len(got) + [x.grad] * len(got) + [conv.weight.grad]))
    return worst


def _classifier_diff(classifier_ranks, model_spec, seed: int, batch: int) -> float:
    """classifier_worker's column/row classifier, by hand and with torch.distributed.tensor.parallel, against the
    unsplit one: outputs, input gradients, both weights' gradients (the hand-built shards put back together)."""
    import torch.nn.functional as F

    full = spec.build_torch(model_spec, INPUT_SHAPE, seed=seed)
    images, labels = course_batch(batch, seed)
    features = full[:7](images).detach().requires_grad_(True)
    logits = full[7:](features)
    F.cross_entropy(logits, labels).backward()
    worst = 0.0
    for name, shards in (("by hand", True), ("torch.distributed.tensor.parallel", False)):
        got = [r[name] for r in classifier_ranks]
        fc1 = np.concatenate([g["fc1"] for g in got], axis=0) if shards else got[0]["fc1"]
        fc2 = np.concatenate([g["fc2"] for g in got], axis=1) if shards else got[0]["fc2"]
        worst = max(worst, _max_diff([g["logits"] for g in got] + [g["x_grad"] for g in got] + [fc1, fc2],
                                     [logits] * len(got) + [features.grad] * len(got) +
                                     [full[7].weight.grad, full[9].weight.grad]))
    return worst
