"""Lab 03 on a GPU: DDP against the same training on CPU ranks.

Moved from lab_utils/ddp.py: the learner's module holds only what a lab imports."""
from __future__ import annotations

from dataclasses import replace

import torch

from ... import spec
from ...compare import max_abs_diff
from .lesson import DDPConfig, ddp_worker


def gpu_check(quick: bool = False) -> dict:
    """DDP on the GPU(s) against the same training on CPU ranks: 2 ranks sharing cuda:0 over gloo, NCCL with one rank
    per GPU where there are 2, and nn.SyncBatchNorm; each equal to the CPU run within 1e-4."""
    from ...launch import launch

    if not torch.cuda.is_available():
        return {name: "skipped: no GPU" for name in ("2 ranks sharing a GPU (gloo)", "NCCL, one rank per GPU", "SyncBatchNorm")}
    cfg = DDPConfig(data={"kind": "digits", "n_train": 256}, layers=spec.cnn2d_2layer_fullconnected_2layer(),
                    epochs=1, per_rank_batch=16, lr=0.05, seed=0, warmup_steps=0, accumulation=1, timeout_s=100, checkpoint=None)
    bn = replace(cfg, layers=spec.with_batchnorm(cfg.layers), per_rank_batch=4, data={"kind": "digits", "n_train": 32})
    cpu = {"CUDA_VISIBLE_DEVICES": ""}
    results, figures = {}, {}

    def compare(name, config, gpu_env, ranks=2):
        on_cpu = launch(ddp_worker, ranks, args=(config,), env=cpu, timeout=120)
        on_gpu = launch(ddp_worker, ranks, args=(config,), env=gpu_env, timeout=120)
        diff = max(max_abs_diff(g["weights"], c["weights"]) for g, c in zip(on_gpu, on_cpu))
        figures[f"{name}: max |gpu - cpu|"] = diff
        figures[f"{name}: samples/s"] = on_gpu[0]["samples_per_s"]
        results[name] = "passed" if diff <= 1e-4 else f"failed: weights differ from the CPU run by {diff:.1e}"

    compare("2 ranks sharing a GPU (gloo)", cfg, {"CUDA_VISIBLE_DEVICES": "0"})
    if torch.cuda.device_count() >= 2:
        compare("NCCL, one rank per GPU", cfg, {})
    else:
        results["NCCL, one rank per GPU"] = "skipped: needs 2 GPUs (NCCL refuses two ranks on one GPU)"
    if not quick:
        compare("SyncBatchNorm", bn, {"CUDA_VISIBLE_DEVICES": "0"})
    return {**results, "figures": figures}
