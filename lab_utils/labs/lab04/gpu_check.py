"""Lab 04 on a GPU: two pipeline stages on CUDA against the unsplit model on the CPU.

The stage worker, step and ops are lab 04's lesson code (lab_utils.labs.lab04.lesson), as in the notebook's measurements."""
from __future__ import annotations

import numpy as np
import torch

from ...compare import max_abs_diff
from .pipeline import Measured, PipelineRun, reference, run_pipelines
from .lesson import backward_op, forward_op, library_schedule, library_step, library_unsupported, stage_worker


# ---- the same pipeline on a GPU -------------------------------------------------------------------------------------

GPU_TOLERANCE = 2e-3  # relative to the largest reference gradient: cuDNN may convolve in TF32 (10-bit mantissa)


def _compared(measured: Measured, logits, grads) -> str:
    """'passed', or 'failed: <what differs>' against the CPU reference."""
    scale = float(np.abs(grads).max())
    diff = max_abs_diff(measured.grads, grads)
    if diff > GPU_TOLERANCE * scale:
        return f"failed: max |gradient difference| {diff:.1e} > {GPU_TOLERANCE * scale:.1e}"
    if logits is not None and max_abs_diff(measured.logits, logits) > GPU_TOLERANCE * float(np.abs(logits).max()):
        return "failed: the outputs differ from the CPU reference"
    return "passed"


def gpu_check() -> dict[str, str]:
    """Two stages on CUDA — lab 04's ops (1F1B) and torch.distributed.pipelining where it can run — against the
    unsplit model on the CPU."""
    hand, library = "pipeline: hand-built 1F1B stages on CUDA", "pipeline: torch.distributed.pipelining on CUDA"
    if not torch.cuda.is_available():
        return {hand: "skipped: no GPU", library: "skipped: no GPU"}
    from ... import hardware

    run = PipelineRun("hand-built", "1f1b", 4, batch_size=64, split=(2,), model="cnn2d_2layer_fullconnected_2layer")
    reason = library_unsupported(hardware.plan(2))
    library_runs = [] if reason else [PipelineRun("library", "1f1b", 4, batch_size=64, split=(2,), model=run.model)]
    try:
        measured = run_pipelines([run], 2, stage_worker, forward_op, backward_op, library_runs=library_runs, rounds=1,
                                 warmup=1, library_schedule=library_schedule, library_step=library_step, timeout=120)
    except Exception as exc:  # report it, whatever it is: this is a check, not a lab
        return {hand: f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", library: "failed: not run"}
    _, logits, grads = reference(run)
    return {hand: _compared(measured["hand-built"], logits, grads),
            library: f"skipped: {reason}" if reason else _compared(measured["library"], None, grads)}
