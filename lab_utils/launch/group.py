"""The process group, as every helper-side worker joins and leaves it."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from .. import hardware

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


def init_process_group(timeout_s: float = 60.0) -> RankContext:
    """Join the process group with the backend and device the hardware plan picks; collectives time out."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    device, backend = hardware.rank_device()
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s))
    return RankContext(rank, world_size, device, backend)


def destroy_process_group(*, wait_for_peers: bool = False) -> None:
    """Leave the process group (safe twice); wait_for_peers (use only after a success) first waits for every rank."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # without the barrier gloo may abort a slower peer still using the group (SIGABRT: connection closed by peer);
        # after a failure, skip it: the peers may be gone, and it would only wait for its timeout
        if wait_for_peers:
            dist.barrier()
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(timeout_s: float = 60.0):
    """`with process_group() as ctx:` joins the group, and leaves it however the block ends."""
    ctx = init_process_group(timeout_s)
    try:
        yield ctx
    except BaseException:
        destroy_process_group()
        raise
    destroy_process_group(wait_for_peers=True)


_HELD_GROUPS: list = []


def hold_process_groups() -> None:
    """Keep each destroyed default process group alive until the process ends (works around pytorch/pytorch#75097)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    original = distributed_c10d.destroy_process_group
    if getattr(original, "__wrapped_by_lab__", False):
        return

    def destroy_process_group(group=None):
        if group is None and dist.is_initialized():
            # DDP's reducer may drop the group's last reference later; its destructor then joins gloo's threads while
            # holding the GIL and the rank hangs at random (pytorch/pytorch#75097); the launcher kills the rank later
            _HELD_GROUPS.append(distributed_c10d._get_default_group())
        return original(group)

    destroy_process_group.__wrapped_by_lab__ = True  # type: ignore[attr-defined]  # a function takes attributes
    destroy_process_group.__doc__ = original.__doc__
    dist.destroy_process_group = distributed_c10d.destroy_process_group = destroy_process_group
