"""Launcher wrappers around a worker, for workers that must keep in step with each other: run a job, then leave
together; or work only on one's turn while the others wait. Each uses a gloo group for nothing but the waiting."""
from __future__ import annotations

import gc

from .group import process_group


def run_together(rank: int, world_size: int, worker, args, timeout_s: float):
    """Run worker(rank, world_size, *args), then wait until every rank has finished it and dropped what it built."""
    # a worker building the next MultiWorkerMirroredStrategy while a peer holds the last one can see its first
    # collective aborted ("Delete called on non-empty BufRendezvous"): this gloo barrier keeps them in step
    with process_group(timeout_s):  # leaving it waits for every rank
        value = worker(rank, world_size, *args)
        gc.collect()  # the strategy and its collective state go now, on every rank, before the wait
    return value


def in_turns(rank: int, world_size: int, payloads, order, timeout_s: float):
    """Build this rank's work from `payloads[rank]` (a cloudpickled function returning work(round)), then call
    work(round) only on this rank's turns: `order` holds (round, rank) pairs; the others wait in a barrier. Returns
    work(None), called once all turns are done."""
    import cloudpickle
    import torch.distributed as dist

    work = cloudpickle.loads(payloads[rank])()  # only this rank's payload: a torch process never sees TF's
    with process_group(timeout_s):  # used only to take turns
        for r, turn in order:
            if turn == rank:
                work(r)
            dist.barrier()
    return work(None)
