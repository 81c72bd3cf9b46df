"""DistributedDataParallel helpers around lab 03's notebook worker: the CPU synchronised BatchNorm, the timed
all-reduce hook, the learning-rate warm-up, checkpoint keys, and a reference worker (the same recipe, kept as the
answer key for benchmarks, the grader and the scaling report)."""
from __future__ import annotations

import contextlib
import statistics
import time
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from . import data, hardware, measure, spec


def flat_weights(model: nn.Module) -> np.ndarray:
    """All parameters in one vector."""
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()]).numpy()


def bn_running_mean(model: nn.Module) -> list[float] | None:
    """The first BatchNorm layer's running mean (None without BatchNorm): what evaluation will normalise with."""
    bn = next((m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)), None)
    return bn.running_mean.tolist() if bn is not None else None


class AllReduceBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm whose training statistics cover the global batch: torch's SyncBatchNorm for CPU processes.

    nn.SyncBatchNorm refuses CPU modules ("SyncBatchNorm layers only work with GPU modules"); this layer all-reduces
    the per-channel sums with torch.distributed.nn's differentiable all_reduce, so gradients flow across ranks too.
    """

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        from torch.distributed.nn.functional import all_reduce

        channels = x.shape[1]
        count = torch.full((1,), x.numel() / channels, dtype=x.dtype, device=x.device)
        with warnings.catch_warnings():  # deprecated in favour of a private module without verified autograd support
            warnings.simplefilter("ignore", FutureWarning)
            stats = all_reduce(torch.cat([x.sum(dim=(0, 2, 3)), (x * x).sum(dim=(0, 2, 3)), count]))
        total = stats[-1]
        mean = stats[:channels] / total
        var = stats[channels:2 * channels] / total - mean * mean
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
    """DDP's gradient averaging as a communication hook that also counts and times each bucket's all-reduce.

    `AllReduceTimer(ddp_model, optimizer)` registers it. Each all-reduce is timed from "bucket ready" to its averaged
    result, which includes waiting for the slower rank; `seconds_per_step` sums the buckets of each optimizer step.
    A model that is not wrapped in DDP has no such hook: nothing is counted or timed.
    """

    def __init__(self, ddp_model, optimizer, *, average: bool = True):
        self.average, self.calls, self._pending, self.seconds_per_step = average, 0, [], []
        if isinstance(ddp_model, nn.parallel.DistributedDataParallel):
            ddp_model.register_comm_hook(self, AllReduceTimer._hook)
        optimizer.register_step_post_hook(lambda *args: self._step_done())

    @staticmethod
    def _hook(self, bucket):
        self.calls += 1
        start = time.perf_counter()
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
        kept = self.seconds_per_step[warmup:] or self.seconds_per_step
        return statistics.median(kept) * 1e3 if kept else None


def linear_warmup(optimizer, world_size: int, steps: int):
    """A scheduler that ramps the learning rate from 1/world_size of its value (one device's) to all of it in `steps`."""
    start = 1.0 / world_size

    def factor(step: int) -> float:
        return 1.0 if not steps or step >= steps else start + (1.0 - start) * step / steps

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@torch.no_grad()
def accuracy(model: nn.Module, dataset, device: str = "cpu") -> float:
    """Test accuracy of `model` on a whole dataset (evaluation mode, then back)."""
    from .train import evaluate

    return evaluate(model, DataLoader(dataset, batch_size=512), device)[1]


def reference_worker(rank: int, world_size: int, cfg: dict) -> dict:
    """The lab 03 recipe as helper code (answer key): DDP training configured by the same cfg dict as the notebook's
    worker; cfg["sum_gradients"] switches on the summed-gradients bug for the scaling report's noise-or-bug demo."""
    from .launch import process_group

    with process_group(cfg.get("timeout_s", 120)) as ctx:
        split = data.load_split(cfg["data"])
        train_set, test_set = split.datasets()
        model = convert_sync_batchnorm(spec.build_torch(cfg["layers"], split.image_shape, seed=cfg["seed"]), ctx.device)
        model.to(ctx.device)
        ddp_model = nn.parallel.DistributedDataParallel(model, device_ids=[ctx.device] if ctx.device.startswith("cuda") else None)
        sampler = DistributedSampler(train_set, world_size, rank, shuffle=True, seed=cfg["seed"], drop_last=True)
        loader = DataLoader(train_set, batch_size=cfg["per_rank_batch"], sampler=sampler, drop_last=True)
        optimizer = torch.optim.SGD(ddp_model.parameters(), lr=cfg["lr"] * world_size, momentum=0.9)
        warmup = linear_warmup(optimizer, world_size, cfg.get("warmup_steps", 0))
        allreduce = AllReduceTimer(ddp_model, optimizer, average=not cfg.get("sum_gradients", False))
        timer, losses, accuracies = measure.StepTimer(ctx.device), [], []
        for epoch in range(cfg["epochs"]):
            sampler.set_epoch(epoch)
            for x, y in loader:
                loss = F.cross_entropy(ddp_model(x.to(ctx.device)), y.to(ctx.device))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                warmup.step()
                timer.tick()
                losses.append(loss.item())
            if cfg.get("evaluate", True) and rank == 0:
                accuracies.append(accuracy(model, test_set, ctx.device))
        return {"losses": losses, "accuracy": accuracies, "weights": flat_weights(model),
                "samples_per_s": timer.samples_per_s(cfg["per_rank_batch"] * world_size),
                "step_spread": timer.spread(), "allreduce_ms": allreduce.median_ms()}
