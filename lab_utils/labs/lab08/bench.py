"""`bench async`: lab 08's synchronous and asynchronous parameter servers, interleaved.

The runs are lab 08's run_all, serve and work (lab_utils.labs.lab08.lesson, generated from its notebook), launched by
lab_utils.labs.lab08.parameter_server.run."""
from __future__ import annotations

import json
import statistics
from dataclasses import replace

import numpy as np

from ... import detectors, hardware, measure
from ...compare import max_abs_diff
from .parameter_server import MODEL, MODES, PSConfig, interleaved, run, single_process_weights
from .lesson import run_all, serve, work


# ---- reading the runs ------------------------------------------------------------------------------------------------

def compute_share(result: dict) -> float:
    """In one run, the first worker's median compute time per gradient over its mean iteration time (run time over
    its gradients): how much of an iteration is compute rather than messaging and waiting."""
    order, workers = list(result["order"]), result.get("workers") or []
    if not workers or not order.count(1) or not result["seconds"]:
        return float("nan")
    return workers[0]["compute_ms"] / 1e3 / (result["seconds"] / order.count(1))


def effective_slowdown(result: dict, straggler: int) -> float:
    """From an asynchronous run: how many gradients each other worker had applied per straggler gradient (the
    slowdown as the server saw it: it also holds how much slower the other workers were, e.g. worker 1 sharing the
    server's core); nan when the straggler had none applied."""
    order = list(result["order"])
    others = [w for w in set(order) if w != straggler]
    if not order.count(straggler) or not others:
        return float("nan")
    return statistics.mean(order.count(w) for w in others) / order.count(straggler)


def rates_by_setting(runs) -> dict:
    """{(mode, straggler factor): [samples/s of each repeat]} for plain (not damped) runs with a label-free config."""
    rates: dict[tuple, list[float]] = {}
    for r in runs:
        c = r["config"]
        if not c.damped and not c.label:
            rates.setdefault((c.mode, c.straggler_factor), []).append(r["samples_per_s"])
    return rates



# ---- bench async ------------------------------------------------------------------------------------------------------

def bench(*, n_workers: int = 2, repeats: int = 3, gradients: int = 96, batch_size: int = 256,
          factors=(1, 2, 4), seed: int = 0, timeout_s: float = 600.0) -> dict:
    """Sync vs async throughput at each straggler factor (runs interleaved in one launch), sync vs one process,
    sync determinism and async staleness."""
    base = PSConfig(gradients=gradients, batch_size=batch_size, seed=seed)
    check = replace(base, mode="sync", gradients=10 * n_workers, warmup=0, label="check")
    per_round = [replace(base, mode=m, straggler_factor=float(f)) for f in factors for m in MODES]

    runs = run(run_all, [check] + interleaved(per_round, repeats), serve, work, n_workers, timeout_s)
    single = single_process_weights(check, n_workers, check.gradients // n_workers)
    rates = rates_by_setting(runs[1:])
    syncs = [r["weights"] for r in runs[1:] if r["config"].mode == "sync"]
    result = {"benchmark": "async", "n_workers": n_workers, "repeats": repeats, "gradients": gradients,
              "batch_size": batch_size, "dataset": base.dataset, "model": MODEL}
    for f in factors:
        sync, asyn = rates[("sync", float(f))], rates[("async", float(f))]
        ratios = measure.paired_ratios(asyn, sync, higher_is_better=True)
        result[f"samples_per_s[sync, straggler={f}]"] = round(statistics.median(sync), 1)
        result[f"samples_per_s[async, straggler={f}]"] = round(statistics.median(asyn), 1)
        result[f"async_vs_sync_throughput[straggler={f}]"] = round(statistics.median(asyn) / statistics.median(sync), 3)
        result[f"async_vs_sync_throughput_spread[straggler={f}]"] = round(measure.spread(ratios), 3)
        async_runs = [r for r in runs[1:] if r["config"].mode == "async" and r["config"].straggler_factor == f]
        result[f"effective_slowdown[straggler={f}]"] = round(statistics.median(
            r["workers"][-1]["slowdown"] for r in async_runs + [r for r in runs[1:] if r["config"].mode == "sync"
                                                                 and r["config"].straggler_factor == f]), 3)
        result[f"gradient_ratio[straggler={f}]"] = round(statistics.median(
            effective_slowdown(r, n_workers) for r in async_runs), 3)
        result[f"compute_share[straggler={f}]"] = round(statistics.median(compute_share(r) for r in async_runs), 3)
    staleness = {f: [s for r in runs[1:] if r["config"].mode == "async" and r["config"].straggler_factor == f
                     for s in r["staleness"]] for f in map(float, factors)}
    result.update({
        "sync_vs_single_max_abs_diff": max_abs_diff(runs[0]["weights"], single),
        "sync_deterministic": bool(all(np.array_equal(w, syncs[0]) for w in syncs)),
        "async_staleness_mean": round(float(np.mean([s for v in staleness.values() for s in v])), 3),
        **{f"async_staleness_mean[straggler={f:g}]": round(float(np.mean(v)), 3) for f, v in staleness.items()},
        "server_shares_a_core": n_workers + 1 > hardware.usable_cpu_count() and not hardware.detect_gpus(),
    })
    return result


def print_bench(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    factors = [k[len("async_vs_sync_throughput[straggler="):-1] for k in result if k.startswith("async_vs_sync_throughput[")]
    print(f"{result['n_workers']} workers + 1 server, {result['model']} on {result['dataset']}, batch "
          f"{result['batch_size']} per gradient, {result['gradients']} gradients per run, median of "
          f"{result['repeats']} interleaved runs")
    print(f"{'straggler':>9} {'effective':>9} {'sync grad/s':>12} {'async grad/s':>13} {'async/sync':>11} "
          f"{'spread':>7} {'staleness':>10} {'compute share':>14}")
    for f in factors:
        ratio = result[f"async_vs_sync_throughput[straggler={f}]"]
        print(f"{f:>9} {result[f'effective_slowdown[straggler={f}]']:>8.2f}x "
              f"{result[f'samples_per_s[sync, straggler={f}]'] / result['batch_size']:>12.1f} "
              f"{result[f'samples_per_s[async, straggler={f}]'] / result['batch_size']:>13.1f} {ratio:>10.2f}x "
              f"{result[f'async_vs_sync_throughput_spread[straggler={f}]']:>6.0%} "
              f"{result[f'async_staleness_mean[straggler={f}]']:>10.2f} {result[f'compute_share[straggler={f}]']:>13.0%}")
    print("effective: the straggler's measured slowdown over its whole pull-compute-push (its iteration's wall time "
          "over the time it was busy pulling, computing and pushing); compute share: worker 1's compute time over its "
          "iteration time in the async runs (the rest is messaging and waiting for the server, which shares its core)")
    noise = detectors.noise_line(result[f"async_vs_sync_throughput_spread[straggler={f}]"] for f in factors)
    if noise:
        print(noise)
    if result["server_shares_a_core"]:
        print(f"note: {result['n_workers'] + 1} processes on {hardware.usable_cpu_count()} cores: the server shares "
              "worker 1's core (it mostly waits for messages; the straggler's sleep holds no core)")
    print(f"sync vs one process on the global batch: max |weight diff| {result['sync_vs_single_max_abs_diff']:.1e}; "
          f"every sync run gave identical weights: {result['sync_deterministic']}")
    print(json.dumps(result))
