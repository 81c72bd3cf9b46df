"""DistributedDataParallel: process-group set-up from the hardware plan, and the workers lab 03 launches."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from . import hardware


@dataclass(frozen=True)
class RankContext:
    """Who this process is in the job and where it computes."""

    rank: int
    world_size: int
    device: str
    backend: str


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except KeyError:
        raise RuntimeError(f"${name} is not set: start this worker with lab_utils.launch or torchrun, "
                           "which set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT") from None


def setup(timeout_s: float = 60.0) -> RankContext:
    """Join the process group with the backend and device the hardware plan picks; collectives time out."""
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    plan = hardware.plan(int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    device = plan.device(local_rank)
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    dist.init_process_group(plan.backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s))
    return RankContext(rank, world_size, device, plan.backend)


def teardown() -> None:
    """Leave the process group (safe to call twice)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# --- small workers that show what the launcher does -------------------------------------------------------------


def whoami_worker(rank: int, world_size: int) -> dict:
    """Report the environment a rank sees, and a real all_reduce of the ranks' numbers."""
    ctx = setup(timeout_s=30)
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    teardown()
    return {"rank": rank, "env": {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")},
            "threads": torch.get_num_threads(), "device": ctx.device, "backend": ctx.backend,
            "sum_of_ranks": total.item(), "pid": os.getpid()}


def failing_worker(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """Rank `bad_rank` raises; the others would wait for it in a barrier."""
    setup(timeout_s=60)
    if rank == bad_rank:
        raise ValueError(f"rank {rank} found a bad batch")
    dist.barrier()
    return rank


def hanging_worker(rank: int, world_size: int) -> int:
    """Every rank but the last enters a barrier the last rank never reaches: a hang without the launcher's timeout."""
    setup(timeout_s=600)
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
