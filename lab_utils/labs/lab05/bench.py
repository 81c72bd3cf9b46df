"""Lab 05's benchmark: one TensorFlow worker (default strategy) vs 2 MultiWorkerMirroredStrategy workers running the
lesson's `mwms_worker`, the launches interleaved (medians of repeats, warm-up excluded), the workers' weights
checked against each other and against one worker on the same global batches."""
from __future__ import annotations

import json

from ... import measure
from ...compare import max_abs_diff
from ...setups import Setup, in_alternating_rounds

TF_MODEL = "cnn2d_2layer_fullconnected_2layer"  # bench tf's CNN


def tf(*, repeats: int = 3, steps: int = 20, global_batch: int = 512, seed: int = 0) -> dict:
    """One TF worker (default strategy) vs 2 MultiWorkerMirroredStrategy workers, launches interleaved."""
    from ... import tf_distribute as tfd

    tfd.import_tensorflow()  # quietly: lab 05's module imports TensorFlow
    from .lesson import mwms_worker  # lab 05's worker, generated from its notebook

    cfg = {"data": {"kind": "synthetic", "n_train": global_batch * steps, "n_test": 512, "side": 28, "seed": seed},
           "model": TF_MODEL, "global_batch": global_batch, "lr": 0.05, "seed": seed, "steps": steps}
    runs = {}  # ranks -> every worker's results of the last run (the same global batches: one worker must end where two do)

    def run(setup, figures):
        results = tfd.launch_workers(mwms_worker, setup.ranks, args=(cfg,), timeout=300)
        runs[setup.ranks] = results
        figures.samples_per_s.append(tfd.step_rate(global_batch, [results[0]["step_seconds"][3:]]).samples_per_s)

    one, two = in_alternating_rounds([Setup("1 worker", 1, 1), Setup("2 workers", 2, 1)], repeats, run)
    return {"benchmark": "tf", "model": TF_MODEL, "global_batch": global_batch, "steps": steps,
            "repeats": repeats, "setups": [f.as_json(global_batch) for f in (one, two)],
            "speedup_multiworker": round(two.rate / one.rate, 3),
            "replicas_in_sync": [w["replicas"] for w in runs[2]],
            "weights_max_abs_diff": max_abs_diff(runs[2][0]["weights"], runs[2][1]["weights"]),
            "weights_vs_one_worker": max_abs_diff(runs[2][0]["weights"], runs[1][0]["weights"]),
            "first_loss_vs_one_worker": abs(runs[2][0]["losses"][0] - runs[1][0]["losses"][0]),
            "flags": measure.plausibility(speedup=two.rate / one.rate, devices=2)}


def print_tf(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'setup':<10} {'samples/s':>10} {'spread':>7}   ({result['model']}, custom loop, global batch "
          f"{result['global_batch']}, median step of {result['steps']}, median of {result['repeats']} interleaved launches)")
    for s in result["setups"]:
        print(f"{s['name']:<10} {s['samples_per_s']:>10.1f} {s['spread']:>6.0%}")
    print(measure.flagged(f"2 MultiWorkerMirroredStrategy workers vs 1: {result['speedup_multiworker']:.2f}x; max |weight "
                          f"diff| between the workers {result['weights_max_abs_diff']:.1e}, vs one worker on the same global batches "
                          f"{result['weights_vs_one_worker']:.1e}", result["flags"]))
    print(json.dumps(result))
