"""`bench dp`: lab 02's sweep of its notebook's DataParallel (lab_utils.labs.lab02.lesson) against one device."""
from __future__ import annotations

import json

from dataclasses import dataclass

import torch

from ... import data, hardware, spec
from . import data_parallel
from .data_parallel import ONE_DEVICE, Sweep, dp_name, threaded_name
from .lesson import DataParallel, gradient_difference


@dataclass(frozen=True)
class SweepAndGradCheck:
    """Lab 02's sweep and its gradient check (DataParallel vs one device on the largest batch)."""

    sweep: Sweep
    grad_max_abs_diff: float


def bench(*, n_devices: int = 2, batch_sizes=(16, 256), seed: int = 0, hw=None, **options) -> SweepAndGradCheck:
    """data_parallel.sweep of lab 02's DataParallel, as the notebook runs it, then lab 02's gradient_difference."""

    hw = hw or hardware.detect()
    result = data_parallel.sweep(DataParallel, n_devices=n_devices, batch_sizes=batch_sizes, seed=seed, hw=hw, **options)
    x, y = (torch.from_numpy(a) for a in data.synthetic_images(max(batch_sizes), image_shape=(1, 28, 28), seed=seed + 1))
    model = spec.build_torch(spec.cnn2d_3layer_fullconnected_3layer(), (1, 28, 28), seed=seed)
    return SweepAndGradCheck(result, gradient_difference(model, x, y, result.plan))


def figures(measured: SweepAndGradCheck) -> dict:
    """The figures of `bench dp`, each with its spread and flags."""
    result = measured.sweep
    n, rows = result.n_devices, []
    for batch in result.batch_sizes:
        one, many = result.result(batch, ONE_DEVICE), result.result(batch, dp_name(n))
        assert one.spread is not None and many.spread is not None  # the sweep times every row it keeps
        row = {"batch_size": batch, "single_ms": round(one.wall_s * 1e3, 3), "single_spread": round(one.spread, 3),
               "dp_ms": round(many.wall_s * 1e3, 3), "dp_spread": round(many.spread, 3),
               "speedup": round(result.speedup(batch, dp_name(n)), 3), "flags": "; ".join(many.flags)}
        if result.plan.threads_per_device:
            threads = result.result(batch, threaded_name(n))
            assert threads.spread is not None
            row.update(threads_ms=round(threads.wall_s * 1e3, 3), threads_spread=round(threads.spread, 3),
                       speedup_vs_threads=round(threads.wall_s / many.wall_s, 3))
        rows.append(row)
    return {"benchmark": "dp", "n_devices": n, "devices": [str(d) for d in result.plan.devices],
            "backend": result.plan.backend, "threads_per_device": result.plan.threads_per_device,
            "model": "cnn2d_3layer_fullconnected_3layer", "repeats": result.repeats, "by_batch": rows,
            "phase_ms": result.phase_ms, "grad_max_abs_diff": measured.grad_max_abs_diff,
            "batch_size": rows[-1]["batch_size"], "speedup": rows[-1]["speedup"],
            "speedup_small_batch": rows[0]["speedup"], "flags": rows[-1]["flags"]}


def print_bench(measured: SweepAndGradCheck) -> None:
    """Lab 02's table, each batch's phases, the gradient check, then the JSON line (the last line of output)."""
    data_parallel.print_sweep(measured.sweep)
    for batch, table in measured.sweep.phase_ms.items():
        print(f"phases at batch {batch} (median ms):")
        for row, parts in table.items():
            print(f"  {row:<18} " + "  ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    print(f"DataParallel vs one device, same batch of {max(measured.sweep.batch_sizes)}: "
          f"max |grad diff| = {measured.grad_max_abs_diff:.2e}")
    print(json.dumps(figures(measured)))
