"""Lab 08 on a GPU: the synchronous parameter server against one CPU process.

The runs are lab 08's run_all, serve and work (lab_utils.labs.lab08.lesson, generated from its notebook)."""
from __future__ import annotations

import torch

from ...compare import max_abs_diff
from .parameter_server import PSConfig, run, single_process_weights
from .lesson import run_all, serve, work


# ---- the lab's core on a GPU -----------------------------------------------------------------------------------------

def gpu_check() -> dict[str, str]:
    """The synchronous parameter server with its workers on the GPU, against one CPU process on the global batch."""
    name = "parameter server (sync, workers on GPU) vs one CPU process"
    if not torch.cuda.is_available():
        return {name: "skipped: no GPU"}

    cfg = PSConfig(mode="sync", gradients=10, warmup=0)
    try:
        server = run(run_all, [cfg], serve, work, n_workers=2, timeout_s=120)[0]
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {name: f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    diff = max_abs_diff(server["weights"], single_process_weights(cfg, 2, 5))
    return {name: "passed" if diff <= 1e-4 else f"failed: max |weight diff| {diff:.1e} > 1e-4"}
