"""`bench inference`: lab 09's dynamic batching, worker pool, torch.compile and bf16.

The batcher, its forward pass, the model workers and their dispatcher are lab 09's (lab_utils.labs.lab09.lesson,
generated from its notebook)."""
from __future__ import annotations

import contextlib
import functools
import json
import statistics
import time

from ... import detectors
from ... import measure
from .serving import (DEFAULT_SHAPE, wide_head_model, compile_unavailable, fresh_compile_cache, interleaved_loads,
    request_images)
from .lesson import PoolConfig, answer_batch, batcher, serving_job


def paired_speedup(slow: measure.Timing, fast: measure.Timing) -> tuple[float, float]:
    """Speedup of `fast` over `slow` from repeats timed side by side: median of the per-round ratios, their spread."""
    ratios = measure.paired_ratios(fast, slow)
    return statistics.median(ratios), measure.spread(ratios)


# ---- lab 09's batcher and worker pool, set up for the bench, the GPU check and the tests ---------------------------------

def local_runner(model, device: str = "cpu"):
    """run_batch for the batcher: lab 09's answer_batch on this model (one forward pass in the batcher's thread)."""

    return functools.partial(answer_batch, model=model, device=device)


def make_batcher(run_batch, max_batch: int, max_wait_ms: float, image_shape=DEFAULT_SHAPE):
    """batcher(requests, stop) for run_load: lab 09's batcher with these settings."""

    return functools.partial(batcher, run_batch=run_batch, max_batch=max_batch, max_wait_s=max_wait_ms / 1e3,
                             input_shape=tuple(image_shape))


def pool_run(*, width: int = 2048, image_side: int = 28, seed: int = 0, requests: int = 1500, max_batch: int = 64,
             rounds: int = 2, timeout_s: float = 300) -> dict:
    """Lab 09's serving_job on 3 processes (rank 0 batches, ranks 1 and 2 run the model): rank 0's result, its
    {"1 worker": [LoadSummary per round], "2 workers": [...], "ids": ..., "outputs": ...}. A round with a failed or
    unanswered request is an error."""
    from ...launch import launch

    shape = (1, image_side, image_side)
    cfg = PoolConfig(width, shape, seed, max_batch, timeout_s=60)
    rank0 = launch(serving_job, 3, args=(batcher, request_images(256, shape, seed), rounds, requests, cfg),
                   timeout=timeout_s, pin_cores=False)[0]
    for name in ("1 worker", "2 workers"):
        for summary in rank0[name]:
            if summary.unanswered or summary.failed:
                raise RuntimeError(f"{name}: {summary.text()}; batcher error: {summary.batcher_error}")
    return rank0


# ---- bench inference ---------------------------------------------------------------------------------------------------

def bench(*, repeats: int = 3, duration_s: float = 0.8, width: int = 2048, image_side: int = 28, max_batch: int = 64,
          pool_requests: int = 1500, threads: int = 1, compile_model: bool = True, fresh_cache: bool = True,
          seed: int = 0) -> dict:
    """Dynamic batching vs batch-1 serving, 2 model workers vs 1, torch.compile and bf16 against eager; the
    in-process model uses `threads` intra-op threads (one core, as each worker process; the load generator needs
    another)."""
    with measure.intra_op_threads(threads):
        return _bench(repeats, duration_s, width, image_side, max_batch, pool_requests, compile_model, fresh_cache, seed)


