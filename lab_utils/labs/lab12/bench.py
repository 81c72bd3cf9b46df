"""Lab 12's benchmark: what the course's record of collectives (lab_utils.launch.record) costs lab 03's DDP step.
In one launch the same ranks run timed windows of many steps with the record on and off, alternating which goes
first; each round's on/off ratio is one pair, and the verdict on their median is taken against the 2 % bound."""
from __future__ import annotations

import json
import statistics
import time

from ... import measure, spec
from ..lab03.lesson import DDPConfig, ddp_worker

BOUND = 0.02  # the record's cost per step that issue 48 accepts
WINDOW_STEPS = 60  # steps per timed window: a window of a few hundred ms to seconds, long against its noise


def recording(on: bool) -> None:
    """The course's record on (its wrappers installed) or off (torch.distributed's own functions)."""
    from ...launch import record

    if on:
        record.start_recording()
    else:
        record.stop_recording()


def _window(ddp_model, optimizer, x, y, steps: int) -> float:
    """Seconds of `steps` steps of lab 03's DDP step (forward, loss, backward with DDP's all-reduce, SGD step, the
    loss summed for the epoch's metric), from a barrier that lines the ranks up."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    dist.barrier()
    start = time.perf_counter()
    totals = torch.zeros(2)
    for _ in range(steps):
        loss = F.cross_entropy(ddp_model(x), y)
        loss.backward()
        totals += torch.tensor([loss.item() * len(y), len(y)])
        optimizer.step()
        optimizer.zero_grad()
    return time.perf_counter() - start


def record_cost_worker(rank, world_size, per_rank_batch: int, steps: int, rounds: int, seed: int, switch=recording):
    """Alternating windows with the record on and off (switch(True/False)); returns each side's window seconds."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ... import ddp

    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    torch.manual_seed(seed + rank)
    model = ddp.convert_sync_batchnorm(spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 28, 28),
                                                        seed=seed), "cpu")
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.01 * world_size, momentum=0.9)
    ddp.AllReduceTimer(ddp_model, optimizer)  # lab 03's worker times its all-reduces through this hook: so does this
    x, y = torch.rand(per_rank_batch, 1, 28, 28), torch.randint(0, 10, (per_rank_batch,))
    seconds: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds + 1):  # round 0 warms both sides up and is not kept
        for side in ("on", "off") if r % 2 else ("off", "on"):
            switch(side == "on")
            took = _window(ddp_model, optimizer, x, y, steps)
            if r:
                seconds[side].append(took)
    switch(True)
    dist.barrier()
    dist.destroy_process_group()
    return seconds


def summary(on_s, off_s, *, bound: float = BOUND) -> dict:
    """The record's cost from paired windows (seconds with it on and off, round by round): the median of the rounds'
    on/off ratios minus 1, its sign-test range, and the verdict against `bound` (holds: the cost is under it)."""
    decided = measure.verdict(on_s, off_s, claim="record on vs off", expected=f"the record costs under {bound:.0%}",
                              no_worse_than=bound, lab="12")
    # decided.ratio is off/on (above 1 favours the record): the cost is its inverse minus 1
    cost_range = [1 / decided.high - 1, 1 / decided.low - 1]
    verdict = decided.verdict
    if verdict == measure.HOLDS and cost_range[1] >= bound:  # it held a weaker claim, restated for noisy pairs
        verdict = measure.UNDECIDED
    return {"cost": round(1 / decided.ratio - 1, 4), "cost_range": [round(c, 4) for c in cost_range],
            "repeats": decided.repeats, "verdict": verdict, "notes": decided.notes}


def record_cost(*, world_size: int = 2, repeats: int = 9, steps: int = WINDOW_STEPS, per_rank_batch: int = 32,
                seed: int = 0, switch=recording) -> dict:
    """Lab 03's DDP step with the record on and off, `repeats` paired windows of `steps` steps in the same ranks."""
    from ...launch import launch

    ranks = launch(record_cost_worker, world_size, args=(per_rank_batch, steps, repeats, seed, switch), timeout=900)
    on, off = ranks[0]["on"], ranks[0]["off"]  # DDP's all-reduce lines the ranks up every step: rank 0's windows
    return {"benchmark": "record", "world_size": world_size, "steps": steps, "per_rank_batch": per_rank_batch,
            "step_ms_on": round(statistics.median(on) / steps * 1e3, 3),
            "step_ms_off": round(statistics.median(off) / steps * 1e3, 3),
            "window_spread_on": round(measure.spread(on), 3), "window_spread_off": round(measure.spread(off), 3),
            **summary(on, off)}


def print_record_cost(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"lab 03's DDP step, {result['world_size']} ranks x batch {result['per_rank_batch']}, windows of "
          f"{result['steps']} steps, the record on and off alternating in the same ranks, {result['repeats']} pairs:")
    print(f"  record on  {result['step_ms_on']:>8.3f} ms per step (median window; windows spread "
          f"{result['window_spread_on']:.0%})")
    print(f"  record off {result['step_ms_off']:>8.3f} ms per step (median window; windows spread "
          f"{result['window_spread_off']:.0%})")
    print(f"  cost {result['cost']:+.2%} (median of the pairs' ratios; range {result['cost_range'][0]:+.2%} to "
          f"{result['cost_range'][1]:+.2%}), against the {BOUND:.0%} bound: {result['verdict']}")
    if result["notes"]:
        print(f"  ({result['notes']})")
    print(json.dumps(result))
