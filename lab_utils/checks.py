"""Self-checks for the exercises: run the learner's code beside the reference and say pass or fail, with a hint."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from . import measure, spec, train


@dataclass(frozen=True)
class CheckResult:
    """Outcome of a self-check: true when passed; shows as a PASS/FAIL line (with a hint) in a notebook."""

    name: str
    passed: bool
    hint: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        if self.passed:
            return f"PASS  {self.name}"
        return f"FAIL  {self.name}" + (f"\n      hint: {self.hint}" if self.hint else "")


def report(name: str, passed: bool, hint: str = "") -> CheckResult:
    """The result of one check, with a hint shown only on failure."""
    return CheckResult(name, bool(passed), "" if passed else hint)


def _tiny_problem(seed: int = 0):
    """A small model and batch shaped like the digits data."""
    gen = torch.Generator().manual_seed(seed)
    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=seed)
    x = torch.rand(16, 1, 8, 8, generator=gen)
    y = torch.randint(0, 10, (16,), generator=gen)
    return model, x, y


def check_train_step(learner_step) -> CheckResult:
    """Two steps of the learner's train_step must match the reference exactly (same model, batch, optimizer)."""
    model_ref, x, y = _tiny_problem()
    model_you = copy.deepcopy(model_ref)
    opt_ref = torch.optim.SGD(model_ref.parameters(), lr=0.1, momentum=0.9)
    opt_you = torch.optim.SGD(model_you.parameters(), lr=0.1, momentum=0.9)
    before = [p.detach().clone() for p in model_you.parameters()]
    for step in (1, 2):
        loss_ref = train.train_step(model_ref, x, y, opt_ref)
        loss_you = learner_step(model_you, x, y, opt_you)
        same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(model_ref.parameters(), model_you.parameters()))
        if all(torch.equal(a, b) for a, b in zip(before, model_you.parameters())):
            return report("train_step", False, "the weights did not change: call optimizer.step() after loss.backward()")
        if not same:
            hint = ("step 1 matched but step 2 did not: gradients accumulate across steps, call optimizer.zero_grad() first"
                    if step == 2 else "the weights differ from the reference after one step: compute "
                    "loss = F.cross_entropy(model(x), y), then loss.backward(), then optimizer.step()")
            return report("train_step", False, hint)
        if loss_you is None or abs(float(loss_you) - float(loss_ref)) > 1e-6:
            return report("train_step", False, f"return the batch loss (reference {float(loss_ref):.6f}, yours {loss_you!r})")
    return report("train_step: weights and loss equal the reference after 2 steps", True)


def check_throughput(learner_fn) -> CheckResult:
    """The learner's throughput(batch_size, step_times, warmup) must drop warm-up steps and use the median."""
    cases = [
        (32, [0.9, 0.3, 0.10, 0.11, 0.10, 0.12, 0.10], 2),
        (64, [2.0, 0.20, 0.21, 0.90, 0.20], 1),  # a slow outlier: a mean would be pulled up
    ]
    for batch, times, warmup in cases:
        expected = measure.throughput_from_step_times(batch, times, warmup)
        got = learner_fn(batch, times, warmup)
        if got is None or abs(float(got) - expected) > 1e-6 * expected:
            mean_all = batch / (sum(times) / len(times))
            hint = ("divide the batch size by the *median* of the step times after the warm-up steps "
                    f"(expected {expected:.1f} samples/s, got {got!r})")
            if got is not None and abs(float(got) - mean_all) < 1e-6 * mean_all:
                hint = "you included the warm-up steps and used the mean: drop step_times[:warmup], then take the median"
            return report("throughput", False, hint)
    return report("throughput: warm-up excluded, median used", True)


def check_top_self_cpu_op(answer: str, prof) -> CheckResult:
    """The answer must name the operator with the largest *self* CPU time in the profile."""
    events = prof.key_averages()
    expected = max(events, key=lambda e: e.self_cpu_time_total).key
    by_total = max(events, key=lambda e: e.cpu_time_total).key
    if answer == expected:
        return report("profiler: top operator by self CPU time", True)
    hint = "sort the table by self CPU time: prof.key_averages().table(sort_by='self_cpu_time_total')"
    if answer == by_total:
        hint = ("that is the largest *total* CPU time, which includes the operators it calls; "
                "self CPU time counts only the operator's own work")
    return report("profiler: top operator by self CPU time", False, hint)


