"""Lab 12's benchmark: what the course's record of collectives (lab_utils.launch.record) costs a step, decided two ways.

1. From its cost per call: the record's wrapper around a stub collective against the stub alone, timed in this
   process in interleaved blocks of many calls (medians, warm-up excluded), times the calls the record sees in one
   step, against that step's time. The calls are counted in the steps themselves: lab 03's DDP worker (its recipe on
   the digits and its CNN-3conv speed step), run as lab 03 runs it, and lab 12's `cost_worker`. DDP's own gradient
   all-reduce runs in C++ and is not recorded; what is, in lab 03's step, is what the step calls from Python: the
   all_reduce its communication hook (ddp.AllReduceTimer) starts for each bucket. The benchmark counts the calls and
   names their ops rather than assume them. The stub is called from a frame of the course, as lab 03's hook and lab
   12's worker call theirs, so the record walks no library frames to find the learner's line, as in those steps.
2. End to end: lab 12's `cost_worker` (lab 03's hand-written gradient averaging, one all_reduce per parameter tensor:
   the record's worst case) runs timed windows of many steps with the record on and off, alternating; each round's
   on/off ratio is one pair. On 2 gloo ranks that share 2 cores the windows scatter far more than 2 % (each step waits
   for the slower rank, and the ranks' message threads compete with their own compute), so these pairs rarely decide
   the 2 % bound: the first way does.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time

from ... import measure, spec, workloads
from ...launch import record
from .lesson import cost_worker
from .report import CALLS_PER_BLOCK  # stub calls per timed block of the per-call measure

BOUND = 0.02  # the record's cost per step that issue 48 accepts
WINDOW_STEPS = 60  # steps per timed window: a window of a few hundred ms to seconds, long against its noise
NOTEBOOK_STEPS = 5  # steps per window in lab 12's notebook (section 4)
DDP_STEPS = 20  # optimizer steps of each lab 03 run that counts the recorded calls (the first 3 are not timed)
WARMUP_STEPS = 3
TARGET = (workloads.DDP_RECIPE.name, workloads.STEP_3CONV.name)  # lab 03's DDP step, which the 2 % bound is on


def cost_summary(on_s, off_s, *, bound: float = BOUND) -> dict:
    """The record's cost from paired windows (seconds with it on and off, round by round): the median of the rounds'
    on/off ratios minus 1, its sign-test range, and the verdict against `bound` (holds: the cost is under it)."""
    decided = measure.verdict(on_s, off_s, claim="record on vs off", expected=f"the record costs under {bound:.0%}",
                              no_worse_than=bound, lab="12", workload=workloads.RECORD_STEP, extra_work=True)
    return _as_cost(decided, bound)


def _as_cost(decided: measure.Verdict, bound: float) -> dict:
    """A verdict on off/on ratios as the record's cost: median, range and the verdict against `bound`."""
    cost_range = [1 / decided.high - 1, 1 / decided.low - 1]  # decided.ratio is off/on: the cost is its inverse - 1
    verdict = decided.verdict
    if verdict == measure.HOLDS and cost_range[1] >= bound:  # it held a weaker claim, restated for noisy pairs
        verdict = measure.UNDECIDED
    return {"cost": round(1 / decided.ratio - 1, 5), "cost_range": [round(c, 5) for c in cost_range],
            "repeats": decided.repeats, "verdict": verdict, "notes": decided.notes}


def _stub(tensor, op=None, group=None, async_op=False):
    """A collective that does nothing: timing it bare and wrapped leaves the wrapper's own work."""
    return None


def per_call_seconds(repeats: int, calls: int = CALLS_PER_BLOCK, warmup: int = 2) -> list[float]:
    """The record's own cost per call, one figure per pair of blocks: `calls` calls of the wrapped stub minus `calls`
    of the bare one, over `calls`; blocks interleaved, order alternating, the first `warmup` pairs left out."""
    import torch

    wrapped, gradient = record._wrap("all_reduce", _stub), torch.zeros(26_000)  # a gradient bucket's shape
    per_call = []
    for r in range(warmup + repeats):
        took = {}
        for side, function in ((("bare", _stub), ("wrapped", wrapped)) if r % 2 else (("wrapped", wrapped), ("bare", _stub))):
            start = time.perf_counter()
            for _ in range(calls):
                function(gradient, async_op=True)
            took[side] = time.perf_counter() - start
        if r >= warmup:
            per_call.append((took["wrapped"] - took["bare"]) / calls)
    record.clear()  # the wrapper recorded the stub's calls in this process
    return per_call


