"""Lab 08 helpers around the notebook's parameter server and Hogwild processes: data shards, the straggler, run
records, core pinning, the single-process baseline, shared memory for launched ranks, accuracy curves and plots;
`run` launches the notebook's run_all (lab_utils.labs.lab08.lesson, passed in) for the benchmark, the GPU check, the
exercise check and the tests."""
from __future__ import annotations

import functools
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils import vector_to_parameters

from ... import data, hardware, measure, spec, tensors

MODEL = "cnn2d_2layer_fullconnected_2layer"
MODES = ("sync", "async")


# ---- one run, as data ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PSConfig:
    """One parameter-server run: the server applies `gradients` worker gradients in all, then every rank stops."""

    mode: str = "sync"              # "sync": average one gradient of every worker per update; "async": apply each
    gradients: int = 240            # gradients the server applies (sync: a multiple of the number of workers)
    batch_size: int = 32            # samples per gradient (one worker's batch)
    lr: float = 0.1                 # learning rate of a synchronous update (global batch n_workers x batch_size)
    momentum: float = 0.9
    straggler_factor: float = 1.0   # the last worker takes this many times its compute time per gradient
    damped: bool = False            # async: each gradient's learning rate divided by (1 + its staleness)
    snapshot_every: int = 16        # keep a copy of the weights every this many applied gradients
    warmup: int = 8                 # first gradients left out of the throughput
    seed: int = 0
    dataset: str = "digits"         # "digits" (8x8 handwritten digits) or "synthetic" (28x28 procedural images)
    timeout_s: float = 60.0         # the longest the server waits for a gradient
    label: str = ""

    def validate(self, n_workers: int) -> "PSConfig":
        """Raise, before any rank starts, on settings that cannot run; return self."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"a parameter server needs at least one worker (n_workers >= 1), got {n_workers!r}")
        if self.gradients < 1 or self.batch_size < 1 or self.snapshot_every < 1:
            raise ValueError(f"gradients, batch_size and snapshot_every must be positive, got {self.gradients}, "
                             f"{self.batch_size} and {self.snapshot_every}")
        if self.mode == "sync" and self.gradients % n_workers:
            raise ValueError(f"a synchronous update uses one gradient of every worker: gradients={self.gradients} "
                             f"must be a multiple of n_workers={n_workers}")
        if self.warmup < 0 or self.gradients - self.warmup < 2 * n_workers:
            raise ValueError(f"warmup={self.warmup} leaves too little to time: keep 0 <= warmup and gradients - "
                             f"warmup >= 2 x n_workers ({2 * n_workers})")
        if self.straggler_factor < 1:
            raise ValueError(f"straggler_factor={self.straggler_factor} must be >= 1 (1: no straggler)")
        if self.dataset not in ("digits", "synthetic"):
            raise ValueError(f"dataset must be 'digits' or 'synthetic', got {self.dataset!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")
        return self

    @property
    def name(self) -> str:
        """A short label: the mode, damping and straggler factor."""
        return self.label or f"{self.mode}{' damped' if self.damped else ''} x{self.straggler_factor:g}"


# ---- data: one shard per worker, its k-th batch, and the global batch one process sees ----------------------------

@functools.lru_cache(maxsize=4)
def load_split(dataset: str = "digits", seed: int = 0) -> data.Split:
    """The train/test split every rank builds for itself (the same in every process; read once per process)."""
    if dataset == "digits":
        return data.load_digits_split()
    return data.synthetic_split(4096, 512, image_shape=(1, 28, 28), seed=seed)


def input_shape(split: data.Split) -> tuple[int, int, int]:
    """(C, H, W) of the split's images."""
    channels, height, width = (int(s) for s in split.x_train.shape[1:])
    return channels, height, width


def worker_batch(split: data.Split, worker: int, n_workers: int, step: int, batch_size: int):
    """(x, y) of worker `worker`'s `step`-th batch from its rows worker-1, worker-1+n_workers, ... (wraps around)."""
    shard = np.arange(worker - 1, len(split.x_train), n_workers)
    rows = shard[(step * batch_size + np.arange(batch_size)) % len(shard)]
    return torch.from_numpy(split.x_train[rows]), torch.from_numpy(split.y_train[rows])


