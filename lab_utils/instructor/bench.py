"""Benchmarks run side by side in one process: medians of interleaved repeats, warm-up excluded."""
from __future__ import annotations

import json
import statistics

import numpy as np
import torch
import torch.nn.functional as F

from .. import data, measure, spec, train


def _plain_epoch(model, loader, optimizer) -> None:
    """The hand-written PyTorch loop the helper is compared with."""
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def _helper_epoch(model, loader, optimizer) -> None:
    """One epoch through lab_utils.train.fit (progress bar off, no evaluation)."""
    train.fit(model, loader, epochs=1, optimizer=optimizer, progress=False)


def _interleaved_medians(setups: dict, repeats: int, run) -> dict:
    """run(*setups[name]) for every setup, `repeats` rounds in alternating order; the median per setup
    (per key and setup when run returns a dict of figures)."""
    values = {name: [] for name in setups}
    for r in range(repeats):
        for name in (list(setups) if r % 2 == 0 else reversed(list(setups))):
            values[name].append(run(*setups[name]))
    if all(isinstance(v[0], dict) for v in values.values()):
        return {name: {key: statistics.median(x[key] for x in v) for key in v[0]} for name, v in values.items()}
    return {name: statistics.median(v) for name, v in values.items()}


def overhead(*, samples: int = 4096, batch_size: int = 64, repeats: int = 15, seed: int = 0) -> dict:
    """Samples/s of lab_utils' loop vs a plain loop on the same model, data and steps."""
    split = data.synthetic_split(samples, 1, image_shape=(1, 28, 28), seed=seed)
    loader = data.make_loader(data.to_dataset(split.x_train, split.y_train), batch_size, seed=seed)
    model_spec = spec.cnn2d_2layer_fullconnected_2layer()
    loops = {"plain": _plain_epoch, "lab_utils": _helper_epoch}
    models = {name: spec.build_torch(model_spec, (1, 28, 28), seed=seed) for name in loops}
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for name, m in models.items()}
    timings = measure.time_interleaved(
        {name: (lambda name=name: loop(models[name], loader, optimizers[name])) for name, loop in loops.items()},
        warmup=1, repeats=repeats)
    rate = {name: measure.samples_per_second(samples, t.median) for name, t in timings.items()}
    return {"benchmark": "overhead", "samples_per_epoch": samples, "batch_size": batch_size, "repeats": repeats,
            "threads": torch.get_num_threads(), "plain_samples_per_s": round(rate["plain"], 1),
            "lab_utils_samples_per_s": round(rate["lab_utils"], 1),
            "ratio": round(rate["lab_utils"] / rate["plain"], 4)}


def print_overhead(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'loop':<10} {'samples/s':>10}   (median of {result['repeats']} interleaved epochs of "
          f"{result['samples_per_epoch']} samples, batch {result['batch_size']}, {result['threads']} threads)")
    print(f"{'plain':<10} {result['plain_samples_per_s']:>10.1f}")
    print(f"{'lab_utils':<10} {result['lab_utils_samples_per_s']:>10.1f}")
    print(f"ratio lab_utils/plain = {result['ratio']:.3f} (1.0 means the helper costs nothing)")
    print(json.dumps(result))


def _print_rates(result: dict, width: int, what: str) -> None:
    """The header and one line per `samples_per_s[setup]` entry of a benchmark result."""
    print(f"{'setup':<{width}} {'samples/s':>10}   ({what})")
    for key, value in result.items():
        if key.startswith("samples_per_s["):
            print(f"{key[len('samples_per_s['):-1]:<{width}} {value:>10.1f}")


