"""One pipeline configuration (the model, its split, the batch, the schedule) and what one stage knows during a step
(the context lab 04's ops read and fill)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .... import data, spec
from .split import stage_input_shape


def micro_batch_size(batch_size: int, micro_batches: int) -> int:
    """Samples per micro-batch; the batch must divide evenly (so every micro-batch weighs the same in the loss)."""
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
        raise ValueError(f"micro_batches must be a positive integer, got {micro_batches!r}")
    if batch_size % micro_batches:
        lower, upper = batch_size - batch_size % micro_batches, batch_size - batch_size % micro_batches + micro_batches
        raise ValueError(f"a batch of {batch_size} does not split into {micro_batches} equal micro-batches: use a batch "
                         f"that is a multiple of {micro_batches} (e.g. {lower or upper} or {upper}), or a number of "
                         f"micro-batches that divides {batch_size}")
    return batch_size // micro_batches


@dataclass(frozen=True)
class PipelineRun:
    """One pipeline configuration: the model, its split, the batch, and the schedule."""

    label: str
    schedule: str = "gpipe"  # naive | gpipe | 1f1b
    micro_batches: int = 1
    batch_size: int = 256
    split: tuple[int, ...] = (5,)
    model: str = "cnn2d_3layer_fullconnected_3layer"
    image_side: int = 28
    batchnorm: bool = False
    seed: int = 0

    def model_spec(self) -> list[dict]:
        layers = spec.preset(self.model)
        return spec.with_batchnorm(layers) if self.batchnorm else layers

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (1, self.image_side, self.image_side)

    def batch(self):
        """The (images, labels) every configuration with this seed and size trains on."""
        x, y = data.synthetic_images(self.batch_size, image_shape=self.input_shape, seed=self.seed)
        return torch.from_numpy(x), torch.from_numpy(y)


@dataclass
class StageContext:
    """What one pipeline stage knows during one step, and what it keeps between its ops."""

    rank: int
    stages: int
    stage: nn.Module                # this rank's layers
    device: torch.device
    wire: torch.device              # where messages leave from and arrive: `device`, or host memory when gloo links GPUs
    micro_batches: int
    in_shape: tuple[int, ...]       # the shape of a received activation, micro-batch first (not used on the first stage)
    inputs: list = field(default_factory=list)   # first stage: the images, one tensor per micro-batch
    labels: list = field(default_factory=list)   # last stage: the labels, one tensor per micro-batch
    saved: dict = field(default_factory=dict)    # micro-batch -> what its backward needs
    pending: list = field(default_factory=list)  # sends started (isend) and not yet known to be delivered
    logits: dict = field(default_factory=dict)   # last stage: micro-batch -> the model's outputs

    @property
    def first(self) -> bool:
        return self.rank == 0

    @property
    def last(self) -> bool:
        return self.rank == self.stages - 1

    @classmethod
    def for_run(cls, run: "PipelineRun", stage: nn.Module, rank: int, stages: int, device, backend: str,
                batch=None) -> "StageContext":
        """A fresh context for one step of `run` on stage `rank` (the batch is run.batch() unless given)."""
        device = torch.device(device)
        wire = torch.device("cpu") if device.type == "cuda" and backend == "gloo" else device  # gloo sends host memory
        size = micro_batch_size(run.batch_size, run.micro_batches)
        x, y = batch if batch is not None else run.batch()
        return cls(rank, stages, stage, device, wire, run.micro_batches,
                   (size, *stage_input_shape(run.model_spec(), run.input_shape, run.split, rank)),
                   inputs=list(x.to(device).split(size)) if rank == 0 else [],
                   labels=list(y.to(device).split(size)) if rank == stages - 1 else [])
