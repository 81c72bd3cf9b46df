"""`bench collectives`: lab 06's hand-built ring against the library's all-reduce, and the tensor-parallel layers.

Moved from lab_utils/collectives.py: the learner's module holds only what a lab imports."""
from __future__ import annotations

import json
import statistics

import numpy as np

from ... import measure, report
from ...collectives import RING_BYTES, reference_worker


_spread = measure.spread  # the course's one rule


DIFF_KEYS = ("ring_max_abs_diff", "tp_conv_max_abs_diff", "tp_mlp_max_abs_diff", "tp_cnn_weights_max_abs_diff")


def bench(*, nbytes: int = RING_BYTES, repeats: int = 9, train_steps: int = 3, world_size: int = 2, seed: int = 0,
          timeout_s: float = 300.0) -> dict:
    """The hand-built ring against gloo's all-reduce (medians of interleaved repeats; a repeat lasts until the slower
    rank is done) and the tensor-parallel layers against unsplit ones, in one launch."""
    from ...launch import launch

    ranks = launch(reference_worker, world_size, args=(nbytes, repeats, train_steps, seed, timeout_s / 2),
                   timeout=timeout_s)
    ring = np.max([r["ring"] for r in ranks], axis=0)  # a repeat ends when its slowest rank is done
    library = np.max([r["library"] for r in ranks], axis=0)
    busbw = [report.bus_bandwidth(nbytes, t, world_size) / 1e9 for t in library]
    return {"benchmark": "collectives", "world_size": world_size, "backend": ranks[0]["backend"],
            "device": ranks[0]["device"], "nbytes": nbytes, "repeats": repeats,
            "ring_ms": round(1e3 * statistics.median(ring), 3), "ring_spread": round(_spread(ring), 3),
            "library_ms": round(1e3 * statistics.median(library), 3), "library_spread": round(_spread(library), 3),
            "ring_vs_library": round(statistics.median(library) / statistics.median(ring), 3),
            "ring_vs_library_spread": round(_spread(library / ring), 3),
            "busbw_gbps": round(statistics.median(busbw), 3), "busbw_spread": round(_spread(busbw), 3),
            **{key: max(r[key] for r in ranks) for key in DIFF_KEYS}}


def print_bench(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    n, mib = result["world_size"], result["nbytes"] / 2**20
    print(f"all-reduce of {mib:g} MiB over {n} ranks ({result['backend']}), median of {result['repeats']} interleaved "
          "repeats (spread = (max - min) / median)")
    for label, key in (("hand-built ring", "ring"), (f"{result['backend']} all_reduce", "library")):
        line = f"  {label:<16} {result[key + '_ms']:8.3f} ms  (spread {result[key + '_spread']:.2f})"
        print(measure.flagged(line, measure.plausibility(spread=result[key + "_spread"])))
    print(f"  ring_vs_library = {result['backend']} time / ring time = {result['ring_vs_library']:.3f} (target >= 0.7)")
    print(f"  bus bandwidth of {result['backend']}'s all-reduce: 2 (N-1)/N x bytes / time = {result['busbw_gbps']:.3f} GB/s")
    for key in DIFF_KEYS:
        target = 1e-4 if key == "tp_cnn_weights_max_abs_diff" else 1e-5
        print(f"  {key:<28} {result[key]:.2e}  (target <= {target:g})")
    print(json.dumps(result))
