"""`bench dp`: lab 02's sweep of its notebook's DataParallel (lab_utils.lessons.lab02) against one device."""
from __future__ import annotations

import json

from ... import data_parallel
from ...data_parallel import ONE_DEVICE, Sweep, dp_name, threaded_name
from ...lessons.lab02 import DataParallel


def sweep(**options) -> Sweep:
    """data_parallel.sweep of lab 02's DataParallel, as the notebook runs it."""
    return data_parallel.sweep(DataParallel, **options)


def figures(result: Sweep) -> dict:
    """The figures of `bench dp`, each with its spread and flags."""
    n, rows = result.n_devices, []
    for batch in result.batch_sizes:
        one, many = result.result(batch, ONE_DEVICE), result.result(batch, dp_name(n))
        row = {"batch_size": batch, "single_ms": round(one.wall_s * 1e3, 3), "single_spread": round(one.spread, 3),
               "dp_ms": round(many.wall_s * 1e3, 3), "dp_spread": round(many.spread, 3),
               "speedup": round(result.speedup(batch, dp_name(n)), 3), "flags": many.flags}
        if result.plan.threads_per_device:
            threads = result.result(batch, threaded_name(n))
            row.update(threads_ms=round(threads.wall_s * 1e3, 3), threads_spread=round(threads.spread, 3),
                       speedup_vs_threads=round(threads.wall_s / many.wall_s, 3))
        rows.append(row)
    return {"benchmark": "dp", "n_devices": n, "devices": [str(d) for d in result.plan.devices],
            "backend": result.plan.backend, "threads_per_device": result.plan.threads_per_device,
            "model": "cnn2d_3layer_fullconnected_3layer", "repeats": result.repeats, "by_batch": rows,
            "phase_ms": result.phase_ms, "grad_max_abs_diff": result.grad_max_abs_diff,
            "batch_size": rows[-1]["batch_size"], "speedup": rows[-1]["speedup"],
            "speedup_small_batch": rows[0]["speedup"], "flags": rows[-1]["flags"]}


def show(result: Sweep) -> None:
    """Lab 02's table, each batch's phases, then the JSON line (the last line of output)."""
    data_parallel.print_sweep(result)
    for batch, table in result.phase_ms.items():
        print(f"phases at batch {batch} (median ms):")
        for row, parts in table.items():
            print(f"  {row:<18} " + "  ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    print(json.dumps(figures(result)))
