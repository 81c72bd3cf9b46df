"""DistributedDataParallel helpers around lab 03's notebook worker: the CPU synchronised BatchNorm, the all-reduce
timing hook, checkpoint keys, the single-process baseline on the same global batches, and a reference worker for
benchmarks and checks."""
from __future__ import annotations

import contextlib
import os
import statistics
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from . import data, spec
from .launch import RankContext, destroy_process_group, init_process_group, process_group


# --- DDP training, configured as data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DDPConfig:
    """One DDP training run. Defaults are the correct recipe; flags switch on the classic bugs."""

    model: str = "cnn2d_2layer_fullconnected_2layer"
    dataset: str = "digits"              # "digits" or "synthetic"
    synthetic_samples: int = 4096
    image_side: int = 28                  # synthetic images are image_side x image_side
    global_batch: int = 64                # per-rank batch = global_batch / world_size
    epochs: int = 1
    max_steps: int | None = None          # optimizer steps per epoch (None: the whole epoch)
    lr: float = 0.05
    momentum: float = 0.9
    lr_scaling: str = "none"              # "linear": lr x world_size (with warmup_steps to ramp up)
    warmup_steps: int = 0
    seed: int = 0
    use_sampler: bool = True              # False: every rank reads the same data
    set_epoch: bool = True                # False: the same order every epoch
    grad_reduction: str = "mean"          # "sum": the all-reduce sums instead of averaging
    accumulation: int = 1                 # micro-batches per optimizer step
    use_no_sync: bool = True              # skip the all-reduce on non-final micro-batches
    batchnorm: bool = False               # add BatchNorm after each convolution
    sync_bn: bool = False
    sync_buffers: bool = True             # DDP's forward_sync_buffers (called broadcast_buffers before torch 2.13)
    bucket_cap_mb: float = 25.0
    count_allreduces: bool = False        # register a comm hook that counts the all-reduce calls
    time_allreduces: bool = False         # ... and times each one, waiting for the slower rank included
    evaluate: bool = True                 # rank 0 evaluates on the test set after each epoch
    return_weights: bool = False
    label: str = ""

    def per_rank_batch(self, world_size: int) -> int:
        """The batch each rank processes; the global batch must split evenly."""
        if self.global_batch % world_size:
            raise ValueError(f"global_batch={self.global_batch} does not split evenly over {world_size} ranks; "
                             f"use a multiple of {world_size}")
        return self.global_batch // world_size

    def scaled_lr(self, world_size: int) -> float:
        """The peak learning rate: lr, or lr x world_size with linear scaling."""
        if self.lr_scaling not in ("none", "linear"):
            raise ValueError(f"lr_scaling must be 'none' or 'linear', got {self.lr_scaling!r}")
        return self.lr * world_size if self.lr_scaling == "linear" else self.lr


def build_model(cfg: DDPConfig, input_shape) -> nn.Module:
    """The course CNN from the spec (optionally with BatchNorm after each convolution), seeded."""
    layers = []
    for layer in spec.preset(cfg.model):
        layers.append(layer)
        if cfg.batchnorm and layer["type"] == "conv2d":
            layers.append({"type": "batchnorm"})
    return spec.build_torch(layers, input_shape, seed=cfg.seed)


def datasets_for(cfg: DDPConfig):
    """Train and test torch datasets, and the image shape."""
    if cfg.dataset == "digits":
        split = data.load_digits_split()
    elif cfg.dataset == "synthetic":
        split = data.synthetic_split(cfg.synthetic_samples, 512, image_shape=(1, cfg.image_side, cfg.image_side), seed=cfg.seed)
    else:
        raise ValueError(f"dataset must be 'digits' or 'synthetic', got {cfg.dataset!r}")
    return data.to_dataset(split.x_train, split.y_train), data.to_dataset(split.x_test, split.y_test), split.x_train.shape[1:]


def flat_weights(model: nn.Module) -> np.ndarray:
    """All parameters in one vector."""
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()]).numpy()


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


def load_state_dict_tolerant(model: nn.Module, state_dict: dict) -> nn.Module:
    """Load a checkpoint saved from a DDP model or a plain one into a plain model."""
    model.load_state_dict(strip_module_prefix(state_dict))
    return model


