"""Splitting the spec'd CNN into pipeline stages: which layers each stage holds, its weights, its input's shape, and
a split balanced on the layers' measured times."""
from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn

from .... import data, spec

def modules_per_layer(model_spec) -> list[int]:
    """How many torch modules spec.build_torch makes for each spec layer (a layer plus its ReLU)."""
    return [1 + (layer.get("activation") == "relu") for layer in spec.validate(model_spec)]


def check_split(model_spec, split) -> tuple[int, ...]:
    """`split` lists the spec-layer index where each stage after the first begins; returns it validated."""
    n = len(spec.validate(model_spec))
    split = tuple(split)
    if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in split):
        raise ValueError(f"split must list layer indices (integers), got {split!r}")
    if list(split) != sorted(set(split)) or (split and (split[0] < 1 or split[-1] > n - 1)):
        raise ValueError(f"split {list(split)} must be strictly increasing layer indices between 1 and {n - 1}: "
                         f"stage s+1 starts at layer split[s] of the {n}-layer spec")
    return tuple(int(i) for i in split)


def stage_layers(model_spec, split) -> list[range]:
    """The spec layers of each stage."""
    bounds = [0, *check_split(model_spec, split), len(spec.validate(model_spec))]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def build_stage(model_spec, input_shape, split, stage: int, seed: int = 0) -> nn.Sequential:
    """Stage `stage` of the spec'd model: the same weights as spec.build_torch(..., seed) has for those layers."""
    layers = stage_layers(model_spec, split)
    if not 0 <= stage < len(layers):
        raise ValueError(f"stage {stage} does not exist: split {list(split)} makes {len(layers)} stages")
    full = spec.build_torch(model_spec, input_shape, seed=seed)
    starts = np.cumsum([0] + modules_per_layer(model_spec))
    return full[int(starts[layers[stage].start]):int(starts[layers[stage].stop])]


def stage_input_shape(model_spec, input_shape, split, stage: int) -> tuple[int, ...]:
    """The shape (without batch) of the activation that enters `stage`."""
    first = stage_layers(model_spec, split)[stage].start
    return tuple(input_shape) if first == 0 else spec.output_shapes(model_spec, input_shape)[first - 1]


def _forward_backward(layer: nn.Module, inp: torch.Tensor):
    """One forward and backward pass of `layer` on `inp` (a gradient of ones), as a function to time."""
    def step():
        out = layer(inp)
        out.backward(torch.ones_like(out))
    return step


def layer_timings(model_spec, input_shape, batch_size: int = 64, repeats: int = 5, seed: int = 0,
                  threads: int | None = 1) -> list:
    """The measured forward + backward (measure.Timing) of each spec layer, with `threads` intra-op threads."""
    from ....measure import intra_op_threads, time_interleaved

    model = spec.build_torch(model_spec, input_shape, seed=seed)
    starts = np.cumsum([0] + modules_per_layer(model_spec))
    x = torch.from_numpy(data.synthetic_images(batch_size, image_shape=tuple(input_shape), seed=seed)[0])
    steps = {}
    for i in range(len(starts) - 1):
        layer = model[int(starts[i]):int(starts[i + 1])]
        # the first layer's input is data: no gradient is computed for it
        steps[i] = _forward_backward(layer, x.detach().requires_grad_(i > 0))
        with torch.no_grad():
            x = layer(x)
    with intra_op_threads(threads):
        # round-robin, so that drift on a busy machine hits every layer alike
        timings = time_interleaved(steps, warmup=2, repeats=repeats)
    return [timings[i] for i in range(len(steps))]


def layer_times(model_spec, input_shape, batch_size: int = 64, repeats: int = 5, seed: int = 0,
                threads: int | None = 1) -> list[float]:
    """Measured seconds of forward + backward of each spec layer (the medians of layer_timings)."""
    return [t.median for t in layer_timings(model_spec, input_shape, batch_size, repeats, seed, threads)]


def balanced_split(times, stages: int) -> tuple[int, ...]:
    """The split into `stages` contiguous stages that minimises the slowest stage's total time."""
    n = len(times)
    if not 1 <= stages <= n:
        raise ValueError(f"cannot split {n} layers into {stages} stages: each stage needs at least one layer")
    best, best_split = math.inf, tuple[int, ...]()
    for cut in itertools.combinations(range(1, n), stages - 1):
        bounds = [0, *cut, n]
        slowest = max(sum(times[a:b]) for a, b in zip(bounds, bounds[1:]))
        if slowest < best - 1e-12:
            best, best_split = slowest, cut
    return tuple(best_split)


def stage_shares(times, split) -> list[float]:
    """Each stage's share of the total measured time."""
    bounds = [0, *split, len(times)]
    total = sum(times)
    return [sum(times[a:b]) / total for a, b in zip(bounds, bounds[1:])]


def split_movers(timings, stages: int) -> list[int]:
    """The layers whose time, anywhere in its repeats' range (the others at their medians), changes balanced_split:
    the layers whose noise can move the split (a light layer's wide spread cannot)."""
    medians = [t.median for t in timings]
    split = balanced_split(medians, stages)
    return [i for i, t in enumerate(timings)
            if any(balanced_split(medians[:i] + [v] + medians[i + 1:], stages) != split for v in (min(t.times), max(t.times)))]


def overlap_cap(shares) -> float:
    """The most any schedule can overlap K stages' work, over the naive split: 1 / the slowest stage's share (the
    step lasts at least as long as that stage's own ops)."""
    return 1 / max(shares)
