"""bench pipeline: 2 stages with lab 04's stage worker, step and ops (lab_utils.labs.lab04.lesson) — the naive split, GPipe
with M = 2, 4, 8 and 1F1B with M = 8 — interleaved in one launch; medians of the timed steps, their spreads, and
plausibility flags."""
from __future__ import annotations

import json

from ... import measure, spec
from . import pipeline as pl
from ...compare import max_abs_diff
from . import lesson as lab04


def _row(m: pl.Measured) -> dict:
    """One configuration's figures."""
    return {"makespan_ms": round(m.makespan * 1e3, 2), "makespan_spread": round(m.spread, 3),
            "bubble": round(m.bubble, 4), "bubble_range": [round(min(m.bubbles), 4), round(max(m.bubbles), 4)],
            "bubble_theory": round(pl.make_schedule(m.run.schedule, m.stages, m.run.micro_batches).theoretical_bubble, 4),
            "bubble_ideal_same_op_times": round(pl.ideal_bubble(m), 4),
            "busy_ms_per_stage": [round(sum(i.seconds for i in m.typical() if i.row == f"stage {s}") * 1e3, 1)
                                  for s in range(m.stages)],
            "peak_activation_mb_per_stage": [round(b / 1e6, 2) for b in m.peak_activation_bytes or []]}


def pipeline(*, batch_size: int = 1024, repeats: int = 5, split=None, seed: int = 0,
             model: str = "cnn2d_2layer_fullconnected_2layer") -> dict:
    """2 stages: naive split, GPipe with M = 2, 4, 8 and 1F1B with M = 8, interleaved in one launch."""

    model_spec = spec.preset(model)
    times = pl.layer_times(model_spec, (1, 28, 28), batch_size=pl.micro_batch_size(batch_size, 8), seed=seed)  # M=8's
    split = tuple(split) if split else pl.balanced_split(times, 2)
    common = dict(batch_size=batch_size, split=split, model=model, seed=seed)
    runs = [pl.PipelineRun("naive", "naive", 1, **common)]
    runs += [pl.PipelineRun(f"gpipe M={m}", "gpipe", m, **common) for m in (2, 4, 8)]
    runs += [pl.PipelineRun("1f1b M=8", "1f1b", 8, **common)]
    measured = pl.run_pipelines(runs, 2, lab04.stage_worker, lab04.forward_op, lab04.backward_op, rounds=repeats,
                                warmup=1)
    _, _, grads = pl.reference(runs[0])
    rows = {label: _row(m) for label, m in measured.items()}
    gpipe = [k for k in rows if k.startswith("gpipe")]
    naive, best = measured["naive"], measured["gpipe M=8"]
    speedup = naive.makespan / best.makespan
    return {"benchmark": "pipeline", "stages": 2, "model": model, "batch_size": batch_size, "repeats": repeats,
            "split": list(split), "layer_share_per_stage": [round(x, 3) for x in pl.stage_shares(times, split)],
            "configs": rows, "speedup_gpipe_m8_vs_naive": round(speedup, 3),
            "speedup_spread": round(max(naive.spread, best.spread), 3),
            "bubble_abs_error_max": round(max(abs(rows[k]["bubble"] - rows[k]["bubble_theory"]) for k in gpipe), 4),
            "bubble_abs_error_vs_ideal_max": round(max(abs(rows[k]["bubble"] - rows[k]["bubble_ideal_same_op_times"])
                                                       for k in gpipe), 4),
            "grad_max_abs_diff": max(max_abs_diff(m.grads, grads) for m in measured.values()),
            "flags": measure.plausibility(speedup=speedup, devices=2)}


def print_pipeline(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"2 stages of {result['model']}, split before layer {result['split']} (layer-time shares "
          f"{result['layer_share_per_stage']}), batch {result['batch_size']}, median of {result['repeats']} interleaved steps")
    print(f"{'config':<12} {'makespan ms':>11} {'spread':>7} {'bubble':>7} {'theory':>7} {'ideal*':>7} "
          f"{'busy ms/stage':>15} {'act. MB/stage':>15}")
    for label, r in result["configs"].items():
        print(f"{label:<12} {r['makespan_ms']:>11.1f} {r['makespan_spread']:>6.0%} {r['bubble']:>7.3f} "
              f"{r['bubble_theory']:>7.3f} {r['bubble_ideal_same_op_times']:>7.3f} {str(r['busy_ms_per_stage']):>15} "
              f"{str(r['peak_activation_mb_per_stage']):>15}")
    print("ideal*: the same schedule simulated with this run's measured op times (imbalance included, transfers not)")
    print(measure.flagged(f"GPipe M=8 vs naive: {result['speedup_gpipe_m8_vs_naive']:.2f}x", result["flags"]))
    print(f"largest |bubble - theory| over GPipe runs {result['bubble_abs_error_max']:.3f} (vs ideal* "
          f"{result['bubble_abs_error_vs_ideal_max']:.3f}); max |grad diff| vs the unsplit model "
          f"{result['grad_max_abs_diff']:.2e}")
    print(json.dumps(result))