def _comm_hook(state: dict, bucket):
    """All-reduce one gradient bucket, averaging or (the bug) summing; count the call and time it to its result."""
    state["calls"] += 1
    start = time.perf_counter()
    tensor = bucket.buffer()
    if state["mean"]:
        tensor.div_(state["world_size"])
    future = dist.all_reduce(tensor, async_op=True).get_future()

    def done(f):
        state["seconds"].append(time.perf_counter() - start)  # DDP waits for this before backward() returns
        return f.value()[0]

    return future.then(done)


def lr_factor(step: int, cfg: DDPConfig, world_size: int) -> float:
    """Multiplier on the peak lr: ramps linearly from the single-device lr to the scaled one over warmup_steps."""
    peak = cfg.scaled_lr(world_size)
    if not cfg.warmup_steps or step >= cfg.warmup_steps:
        return 1.0
    start = cfg.lr / peak
    return start + (1.0 - start) * step / cfg.warmup_steps


def run_ddp(ctx: RankContext, cfg: DDPConfig) -> dict:
    """Train one configuration in an initialised process group; returns what this rank measured."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .train import evaluate

    per_rank = cfg.per_rank_batch(ctx.world_size)
    train_set, test_set, shape = datasets_for(cfg)
    model = build_model(cfg, shape)
    if cfg.sync_bn:
        model = convert_sync_batchnorm(model, ctx.device)
    model.to(ctx.device)
    ddp_model = DDP(model, device_ids=[ctx.device] if ctx.device.startswith("cuda") else None,
                    bucket_cap_mb=cfg.bucket_cap_mb, forward_sync_buffers=cfg.sync_buffers)
    hook_state = {"calls": 0, "mean": cfg.grad_reduction == "mean", "world_size": ctx.world_size, "seconds": []}
    if cfg.count_allreduces or cfg.time_allreduces or cfg.grad_reduction != "mean":
        if cfg.grad_reduction not in ("mean", "sum"):
            raise ValueError(f"grad_reduction must be 'mean' or 'sum', got {cfg.grad_reduction!r}")
        ddp_model.register_comm_hook(hook_state, _comm_hook)
    sampler = (DistributedSampler(train_set, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=True,
                                  seed=cfg.seed, drop_last=True) if cfg.use_sampler else None)
    loader = DataLoader(train_set, batch_size=per_rank, sampler=sampler, shuffle=sampler is None, drop_last=True,
                        generator=torch.Generator().manual_seed(cfg.seed) if sampler is None else None)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=cfg.scaled_lr(ctx.world_size), momentum=cfg.momentum)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, cfg, ctx.world_size))
    out = {"rank": ctx.rank, "label": cfg.label, "losses": [], "test_accuracy": [], "first_labels": [],
           "step_seconds": [], "allreduce_seconds": []}
    step = 0
    for epoch in range(cfg.epochs):
        if sampler is not None and cfg.set_epoch:
            sampler.set_epoch(epoch)
        micro, start = 0, time.perf_counter()
        for i, (x, y) in enumerate(loader):
            if i == 0:
                out["first_labels"].append(y[:8].tolist())
            x, y = x.to(ctx.device), y.to(ctx.device)
            final_micro = micro == cfg.accumulation - 1
            skip_sync = cfg.use_no_sync and not final_micro
            with ddp_model.no_sync() if skip_sync else contextlib.nullcontext():
                loss = F.cross_entropy(ddp_model(x), y) / cfg.accumulation
                loss.backward()
            micro += 1
            if not final_micro:
                continue
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            out["losses"].append(loss.item() * cfg.accumulation)
            if ctx.device.startswith("cuda"):
                torch.cuda.synchronize()
            out["step_seconds"].append(time.perf_counter() - start)
            if cfg.time_allreduces:
                out["allreduce_seconds"].append(sum(hook_state["seconds"]))  # this step's buckets
            hook_state["seconds"].clear()
            micro, step = 0, step + 1
            start = time.perf_counter()
            if cfg.max_steps and len(out["losses"]) >= cfg.max_steps * (epoch + 1):
                break
        if cfg.evaluate and ctx.rank == 0:
            out["test_accuracy"].append(evaluate(ddp_model.module, DataLoader(test_set, batch_size=256), ctx.device)[1])
    kept = out["step_seconds"][3:] or out["step_seconds"]
    out["samples_per_s"] = cfg.global_batch / statistics.median(kept) if kept else None
    timed = out["allreduce_seconds"][3:] or out["allreduce_seconds"]
    out["allreduce_ms"] = statistics.median(timed) * 1e3 if timed else None
    out["allreduce_calls"] = hook_state["calls"]
    out["optimizer_steps"] = step
    out["state_dict_keys"] = list(ddp_model.state_dict())[:2]
    bn = next((m for m in ddp_model.module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)), None)
    out["bn_running_mean"] = bn.running_mean[:4].tolist() if bn is not None else None
    if cfg.return_weights:
        out["weights"] = flat_weights(ddp_model.module)
    return out


def train_worker(rank: int, world_size: int, configs, timeout_s: float = 120.0) -> list[dict]:
    """Join the group once, train each configuration in turn, leave; returns one result per configuration."""
    with process_group(timeout_s) as ctx:
        return [run_ddp(ctx, cfg) for cfg in configs]


def baseline_weights(cfg: DDPConfig, world_size: int, steps: int) -> np.ndarray:
    """Single-process training on exactly the global batches a `world_size` DDP run sees; returns the weights."""
    from .train import train_step

    train_set, _, shape = datasets_for(cfg)
    model = build_model(cfg, shape)
    per_rank = cfg.per_rank_batch(world_size)
    samplers = [DistributedSampler(train_set, num_replicas=world_size, rank=r, shuffle=True, seed=cfg.seed,
                                   drop_last=True) for r in range(world_size)]
    orders = [list(s) for s in samplers]
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.scaled_lr(world_size), momentum=cfg.momentum)
    for step in range(steps):
        idx = [i for order in orders for i in order[step * per_rank:(step + 1) * per_rank]]
        x, y = train_set[idx]
        train_step(model, x, y, optimizer)
    return flat_weights(model)


def shard_indices(n: int, rank: int, world_size: int) -> list[int]:
    """Rank `rank`'s contiguous, non-overlapping share of n samples (the first n % world_size ranks get one more)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return list(range(start, start + base + (rank < extra)))