def check_median_timer(learner_timer) -> CheckResult:
    """The learner's timer(fn, warmup, repeats) must skip slow warm-up calls and return the median of the rest."""
    durations = iter([0.08, 0.08] + [0.010, 0.012, 0.011, 0.030, 0.011])

    def work():
        time.sleep(next(durations, 0.010))

    got = learner_timer(work, warmup=2, repeats=5)
    expected = 0.011
    if got is None:
        return report("median timer", False, "return the median duration in seconds")
    passed = abs(float(got) - expected) < 0.004
    hint = (f"expected about {expected * 1e3:.0f} ms, got {float(got) * 1e3:.1f} ms: call fn() `warmup` times "
            "without timing it, then time each of `repeats` calls and return statistics.median of them")
    return report("median timer: warm-up skipped, median of repeats", passed, hint)


def check_average_gradients(learner_fn, world_size: int = 2) -> CheckResult:
    """Run the learner's average_gradients in real ranks (its source is sent over) and compare with DDP."""
    import inspect
    import textwrap

    from . import ddp
    from .launch import RankError, launch

    try:
        source = textwrap.dedent(inspect.getsource(learner_fn))
    except (OSError, TypeError):
        return report("average_gradients", False, "define average_gradients with def in a notebook cell")
    try:
        diffs = launch(ddp.manual_allreduce_worker, world_size, args=(source, learner_fn.__name__), timeout=120)
    except RankError as err:
        return report("average_gradients", False, f"a rank failed: {err.message}")
    worst = max(diffs)
    hint = (f"weights differ from DDP's by up to {worst:.2e}: all_reduce each p.grad (it sums by default), "
            "then divide by world_size")
    return report(f"average_gradients matches DDP on {world_size} ranks (max diff {'<= 1e-6' if worst <= 1e-6 else '> 1e-6'})",
                  worst <= 1e-6, hint)


def check_shard(learner_shard) -> CheckResult:
    """The learner's shard(n, rank, world_size) must cover every index once, with balanced shares."""
    for n, world_size in [(10, 2), (10, 3), (7, 4), (3, 5), (1000, 8)]:
        shares = [list(learner_shard(n, r, world_size)) for r in range(world_size)]
        flat = sorted(i for share in shares for i in share)
        if flat != list(range(n)):
            missing, repeated = set(range(n)) - set(flat), len(flat) - len(set(flat))
            return report("shard", False, f"n={n}, world_size={world_size}: {len(missing)} index(es) missing and "
                          f"{repeated} repeated; every index must land on exactly one rank")
        sizes = [len(share) for share in shares]
        if max(sizes) - min(sizes) > 1:
            return report("shard", False, f"n={n}, world_size={world_size}: shard sizes {sizes}; they may differ by one at most")
    return report("shard: every index on exactly one rank, sizes balanced", True)


def check_epoch_loop(learner_run_epochs, learner_scaled_lr) -> CheckResult:
    """The learner's loop must reshuffle each epoch (set_epoch) and scale the learning rate linearly."""
    from . import data

    dataset = data.to_dataset(*data.synthetic_images(32, image_shape=(1, 4, 4)))
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True, seed=0)
    orders = []

    class RecordingLoader:
        def __iter__(self):
            orders.append(list(sampler))
            return iter(())

    learner_run_epochs(sampler, RecordingLoader(), None, None, 3)
    if len(orders) != 3:
        return report("epoch loop", False, f"the loop ran {len(orders)} epochs instead of 3")
    if orders[0] == orders[1] or orders[1] == orders[2]:
        return report("epoch loop", False, "every epoch reads the data in the same order: call sampler.set_epoch(epoch) "
                      "at the start of each epoch")
    for base, world_size in [(0.05, 2), (0.1, 4), (0.01, 8)]:
        got = learner_scaled_lr(base, world_size)
        if got is None or abs(float(got) - base * world_size) > 1e-12:
            return report("epoch loop", False, f"scaled_lr({base}, {world_size}) gave {got!r}: the global batch is "
                          "world_size times larger, so scale the learning rate by world_size (linear scaling)")
    return report("epoch loop: a new order every epoch, learning rate scaled linearly", True)


