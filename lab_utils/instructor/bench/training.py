"""Benchmarks of lessons 00, 03, 05 and 11 run side by side in one process: medians of interleaved repeats, warm-up excluded."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from ... import data, measure, spec, train
from ...compare import max_abs_diff
from ...labs.lab03.lesson import DDPConfig, ddp_worker
from ...labs.lab11 import lesson as lab11


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


@dataclass(frozen=True)
class Setup:
    """One way of running the same training: how many ranks, and how many threads each."""

    name: str
    ranks: int
    threads: int


@dataclass
class SetupFigures:
    """What one setup measured over the interleaved repeats."""

    setup: Setup
    samples_per_s: list[float] = field(default_factory=list)
    allreduce_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return statistics.median(self.samples_per_s)

    @property
    def spread(self) -> float:
        return measure.spread(self.samples_per_s)

    def as_json(self, global_batch: int) -> dict:
        return {"name": self.setup.name, "ranks": self.setup.ranks, "threads": self.setup.threads,
                "samples_per_s": round(self.rate, 1), "spread": round(self.spread, 3),
                "step_ms": round(1e3 * global_batch / self.rate, 2),
                "allreduce_ms": round(statistics.median(self.allreduce_ms), 2) if self.allreduce_ms else None}


def _interleaved(setups, repeats: int, run) -> list[SetupFigures]:
    """run(setup, figures) for every setup, `repeats` rounds in alternating order."""
    figures = [SetupFigures(s) for s in setups]
    for f in measure.alternating_rounds(figures, repeats):
        run(f.setup, f)
    return figures


def ddp(*, world_size: int = 2, repeats: int = 3, steps: int = 20, global_batch: int = 256, seed: int = 0) -> dict:
    """DDP with `world_size` single-thread ranks vs one process with 1 and with `world_size` threads, interleaved."""
    from ...launch import launch

    synthetic = {"kind": "synthetic", "n_train": global_batch * (steps + 1), "n_test": 64, "side": 28, "seed": seed}
    cfg = DDPConfig(data=synthetic, layers=spec.cnn2d_3layer_fullconnected_3layer(), epochs=1,
                    per_rank_batch=global_batch, lr=0.01, seed=seed, warmup_steps=0, accumulation=1, timeout_s=240,
                    checkpoint=None)  # per_rank_batch: each setup splits the global batch over its ranks
    setups = [Setup("1 rank x 1 thread", 1, 1), Setup(f"1 rank x {world_size} threads", 1, world_size),
              Setup(f"{world_size} ranks x 1 thread", world_size, 1)]

    def run(setup, figures):
        ranks = launch(ddp_worker, setup.ranks, args=(replace(cfg, per_rank_batch=global_batch // setup.ranks),),
                       threads=setup.threads, timeout=300)
        figures.samples_per_s.append(ranks[0]["samples_per_s"])
        if setup.ranks > 1:
            figures.allreduce_ms.append(statistics.mean(r["allreduce_ms"] for r in ranks))

    one, threaded, many = _interleaved(setups, repeats, run)
    check = replace(cfg, data={"kind": "digits", "n_train": 256}, layers=spec.cnn2d_2layer_fullconnected_2layer(),
                    per_rank_batch=16)
    ranks = launch(ddp_worker, world_size, args=(check,), timeout=300)
    reference = launch(ddp_worker, 1, args=(replace(check, per_rank_batch=16 * world_size, lr=check.lr * world_size),),
                       timeout=300)[0]
    diff = max(max_abs_diff(r["weights"], reference["weights"]) for r in ranks)
    return {"benchmark": "ddp", "world_size": world_size, "global_batch": global_batch, "steps": steps,
            "repeats": repeats, "model": "cnn2d_3layer_fullconnected_3layer",
            "setups": [f.as_json(global_batch) for f in (one, threaded, many)],
            "speedup_vs_1x1": round(many.rate / one.rate, 3), "speedup_vs_1x2": round(many.rate / threaded.rate, 3),
            "weights_max_abs_diff": diff,
            "flags": measure.plausibility(speedup=many.rate / one.rate, devices=world_size)}


def print_ddp(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'setup':<22} {'samples/s':>10} {'spread':>7} {'step ms':>8} {'all-reduce ms':>14}   ({result['model']}, global "
          f"batch {result['global_batch']}, median step of {result['steps']}, median of {result['repeats']} interleaved launches)")
    for s in result["setups"]:
        comm = f"{s['allreduce_ms']:.2f}" if s["allreduce_ms"] is not None else "-"
        print(f"{s['name']:<22} {s['samples_per_s']:>10.1f} {s['spread']:>6.0%} {s['step_ms']:>8.2f} {comm:>14}")
    print(measure.flagged(f"speedup of {result['world_size']} ranks: {result['speedup_vs_1x1']:.2f}x vs 1 thread, "
                          f"{result['speedup_vs_1x2']:.2f}x vs one process using {result['world_size']} threads",
                          result["flags"]))
    print(f"DDP vs one process on the same global batches: max |weight diff| = {result['weights_max_abs_diff']:.2e}")
    print(json.dumps(result))


TF_MODEL = "cnn2d_2layer_fullconnected_2layer"  # bench tf's CNN


def tf(*, repeats: int = 3, steps: int = 20, global_batch: int = 512, seed: int = 0) -> dict:
    """One TF worker (default strategy) vs 2 MultiWorkerMirroredStrategy workers, launches interleaved."""
    from ... import tf_distribute as tfd

    tfd.import_tensorflow()  # quietly: lab 05's module imports TensorFlow
    from ...labs.lab05.lesson import mwms_worker  # lab 05's worker, generated from its notebook

    cfg = {"data": {"kind": "synthetic", "n_train": global_batch * steps, "n_test": 512, "side": 28, "seed": seed},
           "model": TF_MODEL, "global_batch": global_batch, "lr": 0.05, "seed": seed, "steps": steps}
    runs = {}  # ranks -> every worker's results of the last run (the same global batches: one worker must end where two do)

    def run(setup, figures):
        results = tfd.launch_workers(mwms_worker, setup.ranks, args=(cfg,), timeout=300)
        runs[setup.ranks] = results
        figures.samples_per_s.append(tfd.step_rate(global_batch, [results[0]["step_seconds"][3:]]).samples_per_s)

    one, two = _interleaved([Setup("1 worker", 1, 1), Setup("2 workers", 2, 1)], repeats, run)
    return {"benchmark": "tf", "model": TF_MODEL, "global_batch": global_batch, "steps": steps,
            "repeats": repeats, "setups": [f.as_json(global_batch) for f in (one, two)],
            "speedup_multiworker": round(two.rate / one.rate, 3),
            "replicas_in_sync": [w["replicas"] for w in runs[2]],
            "weights_max_abs_diff": max_abs_diff(runs[2][0]["weights"], runs[2][1]["weights"]),
            "weights_vs_one_worker": max_abs_diff(runs[2][0]["weights"], runs[1][0]["weights"]),
            "first_loss_vs_one_worker": abs(runs[2][0]["losses"][0] - runs[1][0]["losses"][0]),
            "flags": measure.plausibility(speedup=two.rate / one.rate, devices=2)}


def print_tf(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'setup':<10} {'samples/s':>10} {'spread':>7}   ({result['model']}, custom loop, global batch "
          f"{result['global_batch']}, median step of {result['steps']}, median of {result['repeats']} interleaved launches)")
    for s in result["setups"]:
        print(f"{s['name']:<10} {s['samples_per_s']:>10.1f} {s['spread']:>6.0%}")
    print(measure.flagged(f"2 MultiWorkerMirroredStrategy workers vs 1: {result['speedup_multiworker']:.2f}x; max |weight "
                          f"diff| between the workers {result['weights_max_abs_diff']:.1e}, vs one worker on the same global batches "
                          f"{result['weights_vs_one_worker']:.1e}", result["flags"]))
    print(json.dumps(result))


def cluster(*, repeats: int = 5, nodes: int = 2, steps: int = 60, seed: int = 0) -> dict:
    """Lab 11's measure: lab 03's DDP worker (from its notebook) on `nodes` Slurm nodes via submitit vs
    lab_utils.launch with as many ranks, and vs launch with each rank in a session of its own (as slurmstepd starts
    Slurm's tasks: the suspected cause of a slower Slurm on one shared machine), interleaved: seconds from
    submission to the first optimizer step, steady steps/s, and the verdicts. Needs a Slurm cluster (`make
    cluster`); without one the result says it was skipped."""
    import time

    from ... import learner_code
    from ...labs.lab11 import slurm
    from ...launch import OWN_SESSION

    found = slurm.find()
    if found is None:
        return {"benchmark": "cluster", "skipped": slurm.SKIPPED}
    worker = learner_code.from_notebook(learner_code.notebook_path("03_ddp.ipynb"), "ddp_worker").function
    # steps: enough that the steady rate is a median of about a second of training per run, not of a few jittery steps
    cfg = DDPConfig(data={"kind": "synthetic", "n_train": 128 * (steps + 1), "n_test": 64, "side": 28},
                    layers=spec.cnn2d_3layer_fullconnected_3layer(), epochs=1, per_rank_batch=128 // nodes, lr=0.05,
                    warmup_steps=0, accumulation=1, seed=seed, timeout_s=60, checkpoint=None)
    folder = measure.results_dir(None) / "slurm" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    ex = lab11.submitit_executor(folder / "submitit", nodes=nodes, job_name="lab11-bench",
                                 setup=["export LAB_ONE_HOST=1"] if found.one_host else [])
    own = "launch, a session per rank"
    begin = time.time()
    # lab 11's measure, with a third path: launch with each rank in a session of its own
    speed = lab11.side_by_side(worker, cfg, ex, folder, world_size=nodes, repeats=repeats, timeout=180,
                               more_launches={own: {OWN_SESSION: "1"}})
    rate = {p: speed[p]["steps_per_s_all"] for p in ("slurm", "launch", own)}

    def no_worse(a, b, claim):
        return measure.verdict(rate[a], rate[b], claim=claim, higher_is_better=True, no_worse_than=0.10, lab="11",
                               same_work=True, expected=f"{a} no more than 10 % slower than {b}")

    verdicts = [no_worse("slurm", "launch", "Slurm vs launch, steady steps/s"),
                no_worse("slurm", own, "Slurm vs launch with a session per rank, steady steps/s"),
                no_worse(own, "launch", "a session per rank vs one session, steady steps/s")]
    return {"benchmark": "cluster", "nodes": nodes, "global_batch": 128, "steps": steps, "model": "cnn2d_3layer_fullconnected_3layer",
            "repeats": repeats, "one_host": found.one_host,
            "submit_to_first_step_s": round(speed["slurm"]["first_step_s"], 2),
            "launch_to_first_step_s": round(speed["launch"]["first_step_s"], 2),
            "slurm_steps_per_s": round(speed["slurm"]["steps_per_s"], 2),
            "launch_steps_per_s": round(speed["launch"]["steps_per_s"], 2),
            "own_session_steps_per_s": round(speed[own]["steps_per_s"], 2),
            "slurm_steps_per_s_runs": speed["slurm"]["steps_per_s_runs"],
            "launch_steps_per_s_runs": speed["launch"]["steps_per_s_runs"],
            "own_session_steps_per_s_runs": speed[own]["steps_per_s_runs"],
            "slurm_vs_local_steps": round(speed["slurm_vs_local_steps"], 3),
            "target": 0.9, "verdicts": [{"claim": v.claim, "ratio": round(v.ratio, 3), "low": round(v.low, 3),
                                         "high": round(v.high, 3), "verdict": v.verdict, "text": str(v)} for v in verdicts],
            "wall_s": round(time.time() - begin, 1)}


def print_cluster(result: dict) -> None:
    """The table, the verdicts, then the JSON line (last line of output)."""
    if "skipped" in result:
        print(result["skipped"])
    else:
        print(f"{'':<28}{'steps/s':>9}   (lab 03's worker, {result['model']}, global batch {result['global_batch']}, "
              f"median of {result['repeats']} interleaved runs each)")
        for label, key in ((f"{result['nodes']} Slurm nodes", "slurm"), (f"launch, {result['nodes']} ranks", "launch"),
                           ("launch, a session per rank", "own_session")):
            print(f"{label:<28}{result[key + '_steps_per_s']:>9.2f}   {result[key + '_steps_per_s_runs']}")
        print(f"submission to first step: {result['submit_to_first_step_s']:.1f} s on Slurm, "
              f"{result['launch_to_first_step_s']:.1f} s with launch")
        for v in result["verdicts"]:
            print(v["text"])
    print(json.dumps(result))
