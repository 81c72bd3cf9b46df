"""The graded exercises of every lab: a probe that runs in the student's kernel and exports plain data, and a
grade that runs in the grader's own process and compares that data with references it computes itself."""
from __future__ import annotations

import json
import math
import random
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

GRADING_SEED = 7


@dataclass(frozen=True)
class Exercise:
    """One graded answer: `name` is what the learner defines in the notebook."""

    lab: str
    name: str
    probe: Callable[[Any, dict], Any]           # kernel side: (learner's answer, notebook globals) -> plain data
    grade: Callable[[Any], tuple[float, str]]    # grader side: exported data -> (fraction of the points, message)
    hint: str                                    # what to look at when it fails, without the answer
    points: float = 1.0


# --- plain data only: no pickles, no objects with home-made __eq__ -------------------------------------------------

def to_plain(value, depth: int = 0):
    """JSON-able data from numbers, strings, lists, dicts, numpy arrays and tensors; anything else raises TypeError."""
    if depth > 20:
        raise TypeError("answer nested too deeply")
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return to_plain(value.item(), depth + 1)
    if isinstance(value, np.ndarray):
        return to_plain(value.tolist(), depth + 1)
    module = type(value).__module__ or ""
    if module.startswith("torch") and type(value).__name__ in ("Tensor", "Parameter"):
        return to_plain(value.detach().cpu().numpy(), depth + 1)
    if module.startswith(("tensorflow", "keras")) and hasattr(value, "numpy") and "Tensor" in type(value).__name__:
        return to_plain(np.asarray(value.numpy()), depth + 1)
    if type(value) in (list, tuple):
        return [to_plain(v, depth + 1) for v in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: to_plain(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"an answer of type {type(value).__name__} is not plain data (numbers, lists, arrays, tensors)")


def export(exercise: Exercise, ns: dict, out_dir, token: str, suffix: str = "") -> None:
    """Kernel side: run the probe on the learner's answer and write what it returns (or why it could not) as JSON."""
    record = {"lab": exercise.lab, "exercise": exercise.name}
    if exercise.name not in ns:
        record.update(status="missing", error=f"{exercise.name} is not defined")
    else:
        try:
            record.update(status="ok", value=to_plain(exercise.probe(ns[exercise.name], ns)))
        except TypeError as exc:
            record.update(status="invalid" if "not plain data" in str(exc) else "error", error=_last_line(exc))
        except BaseException as exc:  # the learner's code may raise anything, SystemExit included
            record.update(status="error", error=_last_line(exc))
    path = Path(out_dir) / f"{token}-{exercise.lab}-{exercise.name}{'-' + suffix if suffix else ''}.json"
    path.write_text(json.dumps(record))


def export_named(lab: str, name: str, ns: dict, out_dir, token: str, source: str | None = None, suffix: str = "") -> None:
    """Kernel side: export one built-in exercise, or one from an instructor test file (`source`)."""
    table = load_test_file(source) if source else BUILT_IN
    export(next(e for e in table if e.lab == lab and e.name == name), ns, out_dir, token, suffix)


def load_test_file(path) -> list[Exercise]:
    """The EXERCISES list of an instructor test file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"instructor_tests_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exercises = getattr(module, "EXERCISES", None)
    if not isinstance(exercises, list) or not all(isinstance(e, Exercise) for e in exercises):
        raise ValueError(f"{path}: an instructor test file must define EXERCISES = [Exercise(...), ...]")
    return exercises


def _last_line(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return " ".join((text[-1] if text else type(exc).__name__).split())[:300]


# --- comparison helpers (grader side) ------------------------------------------------------------------------------

def close(got, expected, tol: float = 1e-6) -> bool:
    """Nested equality with a numeric tolerance; plain data only."""
    if isinstance(expected, (list, tuple)):
        return isinstance(got, list) and len(got) == len(expected) and all(close(g, e, tol) for g, e in zip(got, expected))
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(close(got[k], expected[k], tol) for k in expected)
    if isinstance(expected, bool) or isinstance(expected, str) or expected is None:
        return type(got) is type(expected) and got == expected
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return abs(got - expected) <= tol * max(1.0, abs(expected))


def _all_or_nothing(ok: bool, good: str, bad: str) -> tuple[float, str]:
    return (1.0, good) if ok else (0.0, bad)


# --- lab 00 --------------------------------------------------------------------------------------------------------

def _probe_median_time(fn, ns):
    import time

    durations = iter([0.06, 0.06, 0.010, 0.012, 0.011, 0.030, 0.011])
    calls = []

    def work():
        calls.append(1)
        time.sleep(next(durations, 0.010))

    return {"median": float(fn(work, 2, 5)), "calls": len(calls)}


def _grade_median_time(data):
    if data["calls"] != 7:
        return 0.0, f"fn was called {data['calls']} times for warmup=2, repeats=5"
    return _all_or_nothing(abs(data["median"] - 0.011) < 0.004, "warm-up skipped, median of the repeats",
                           f"got {data['median'] * 1e3:.1f} ms where the median of the timed calls is about 11 ms")


# --- lab 01 --------------------------------------------------------------------------------------------------------

def _train_problem():
    import torch

    from . import checks

    model, x, y = checks._tiny_problem(seed=GRADING_SEED)
    return model, x, y, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _run_train_step(fn):
    import torch

    model, x, y, optimizer = _train_problem()
    losses = [float(fn(model, x, y, optimizer)) for _ in range(2)]
    return {"weights": torch.cat([p.detach().flatten() for p in model.parameters()]).tolist(), "losses": losses}


def _grade_train_step(data):
    from . import train

    expected = _run_train_step(train.train_step)
    if not close(data["weights"], expected["weights"], 1e-5):
        return 0.0, "the weights after two steps differ from the reference"
    return _all_or_nothing(close(data["losses"], expected["losses"], 1e-5), "weights and losses right after two steps",
                           "the weights are right but the returned loss is not the batch loss")


THROUGHPUT_CASES = [(16, [0.5, 0.04, 0.05, 0.04, 0.06], 1), (128, [1.0, 0.9, 0.2, 0.21, 0.8, 0.2, 0.22], 2)]


def _grade_throughput(data):
    from . import measure

    expected = [measure.throughput_from_step_times(b, t, w) for b, t, w in THROUGHPUT_CASES]
    return _all_or_nothing(close(data, expected, 1e-6), "warm-up dropped, median used",
                           "the samples/s differ from the reference on the grader's step times")


def _probe_top_op(answer, ns):
    return {"answer": answer, "table": [[e.key, float(e.self_cpu_time_total), float(e.cpu_time_total)]
                                        for e in ns["prof"].key_averages()]}


def _grade_top_op(data):
    if not data["table"]:
        return 0.0, "the profile is empty"
    expected = max(data["table"], key=lambda row: row[1])[0]
    return _all_or_nothing(data["answer"] == expected, "the operator with the largest self CPU time",
                           "not the operator with the largest *self* CPU time of your profile")


# --- lab 02 --------------------------------------------------------------------------------------------------------

SCATTER_CASES = [(9, 2), (11, 3), (6, 4), (13, 5), (3, 3)]


def _probe_scatter(fn, ns):
    import torch

    out = []
    for n, k in SCATTER_CASES:
        batch = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
        out.append([c.tolist() for c in fn(batch, [torch.device("cpu")] * k)])
    return out


def _grade_scatter(data):
    import torch

    from . import dp

    expected = [[c.tolist() for c in dp.scatter(torch.arange(n * 3, dtype=torch.float32).reshape(n, 3),
                                                [torch.device("cpu")] * k)] for n, k in SCATTER_CASES]
    return _all_or_nothing(close(data, expected), "one balanced chunk of consecutive rows per device",
                           "the chunks differ from the reference for some batch size / device count")


def _gather_inputs():
    import torch

    gen = torch.Generator().manual_seed(GRADING_SEED)
    return [torch.randn(size, 4, generator=gen) for size in (2, 5, 3)]


def _grade_gather(data):
    import torch

    return _all_or_nothing(close(data, torch.cat(_gather_inputs()).tolist()), "outputs concatenated in device order",
                           "not one tensor with every output's rows in device order")


def _reduce_problem():
    import copy

    import torch

    from . import spec

    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=GRADING_SEED)
    replicas = [copy.deepcopy(model) for _ in range(3)]
    gen = torch.Generator().manual_seed(GRADING_SEED)
    for m in (model, *replicas):
        for p in m.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
    return model, replicas


def _run_reduce(fn):
    import torch

    model, replicas = _reduce_problem()
    fn(model, replicas)
    return torch.cat([p.grad.flatten() for p in model.parameters()]).tolist()


def _grade_reduce(data):
    from . import dp

    return _all_or_nothing(close(data, _run_reduce(dp.reduce_gradients), 1e-5), "replicas' gradients summed into the model's",
                           "the model's gradients after the reduce differ from the reference")


# --- lab 03 --------------------------------------------------------------------------------------------------------

def _probe_average_gradients(fn, ns):
    import inspect
    import textwrap

    from . import ddp
    from .launch import launch

    source = textwrap.dedent(inspect.getsource(fn))
    return launch(ddp.manual_allreduce_worker, 2, args=(source, fn.__name__, GRADING_SEED, True), timeout=120)


def _grade_average_gradients(data):
    import torch
    import torch.nn.functional as F

    from . import ddp

    cfg = ddp.DDPConfig(seed=GRADING_SEED)
    train_set, _, shape = ddp.datasets_for(cfg)
    model = ddp.build_model(cfg, shape)
    x, y = train_set[list(range(32))]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    expected = ddp.flat_weights(model).tolist()
    return _all_or_nothing(len(data) == 2 and all(close(w, expected, 1e-5) for w in data),
                           "every rank equals one process on the whole batch",
                           "after one step with your averaging, the ranks' weights differ from one process on the global batch")


SHARD_CASES = [(11, 2), (10, 4), (5, 3), (2, 4), (997, 7)]


def _grade_shard(data):
    for (n, world_size), shares in zip(SHARD_CASES, data):
        flat = sorted(i for share in shares for i in share)
        sizes = [len(s) for s in shares]
        if len(shares) != world_size or flat != list(range(n)) or max(sizes) - min(sizes) > 1:
            return 0.0, f"n={n}, world_size={world_size}: not every index exactly once in balanced shares"
    return 1.0, "every index on exactly one rank, balanced"


def _epoch_problem():
    import torch

    from . import data

    dataset = data.to_dataset(*data.synthetic_images(24, image_shape=(1, 4, 4), seed=GRADING_SEED))
    return torch.utils.data.DistributedSampler(dataset, num_replicas=2, rank=1, shuffle=True, seed=GRADING_SEED)


def _probe_run_epochs(fn, ns):
    sampler, orders = _epoch_problem(), []

    class RecordingLoader:
        def __iter__(self):
            orders.append(list(sampler))
            return iter(())

    fn(sampler, RecordingLoader(), None, None, 3)
    return orders


def _grade_run_epochs(data):
    sampler, expected = _epoch_problem(), []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        expected.append(list(sampler))
    return _all_or_nothing(close(data, expected), "a new order every epoch", "the epochs do not read the orders set_epoch gives")


LR_CASES = [(0.02, 2), (0.1, 3), (0.005, 16)]


def _grade_scaled_lr(data):
    return _all_or_nothing(close(data, [b * w for b, w in LR_CASES], 1e-9), "linear scaling",
                           "the learning rate for world_size ranks is not scaled as the global batch grows")


# --- lab 04 --------------------------------------------------------------------------------------------------------

GPIPE_CASES = [(3, 4), (2, 5), (4, 2), (1, 2)]


def _grade_gpipe_order(data):
    from . import pipeline as pl

    expected = [[[str(op) for op in ops] for ops in pl.gpipe(k, m).ops] for k, m in GPIPE_CASES]
    return _all_or_nothing(close(data, expected), "every forward, then every backward, on each stage",
                           "the per-stage order differs from GPipe's for some stages / micro-batches")


def _timelines():
    from .plots import Interval

    rng = random.Random(GRADING_SEED)
    out = []
    for stages in (2, 3):
        intervals, clock = [], 0.0
        for op in range(6):
            stage = op % stages
            start = clock + rng.uniform(0, 0.5)
            clock = start + rng.uniform(0.5, 2)
            intervals.append(Interval(f"stage {stage}", "forward" if op < 3 else "backward", start, clock))
        out.append((intervals, stages))
    return out


def _probe_bubble(fn, ns):
    return [float(fn(list(intervals), stages)) for intervals, stages in _timelines()]


def _grade_bubble(data):
    from . import pipeline as pl

    expected = [pl.bubble_fraction(intervals, stages) for intervals, stages in _timelines()]
    return _all_or_nothing(close(data, expected, 1e-9), "idle share of stages x makespan",
                           "the bubble differs from idle / (stages x makespan) on the grader's timelines")


def _split_cases():
    rng = random.Random(GRADING_SEED)
    return [([round(rng.uniform(0.1, 9), 2) for _ in range(rng.randint(4, 8))], rng.randint(2, 4)) for _ in range(6)]


def _grade_best_split(data):
    from . import pipeline as pl
    from .checks import _stage_sums

    for (times, stages), got in zip(_split_cases(), data):
        best = max(_stage_sums(times, pl.balanced_split(times, stages)))
        try:
            valid = len(got) == stages - 1 and list(got) == sorted(set(got)) and 0 < got[0] and got[-1] < len(times)
            slowest = max(_stage_sums(times, tuple(got))) if valid else math.inf
        except (TypeError, IndexError):
            slowest = math.inf
        if slowest > best + 1e-9:
            return 0.0, f"for {stages} stages over {len(times)} layers the slowest stage could be faster"
    return 1.0, "the slowest stage is as fast as it can be"


# --- lab 05 --------------------------------------------------------------------------------------------------------

BATCH_CASES = [(256, 4), (30, 3), (64, 1)]


def _probe_per_replica_batch(fn, ns):
    values = [fn(g, r) for g, r in BATCH_CASES]
    try:
        fn(9, 2)
        uneven = "no error"
    except ValueError as exc:
        uneven = "ValueError" + (" (says what)" if "9" in str(exc) and "2" in str(exc) else "")
    except Exception as exc:  # noqa: BLE001
        uneven = type(exc).__name__
    return {"values": values, "uneven": uneven}


def _grade_per_replica_batch(data):
    if not (all(type(v) is int for v in data["values"]) and data["values"] == [g // r for g, r in BATCH_CASES]):
        return 0.0, "the per-replica batch sizes are not right (an int for each)"
    if data["uneven"] != "ValueError (says what)":
        return 0.5, "a batch that does not split evenly must raise a ValueError naming both numbers"
    return 1.0, "global / replicas, uneven batches refused"


def _probe_local_values(fn, ns):
    import tensorflow as tf

    strategy = ns["strategy"]

    def replica_value():
        ctx = tf.distribute.get_replica_context()
        return tf.fill([3], tf.cast(ctx.replica_id_in_sync_group, tf.float32) * 2 + 1)

    got = fn(strategy, tf.function(lambda: strategy.run(replica_value))())
    return {"replicas": strategy.num_replicas_in_sync, "types": [type(v).__name__ for v in got], "values": list(got)}


def _grade_local_values(data):
    expected = [[r * 2.0 + 1] * 3 for r in range(data["replicas"])]
    if not close(data["values"], expected):
        return 0.0, "not one value per replica, in replica order"
    return _all_or_nothing(all(t == "ndarray" for t in data["types"]), "numpy arrays, one per replica, in order",
                           "the values are right but not numpy arrays")


def _probe_replica_step(fn, ns):
    from . import tf_checks

    return tf_checks.distributed_update(fn, ns["strategy"], global_batch=24, seed=GRADING_SEED)


def _grade_replica_step(data):
    from . import tf_distribute

    tf_distribute.import_tensorflow()
    from . import tf_checks

    expected = tf_checks.single_device_update(global_batch=24, seed=GRADING_SEED)
    if not close(data["update"], expected["update"], 1e-4):
        return 0.0, "the distributed update differs from one device's on the whole batch: check the loss scaling"
    return _all_or_nothing(close(data["loss"], expected["loss"], 1e-4), "same update as one device, loss scaled right",
                           "the update is right but the returned loss is not the scaled loss")


# --- lab 06 --------------------------------------------------------------------------------------------------------

def _speedup_rows():
    rng = random.Random(GRADING_SEED)
    out = []
    for _ in range(4):
        base = {"samples_per_s": rng.uniform(100, 1000), "world_size": 1.0, "threads": float(rng.choice([1, 2]))}
        row = {"samples_per_s": rng.uniform(100, 4000), "world_size": float(rng.choice([2, 4, 8])), "threads": float(rng.choice([1, 2]))}
        out.append((row, base))
    return out


def _grade_speedup(data):
    from . import report

    expected = [[report.Compared(r, b).speedup, report.Compared(r, b).efficiency] for r, b in _speedup_rows()]
    return _all_or_nothing(close(data, expected, 1e-9), "speedup and efficiency right",
                           "speedup or efficiency differs from the reference on the grader's rows")


def _serial_points():
    rng = random.Random(GRADING_SEED)
    return [(n, 1 / (0.12 + 0.88 / n) * rng.uniform(0.95, 1.05)) for n in (2, 4, 8, 16)]


def _grade_serial(data):
    from . import report

    return _all_or_nothing(close(data, report.fit_serial_fraction(_serial_points()), 1e-3), "serial fraction fitted",
                           "the fitted serial fraction differs from a least-squares fit of Amdahl's law")


PREDICT_CASES = [(0.07, 4), (0.3, 8), (0.0, 3)]


def _grade_predict(data):
    from . import report

    return _all_or_nothing(close(data, [float(report.amdahl_speedup(s, n)) for s, n in PREDICT_CASES], 1e-9),
                           "Amdahl's law", "the predictions differ from Amdahl's law")


BUILT_IN = [
    Exercise("00", "median_time", _probe_median_time, _grade_median_time,
             "call fn warmup times untimed, then time each of the repeats and return their median"),
    Exercise("01", "train_step", lambda fn, ns: _run_train_step(fn), _grade_train_step,
             "forward, loss, zero the old gradients, backward, step; return the loss"),
    Exercise("01", "throughput", lambda fn, ns: [fn(b, t, w) for b, t, w in THROUGHPUT_CASES], _grade_throughput,
             "drop the warm-up steps, then divide the batch size by the median step time"),
    Exercise("01", "top_op", _probe_top_op, _grade_top_op, "self CPU time excludes the operators an operator calls"),
    Exercise("02", "scatter", _probe_scatter, _grade_scatter,
             "one chunk per device, consecutive rows, sizes differing by one at most"),
    Exercise("02", "gather", lambda fn, ns: fn(_gather_inputs(), __import__("torch").device("cpu")), _grade_gather,
             "concatenate along the batch dimension, in device order"),
    Exercise("02", "reduce_gradients", lambda fn, ns: _run_reduce(fn), _grade_reduce,
             "add (not average) every replica's gradient into the model's"),
    Exercise("03", "average_gradients", _probe_average_gradients, _grade_average_gradients,
             "all_reduce each gradient (a sum), then divide by world_size"),
    Exercise("03", "shard", lambda fn, ns: [[list(fn(n, r, w)) for r in range(w)] for n, w in SHARD_CASES], _grade_shard,
             "every index on exactly one rank, shares differing by one at most"),
    Exercise("03", "run_epochs", _probe_run_epochs, _grade_run_epochs, "reshuffle at the start of every epoch"),
    Exercise("03", "scaled_lr", lambda fn, ns: [fn(b, w) for b, w in LR_CASES], _grade_scaled_lr,
             "the global batch grows with world_size; so does the learning rate (linear scaling)"),
    Exercise("04", "gpipe_order", lambda fn, ns: [[[str(op) for op in ops] for ops in fn(k, m)] for k, m in GPIPE_CASES],
             _grade_gpipe_order, "GPipe: all forwards, then all backwards, on every stage"),
    Exercise("04", "bubble", _probe_bubble, _grade_bubble, "idle time over stages x makespan"),
    Exercise("04", "best_split", lambda fn, ns: [list(fn(list(t), k)) for t, k in _split_cases()], _grade_best_split,
             "try every contiguous split and keep the one whose slowest stage is fastest"),
    Exercise("05", "per_replica_batch", _probe_per_replica_batch, _grade_per_replica_batch,
             "integer division, and a ValueError when the batch does not split"),
    Exercise("05", "local_values", _probe_local_values, _grade_local_values,
             "strategy.experimental_local_results, then .numpy() on each"),
    Exercise("05", "replica_step", _probe_replica_step, _grade_replica_step,
             "scale the per-example losses by the global batch size"),
    Exercise("06", "speedup_and_efficiency", lambda fn, ns: [list(fn(dict(r), dict(b))) for r, b in _speedup_rows()],
             _grade_speedup, "efficiency divides the speedup by the extra hardware (ranks x threads)"),
    Exercise("06", "fit_serial_fraction", lambda fn, ns: fn(_serial_points()), _grade_serial,
             "1/S = 1/N + s (1 - 1/N) is linear in s: least squares over all points"),
    Exercise("06", "predict_speedup", lambda fn, ns: [fn(s, n) for s, n in PREDICT_CASES], _grade_predict,
             "Amdahl: S(N) = 1 / (s + (1 - s) / N)"),
]


def for_lab(lab: str) -> list[Exercise]:
    """The built-in exercises of one lab."""
    return [e for e in BUILT_IN if e.lab == lab]
