"""Lab 01's benchmarks: what lab_utils' training loop costs against a plain PyTorch loop (overhead), and labs 01 and
03 quiet and beside a classmate (a process spinning on one core), interleaved: how much slower each runs beside it
(the course's target: at most 2x)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

from ... import conditions, data, measure, spec, train
from ...launch import launch
from ..lab03.lesson import DDPConfig, ddp_worker

TARGET = 2.0  # beside one busy core, a lab may take at most this many times its quiet time
BURNER_LIMIT_S = 900  # the burner ends by itself after this long, whatever happens to this process
SPIN = "import time\nend = time.time() + {limit}\nwhile time.time() < end:\n    pass"
QUIET, BESIDE = "quiet", "beside a burner"


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


@contextlib.contextmanager
def burner():
    """A classmate: a process spinning on one core for the block, killed after it. Started through a shell that exits
    at once, so it is no descendant of this process: the lab's measuring windows count it among other programs, as
    they would a classmate's (a child would be counted as the lab's own CPU, and fit_threads would not see it)."""
    shell = subprocess.run(["/bin/sh", "-c", '"$0" -c "$1" >/dev/null 2>&1 & echo $!', sys.executable,
                            SPIN.format(limit=BURNER_LIMIT_S)], capture_output=True, text=True, check=True)
    pid = int(shell.stdout.split()[-1])
    try:
        time.sleep(0.3)  # running before the lab starts, as a classmate's job is
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def lab01_steps(steps: int, batch_size: int = 64, seed: int = 0) -> tuple[float, int]:
    """(median seconds per training step, intra-op threads) of lab 01's CNN, threads fitted as a lab's start fits them."""
    before = torch.get_num_threads()
    conditions.fit_threads()
    threads = torch.get_num_threads()
    try:
        images, labels = data.synthetic_images(batch_size, image_shape=(1, 28, 28), seed=seed)
        x, y = torch.from_numpy(images), torch.from_numpy(labels).long()
        model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 28, 28), seed=seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        timing = measure.time_it(lambda: train.train_step(model, x, y, optimizer), warmup=3, repeats=steps)
        return timing.median, threads
    finally:
        torch.set_num_threads(before)


def lab03_ddp_step(steps: int, global_batch: int = 128, seed: int = 0) -> float:
    """Median seconds per step of lab 03's DDP worker on 2 single-thread ranks."""
    synthetic = {"kind": "synthetic", "n_train": global_batch * (steps + 3), "n_test": 64, "side": 28, "seed": seed}
    cfg = DDPConfig(data=synthetic, layers=spec.cnn2d_2layer_fullconnected_2layer(), epochs=1,
                    per_rank_batch=global_batch // 2, lr=0.01, seed=seed, warmup_steps=0, accumulation=1,
                    timeout_s=240, checkpoint=None)
    ranks = launch(ddp_worker, 2, args=(replace(cfg),), threads=1, timeout=300)
    return global_batch / ranks[0]["samples_per_s"]


def measure_classmates(*, repeats: int = 3, steps: int = 20) -> dict:
    """Lab 01's steps and lab 03's 2-rank DDP step, quiet and beside a burner, in alternating rounds."""
    step_s: dict[tuple[str, str], list[float]] = {(w, c): [] for w in ("lab 01", "lab 03") for c in (QUIET, BESIDE)}
    threads: dict[str, list[int]] = {QUIET: [], BESIDE: []}
    for condition in measure.alternating_rounds([QUIET, BESIDE], repeats):
        with burner() if condition == BESIDE else contextlib.nullcontext():
            seconds, fitted = lab01_steps(steps)
            step_s[("lab 01", condition)].append(seconds)
            threads[condition].append(fitted)
            step_s[("lab 03", condition)].append(lab03_ddp_step(steps))
    rows = []
    for workload in ("lab 01", "lab 03"):
        quiet, beside = (statistics.median(step_s[(workload, c)]) for c in (QUIET, BESIDE))
        rows.append({"workload": workload, "quiet_step_ms": round(quiet * 1e3, 2),
                     "beside_step_ms": round(beside * 1e3, 2), "ratio": round(beside / quiet, 3),
                     "spread_quiet": round(measure.spread(step_s[(workload, QUIET)]), 3),
                     "spread_beside": round(measure.spread(step_s[(workload, BESIDE)]), 3)})
    load = conditions.taken(reset=True)
    return {"benchmark": "classmates", "repeats": repeats, "steps": steps, "target": TARGET, "rows": rows,
            "lab01_threads": {c: statistics.median(t) for c, t in threads.items()},
            "machine": load.line() if load else ""}


def show_classmates(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'workload':<9} {'quiet ms/step':>14} {'beside ms/step':>15} {'ratio':>7}   (median of {result['repeats']} "
          f"interleaved rounds of {result['steps']} steps; the burner spins on one core)")
    labels = {"lab 01": "lab 01 training steps", "lab 03": "lab 03 DDP, 2 ranks"}
    for row in result["rows"]:
        verdict = "within" if row["ratio"] <= result["target"] else "ABOVE"
        print(f"{row['workload']:<9} {row['quiet_step_ms']:>14.2f} {row['beside_step_ms']:>15.2f} {row['ratio']:>6.2f}x"
              f"   {verdict} the {result['target']:g}x target ({labels[row['workload']]}; spreads "
              f"{row['spread_quiet']:.0%} / {row['spread_beside']:.0%})")
    print(f"lab 01's intra-op threads fitted at its start: {result['lab01_threads'][QUIET]:g} quiet, "
          f"{result['lab01_threads'][BESIDE]:g} beside the burner")
    if result["machine"]:
        print(result["machine"])
    print(json.dumps(result))
