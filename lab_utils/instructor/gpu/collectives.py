"""Lab 06 on a GPU: the ring and the tensor-parallel layers against the CPU.

The ring and the layers are lab 06's lesson code (lab_utils.lessons.lab06); the worker is the benchmark's."""
from __future__ import annotations

import torch

from ..bench.collectives import reference_worker


GPU_TOLERANCES = {"ring_max_abs_diff": 1e-9, "tp_conv_max_abs_diff": 1e-4, "tp_mlp_max_abs_diff": 1e-4,
                  "tp_cnn_weights_max_abs_diff": 1e-3}


def gpu_check() -> dict[str, str]:
    """On a GPU: the ring and the tensor-parallel layers on 2 ranks, against the unsplit layers computed on the CPU."""
    names = {"ring_max_abs_diff": "ring all-reduce on the GPU ranks",
             "tp_conv_max_abs_diff": "tensor-parallel conv on the GPU",
             "tp_mlp_max_abs_diff": "column/row classifier on the GPU",
             "tp_cnn_weights_max_abs_diff": "tensor-parallel CNN training on the GPU"}
    if not torch.cuda.is_available():
        return {name: "skipped: no GPU" for name in names.values()}
    from ...launch import launch

    ranks = launch(reference_worker, 2, args=(1 << 20, 3, 2, 0, 60.0), timeout=180)
    results = {}
    for key, name in names.items():
        worst = max(r[key] for r in ranks)
        where = f"{ranks[0]['backend']}, {ranks[0]['device']}"
        results[name] = ("passed" if worst <= GPU_TOLERANCES[key] else
                         f"failed: max |GPU - CPU| = {worst:.2e} > {GPU_TOLERANCES[key]:g} ({where})")
    return results