def lab03_configs(steps: int) -> dict:
    """Lab 03's two DDP runs, `steps` optimizer steps each on 2 ranks: its recipe on the digits (CNN-2conv, 32 per
    rank) and its speed step (CNN-3conv on synthetic 28x28 images, 128 per rank), keyed by their workloads."""
    from ..lab03.lesson import DDPConfig

    recipe = DDPConfig(data={"kind": "digits", "n_train": 64 * (steps + 1)},
                       layers=spec.cnn2d_2layer_fullconnected_2layer(10), epochs=1, per_rank_batch=32, lr=0.05,
                       warmup_steps=0, accumulation=1, seed=0, timeout_s=60, checkpoint=None)
    speed = dataclasses.replace(recipe, data={"kind": "synthetic", "n_train": 256 * (steps + 1), "n_test": 64, "side": 28},
                                layers=spec.cnn2d_3layer_fullconnected_3layer(), per_rank_batch=128)
    return {name: cfg for name, cfg in zip(TARGET, (recipe, speed))}


def calls_and_steps(world_size: int, ddp_steps: int, on: list[float]) -> dict:
    """Per workload: the calls the record sees in one step (median), its ops, and the step's median seconds (lab 03's
    runs measured here; lab 12's cost_worker from its end-to-end windows with the record on)."""
    import tempfile
    from pathlib import Path

    from ...launch import launch_jobs
    from ..lab03.lesson import ddp_worker

    configs = lab03_configs(ddp_steps)
    with tempfile.TemporaryDirectory() as folder:  # lab 03's worker as lab 03 runs it; the launcher marks its steps
        launch_jobs([(ddp_worker, (cfg,)) for cfg in configs.values()], world_size, timeout=300,
                    env={record.STEP_MARKS: folder})
        ranks = [[json.loads((Path(folder) / f"{job}-{rank}.json").read_text()) for rank in range(world_size)]
                 for job in range(len(configs))]
    steps = {}
    for name, job in zip(configs, ranks):
        if not all(r["recording"] for r in job):
            raise RuntimeError("the record was off in lab 03's ranks (LAB_COLLECTIVE_RECORD=0?): nothing to count")
        slower = max(job, key=lambda r: statistics.median(r["step_s"][WARMUP_STEPS:]))
        steps[name] = {"calls": statistics.median(slower["calls"]), "ops": slower["ops"],
                       "step_s": statistics.median(slower["step_s"][WARMUP_STEPS:])}
    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8))  # cost_worker's model: a call per tensor
    steps[workloads.RECORD_STEP.name] = {"calls": len(list(model.parameters())), "ops": ["all_reduce"] * len(list(
        model.parameters())), "step_s": statistics.median(on)}
    return steps


def estimated_cost(per_call: list[float], calls: float, step_s: float, workload, *, bound: float = BOUND) -> dict:
    """The verdict on the record's share of a step, from each pair's cost per call x the calls per step over the
    step's seconds (as off/on ratios: 1 / (1 + share))."""
    ratios = [1 / (1 + max(c, 0.0) * calls / step_s) for c in per_call]  # a pair that timed no cost: no cost
    decided = measure.decide(ratios, claim="record on vs off, from its cost per call",
                             expected=f"the record costs under {bound:.0%}", no_worse_than=bound, lab="12",
                             workload=workload, extra_work=True)
    return {"calls_per_step": calls, "step_ms": round(step_s * 1e3, 3), **_as_cost(decided, bound)}


