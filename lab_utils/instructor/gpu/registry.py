"""`python -m lab_utils gpu-check`: run every GPU branch of the course, each compared with its CPU result.

Each lab's check is a `gpu_check()` in lab_utils/labs/labNN/gpu_check.py, which the lab declares in its package's
__init__.py (read by lab_utils.instructor.labs; CHECKS below holds the functions themselves); it returns
{check: "passed" | "failed: <reason>" | "skipped: <why>"} (and may add figures under "figures").
Here each one runs in a process of its own, with a time limit, so that one hanging or crashing check (or
TensorFlow's start-up) cannot take the others with it. Without a GPU nothing is started and every check reports
"skipped: no GPU".
"""
from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import labs

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Check:
    """One lab's GPU check: the function, and the seconds it may take."""

    lab: str
    run: Callable[..., dict]
    limit_s: float


CHECKS = [Check(lab, importlib.import_module(check.module).gpu_check, check.limit_s)
          for lab, check in labs.gpu_checks()]
QUICK = {lab for lab, check in labs.gpu_checks() if check.quick}


def gpus() -> list[str]:
    """Names of the CUDA devices torch sees."""
    import torch

    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def plan_check(n_gpus: int) -> str:
    """One rank per GPU goes over NCCL on distinct GPUs; more ranks than GPUs share them over gloo."""
    from ... import hardware

    own, shared = hardware.plan(n_gpus), hardware.plan(n_gpus + 1)
    if own.backend != "nccl" or len(set(own.devices)) != n_gpus:
        return f"failed: {n_gpus} rank(s) on {n_gpus} GPU(s) planned as {own.backend} on {own.devices}"
    if shared.backend != "gloo":
        return f"failed: {n_gpus + 1} ranks on {n_gpus} GPU(s) planned as {shared.backend}"
    return "passed"


def run_check(fn: Callable[..., dict], limit: float, quick: bool) -> dict:
    """fn() in a fresh process (this module run with fn's module and name); a crash, a hang or an exception is reported
    as a failure."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    try:
        done = subprocess.run([sys.executable, "-m", __name__, fn.__module__, fn.__qualname__, "1" if quick else "0"],
                              capture_output=True, text=True, timeout=limit, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {name: f"failed: no answer within {limit:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("GPU-CHECK ")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return {name: f"failed: {last[:300]}"}
    return json.loads(lines[-1][len("GPU-CHECK "):])


def check_all(quick: bool = False, names=None, only=None) -> dict:
    """Every check's verdict (or only those of the labs numbered in `only`), plus the GPUs seen and the seconds it
    took."""
    start = time.monotonic()
    present = gpus() if names is None else names
    results, figures = {}, {}
    if present:
        results["lab 00: hardware plan"] = plan_check(len(present))
    for check in CHECKS:
        lab = check.lab
        if (quick and lab not in QUICK) or (only is not None and lab not in only):
            continue
        if not present:
            results[f"lab {lab}"] = "skipped: no GPU (torch.cuda.is_available() is False)"
            continue
        verdicts = run_check(check.run, check.limit_s, quick)
        figures.update({f"lab {lab}: {k}": v for k, v in verdicts.pop("figures", {}).items()})
        results.update({f"lab {lab}: {k}": v for k, v in verdicts.items()})
    return {"gpus": present, "quick": quick, "seconds": round(time.monotonic() - start, 1), "checks": results,
            "figures": figures}


def main(quick: bool = False, only=None) -> int:
    """Print a table, then the JSON line; non-zero exit when a check failed."""
    report = check_all(quick, only=only)
    print(f"GPUs: {', '.join(report['gpus']) or 'none'}")
    width = max((len(k) for k in report["checks"]), default=10)
    for name, verdict in report["checks"].items():
        print(f"{name:<{width}}  {verdict}")
    for name, value in report["figures"].items():
        print(f"  {name}: {value}")
    print(json.dumps(report))
    return 1 if any(v.startswith("failed") for v in report["checks"].values()) else 0


if __name__ == "__main__":  # the fresh process of run_check: python -m lab_utils.instructor.gpu.registry MODULE NAME QUICK
    fn: Any = importlib.import_module(sys.argv[1])
    for part in sys.argv[2].split("."):
        fn = getattr(fn, part)
    kw = {"quick": sys.argv[3] == "1"} if "quick" in inspect.signature(fn).parameters else {}
    print("GPU-CHECK " + json.dumps(fn(**kw)))
