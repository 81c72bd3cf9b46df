"""DistributedDataParallel helpers around lab 03's notebook worker: the CPU synchronised BatchNorm, the timed
all-reduce hook, the learning-rate warm-up, checkpoint keys, what theory predicts for several gradient buckets. The worker itself is the notebook's (`ddp_worker`, cell
tagged `lesson`); benchmarks, GPU checks and tests run it as generated into lab_utils.labs.lab03.lesson."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from . import hardware, measure


def bn_running_mean(model: nn.Module) -> list[float] | None:
    """The first BatchNorm layer's running mean (None without BatchNorm): what evaluation will normalise with."""
    bn = next((m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)), None)
    return bn.running_mean.tolist() if bn is not None and bn.running_mean is not None else None


class AllReduceBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm whose training statistics span the global batch, for CPU processes (nn.SyncBatchNorm is GPU-only)."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        from torch.distributed.nn.functional import all_reduce  # differentiable: gradients flow across ranks too

        channels = x.shape[1]
        count = torch.full((1,), x.numel() / channels, dtype=x.dtype, device=x.device)
        with warnings.catch_warnings():  # deprecated in favour of a private module without verified autograd support
            warnings.simplefilter("ignore", FutureWarning)
            stats = all_reduce(torch.cat([x.sum(dim=(0, 2, 3)), (x * x).sum(dim=(0, 2, 3)), count]))
        total = stats[-1]
        mean = stats[:channels] / total
        var = stats[channels:2 * channels] / total - mean * mean
        # this layer always tracks running statistics with a momentum (nn.BatchNorm2d's defaults)
        assert self.num_batches_tracked is not None and self.running_mean is not None
        assert self.running_var is not None and self.momentum is not None
        with torch.no_grad():
            self.num_batches_tracked += 1
            self.running_mean.lerp_(mean.detach(), self.momentum)
            self.running_var.lerp_(var.detach() * total / (total - 1), self.momentum)
        shape = (1, channels, 1, 1)
        x_hat = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return x_hat * self.weight.view(shape) + self.bias.view(shape)


def convert_sync_batchnorm(model: nn.Module, device: str) -> nn.Module:
    """BatchNorm over the global batch: nn.SyncBatchNorm on GPUs, AllReduceBatchNorm2d on CPU processes."""
    if device.startswith("cuda"):
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    for name, child in model.named_children():
        if isinstance(child, nn.BatchNorm2d):
            synced = AllReduceBatchNorm2d(child.num_features, child.eps, child.momentum)
            synced.load_state_dict(child.state_dict())
            setattr(model, name, synced)
        else:
            convert_sync_batchnorm(child, device)
    return model


def strip_module_prefix(state_dict: dict) -> dict:
    """A DDP state_dict's keys without the 'module.' prefix; a plain one is returned unchanged."""
    return {k.removeprefix("module."): v for k, v in state_dict.items()}


class AllReduceTimer:
    """DDP's gradient averaging as a communication hook that also counts and times each bucket's all-reduce."""

    def __init__(self, ddp_model, optimizer, *, average: bool = True):
        self._pending: list
        self.seconds_per_step: list[float]
        self.average, self.calls, self._pending, self.seconds_per_step = average, 0, [], []
        if isinstance(ddp_model, nn.parallel.DistributedDataParallel):  # else nothing is counted or timed
            ddp_model.register_comm_hook(self, AllReduceTimer._hook)
        optimizer.register_step_post_hook(lambda *args: self._step_done())

    @staticmethod
    def _hook(self, bucket):
        self.calls += 1
        start = time.perf_counter()  # from bucket ready to averaged result: includes waiting for the slower rank
        grads = bucket.buffer()
        if self.average:
            grads.div_(dist.get_world_size())
        future = dist.all_reduce(grads, async_op=True).get_future()

        def done(f):
            self._pending.append(time.perf_counter() - start)  # DDP waits for this before backward() returns
            return f.value()[0]

        return future.then(done)

    def _step_done(self) -> None:
        """Close one optimizer step: its buckets' times add up to one figure."""
        if self._pending:
            self.seconds_per_step.append(sum(self._pending))
            self._pending.clear()

    def median_ms(self, warmup: int = 3) -> float | None:
        return measure.median_after_warmup(self.seconds_per_step, warmup) * 1e3 if self.seconds_per_step else None

    def compute_ms(self, step_seconds: list[float], warmup: int = 3) -> float | None:
        """The median over steps of a step's time minus its own all-reduce: the step's compute, as this rank ran it
        (step_seconds: a StepTimer's, one per optimizer step, as these are)."""
        if not self.seconds_per_step or len(step_seconds) != len(self.seconds_per_step):
            return None
        own = [step - reduce for step, reduce in zip(step_seconds, self.seconds_per_step)]
        return measure.median_after_warmup(own, warmup) * 1e3


def linear_warmup(optimizer, world_size: int, steps: int):
    """A scheduler ramping the learning rate from 1/world_size of its value (one device's) to all of it in `steps`."""
    start = 1.0 / world_size

    def factor(step: int) -> float:
        return 1.0 if not steps or step >= steps else start + (1.0 - start) * step / steps

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass(frozen=True)
class BucketPrediction:
    """What theory predicts for several DDP buckets against one: `faster` and `slower` name the settings (A and B of
    measure.verdict), `claim` and `expected` are the verdict's, `why` says it with the figures it came from."""

    faster: str
    slower: str
    claim: str
    expected: str
    why: str


def bucket_prediction(plan: hardware.Plan, cores: int, *, several: str, one: str) -> BucketPrediction:
    """Several buckets (named `several`) against one (`one`) on `plan`'s ranks with `cores` CPU cores: overlap needs
    an engine for the all-reduce beside the backward pass, NCCL's own CUDA stream or a free core per rank for gloo."""
    if plan.backend == "nccl":
        return BucketPrediction(
            several, one, f"{several} vs {one}, NCCL",
            "several buckets faster: NCCL sums each bucket on its own CUDA stream while the backward pass computes the "
            "earlier layers' gradients",
            f"{plan.world_size} rank(s), one GPU each, over NCCL: the all-reduce has an engine of its own, so theory "
            "predicts that several buckets hide their all-reduces behind the backward pass")
    busy = plan.world_size * (plan.threads_per_rank or 1)  # a GPU rank over gloo keeps one host thread busy launching
    free = (cores - busy) / plan.world_size
    on = (f"CPU, {plan.threads_per_rank} computing thread(s) each" if plan.threads_per_rank
          else f"{len(set(plan.devices))} shared GPU(s) over gloo, one host thread each")
    where = f"{plan.world_size} rank(s) on {on}, {cores} core(s): {max(free, 0.0):.1f} free core(s) per rank"
    if free >= 1:
        return BucketPrediction(
            several, one, f"{several} vs {one}, a free core per rank",
            "several buckets faster: gloo sums each bucket on a free core while the backward pass computes the "
            "earlier layers' gradients",
            f"{where}: gloo's thread has a core of its own, so theory predicts that several buckets hide their "
            "all-reduces behind the backward pass")
    return BucketPrediction(
        one, several, f"{one} vs {several}, ranks share the cores",
        "one bucket faster: no core is free, so a bucket summed during the backward pass takes a core from it, and "
        "each extra bucket adds an all-reduce call's fixed cost",
        f"{where}: gloo's thread has no core of its own, so theory predicts no overlap to gain, only extra calls, "
        "and one bucket faster")