def _bench(repeats, duration_s, width, image_side, max_batch, pool_requests, compile_model, fresh_cache, seed) -> dict:
    import torch

    shape = (1, image_side, image_side)
    model, images = wide_head_model(width, shape, seed), request_images(256, shape, seed)
    x1, xb = images[:1], images[:max_batch].contiguous()
    with torch.inference_mode():
        base = measure.time_interleaved({"1": lambda: model(x1), "b": lambda: model(xb)}, warmup=2, repeats=7)
    batch1_capacity, batched_capacity = 1 / min(base["1"].times), max_batch / min(base["b"].times)  # the most they serve
    offered = min(3.5 * batch1_capacity, 0.8 * batched_capacity)  # above what batch-1 serving sustains, below batching's
    servers = {"batch-1": make_batcher(local_runner(model), 1, 0, shape),
               "max_wait=5": make_batcher(local_runner(model), max_batch, 5, shape)}
    stats = interleaved_loads(servers, {"high": offered}, images=images, rounds=repeats, duration_s=duration_s, seed=seed)
    b1, dyn = stats[("batch-1", "high")], stats[("max_wait=5", "high")]
    ratios = measure.paired_ratios([d.achieved_rps for d in dyn.runs], [b.achieved_rps for b in b1.runs],
                                   higher_is_better=True)

    pool = pool_run(width=width, image_side=image_side, seed=seed, requests=pool_requests, max_batch=max_batch,
                    rounds=repeats)
    one, two = ([s.achieved_rps for s in pool[name]] for name in ("1 worker", "2 workers"))
    pool_ratios = measure.paired_ratios(two, one, higher_is_better=True)

    result = {"benchmark": "inference", "model": f"wide_head_cnn(width={width})", "image_side": image_side,
              "threads": torch.get_num_threads(), "repeats": repeats, "max_batch": max_batch,
              "batch1_capacity_rps": round(batch1_capacity, 1), "offered_rps": round(offered, 1),
              "throughput_rps[batch-1]": round(b1.achieved_rps, 1), "throughput_rps[max_wait=5]": round(dyn.achieved_rps, 1),
              "dynamic_vs_batch1_throughput": round(statistics.median(ratios), 3),
              "p99_ms[max_wait=5]": round(dyn.p99_ms, 2), "p99_ms[batch-1]": round(b1.p99_ms, 2),
              "batch1_saturated": b1.saturated, "dynamic_saturated": dyn.saturated,
              "throughput_rps[1 worker]": round(statistics.median(one), 1),
              "throughput_rps[2 workers]": round(statistics.median(two), 1),
              "two_workers_vs_one": round(statistics.median(pool_ratios), 3)}
    spreads = {"dynamic_vs_batch1_throughput": measure.spread(ratios), "p99_ms[max_wait=5]": dyn.spread_p99,
               "two_workers_vs_one": measure.spread(pool_ratios)}

    candidates = {"eager": lambda: model(xb)}

    def bf16():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(xb)
    candidates["bf16"] = bf16
    if compile_model and not compile_unavailable():
        with fresh_compile_cache() if fresh_cache else contextlib.nullcontext():
            compiled = torch.compile(model, dynamic=False)
            start = time.perf_counter()
            with torch.inference_mode():
                compiled(xb)
            result["compile_first_call_s"] = round(time.perf_counter() - start, 2)
            result["compile_cache"] = "fresh: a cold start" if fresh_cache else "torch's default: may hold earlier compiles"
        candidates["compiled"] = lambda: compiled(xb)
    with torch.inference_mode():
        timings = measure.time_interleaved(candidates, warmup=2, repeats=max(5, 2 * repeats + 1))
    result["bf16_speedup"], spreads["bf16_speedup"] = paired_speedup(timings["eager"], timings["bf16"])
    if "compiled" in timings:
        result["compile_speedup"], spreads["compile_speedup"] = paired_speedup(timings["eager"], timings["compiled"])
    else:
        result["compile_speedup"], spreads["compile_speedup"] = None, None
        result["compile_skipped"] = compile_unavailable() or "compile_model=False"
    for key in ("bf16_speedup", "compile_speedup"):
        result[key] = round(result[key], 3) if result[key] is not None else None
    result["spread"] = {k: (round(v, 3) if v is not None else None) for k, v in spreads.items()}
    result["flags"] = measure.plausibility(speedup=result["two_workers_vs_one"], devices=2)
    return result


def print_bench(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{result['model']}, {result['image_side']}x{result['image_side']} images, {result['threads']} threads, "
          f"medians of {result['repeats']} interleaved repeats (spread = (max - min) / median)")
    print(f"batch-1 serving sustains about {result['batch1_capacity_rps']:.0f} requests/s (1 / its fastest batch-1 forward); "
          f"offered load {result['offered_rps']:.0f}/s")
    s = result["spread"]
    for name, label, saturated in (("batch-1", "batch-1 serving", "batch1_saturated"),
                                   ("max_wait=5", "max_wait=5 ms", "dynamic_saturated")):
        print(f"  {label:<18}{result[f'throughput_rps[{name}]']:8.0f} req/s  p99 {result[f'p99_ms[{name}]']:8.1f} ms"
              + ("  (saturated)" if result[saturated] else ""))
    print(f"  dynamic vs batch-1: {result['dynamic_vs_batch1_throughput']:.2f}x (spread {s['dynamic_vs_batch1_throughput']:.0%})")
    print(f"  model workers: 1 -> {result['throughput_rps[1 worker]']:.0f} req/s, 2 -> {result['throughput_rps[2 workers]']:.0f}"
          f" req/s: {result['two_workers_vs_one']:.2f}x (spread {s['two_workers_vs_one']:.0%})")
    if result["compile_speedup"] is not None:
        print(f"  torch.compile: first call {result['compile_first_call_s']:.1f} s ({result['compile_cache']}), "
              f"steady state {result['compile_speedup']:.2f}x eager (spread {s['compile_speedup']:.0%})")
    else:
        print(f"  torch.compile: not run ({result['compile_skipped']})")
    print(f"  bf16 autocast: {result['bf16_speedup']:.2f}x eager fp32 (spread {s['bf16_speedup']:.0%})")
    for flag in detectors.impossible(result["flags"]):
        print(f"  {detectors.flag_text(flag)}")
    for note in detectors.notes(result["flags"]):
        print(f"  note: {note}")
    print(json.dumps(result))
