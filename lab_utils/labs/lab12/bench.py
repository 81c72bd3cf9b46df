"""Lab 12's benchmark: what the course's record of collectives (lab_utils.launch.record) costs lab 03's DDP step,
measured with the record on and off in interleaved launches of the same worker; medians, warm-up excluded."""
from __future__ import annotations

import json
import statistics

from ... import measure, spec
from ..lab03.lesson import DDPConfig, ddp_worker


def record_cost(*, world_size: int = 2, repeats: int = 9, steps: int = 12, per_rank_batch: int = 16,
                seed: int = 0) -> dict:
    """Samples/s of lab 03's ddp_worker with the record on vs off (LAB_COLLECTIVE_RECORD), alternating launches."""
    from ...launch import launch
    from ...launch.record import ENABLED

    synthetic = {"kind": "synthetic", "n_train": per_rank_batch * world_size * steps, "n_test": 32, "side": 28,
                 "seed": seed}
    cfg = DDPConfig(data=synthetic, layers=spec.cnn2d_2layer_fullconnected_2layer(), epochs=1,
                    per_rank_batch=per_rank_batch, lr=0.01, seed=seed, warmup_steps=0, accumulation=1, timeout_s=120,
                    checkpoint=None)
    rates: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(repeats + 1):  # round 0 is warm-up; the order alternates so neither side always goes first
        for side in ("on", "off") if i % 2 else ("off", "on"):
            ranks = launch(ddp_worker, world_size, args=(cfg,), timeout=300, env={ENABLED: "1" if side == "on" else "0"})
            if i:
                rates[side].append(float(ranks[0]["samples_per_s"]))
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    verdict = measure.verdict(rates["on"], rates["off"], claim="record on vs off", expected="the record costs under 2 %",
                              higher_is_better=True, no_worse_than=0.02, lab="12")
    return {"benchmark": "record", "world_size": world_size, "repeats": repeats, "steps": steps,
            "per_rank_batch": per_rank_batch, "on_samples_per_s": round(on, 1), "off_samples_per_s": round(off, 1),
            "cost": round(off / on - 1, 4), "spread_on": round(measure.spread(rates["on"]), 3),
            "spread_off": round(measure.spread(rates["off"]), 3), "verdict": verdict.verdict}


def print_record_cost(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"lab 03's DDP step, {result['world_size']} ranks x batch {result['per_rank_batch']}, {result['steps']} steps "
          f"per launch, medians of {result['repeats']} interleaved launches:")
    print(f"  record on  {result['on_samples_per_s']:>9.1f} samples/s (spread {result['spread_on']:.0%})")
    print(f"  record off {result['off_samples_per_s']:>9.1f} samples/s (spread {result['spread_off']:.0%})")
    print(f"  cost {result['cost']:+.1%} (target under 2 %): {result['verdict']}")
    print(json.dumps(result))
