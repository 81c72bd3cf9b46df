"""Lab 06's tensor parallel: the plan of the course CNN (bad splits refused before any rank starts), the course batch
and the unsplit CNN trained on it, which the notebook's tensor-parallel layers must match.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ... import spec


# ---- the tensor-parallel plan of the course CNN ----------------------------------------------------------------------

@dataclass(frozen=True)
class SplitLayer:
    """How one layer of the spec'd CNN is split over the ranks, and the size that must divide evenly."""

    index: int
    kind: str
    how: str   # "output channels" | "output features (column parallel)" | "input features (row parallel)" | "" (not split)
    size: int  # channels or features split over the ranks (0: not split)

    def describe(self) -> str:
        if not self.how:
            return f"layer {self.index} ({self.kind}): not split; {NOT_SPLIT.get(self.kind, 'runs whole on every rank')}"
        unit = "channels" if self.kind == "conv2d" else "features"
        return (f"layer {self.index} ({self.kind}): split by {self.how}, {self.size} {unit},\n"
                f"    valid world sizes {divisors(self.size)}")  # two lines: within 100 columns


NOT_SPLIT = {"maxpool2d": "it works channel by channel, so each rank pools its own channels",
             "flatten": "each rank flattens the all-gathered channels"}


def divisors(n: int) -> list[int]:
    """Every world size that splits n evenly."""
    return [d for d in range(1, n + 1) if n % d == 0]


def tensor_parallel_plan(model_spec, input_shape) -> list[SplitLayer]:
    """Convolutions split by output channels; dense layers in column/row pairs (a last unpaired one stays whole)."""
    layers = spec.validate(model_spec)
    shapes = [tuple(input_shape)] + spec.output_shapes(model_spec, input_shape)
    dense = [i for i, layer in enumerate(layers) if layer["type"] == "dense"]
    paired = dense[:len(dense) // 2 * 2]
    plan = []
    for i, layer in enumerate(layers):
        if layer["type"] == "conv2d":
            plan.append(SplitLayer(i, "conv2d", "output channels", layer["filters"]))
        elif i in paired and paired.index(i) % 2 == 0:
            plan.append(SplitLayer(i, "dense", "output features (column parallel)", layer["units"]))
        elif i in paired:
            plan.append(SplitLayer(i, "dense", "input features (row parallel)", shapes[i][0]))
        else:
            plan.append(SplitLayer(i, layer["type"], "", 0))
    return plan


def check_tensor_parallel(model_spec, input_shape, world_size: int) -> list[SplitLayer]:
    """The plan, or a ValueError naming the layer that cannot be split over `world_size` ranks and the valid sizes."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer (number of ranks), got {world_size!r}")
    plan = tensor_parallel_plan(model_spec, input_shape)
    split = [layer for layer in plan if layer.how]
    if not split:
        return plan
    valid = [d for d in divisors(min(layer.size for layer in split)) if all(l.size % d == 0 for l in split)]
    for layer in split:
        unit = "channels" if layer.kind == "conv2d" else "features"
        if world_size > layer.size:
            raise ValueError(f"world_size={world_size} is larger than layer {layer.index} ({layer.kind})'s {layer.size} "
                             f"{unit}: some ranks would own none of them. World sizes that split every layer of this "
                             f"model: {valid}")
        if layer.size % world_size:
            raise ValueError(f"layer {layer.index} ({layer.kind}, split by {layer.how}) has {layer.size} {unit}, which "
                             f"do not split evenly over {world_size} ranks (valid for this layer: "
                             f"{divisors(layer.size)}). World sizes that split every layer of this model: {valid}")
    return plan


# ---- the course batch, and the unsplit CNN trained on it ------------------------------------------------------

def course_batch(batch_size: int, seed: int, step: int = 0, image_side: int = 28):
    """The procedural images and labels of training step `step` (the same on every rank): one slice of a single
    stream, so that every step draws on the same ten class patterns and the steps teach one task."""
    from ... import data

    x, y = data.synthetic_images(batch_size * (step + 1), image_shape=(1, image_side, image_side), seed=seed * 1000)
    return torch.from_numpy(x[-batch_size:]), torch.from_numpy(y[-batch_size:])


MOMENTUM = 0.9  # the SGD momentum of the tensor-parallel training check, as in Labs 01 and 03


def single_device_training(model_spec, input_shape, batch_size: int, steps: int, lr: float, seed: int):
    """The unsplit CNN trained with SGD (momentum MOMENTUM) on the same batches: its parameters and per-step losses."""
    model = spec.build_torch(model_spec, input_shape, seed=seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM)
    losses = []
    for step in range(steps):
        x, y = course_batch(batch_size, seed, step, input_shape[-1])
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return [p.detach() for p in model.parameters()], losses


# ---- the tensor-parallel step without its communication ---------------------------------------------------------------

def _local_all_reduce(tensor, *args, **kwargs):
    """all_reduce made local: this rank's tensor stays as it is (no bytes sent, no wait for the other ranks)."""
    return None


def _local_all_gather(parts, tensor, *args, **kwargs):
    """all_gather made local: every block is a copy of this rank's (the copies stay, the transfers go)."""
    for part in parts:
        part.copy_(tensor)
    return None


class local_collectives:
    """In the block, torch.distributed's all_reduce and all_gather are local no-ops: a step timed inside does its
    compute and copies but sends nothing (its results are wrong; only its time is read)."""

    def __enter__(self):
        import torch.distributed as dist

        self._saved = {"all_reduce": dist.all_reduce, "all_gather": dist.all_gather}
        setattr(dist, "all_reduce", _local_all_reduce)  # setattr: the no-ops take what the collectives take
        setattr(dist, "all_gather", _local_all_gather)
        return self

    def __exit__(self, *exc):
        import torch.distributed as dist

        for name, function in self._saved.items():
            setattr(dist, name, function)
        return False
