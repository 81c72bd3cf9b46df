"""`python -m lab_utils gpu-check`: run every GPU branch of the course, each compared with its CPU result.

Each lab's room module has a `gpu_check()` that returns {check: "passed" | "failed: <reason>" | "skipped: <why>"}
(and may add figures under "figures"). Here each one runs in a process of its own, with a time limit, so that one
hanging or crashing check (or TensorFlow's start-up) cannot take the others with it. Without a GPU nothing is started
and every check reports "skipped: no GPU".
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# (lab, module whose gpu_check() runs, seconds it may take)
CHECKS = [("01", "lab_utils.train", 60), ("02", "lab_utils.dp", 60), ("03", "lab_utils.ddp", 90),
          ("04", "lab_utils.pipeline", 60), ("05", "lab_utils.tf_distribute", 90), ("06", "lab_utils.collectives", 60),
          ("07", "lab_utils.memory", 60), ("08", "lab_utils.asynchronous", 60), ("09", "lab_utils.serving", 90)]
QUICK = {"01", "03", "05", "09"}
RUN_ONE = ("import importlib, inspect, json, sys; sys.path.insert(0, sys.argv[1]); "
           "fn = importlib.import_module(sys.argv[2]).gpu_check; "
           "kw = {'quick': sys.argv[3] == '1'} if 'quick' in inspect.signature(fn).parameters else {}; "
           "print('GPU-CHECK ' + json.dumps(fn(**kw)))")


def gpus() -> list[str]:
    """Names of the CUDA devices torch sees."""
    import torch

    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def plan_check(n_gpus: int) -> str:
    """One rank per GPU goes over NCCL on distinct GPUs; more ranks than GPUs share them over gloo."""
    from .. import hardware

    own, shared = hardware.plan(n_gpus), hardware.plan(n_gpus + 1)
    if own.backend != "nccl" or len(set(own.devices)) != n_gpus:
        return f"failed: {n_gpus} rank(s) on {n_gpus} GPU(s) planned as {own.backend} on {own.devices}"
    if shared.backend != "gloo":
        return f"failed: {n_gpus + 1} ranks on {n_gpus} GPU(s) planned as {shared.backend}"
    return "passed"


def run_module(module: str, limit: float, quick: bool) -> dict:
    """One module's gpu_check() in a fresh process; a crash, a hang or a missing function is reported as a failure."""
    try:
        done = subprocess.run([sys.executable, "-c", RUN_ONE, str(ROOT), module, "1" if quick else "0"],
                              capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {module: f"failed: no answer within {limit:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("GPU-CHECK ")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return {module: f"failed: {last[:300]}"}
    return json.loads(lines[-1][len("GPU-CHECK "):])


def check_all(quick: bool = False, names=None) -> dict:
    """Every check's verdict, plus the GPUs seen and the seconds it took."""
    start = time.monotonic()
    present = gpus() if names is None else names
    results, figures = {}, {}
    if present:
        results["lab 00: hardware plan"] = plan_check(len(present))
    for lab, module, limit in CHECKS:
        if quick and lab not in QUICK:
            continue
        if not present:
            results[f"lab {lab}"] = "skipped: no GPU (torch.cuda.is_available() is False)"
            continue
        verdicts = run_module(module, limit, quick)
        figures.update({f"lab {lab}: {k}": v for k, v in verdicts.pop("figures", {}).items()})
        results.update({f"lab {lab}: {k}": v for k, v in verdicts.items()})
    return {"gpus": present, "quick": quick, "seconds": round(time.monotonic() - start, 1), "checks": results,
            "figures": figures}


def main(quick: bool = False) -> int:
    """Print a table, then the JSON line; non-zero exit when a check failed."""
    report = check_all(quick)
    print(f"GPUs: {', '.join(report['gpus']) or 'none'}")
    width = max((len(k) for k in report["checks"]), default=10)
    for name, verdict in report["checks"].items():
        print(f"{name:<{width}}  {verdict}")
    for name, value in report["figures"].items():
        print(f"  {name}: {value}")
    print(json.dumps(report))
    return 1 if any(v.startswith("failed") for v in report["checks"].values()) else 0
