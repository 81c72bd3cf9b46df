"""Small workers the launcher's tests start in real ranks (importable, so they are sent by reference)."""
import os
import subprocess
import time

import torch
import torch.distributed as dist

from lab_utils.launch import process_group


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (used by the tests that count leftover processes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def whoami_worker(rank, world_size):
    """The environment a rank sees, and a real all_reduce of the ranks' numbers."""
    with process_group(30) as ctx:
        total = torch.tensor([float(rank)])
        dist.all_reduce(total)
        return {"rank": rank, "env": {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")},
                "threads": torch.get_num_threads(), "device": ctx.device, "backend": ctx.backend,
                "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                "sum_of_ranks": total.item(), "port": os.environ["MASTER_PORT"]}


def failing_worker(rank, world_size, bad_rank=1):
    """Rank `bad_rank` raises; the others would wait for it in a barrier."""
    with process_group(60):
        if rank == bad_rank:
            raise ValueError(f"rank {rank} found a bad batch")
        dist.barrier()
        return rank


def hanging_worker(rank, world_size):
    """Every rank but the last waits in a barrier the last rank never reaches."""
    with process_group(600):
        if rank == world_size - 1:
            time.sleep(600)
        dist.barrier()
        return rank


def exiting_worker(rank, world_size, code=3):
    """The last rank leaves with os._exit(code), or kills itself with signal -code: no Python exception."""
    if rank == world_size - 1:
        if code < 0:
            os.kill(os.getpid(), -code)
        os._exit(code)
    time.sleep(30)
    return rank


def children_worker(rank, world_size):
    """Start a grandchild that would outlive the rank; return its pid."""
    return subprocess.Popen(["sleep", "300"]).pid


def daemon_worker(rank, world_size):
    """Start a grandchild in a session of its own (escaping the rank's process group); return its pid."""
    return subprocess.Popen(["sleep", "300"], start_new_session=True).pid


def owner_only_broadcast_worker(rank, world_size):
    """Only rank 0 calls the broadcast (the others skip it): rank 0 waits for receivers that never come."""
    with process_group(3):
        if rank == 0:
            dist.broadcast(torch.ones(4), src=0)
        return rank


def skipping_worker(rank, world_size, skip_rank=1):
    """Three all_reduces; rank `skip_rank` skips the third under a condition, then all meet in a barrier."""
    with process_group(600):
        t = torch.ones(4)
        for step in range(3):
            if not (rank == skip_rank and step == 2):
                dist.all_reduce(t)  # the line the table names
        dist.barrier()
        return rank


def mismatched_worker(rank, world_size):
    """Rank 0 calls all_reduce where rank 1 calls broadcast (different collectives, the same sequence number)."""
    with process_group(600):
        dist.all_reduce(torch.ones(2))
        if rank == 0:
            dist.all_reduce(torch.ones(3))
        else:
            dist.broadcast(torch.ones(3), 1)
        dist.barrier()
        return rank
def parts_worker(rank, world_size, part):
    """A launch_parts part: each number of `part` is seconds to sleep (a long one outlasts the part's timeout)."""
    import time

    for seconds in part:
        time.sleep(seconds)
    return list(part)


def part_failing_worker(rank, world_size, part):
    """A launch_parts part whose rank 0 raises when the part holds a negative number."""
    if rank == 0 and any(n < 0 for n in part):
        raise ValueError(f"a bad run in {part}")
    return list(part)


def giving_up(rank, world_size, worker, *args):
    """worker(rank, world_size, *args), but an error is returned: its first line and the table it carries."""
    from lab_utils.launch.record import table_note

    try:
        return {"finished": worker(rank, world_size, *args)}
    except RuntimeError as err:
        if dist.is_initialized():
            dist.destroy_process_group()  # the group is broken: no barrier on the way out
        return {"gave up": str(err).splitlines()[0], "table": table_note(err)}


_costly = {"original": None, "last": None}


def costly_recording(on: bool, factor: float = 0.1) -> None:
    """A fake record that costs `factor` of the step (10 %): while on, each all_reduce first sleeps `factor` times the
    time since the previous one ended its sleep (the bench's test: such a cost must be found above its 2 % bound)."""
    if on and _costly["original"] is None:
        original = _costly["original"] = dist.all_reduce
        _costly["last"] = None

        def all_reduce(*args, **kwargs):
            if _costly["last"] is not None:
                time.sleep(factor * (time.perf_counter() - _costly["last"]))
            _costly["last"] = time.perf_counter()
            return original(*args, **kwargs)

        dist.all_reduce = all_reduce
    elif not on and _costly["original"] is not None:
        dist.all_reduce, _costly["original"] = _costly["original"], None


def dying_in_step_worker(rank, world_size):
    """Lab 12's Bug 5: after one all-reduce the last rank exits; the others' next all-reduce fails on gloo."""
    with process_group(30):
        dist.all_reduce(torch.ones(2))
        if rank == world_size - 1:
            os._exit(1)
        dist.all_reduce(torch.ones(2))
        return rank


def allocator_worker(rank, world_size):
    """The allocator a rank runs: its environment's thresholds, its own line, and its minor page faults a step."""
    from lab_utils import allocator
    return {"env": {k: os.environ.get(k) for k in allocator.ENV}, "line": allocator.allocator_line(),
            "faults": allocator.faults_per_step()}