def ddp(*, world_size: int = 2, repeats: int = 3, steps: int = 20, global_batch: int = 256, seed: int = 0) -> dict:
    """DDP with `world_size` single-thread ranks vs one process with 1 and with `world_size` threads, interleaved."""
    from .. import ddp as ddp_mod
    from ..launch import launch

    cfg = ddp_mod.DDPConfig(model="cnn2d_3layer_fullconnected_3layer", dataset="synthetic", image_side=28,
                            synthetic_samples=max(4096, global_batch * (steps + 1)), global_batch=global_batch,
                            max_steps=steps, evaluate=False, seed=seed, time_allreduces=True)
    setups = {"1 rank x 1 thread": (1, 1), f"1 rank x {world_size} threads": (1, world_size),  # (ranks, threads)
              f"{world_size} ranks x 1 thread": (world_size, 1)}

    def run(ranks, threads):
        outs = [r[0] for r in launch(ddp_mod.train_worker, ranks, args=([cfg],), threads=threads, timeout=300)]
        return {"samples_per_s": outs[0]["samples_per_s"], "allreduce_ms": statistics.mean(o["allreduce_ms"] for o in outs)}

    figures = _interleaved_medians(setups, repeats, run)
    median = {name: f["samples_per_s"] for name, f in figures.items()}
    check = ddp_mod.DDPConfig(max_steps=3, evaluate=False, return_weights=True, seed=seed)
    ranks = launch(ddp_mod.train_worker, world_size, args=([check],), timeout=300)
    reference = ddp_mod.baseline_weights(check, world_size, steps=3)
    diff = max(float(abs(r[0]["weights"] - reference).max()) for r in ranks)
    names = list(setups)
    return {"benchmark": "ddp", "world_size": world_size, "global_batch": global_batch, "steps": steps,
            "repeats": repeats, "model": cfg.model, "setups": {n: list(setups[n]) for n in names},
            **{f"samples_per_s[{n}]": round(median[n], 1) for n in names},
            **{f"step_ms[{n}]": round(1e3 * global_batch / median[n], 2) for n in names},
            **{f"allreduce_ms[{n}]": round(figures[n]["allreduce_ms"], 2) for n in names},
            "speedup_vs_1x1": round(median[names[2]] / median[names[0]], 3),
            "speedup_vs_1x2": round(median[names[2]] / median[names[1]], 3),
            "weights_max_abs_diff": diff}


def ddp_time_split(result: dict) -> str:
    """One sentence: where the multi-rank step's time went (compute vs all-reduce), against one process's step."""
    n = result["world_size"]
    many, threads = f"{n} ranks x 1 thread", f"1 rank x {n} threads"
    step, comm = result[f"step_ms[{many}]"], result[f"allreduce_ms[{many}]"]
    return (f"A {n}-rank step took {step:.1f} ms: {step - comm:.1f} ms outside the gradient all-reduce (data, forward, "
            f"backward, update) and {comm:.1f} ms ({comm / step:.0%}) "
            f"in it, waiting for the slower rank included; one process with {n} threads took "
            f"{result[f'step_ms[{threads}]']:.1f} ms for the same global batch")


