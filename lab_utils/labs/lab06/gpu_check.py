"""Lab 06 on a GPU: the ring and the tensor-parallel layers against the CPU.

The workers are lab 06's lesson code (lab_utils.labs.lab06.lesson), run as the benchmark runs them."""
from __future__ import annotations

import torch

from .bench import lesson_checks


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
    checks = lesson_checks(2, 1 << 20, 3, 2, 0, 180.0)
    results = {}
    for key, name in names.items():
        worst = checks[key]
        where = f"{checks['backend']}, {checks['device']}"
        results[name] = ("passed" if worst <= GPU_TOLERANCES[key] else
                         f"failed: max |GPU - CPU| = {worst:.2e} > {GPU_TOLERANCES[key]:g} ({where})")
    return results
