"""Lab 03's benchmark: DDP with single-thread ranks vs one process with 1 and with as many threads, the launches
interleaved (medians of repeats, warm-up excluded), and DDP checked against one process on the same global batches."""
from __future__ import annotations

import json
import statistics
from dataclasses import replace

from ... import measure, spec
from ...compare import max_abs_diff
from ...launch import launch
from ...setups import Setup, in_alternating_rounds
from .lesson import DDPConfig, ddp_worker
from .speed import as_lab01_kernel


def ddp(*, world_size: int = 2, repeats: int = 3, steps: int = 20, global_batch: int = 256, seed: int = 0) -> dict:
    """DDP with `world_size` single-thread ranks vs one process with 1 and with `world_size` threads, interleaved."""
    synthetic = {"kind": "synthetic", "n_train": global_batch * (steps + 1), "n_test": 64, "side": 28, "seed": seed}
    cfg = DDPConfig(data=synthetic, layers=spec.cnn2d_3layer_fullconnected_3layer(), epochs=1,
                    per_rank_batch=global_batch, lr=0.01, seed=seed, warmup_steps=0, accumulation=1, timeout_s=240,
                    checkpoint=None)  # per_rank_batch: each setup splits the global batch over its ranks
    setups = [Setup("1 rank x 1 thread", 1, 1), Setup(f"1 rank x {world_size} threads", 1, world_size),
              Setup(f"{world_size} ranks x 1 thread", world_size, 1)]

    def run(setup, figures):
        ranks = launch(ddp_worker, setup.ranks, args=(replace(cfg, per_rank_batch=global_batch // setup.ranks),),
                       threads=setup.threads, timeout=300,
                       **(as_lab01_kernel() if setup.ranks == 1 else {}))  # threads wait as lab 01's (the lab's rows)
        figures.samples_per_s.append(ranks[0]["samples_per_s"])
        if setup.ranks > 1:
            figures.allreduce_ms.append(statistics.mean(r["allreduce_ms"] for r in ranks))

    one, threaded, many = in_alternating_rounds(setups, repeats, run)
    check = replace(cfg, data={"kind": "digits", "n_train": 256}, layers=spec.cnn2d_2layer_fullconnected_2layer(),
                    per_rank_batch=16)
    ranks = launch(ddp_worker, world_size, args=(check,), timeout=300)
    reference = launch(ddp_worker, 1, args=(replace(check, per_rank_batch=16 * world_size, lr=check.lr * world_size),),
                       timeout=300)[0]
    diff = max(max_abs_diff(r["weights"], reference["weights"]) for r in ranks)
    return {"benchmark": "ddp", "world_size": world_size, "global_batch": global_batch, "steps": steps,
            "repeats": repeats, "model": "cnn2d_3layer_fullconnected_3layer",
            "setups": [f.as_json(global_batch) for f in (one, threaded, many)],
            "speedup_vs_1x1": round(many.rate / one.rate, 3), "speedup_vs_1x2": round(many.rate / threaded.rate, 3),
            "weights_max_abs_diff": diff,
            "flags": measure.plausibility(speedup=many.rate / one.rate, devices=world_size)}


def print_ddp(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'setup':<22} {'samples/s':>10} {'spread':>7} {'step ms':>8} {'all-reduce ms':>14}   ({result['model']}, global "
          f"batch {result['global_batch']}, median step of {result['steps']}, median of {result['repeats']} interleaved launches)")
    for s in result["setups"]:
        comm = f"{s['allreduce_ms']:.2f}" if s["allreduce_ms"] is not None else "-"
        print(f"{s['name']:<22} {s['samples_per_s']:>10.1f} {s['spread']:>6.0%} {s['step_ms']:>8.2f} {comm:>14}")
    print(measure.flagged(f"speedup of {result['world_size']} ranks: {result['speedup_vs_1x1']:.2f}x vs 1 thread, "
                          f"{result['speedup_vs_1x2']:.2f}x vs one process using {result['world_size']} threads",
                          result["flags"]))
    print(f"DDP vs one process on the same global batches: max |weight diff| = {result['weights_max_abs_diff']:.2e}")
    print(json.dumps(result))
