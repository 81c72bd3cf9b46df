"""`bench memory`: lab 07's DDP, ZeRO-1 and FSDP2 in one launch, and activation checkpointing.

The DDP, ZeRO-1 and FSDP2 workers and forward_with_checkpoints are lab 07's (lab_utils.labs.lab07.lesson, generated
from its notebook)."""
from __future__ import annotations

import functools
import json

import torch

from ... import measure, spec
from ...compare import max_abs_diff
from ...memory import INPUT_SHAPE, SavedActivations, layer_blocks, parameter_count, wide_cnn
from . import lesson as lab07
from .lesson import forward_with_checkpoints


def strategy_jobs(strategies, model_spec, *, world_size: int, steps: int, batch_per_rank: int, seed: int = 0,
                  lr: float = 1e-3, param_dtype=None) -> list:
    """launch_jobs' (worker, (job,)) for each of `strategies` ("ddp", "zero1", "fsdp"): lab 07's workers, Adam steps on
    one seeded set of images (each step's global batch is world_size x batch_per_rank of them, rank r's slice r)."""

    workers = {"ddp": lab07.ddp_baseline_worker, "zero1": lab07.zero1_worker, "fsdp": lab07.fsdp_worker}
    gen = torch.Generator().manual_seed(seed + 1)
    n = steps * world_size * batch_per_rank
    job = lab07.StrategyJob(model_spec, INPUT_SHAPE, torch.rand(n, *INPUT_SHAPE, generator=gen),
                            torch.randint(0, 10, (n,), generator=gen), steps=steps, per_rank=batch_per_rank, lr=lr,
                            seed=seed, param_dtype=param_dtype)
    return [(workers[s], (job,)) for s in strategies]


def _checkpoint_figures(model_spec, batch: int, repeats: int, seed: int) -> dict:
    """Saved activation bytes and fwd+bwd time with every block checkpointed, against none."""
    import torch.nn.functional as F


    model = spec.build_torch(model_spec, INPUT_SHAPE, seed=seed)
    blocks = layer_blocks(model)
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.rand(batch, *INPUT_SHAPE, generator=gen), torch.randint(0, 10, (batch,), generator=gen)
    choices = {"none": (), "all": tuple(range(len(blocks)))}

    def step(chosen):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(forward_with_checkpoints(blocks, x, chosen), y).backward()

    saved = {}
    for name, chosen in choices.items():
        with SavedActivations(model) as counter:
            loss = F.cross_entropy(forward_with_checkpoints(blocks, x, chosen), y)
        loss.backward()
        saved[name] = counter.bytes
    timing = measure.time_interleaved({n: functools.partial(step, c) for n, c in choices.items()},
                                      warmup=1, repeats=repeats)
    ratios = measure.paired_ratios(timing["none"], timing["all"])  # all / none, round by round
    return {"checkpoint_activation_bytes_ratio": round(saved["all"] / saved["none"], 4),
            "checkpoint_time_ratio": round(timing["all"].median / timing["none"].median, 3),
            "checkpoint_time_ratio_spread": round(measure.spread(ratios), 3)}


def bench(*, world_size: int = 2, repeats: int = 5, steps: int = 4, batch_per_rank: int = 16, seed: int = 0) -> dict:
    """DDP, hand-built ZeRO-1 and FSDP2 (Adam, the wide CNN) in one launch; activation checkpointing in-process."""
    from ...launch import launch_jobs

    model_spec = wide_cnn()
    jobs = strategy_jobs(("ddp", "zero1", "fsdp"), model_spec, world_size=world_size, steps=steps,
                         batch_per_rank=batch_per_rank, seed=seed)
    ddp, zero1, fsdp = launch_jobs(jobs, world_size, timeout=300)

    def most(runs, kind):
        return max(r["bytes"][kind] for r in runs)

    def diff(runs):
        return max(max_abs_diff(r["weights"], d["weights"]) for r, d in zip(runs, ddp))

    figures = {"benchmark": "memory", "world_size": world_size, "model": "wide CNN (memory.wide_cnn)",
               "parameters": parameter_count(model_spec), "steps": steps, "batch_per_rank": batch_per_rank,
               "repeats": repeats,
               "zero1_optimizer_bytes_ratio": round(most(zero1, "optimizer") / most(ddp, "optimizer"), 4),
               "fsdp_param_bytes_ratio": round(most(fsdp, "parameters") / most(ddp, "parameters"), 4),
               "fsdp_optimizer_bytes_ratio": round(most(fsdp, "optimizer") / most(ddp, "optimizer"), 4),
               "fsdp_vs_ddp_ring_bytes_ratio": round(fsdp[0]["ring_bytes"] / ddp[0]["ring_bytes"], 4),
               "zero1_vs_ddp_max_abs_diff": diff(zero1), "fsdp_vs_ddp_max_abs_diff": diff(fsdp),
               **_checkpoint_figures(spec.cnn2d_2layer_fullconnected_2layer(), 64, repeats, seed)}
    figures["spread"] = {k: 0.0 for k in figures if k.endswith(("_ratio", "_diff"))} | \
        {"checkpoint_time_ratio": figures.pop("checkpoint_time_ratio_spread")}
    return figures


def print_bench(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    n = result["world_size"]
    print(f"{result['model']}, {result['parameters']:,} parameters, Adam, {n} ranks, {result['steps']} steps of "
          f"{result['batch_per_rank']} images per rank (bytes are exact counts; they have no spread)")
    print(f"ZeRO-1 optimizer state per rank / DDP's     {result['zero1_optimizer_bytes_ratio']:.3f}   (1/N = {1 / n:.3f})")
    print(f"FSDP2 parameters per rank / DDP's           {result['fsdp_param_bytes_ratio']:.3f}")
    print(f"FSDP2 optimizer state per rank / DDP's      {result['fsdp_optimizer_bytes_ratio']:.3f}")
    print(f"FSDP2 bytes sent / DDP's (ring passes)      {result['fsdp_vs_ddp_ring_bytes_ratio']:.3f}   (rule: 3 Psi / 2 Psi = 1.5)")
    print(f"max |weights - DDP's|: ZeRO-1 {result['zero1_vs_ddp_max_abs_diff']:.1e}, FSDP2 {result['fsdp_vs_ddp_max_abs_diff']:.1e}")
    print(f"course CNN, batch 64, every block checkpointed: activation bytes x{result['checkpoint_activation_bytes_ratio']:.3f}, "
          f"fwd+bwd time x{result['checkpoint_time_ratio']:.2f} (median of {result['repeats']} interleaved, spread "
          f"{result['spread']['checkpoint_time_ratio']:.0%})")
    print(json.dumps(result))