def print_ddp(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    _print_rates(result, 22, f"{result['model']}, global batch {result['global_batch']}, median step time of "
                             f"{result['steps']} steps, median of {result['repeats']} interleaved launches")
    print(f"speedup of {result['world_size']} ranks: {result['speedup_vs_1x1']:.2f}x vs 1 thread, "
          f"{result['speedup_vs_1x2']:.2f}x vs one process using {result['world_size']} threads")
    print(ddp_time_split(result))
    print(f"DDP vs single process after 3 steps on the same global batches: max |weight diff| = {result['weights_max_abs_diff']:.2e}")
    print(json.dumps(result))


def pipeline(*, batch_size: int = 1024, repeats: int = 5, split=None, seed: int = 0,
             model: str = "cnn2d_2layer_fullconnected_2layer") -> dict:
    """2 stages: naive split, GPipe with M = 2, 4, 8 and 1F1B with M = 8, interleaved in one launch."""
    from .. import pipeline as pl

    model_spec = spec.preset(model)
    times = pl.layer_times(model_spec, (1, 28, 28), batch_size=128, seed=seed)
    split = tuple(split) if split else pl.balanced_split(times, 2)
    common = dict(batch_size=batch_size, split=split, model=model, seed=seed)
    runs = [pl.PipelineRun("naive", "naive", 1, return_grads=True, **common)]
    runs += [pl.PipelineRun(f"gpipe M={m}", "gpipe", m, return_grads=(m == 8), **common) for m in (2, 4, 8)]
    runs += [pl.PipelineRun("1f1b M=8", "1f1b", 8, return_grads=True, **common)]
    measured = pl.run_pipelines(runs, 2, rounds=repeats, warmup=1)
    _, _, grads = pl.reference(runs[0])
    rows = {}
    for label, m in measured.items():
        schedule = pl.make_schedule(m.run.schedule, 2, m.run.micro_batches)
        fwd, bwd = pl.mean_op_seconds(m.typical(), 2)
        rows[label] = {"makespan_ms": round(m.makespan * 1e3, 2), "bubble": round(m.bubble, 4),
                       "bubble_theory": round(schedule.theoretical_bubble, 4),
                       "bubble_ideal_same_op_times": round(pl.bubble_fraction(pl.simulate(schedule, fwd, bwd), 2), 4),
                       "busy_ms_per_stage": [round(sum(i.seconds for i in m.typical() if i.row == f"stage {s}") * 1e3, 1)
                                             for s in range(2)],
                       "peak_activation_mb_per_stage": [round(b / 1e6, 2) for b in m.peak_activation_bytes]}
    gpipe = [k for k in rows if k.startswith("gpipe")]
    diffs = [float(np.abs(m.grads - grads).max()) for m in measured.values() if m.grads is not None]
    return {"benchmark": "pipeline", "stages": 2, "model": model, "batch_size": batch_size, "repeats": repeats,
            "split": list(split), "layer_share_per_stage": [round(x, 3) for x in pl.stage_shares(times, split)],
            "configs": rows,
            "speedup_gpipe_m8_vs_naive": round(rows["naive"]["makespan_ms"] / rows["gpipe M=8"]["makespan_ms"], 3),
            "bubble_abs_error_max": round(max(abs(rows[k]["bubble"] - rows[k]["bubble_theory"]) for k in gpipe), 4),
            "bubble_abs_error_vs_ideal_max": round(max(abs(rows[k]["bubble"] - rows[k]["bubble_ideal_same_op_times"])
                                                       for k in gpipe), 4),
            "grad_max_abs_diff": max(diffs)}


def print_pipeline(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"2 stages of {result['model']}, split before layer {result['split']} (layer-time shares "
          f"{result['layer_share_per_stage']}), batch {result['batch_size']}, median of {result['repeats']} interleaved steps")
    print(f"{'config':<12} {'makespan ms':>11} {'bubble':>7} {'theory':>7} {'ideal*':>7} {'busy ms/stage':>15} {'act. MB/stage':>15}")
    for label, r in result["configs"].items():
        print(f"{label:<12} {r['makespan_ms']:>11.1f} {r['bubble']:>7.3f} {r['bubble_theory']:>7.3f} "
              f"{r['bubble_ideal_same_op_times']:>7.3f} {str(r['busy_ms_per_stage']):>15} {str(r['peak_activation_mb_per_stage']):>15}")
    print("ideal*: the same schedule simulated with this run's measured op times (imbalance included, transfers not)")
    print(f"GPipe M=8 vs naive: {result['speedup_gpipe_m8_vs_naive']:.2f}x; largest |bubble - theory| over GPipe runs "
          f"{result['bubble_abs_error_max']:.3f} (vs ideal* {result['bubble_abs_error_vs_ideal_max']:.3f}); "
          f"max |grad diff| vs the unsplit model {result['grad_max_abs_diff']:.2e}")
    print(json.dumps(result))


def tf(*, repeats: int = 3, steps: int = 20, global_batch: int = 512, seed: int = 0) -> dict:
    """One TF worker (default strategy) vs 2 MultiWorkerMirroredStrategy workers, launches interleaved."""
    from .. import tf_distribute as tfd

    setups = {"1 worker": (1, False), "2 workers": (2, True)}
    weights = []

    def samples_per_s(workers, multi):
        cfg = tfd.TFTrainConfig(steps=steps, global_batch=global_batch, seed=seed, multiworker=multi)
        results = tfd.launch_workers(tfd.train_worker, workers, args=(cfg,), timeout=300)
        if multi:
            weights[:] = [res["weights"] for res in results]
        return global_batch / statistics.median(results[0]["step_seconds"][3:])

    median = _interleaved_medians(setups, repeats, samples_per_s)
    return {"benchmark": "tf", "model": tfd.TFTrainConfig.model, "global_batch": global_batch, "steps": steps,
            "repeats": repeats, **{f"samples_per_s[{n}]": round(v, 1) for n, v in median.items()},
            "speedup_multiworker": round(median["2 workers"] / median["1 worker"], 3),
            "weights_max_abs_diff": float(np.abs(weights[0] - weights[1]).max())}


def print_tf(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    _print_rates(result, 10, f"{result['model']}, custom loop, global batch {result['global_batch']}, median step "
                             f"of {result['steps']} (first 3 not timed), median of {result['repeats']} interleaved launches")
    print(f"2 MultiWorkerMirroredStrategy workers vs 1: {result['speedup_multiworker']:.2f}x; "
          f"max |weight diff| between the workers {result['weights_max_abs_diff']:.1e}")
    print(json.dumps(result))
