"""Running pipeline configurations over real ranks, one rank per stage: each step of a configuration runs the
notebook's `stage_step` with its ops (watched), or the library's step; configurations alternate round by round."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ..measure import alternating_rounds, synchronize
from ..tensors import flat_grads
from .results import Measured, measured_by_label
from .schedules import make_schedule
from .split import build_stage, stage_layers
from .stage import StageContext, micro_batch_size
from .watch import watched_step


def _library_step(library_step, schedule, rank: int, world_size: int, batch, device) -> dict:
    """One step of a library schedule (lab 04's library_step), as one timed event of this stage."""
    x, y = batch
    start = time.perf_counter()
    library_step(schedule, rank, world_size, x.to(device), y.to(device))
    synchronize(device)
    return {"events": [("S", 0, start, time.perf_counter())], "peak_activation_bytes": None}  # not measured


def pipeline_worker(rank: int, world_size: int, runs, stage_step, forward_op, backward_op, rounds: int = 3,
                    warmup: int = 1, timeout_s: float = 60.0, library_runs=(), library_schedule=None,
                    library_step=None) -> list[dict]:
    """This rank's stage of `runs` and `library_runs`, each round; per run: timed steps, gradients, last outputs."""
    from ..launch import process_group

    everything, hand = list(runs) + list(library_runs), len(runs)
    with process_group(timeout_s) as ctx:
        device = torch.device(ctx.device)
        if len(stage_layers(everything[0].model_spec(), everything[0].split)) != world_size:
            raise ValueError(f"split {list(everything[0].split)} makes {len(everything[0].split) + 1} stages but "
                             f"{world_size} ranks were launched: launch one rank per stage")
        modules = [build_stage(r.model_spec(), r.input_shape, r.split, rank, seed=r.seed).to(device) for r in everything]
        batches = [r.batch() for r in everything]
        schedules = [make_schedule(r.schedule, world_size, r.micro_batches).stage_ops(rank) for r in runs]
        schedules += [library_schedule(m, rank, world_size, r, device) for r, m in zip(library_runs, modules[hand:])]
        results = [{"label": r.label, "steps": [], "device": ctx.device, "backend": ctx.backend} for r in everything]
        order = alternating_rounds(range(len(everything)), warmup + rounds)
        for n, i in enumerate(order):
            modules[i].zero_grad(set_to_none=True)
            dist.barrier()  # every stage starts the step together
            if i >= hand:
                step = _library_step(library_step, schedules[i], rank, world_size, batches[i], device)
            else:
                stage_ctx = StageContext.for_run(runs[i], modules[i], rank, world_size, device, ctx.backend, batches[i])
                step = watched_step(stage_step, stage_ctx, schedules[i], forward_op, backward_op)
                if stage_ctx.last:
                    results[i]["logits"] = torch.cat([stage_ctx.logits[m] for m in range(runs[i].micro_batches)])
            if n >= warmup * len(everything):  # past the warm-up rounds
                results[i]["steps"].append(step)
        for result, module in zip(results, modules):
            result["grads"] = flat_grads(module)
    return results


def run_pipelines(runs, stages: int, stage_step, forward_op, backward_op, *, library_runs=(), library_schedule=None,
                  library_step=None, rounds: int = 3,
                  warmup: int = 1, timeout: float = 300.0, group_timeout: float = 60.0) -> dict[str, Measured]:
    """Run every configuration `rounds` times interleaved over one rank per stage, each step with `stage_step` and the
    ops (lab 04's, or your own); returns label -> Measured."""
    from ..launch import launch

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 timed steps and warmup >= 0, got rounds={rounds!r}, warmup={warmup!r}")
    everything = list(runs) + list(library_runs)
    labels = [r.label for r in everything]
    if len(set(labels)) != len(labels):
        raise ValueError(f"every run needs its own label, got {labels}")
    if library_runs and (library_schedule is None or library_step is None):
        raise ValueError("library_runs need library_schedule= and library_step=: lab 04's, or your own")
    for r in everything:
        micro_batch_size(r.batch_size, r.micro_batches)
        if len(stage_layers(r.model_spec(), r.split)) != stages:
            raise ValueError(f"run {r.label!r}: split {list(r.split)} makes {len(r.split) + 1} stages, not {stages}")
    # group_timeout bounds each send, recv and barrier; timeout bounds the whole launch
    ranks = launch(pipeline_worker, stages, timeout=timeout,
                   args=(list(runs), stage_step, forward_op, backward_op, rounds, warmup, group_timeout,
                         list(library_runs), library_schedule, library_step))
    return measured_by_label(everything, ranks)