def manual_allreduce_worker(rank: int, world_size: int, source: str, name: str, seed: int = 0,
                            return_weights: bool = False):
    """One step with the learner's gradient averaging (sent as source code) vs one DDP step; max weight difference
    (or, with return_weights, the weights after the learner's step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ctx = init_process_group(timeout_s=60)
    try:
        namespace = {"dist": dist, "torch": torch}
        exec(compile(source, f"<your {name}>", "exec"), namespace)
        average = namespace[name]
        cfg = DDPConfig(seed=seed)
        train_set, _, shape = datasets_for(cfg)
        x, y = train_set[list(range(rank * 16, rank * 16 + 16))]
        mine, reference = build_model(cfg, shape), DDP(build_model(cfg, shape))
        for model in (mine, reference):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            F.cross_entropy(model(x), y).backward()
            if model is mine:
                average(model, world_size)
            optimizer.step()
        if return_weights:
            return flat_weights(mine)
        return float(np.abs(flat_weights(mine) - flat_weights(reference.module)).max())
    finally:
        destroy_process_group()


# --- small workers that show what the launcher does -------------------------------------------------------------


def whoami_worker(rank: int, world_size: int) -> dict:
    """Report the environment a rank sees, and a real all_reduce of the ranks' numbers."""
    ctx = init_process_group(timeout_s=30)
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    destroy_process_group()
    return {"rank": rank, "env": {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")},
            "threads": torch.get_num_threads(), "device": ctx.device, "backend": ctx.backend,
            "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "sum_of_ranks": total.item(), "pid": os.getpid()}


def failing_worker(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """Rank `bad_rank` raises; the others would wait for it in a barrier."""
    init_process_group(timeout_s=60)
    if rank == bad_rank:
        raise ValueError(f"rank {rank} found a bad batch")
    dist.barrier()
    return rank


def hanging_worker(rank: int, world_size: int) -> int:
    """Every rank but the last enters a barrier the last rank never reaches: a hang without the launcher's timeout."""
    init_process_group(timeout_s=600)
    if rank != world_size - 1:
        dist.barrier()
    else:
        time.sleep(600)
    return rank


def exiting_worker(rank: int, world_size: int, code: int = 3) -> int:
    """The last rank leaves with os._exit(code), or kills itself with signal -code: no Python exception."""
    if rank == world_size - 1:
        if code < 0:
            os.kill(os.getpid(), -code)
        os._exit(code)
    time.sleep(30)
    return rank


def children_worker(rank: int, world_size: int) -> int:
    """Start a grandchild process that would outlive the rank, and return its pid."""
    import subprocess

    return subprocess.Popen(["sleep", "300"]).pid