def record_cost(*, world_size: int = 2, repeats: int = 9, steps: int = WINDOW_STEPS, ddp_steps: int = DDP_STEPS,
                calls: int = CALLS_PER_BLOCK) -> dict:
    """Both ways: the cost per call (`repeats` x 3 pairs of `calls`-call blocks) x the recorded calls per step of lab
    03's DDP runs (`ddp_steps` steps) and of lab 12's cost_worker, against the 2 % bound; then the cost_worker's
    `repeats` end-to-end pairs of `steps`-step windows."""
    from ...launch import launch

    times = launch(cost_worker, world_size, args=(repeats, steps), timeout=900)[0]
    on, off = times["record on"], times["record off"]  # seconds per step, one per window (rank 0's)
    per_call = per_call_seconds(3 * repeats, calls)
    steps_of = calls_and_steps(world_size, ddp_steps, on)
    by_workload = {name: {"ops": sorted(set(s["ops"])), **estimated_cost(per_call, s["calls"], s["step_s"], name)}
                   for name, s in steps_of.items()}
    verdicts = [by_workload[name]["verdict"] for name in TARGET]  # the bound is on lab 03's step; lab 12's worker
    # (a call per tensor of a tiny model) is the record's worst case, shown beside it
    return {"benchmark": "record", "world_size": world_size, "steps": steps, "calls_per_block": calls,
            "per_call_us": round(statistics.median(per_call) * 1e6, 3),
            "per_call_us_range": [round(min(per_call) * 1e6, 3), round(max(per_call) * 1e6, 3)],
            "per_call_pairs": len(per_call), "by_workload": by_workload,
            "verdict": next((v for v in (measure.REVERSED, measure.UNDECIDED, measure.CANNOT_SEE) if v in verdicts),
                            measure.HOLDS),
            "end_to_end": {"step_ms_on": round(statistics.median(on) * 1e3, 3),
                           "step_ms_off": round(statistics.median(off) * 1e3, 3),
                           "step_ms_detail": round(statistics.median(times["DETAIL"]) * 1e3, 3),
                           "window_spread_on": round(measure.spread(on), 3),
                           "window_spread_off": round(measure.spread(off), 3), **cost_summary(on, off)}}


def print_record_cost(result: dict) -> None:
    """The verdicts from the cost per call, the end-to-end pairs, then the JSON line (last line of output)."""
    low, high = result["per_call_us_range"]
    print(f"the record's own cost per call: {result['per_call_us']:.2f} us (median of {result['per_call_pairs']} "
          f"interleaved pairs of {result['calls_per_block']}-call blocks, wrapped stub minus bare stub; range "
          f"{low:.2f}-{high:.2f} us)")
    for name, w in result["by_workload"].items():
        print(f"  [{name}] {w['calls_per_step']:g} recorded call(s) per step ({', '.join(w['ops']) or 'none'}), step "
              f"{w['step_ms']:.2f} ms: cost {w['cost']:+.3%} (range {w['cost_range'][0]:+.3%} to "
              f"{w['cost_range'][1]:+.3%}) against the {BOUND:.0%} bound: {w['verdict']}")
        if w["notes"]:
            print(f"    ({w['notes']})")
    print(f"  the bound's target, lab 03's DDP step (both its runs): {result['verdict']}")
    e = result["end_to_end"]
    print(f"end to end, lab 12's cost_worker on {result['world_size']} ranks, {e['repeats']} pairs of "
          f"{result['steps']}-step windows with the record on and off: cost {e['cost']:+.2%} (range "
          f"{e['cost_range'][0]:+.2%} to {e['cost_range'][1]:+.2%}): {e['verdict']}")
    print(f"  record on {e['step_ms_on']:.3f} ms, off {e['step_ms_off']:.3f} ms per step (median windows; windows "
          f"spread {e['window_spread_on']:.0%} and {e['window_spread_off']:.0%}). These pairs scatter far more than "
          f"{BOUND:.0%}: every step waits for the slower of {result['world_size']} ranks, whose compute and gloo's "
          "message threads share this machine's cores with each other and with other programs")
    if e["notes"]:
        print(f"  ({e['notes']})")
    print(f"  why these step times differ from lab 12's notebook (section 4): the same worker times {NOTEBOOK_STEPS}-step "
          f"windows there, {result['steps']}-step ones here; in both, its record-off and DETAIL windows run in turn "
          "with these in the same ranks, so the first step after each barrier and each switch of side weighs "
          f"1/{NOTEBOOK_STEPS} of a window there and 1/{result['steps']} here")
    print(json.dumps(result))