def check_scatter(learner_scatter) -> CheckResult:
    """The learner's scatter(batch, devices) must give one chunk per device: in order, sizes differing by one at most."""
    from . import dp

    for n, k in [(8, 2), (10, 3), (10, 4), (7, 4), (5, 5)]:
        batch = torch.arange(n * 2, dtype=torch.float32).reshape(n, 2)
        devices = [torch.device("cpu")] * k
        try:
            got = list(learner_scatter(batch, devices))
        except Exception as exc:  # the learner's code may raise anything
            return report("scatter", False, f"scatter(batch of {n}, {k} devices) raised {type(exc).__name__}: {exc}")
        expected = dp.scatter(batch, devices)
        sizes = [len(c) for c in got]
        if len(got) != k:
            hint = f"batch of {n} over {k} devices gave {len(got)} chunks: return exactly one chunk per device"
            if sizes == [len(c) for c in torch.chunk(batch, k)]:
                hint += " (torch.chunk makes chunks of ceil(n/k) and may return fewer than k)"
            return report("scatter", False, hint)
        if sizes != [len(c) for c in expected]:
            hint = (f"batch of {n} over {k} devices: sizes {sizes}, expected {[len(c) for c in expected]}: "
                    "n // k each, plus one for the first n % k devices")
            return report("scatter", False, hint)
        if not all(torch.equal(a, b) for a, b in zip(got, expected)):
            return report("scatter", False, "the chunks hold the wrong rows: chunk i must be the next consecutive rows "
                          "of the batch, in order (use torch.split with the sizes)")
    return report("scatter: one chunk per device, consecutive rows, sizes balanced (uneven batches too)", True)


def check_gather(learner_gather) -> CheckResult:
    """The learner's gather(outputs, device) must concatenate the outputs in device order on `device`."""
    gen = torch.Generator().manual_seed(0)
    outputs = [torch.randn(size, 10, generator=gen) for size in (4, 3, 3)]
    try:
        got = learner_gather(outputs, torch.device("cpu"))
    except Exception as exc:
        hint = f"gather raised {type(exc).__name__}: {exc}"
        if "stack expects each tensor to be equal size" in str(exc):
            hint = "torch.stack needs equal sizes and adds a dimension: concatenate along dim 0 with torch.cat"
        return report("gather", False, hint)
    expected = torch.cat(outputs)
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return report("gather", False, f"expected one tensor of shape {tuple(expected.shape)} (all rows, in order), got {shape}")
    if not torch.equal(got, expected):
        return report("gather", False, "the rows are out of order: concatenate the outputs in device order")
    return report("gather: outputs concatenated in device order", True)


def check_reduce_gradients(learner_reduce) -> CheckResult:
    """The learner's reduce_gradients(model, replicas) must add the replicas' gradients into the model's."""
    from . import dp

    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=0)
    replicas = [copy.deepcopy(model) for _ in range(2)]
    gen = torch.Generator().manual_seed(1)
    for m in (model, *replicas):
        for p in m.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
    mine = copy.deepcopy(model)  # deepcopy leaves .grad behind: copy it over
    own = [p.grad.clone() for p in model.parameters()]
    for p, g in zip(mine.parameters(), own):
        p.grad = g.clone()
    try:
        learner_reduce(mine, replicas)
    except Exception as exc:
        return report("reduce_gradients", False, f"reduce_gradients raised {type(exc).__name__}: {exc}")
    dp.reduce_gradients(model, replicas)
    got = [p.grad for p in mine.parameters()]
    if all(g is not None and torch.allclose(g, e, atol=1e-6) for g, e in zip(got, (p.grad for p in model.parameters()))):
        return report("reduce_gradients: replicas' gradients summed into device 0's model", True)
    if all(g is not None and torch.allclose(g, o) for g, o in zip(got, own)):
        return report("reduce_gradients", False, "the model's gradients did not change: add each replica's p.grad "
                      "into the model's p.grad (in place, under torch.no_grad())")
    mean = [(o + sum(r_p.grad for r_p in rp)) / 3 for o, *rp in zip(own, *(r.parameters() for r in replicas))]
    if all(g is not None and torch.allclose(g, m, atol=1e-6) for g, m in zip(got, mean)):
        return report("reduce_gradients", False, "you averaged: DataParallel sums. The loss was one mean over the whole "
                      "gathered batch, so each replica's gradient is already its share of the total")
    others = [sum(r_p.grad for r_p in rp) for rp in zip(*(r.parameters() for r in replicas))]
    if all(g is not None and torch.allclose(g, o, atol=1e-6) for g, o in zip(got, others)):
        return report("reduce_gradients", False, "device 0's own gradient was replaced: add the replicas' gradients to it")
    return report("reduce_gradients", False, "expected model.grad + the sum of the replicas' grads for every parameter")