def global_batch(split: data.Split, n_workers: int, step: int, batch_size: int):
    """The `step`-th batch of every worker, in rank order: what one process sees for one synchronous update."""
    parts = [worker_batch(split, w, n_workers, step, batch_size) for w in range(1, n_workers + 1)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def build_model(split: data.Split, seed: int | None = None):
    """The course CNN for the split's images (seeded weights when `seed` is given)."""
    return spec.build_torch(spec.preset(MODEL), input_shape(split), seed=seed)


def initial_weights(split: data.Split, seed: int) -> torch.Tensor:
    """The CNN's seeded initial weights as one flat vector (the server's copy of the model)."""
    return tensors.flat_weights(build_model(split, seed))


def straggle(busy_s: float, factor: float) -> float:
    """Sleep (factor - 1) x busy_s, so that busy_s of work takes `factor` times as long; returns the sleep (s)."""
    extra = max(0.0, (factor - 1.0) * busy_s)
    if extra:
        # a sleep holds no core: wall time only, like a worker waiting on a slow disk or sharing its machine
        time.sleep(extra)
    return extra


class Straggler:
    """Stretches a worker's whole iteration (pull, compute, push) by `factor`; call before_push before each push."""

    def __init__(self, factor: float):
        self.factor = float(factor)
        self.busy: list[float] = []
        self.slept: list[float] = []
        self._mark: float | None = None

    def before_push(self, compute_s: float) -> float:
        now = time.perf_counter()
        if self._mark is not None:
            # busy: the time since the previous call less its sleep (the push, the pull with its wait, the compute)
            self.busy.append(now - self._mark - self.slept[-1])
        base = statistics.median(self.busy) if self.busy else compute_s  # compute_s until a busy time is known
        self.slept.append(straggle(base, self.factor) if self.factor > 1 else 0.0)
        self._mark = now
        return self.slept[-1]

    @property
    def slowdown(self) -> float:
        """Measured: an iteration's median wall time (sleep included) over its median busy time (1.0 unknown)."""
        pairs = list(zip(self.busy, self.slept[1:]))  # busy[i] ran between sleeps i and i + 1
        if not pairs:
            return 1.0
        return statistics.median(b + s for b, s in pairs) / statistics.median(b for b, _ in pairs)


# ---- what a server measures while it runs ----------------------------------------------------------------------

class RunRecord:
    """A server's measurements: each applied gradient's worker, staleness and time, weight snapshots, throughput."""

    def __init__(self, cfg: PSConfig):
        self.cfg = cfg
        self.start = time.perf_counter()
        self.log: list[tuple[int, int, int, float]] = []  # (worker, version it was computed on, staleness, seconds since the start)
        self.snapshots: list[tuple[int, float, torch.Tensor]] = []  # (samples applied, seconds, flat weights)
        self.warm: tuple[int, float] | None = (0, 0.0) if cfg.warmup == 0 else None  # (gradients applied, seconds) when the warm-up ended

    @property
    def count(self) -> int:
        """Gradients applied so far."""
        return len(self.log)

    def applied(self, worker: int, computed_on: int, staleness: int, weights: torch.Tensor) -> None:
        """Note one applied gradient (after the update, so a snapshot holds the new weights)."""
        now = time.perf_counter() - self.start
        self.log.append((worker, computed_on, staleness, now))
        if self.count % self.cfg.snapshot_every == 0:
            self.snapshots.append((self.count * self.cfg.batch_size, now, weights.detach().clone()))
        if self.warm is None and self.count >= self.cfg.warmup:
            self.warm = (self.count, now)

    def result(self, weights: torch.Tensor) -> dict:
        """Plain results: final weights, samples/s after the warm-up, the log and the snapshots."""
        if self.warm is None:
            raise RuntimeError(f"the run applied {self.count} gradients, no more than its warm-up of {self.cfg.warmup}: "
                               "give it more steps or a shorter warm-up")
        end = self.log[-1][3]
        return {"weights": weights.detach().clone(), "seconds": end,
                "samples_per_s": (self.count - self.warm[0]) * self.cfg.batch_size / (end - self.warm[1]),
                "order": [w for w, *_ in self.log], "computed_on": [v for _, v, _, _ in self.log],
                "staleness": [s for _, _, s, _ in self.log],
                "snapshot_samples": [s for s, _, _ in self.snapshots],
                "snapshot_seconds": [t for _, t, _ in self.snapshots],
                "snapshots": torch.stack([w for *_, w in self.snapshots]) if self.snapshots else torch.empty(0)}


# ---- the parameter server's ranks, the single-process baseline ------------------------------------------------

def pin_server_beside_worker_1(rank: int, world_size: int) -> None:
    """With fewer CPU cores than ranks, pin worker w to core (w - 1) mod cores, the server (rank 0) to worker 1's."""
    if not hasattr(os, "sched_setaffinity") or hardware.rank_device()[0] != "cpu":
        return
    cores = sorted(os.sched_getaffinity(0))
    # the server beside worker 1: the same worker shares its core every run
    if 1 < len(cores) < world_size:  # ranks that fit the cores are left to the operating system, as launch leaves them
        os.sched_setaffinity(0, {cores[max(rank - 1, 0) % len(cores)]})


def single_process_weights(cfg: PSConfig, n_workers: int, updates: int) -> np.ndarray:
    """One process, `updates` SGD steps on the global batches a synchronous run averages over; flat weights."""
    split = load_split(cfg.dataset, cfg.seed)
    model = build_model(split, cfg.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    for step in range(updates):
        x, y = global_batch(split, n_workers, step, cfg.batch_size)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return tensors.flat_weights(model).numpy()


# ---- lab 08's run_all, launched for the benchmark, the GPU check, the exercise check and the tests -------------------

class _Seated:
    """Lab 08's server or worker for a launch whose runs take different numbers of workers: at its i-th call (run i)
    it passes seats[i] as the number of workers, and a worker rank above that sits the run out (returns None)."""

    def __init__(self, fn, seats, server: bool):
        self.fn, self.seats, self.server, self.calls = fn, list(seats), server, 0

    def __call__(self, *args):
        seats, self.calls = self.seats[self.calls], self.calls + 1
        if self.server:  # serve(n_workers, cfg)
            return self.fn(seats, args[1])
        rank, _, cfg, device = args  # work(rank, n_workers, cfg, device)
        return self.fn(rank, seats, cfg, device) if rank <= seats else None


def run(run_all, configs, serve, work, n_workers=2, timeout_s: float = 180.0) -> list:
    """Every config in turn, in one launch of lab 08's run_all (lab_utils.labs.lab08.lesson, generated from its notebook,
    passed in: a module the labs import never imports the generated lessons) with this server and worker (its serve
    and work, or edits of them made with lab_utils.variants); `n_workers`: how many workers run each config (one
    number for all, or one per config). Returns each run's server result, with `config` and the workers' results
    (`workers`) added."""
    from ...launch import launch

    counts = list(n_workers) if isinstance(n_workers, (list, tuple)) else [n_workers] * len(configs)
    if len(counts) != len(configs):
        raise ValueError(f"n_workers gives {len(counts)} worker counts for {len(configs)} configs: give one per config")
    configs = [c.validate(n) for c, n in zip(configs, counts)]
    if any(c.label == "hogwild" for c in configs):
        raise ValueError("run launches parameter servers only: a Hogwild run needs the notebook's shared memory")
    if len(set(counts)) > 1:
        serve, work = _Seated(serve, counts, server=True), _Seated(work, counts, server=False)
    per_rank = launch(run_all, max(counts) + 1, args=(configs, work, serve), timeout=timeout_s)
    return [dict(server, config=c, workers=[w for w in workers if w is not None])
            for c, server, *workers in zip(configs, *per_rank)]


# ---- staleness -----------------------------------------------------------------------------------------------------

def staleness_by_worker(result: dict) -> dict[int, float]:
    """Mean staleness of each worker's applied gradients."""
    order, staleness = np.asarray(result["order"]), np.asarray(result["staleness"], dtype=float)
    return {int(w): float(staleness[order == w].mean()) for w in np.unique(order)}


# ---- handing shared memory to launched ranks (Hogwild) ----------------------------------------------------------

_SHARED: dict = {}


class ShareWithRanks:
    """A `prepare` for lab_utils.launch that hands objects in shared memory to every rank: `shared(name)` there."""

    def __init__(self, **objects):
        for name, obj in objects.items():
            tensors = list(obj.parameters()) if isinstance(obj, torch.nn.Module) else [obj]
            if not all(isinstance(t, torch.Tensor) and (t.is_shared() or t.is_cuda) for t in tensors):
                raise ValueError(f"{name} is not in shared memory: call {name}.share_memory() (a module) or "
                                 f"{name}.share_memory_() (a tensor) first, or every rank gets a copy of its own")
        self.objects = objects

    def __call__(self) -> None:
        # launch pickles `prepare` like a process argument: a shared tensor arrives as a handle to the same memory
        _SHARED.update(self.objects)


def shared(name: str):
    """In a rank started with prepare=ShareWithRanks(name=...): that object, in the memory every rank shares."""
    try:
        return _SHARED[name]
    except KeyError:
        raise RuntimeError(f"nothing called {name!r} was shared with this rank: launch with "
                           f"prepare=parameter_server.ShareWithRanks({name}=...)") from None


# ---- accuracy ---------------------------------------------------------------------------------------------------------

@torch.no_grad()
def accuracy_of(flat_weights, split: data.Split, model=None) -> float:
    """Test accuracy of the course CNN holding these flat weights."""
    model = model or build_model(split, seed=0)
    vector_to_parameters(torch.as_tensor(np.asarray(flat_weights)).clone(), model.parameters())
    logits = model(torch.from_numpy(split.x_test))
    return float((logits.argmax(1) == torch.from_numpy(split.y_test)).float().mean())


def accuracy_curve(result: dict, split: data.Split) -> dict:
    """{'samples', 'seconds', 'accuracy'} at each weight snapshot a run kept."""
    model = build_model(split, seed=0)
    return {"samples": list(result["snapshot_samples"]), "seconds": list(result["snapshot_seconds"]),
            "accuracy": [accuracy_of(w, split, model) for w in result["snapshots"]]}


def diverged(accuracy: float, num_classes: int = 10) -> bool:
    """True for a final accuracy below twice chance: the run diverged (or never learned), it did not just lag."""
    return accuracy < 2 / num_classes


def rank_correlation(xs, ys) -> float:
    """Spearman's rank correlation of two equally long sequences (ties share their mean rank); nan for fewer than 3."""
    xs, ys = np.asarray(list(xs), float), np.asarray(list(ys), float)
    if len(xs) != len(ys):
        raise ValueError(f"need as many x as y values, got {len(xs)} and {len(ys)}")
    if len(xs) < 3:
        return float("nan")

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):  # ties: the mean of their ranks
            r[v == value] = r[v == value].mean()
        return r

    rx, ry = ranks(xs), ranks(ys)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def divergence_flags(accuracies, num_classes: int = 10) -> list[str]:
    """A warning naming the runs of a setting that diverged (final accuracy near chance), or none."""
    accuracies = list(accuracies)
    bad = [a for a in accuracies if diverged(a, num_classes)]
    if not bad:
        return []
    return [f"{len(bad)} of {len(accuracies)} runs diverged (final accuracy {', '.join(f'{a:.0%}' for a in bad)}, "
            f"chance is {1 / num_classes:.0%}): stale gradients with momentum can throw the weights off"]


def first_reaching(curve: dict, target: float):
    """(samples, seconds) at the first snapshot with accuracy >= target, or None."""
    for samples, seconds, accuracy in zip(curve["samples"], curve["seconds"], curve["accuracy"]):
        if accuracy >= target:
            return samples, seconds
    return None


# ---- plots -----------------------------------------------------------------------------------------------------------

def plot_accuracy(curves: dict, title: str = ""):
    """Accuracy against samples processed (left) and against wall time (right), one line per run."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for label, c in curves.items():
        axes[0].plot(c["samples"], c["accuracy"], marker=".", label=label)
        axes[1].plot(c["seconds"], c["accuracy"], marker=".", label=label)
    axes[0].set_xlabel("samples processed")
    axes[1].set_xlabel("wall time (s)")
    axes[0].set_ylabel("test accuracy")
    axes[1].legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_staleness(results: dict, title: str = "staleness of the applied gradients"):
    """Per run (label -> server result), a histogram of the applied gradients' staleness, stacked by worker."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(3.1 * len(results), 2.8), sharey=True, squeeze=False)
    for ax, (label, result) in zip(axes[0], results.items()):
        order, staleness = np.asarray(result["order"]), np.asarray(result["staleness"])
        values, bottom = np.arange(staleness.max() + 1), np.zeros(staleness.max() + 1)
        for worker in np.unique(order):
            counts = np.bincount(staleness[order == worker], minlength=len(values))
            ax.bar(values, counts, bottom=bottom, width=0.8, label=f"worker {worker}")
            bottom += counts
        ax.set_title(f"{label}\nmean {staleness.mean():.2f}", fontsize=9)
        ax.set_xlabel("staleness (versions)")
    axes[0][0].set_ylabel("gradients")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_throughput(factors, rates: dict, ranges: dict | None = None):
    """Samples/s against the straggler factor, one line per mode; shaded: min..max of the repeats."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.3))
    for mode, values in rates.items():
        ax.plot(factors, values, marker="o", label=mode)
        if ranges and mode in ranges:
            lo, hi = zip(*ranges[mode])
            ax.fill_between(factors, lo, hi, alpha=0.2)
    ax.set_xlabel("straggler factor (the slow worker takes k x its compute time)")
    ax.set_ylabel("samples/s applied by the server")
    ax.set_xticks(list(factors))
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    return fig


# ---- medians of interleaved runs ---------------------------------------------------------------------------------

def interleaved(configs_per_round, repeats: int) -> list:
    """`repeats` rounds of the configs, every other round in reverse order (measure.alternating_rounds)."""
    return measure.alternating_rounds(configs_per_round, repeats)


# ---- Hogwild: what the watching rank records --------------------------------------------------------------------

def watch(model, progress, cfg: PSConfig, start: float, poll_s: float = 0.001) -> dict:
    """Hogwild rank 0: poll `progress`, snapshot the weights every cfg.snapshot_every gradients until all are done."""
    total = (cfg.gradients // progress.numel()) * progress.numel()
    snapshots, warm, due = [], (0, 0.0) if cfg.warmup == 0 else None, cfg.snapshot_every
    while True:
        done, now = int(progress.sum()), time.perf_counter() - start
        if warm is None and done >= cfg.warmup:
            warm = (done, now)
        if done >= due:
            snapshots.append((done * cfg.batch_size, now, tensors.flat_weights(model)))
            due = (done // cfg.snapshot_every + 1) * cfg.snapshot_every
        if done >= total:
            return {"warm": warm, "total": total, "snapshots": snapshots}
        time.sleep(poll_s)


def hogwild_result(values: list, cfg: PSConfig) -> dict:
    """One Hogwild run's ranks' values (rank 0 watched, the others trained) as a server-like result."""
    watcher, trainers = values[0], values[1:]
    end = max(t["seconds"] for t in trainers)
    (warm_done, warm_s), snapshots = watcher["warm"], watcher["snapshots"]
    if warm_done >= watcher["total"]:  # the run ended before the watcher saw the warm-up end: time all of it
        warm_done, warm_s = 0, 0.0
    return {"config": cfg, "weights": watcher["weights"], "seconds": end,
            "samples_per_s": (watcher["total"] - warm_done) * cfg.batch_size / (end - warm_s),
            "snapshot_samples": [s for s, _, _ in snapshots], "snapshot_seconds": [t for _, t, _ in snapshots],
            "snapshots": np.stack([w for *_, w in snapshots]) if snapshots else np.empty(0)}


# ---- TensorFlow: an in-process cluster -------------------------------------------------------------------------------

def tf_in_process_cluster(n_workers: int = 2, n_ps: int = 1):
    """Start `n_workers` worker and `n_ps` ps TF servers in this TF-only process; returns their cluster resolver."""
    from ... import tf_distribute
    from ...launch import free_port

    tf = tf_distribute.import_tensorflow()
    # gRPC's worker cache polls with 64 threads per task by default: hundreds of threads in one process, more than
    # a grading sandbox allows; a few are plenty on loopback
    for variable in ("TF_GRPC_WORKER_CACHE_QUEUES", "TF_GRPC_WORKER_CACHE_THREADS"):
        os.environ.setdefault(variable, "2")
    cluster = tf.train.ClusterSpec({"worker": [f"localhost:{free_port()}" for _ in range(n_workers)],
                                    "ps": [f"localhost:{free_port()}" for _ in range(n_ps)]})
    # one intra-op thread per task; inter-op threads for every task, or the tasks of one process can wait forever
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=n_workers + n_ps)
    for job, count in (("worker", n_workers), ("ps", n_ps)):
        for index in range(count):
            tf.distribute.Server(cluster, job_name=job, task_index=index, config=config, protocol="grpc", start=True)
    return tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