def check_data_parallel_step(learner_scatter, learner_gather, learner_reduce) -> CheckResult:
    """A real DataParallel step run with the learner's three phases must give the single-device gradients."""
    from . import dp

    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=0)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.rand(15, 1, 8, 8, generator=gen), torch.randint(0, 10, (15,), generator=gen)
    plan = dp.plan_devices(2)
    try:
        diff = dp.gradient_difference(model, x, y, plan, scatter_fn=learner_scatter, gather_fn=learner_gather,
                                      reduce_fn=learner_reduce)
    except Exception as exc:
        return report("DataParallel step with your phases", False, f"the step raised {type(exc).__name__}: {exc}")
    return report(f"DataParallel step with your phases equals one device on a batch of 15 (max diff "
                  f"{'<= 1e-5' if diff <= 1e-5 else '> 1e-5'})", diff <= 1e-5,
                  f"gradients differ from one device's by up to {diff:.2e}: run the three checks above first")


def check_gpipe_order(learner_order) -> CheckResult:
    """The learner's gpipe_order(stages, micro_batches) must list, per stage, all forwards then all backwards."""
    from . import pipeline as pl

    for stages, micro in [(2, 4), (3, 2), (4, 8), (1, 3)]:
        expected = [[str(op) for op in ops] for ops in pl.gpipe(stages, micro).ops]
        try:
            got = [[str(op) for op in ops] for ops in learner_order(stages, micro)]
        except Exception as exc:
            return report("GPipe order", False, f"gpipe_order({stages}, {micro}) raised {type(exc).__name__}: {exc}")
        if got == expected:
            continue
        hint = f"gpipe_order({stages}, {micro}) gave {got[:2]}..., expected {expected[:2]}..."
        if len(got) != stages:
            hint = f"return one list per stage ({stages} lists), got {len(got)}"
        elif got and sorted(got[0]) == sorted(expected[0]) and got[0][:micro] != expected[0][:micro]:
            hint = ("GPipe runs every forward first (F0 ... F{M-1}), then every backward (B0 ... B{M-1}), "
                    "the same on every stage; interleaving them is 1F1B")
        return report("GPipe order", False, hint)
    return report("GPipe order: all forwards, then all backwards, on every stage", True)


def check_bubble_from_timeline(learner_bubble, timeline, stages: int) -> CheckResult:
    """The learner's bubble(intervals, stages) must give idle / (stages x makespan), on a made-up and a measured timeline."""
    from . import pipeline as pl
    from .plots import Interval

    made_up = [Interval("stage 0", "forward", 0, 1), Interval("stage 1", "forward", 1, 2),
               Interval("stage 1", "backward", 2, 4), Interval("stage 0", "backward", 4, 6)]
    for name, intervals, k in (("a made-up 2-stage timeline", made_up, 2), ("your measured timeline", timeline, stages)):
        expected = pl.bubble_fraction(intervals, k)
        try:
            got = learner_bubble(list(intervals), k)
        except Exception as exc:
            return report("bubble from a timeline", False, f"raised {type(exc).__name__}: {exc}")
        if got is not None and abs(float(got) - expected) <= 1e-9:
            continue
        hint = (f"on {name} expected {expected:.4f}, got {got!r}: makespan = last end - first start; "
                "bubble = 1 - (sum of op durations) / (stages x makespan)")
        if got is not None and abs(float(got) - (1 - expected)) <= 1e-9:
            hint = "that is the busy share (utilisation); the bubble is the idle share: 1 minus it"
        return report("bubble from a timeline", False, hint)
    return report("bubble from a timeline: idle / (stages x makespan)", True)


def check_best_split(learner_split) -> CheckResult:
    """The learner's best_split(times, stages) must minimise the slowest stage over every contiguous split."""
    import random

    from . import pipeline as pl

    rng = random.Random(0)
    cases = [([5.0, 7.0, 7.0, 4.0, 0.1, 0.8, 0.1], 2), ([1, 1, 1, 1, 1, 1], 3), ([10, 1, 1, 1], 2), ([3, 3], 2)]
    cases += [([round(rng.uniform(0.1, 9), 2) for _ in range(rng.randint(4, 9))], rng.randint(2, 4)) for _ in range(6)]
    for times, stages in cases:
        expected = pl.balanced_split(times, stages)
        best = max(_stage_sums(times, expected))
        try:
            got = tuple(learner_split(list(times), stages))
            slowest = max(_stage_sums(times, got))
            pl.check_split([{"type": "flatten"}] * len(times), got)
        except Exception as exc:
            return report("best split", False, f"best_split({times}, {stages}) failed: {type(exc).__name__}: {exc}")
        if len(got) != stages - 1:
            return report("best split", False, f"{stages} stages need {stages - 1} split point(s), got {list(got)}")
        if slowest > best + 1e-9:
            return report("best split", False, f"times {times}, {stages} stages: your split {list(got)} has a slowest "
                          f"stage of {slowest:.2f}, but {list(expected)} gets {best:.2f}: try every split "
                          "(itertools.combinations(range(1, n), stages - 1)) and keep the one whose slowest stage is fastest")
    return report("best split: the slowest stage is as fast as it can be", True)


def _stage_sums(times, split):
    bounds = [0, *split, len(times)]
    return [sum(times[a:b]) for a, b in zip(bounds, bounds[1:])]


# --- lab 06: the scaling report ------------------------------------------------------------------------------------

def check_speedup_efficiency(learner_fn) -> CheckResult:
    """speedup_and_efficiency(row, baseline) gives samples/s over the baseline's, and that per unit of hardware."""
    from . import report as scaling

    cases = [({"samples_per_s": 300.0, "world_size": 2, "threads": 1}, {"samples_per_s": 200.0, "world_size": 1, "threads": 1}),
             ({"samples_per_s": 900.0, "world_size": 4, "threads": 1}, {"samples_per_s": 300.0, "world_size": 1, "threads": 1}),
             ({"samples_per_s": 500.0, "world_size": 1, "threads": 2}, {"samples_per_s": 400.0, "world_size": 1, "threads": 1})]
    for row, base in cases:
        compared = scaling.Compared(row, base)
        expected = (compared.speedup, compared.efficiency)
        try:
            got = tuple(float(v) for v in learner_fn(dict(row), dict(base)))
        except Exception as exc:
            return report("speedup and efficiency", False, f"raised {type(exc).__name__}: {exc}")
        if len(got) == 2 and all(abs(a - b) <= 1e-9 for a, b in zip(got, expected)):
            continue
        hint = (f"for {row} against {base} expected (speedup, efficiency) = ({expected[0]:.3f}, {expected[1]:.3f}), "
                f"got {got}")
        if len(got) == 2 and abs(got[0] - expected[0]) <= 1e-9:
            hint += ": efficiency = speedup / (ranks x threads of the row over those of the baseline)"
        elif len(got) == 2 and abs(got[0] - 1 / expected[0]) <= 1e-9:
            hint += ": speedup = the row's samples/s over the baseline's, not the other way round"
        return report("speedup and efficiency", False, hint)
    return report("speedup and efficiency", True)


def check_serial_fraction(learner_fit) -> CheckResult:
    """fit_serial_fraction(points) recovers the serial fraction of Amdahl's law from (devices, speedup) pairs."""
    from . import report as scaling

    for s in (0.0, 0.1, 0.35):
        points = [(n, float(scaling.amdahl_speedup(s, n))) for n in (2, 4, 8)]
        try:
            got = float(learner_fit(points))
        except Exception as exc:
            return report("serial fraction", False, f"raised {type(exc).__name__}: {exc}")
        if abs(got - s) > 1e-6:
            hint = f"speedups {[(n, round(v, 3)) for n, v in points]} come from s = {s}, you gave {got:.4f}"
            if abs(got - (1 - s)) <= 1e-6:
                hint += ": that is the parallel fraction; the serial fraction is 1 minus it"
            return report("serial fraction", False, hint + ". Amdahl: 1/S = s + (1 - s)/N, linear in s")
    noisy = [(2, 1.9), (4, 2.5), (8, 3.6)]
    expected = scaling.fit_serial_fraction(noisy)
    got = float(learner_fit(noisy))
    if abs(got - expected) > 0.02:
        return report("serial fraction", False, f"on noisy points {noisy} expected about {expected:.3f}, got {got:.3f}: "
                       "fit all the points (least squares), not only the first")
    return report("serial fraction: Amdahl's s from measured speedups", True)


def check_predict_speedup(learner_predict) -> CheckResult:
    """predict_speedup(s, n) is Amdahl's law."""
    from . import report as scaling

    for s, n in [(0.0, 4), (0.1, 4), (0.05, 8), (1.0, 4), (0.2, 1)]:
        expected = float(scaling.amdahl_speedup(s, n))
        try:
            got = float(learner_predict(s, n))
        except Exception as exc:
            return report("predicted speedup", False, f"raised {type(exc).__name__}: {exc}")
        if abs(got - expected) > 1e-9:
            return report("predicted speedup", False, f"predict_speedup({s}, {n}) should be {expected:.4f}, got {got:.4f}: "
                           "S(N) = 1 / (s + (1 - s) / N)")
    return report("predicted speedup: Amdahl's law", True)
