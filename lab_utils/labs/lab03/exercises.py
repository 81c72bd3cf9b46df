"""Lab 03: gradient averaging in real ranks, sharding, the epoch loop, a metric over ranks, gradient accumulation."""
from __future__ import annotations

from ...exercises.core import ANY, Exercise, FROM_LESSON, Named, close, max_abs_diff, register

SETUP = "import torch\nimport torch.distributed as dist\nfrom lab_utils.train import train_step"


# ---- average_gradients, run in real ranks -------------------------------------------------------------------------

CHECK_RANKS = 3  # not the lesson's 2: a world size hard-coded as 2 must fail


def _average_cases(rng):
    return {"seed": rng.randrange(10**6), "per_rank": rng.choice([4, 8, 12]), "lr": rng.choice([0.05, 0.1, 0.3])}


def _average_problem(case, world_size):
    """A seeded model and a global batch of world_size x per_rank digits-shaped images."""
    import torch

    from ... import spec

    gen = torch.Generator().manual_seed(case["seed"])
    n = world_size * case["per_rank"]
    x, y = torch.rand(n, 1, 8, 8, generator=gen), torch.randint(0, 10, (n,), generator=gen)
    return spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=case["seed"]), x, y


def averaging_worker(rank, world_size, average_gradients, case):
    """One SGD step on this rank's share of the global batch, gradients averaged by `average_gradients`."""
    import torch
    import torch.nn.functional as F

    from ... import tensors
    from ...launch import process_group

    import torch.distributed as dist

    with process_group(timeout_s=60):
        model, x, y = _average_problem(case, world_size)
        mine = slice(rank * case["per_rank"], (rank + 1) * case["per_rank"])
        F.cross_entropy(model(x[mine]), y[mine]).backward()
        reduced = []  # what each all_reduce call was given: a p.grad, a p.data, or another tensor (a copy)
        weights = {p.data_ptr() for p in model.parameters()}
        grads = {p.grad.data_ptr() for p in model.parameters() if p.grad is not None}
        all_reduce = dist.all_reduce

        handles = []  # an async_op=True call's handle, and whether the learner waited on it

        def recording_all_reduce(tensor, *args, **kwargs):
            ptr = tensor.data_ptr()
            reduced.append("grad" if ptr in grads else "data" if ptr in weights else "other")
            op = kwargs.get("op", args[0] if args else dist.ReduceOp.SUM)
            reduced.append(f"op:{getattr(op, 'name', op)}")
            work = all_reduce(tensor, *args, **kwargs)
            if work is None:
                return None
            handles.append(_Handle(work))
            return handles[-1]

        # also the learner's own name for it (`from torch.distributed import all_reduce`), so no call goes unseen
        names = [k for k, v in getattr(average_gradients, "__globals__", {}).items() if v is all_reduce]
        dist.all_reduce = recording_all_reduce
        for name in names:
            average_gradients.__globals__[name] = recording_all_reduce
        try:
            average_gradients(model, world_size)
        finally:
            dist.all_reduce = all_reduce
            for name in names:
                average_gradients.__globals__[name] = all_reduce
        torch.optim.SGD(model.parameters(), lr=case["lr"]).step()
        flat = tensors.flat_weights(model).tolist()
        reduced += ["unwaited"] * any(not h.waited for h in handles)
        for handle in handles:  # none left in flight when the process group closes
            handle.work.wait()
        return {"weights": flat, "reduced": sorted(set(reduced))}


class _Handle:
    """An async all_reduce's work handle, noting whether the learner waited on it (wait() or get_future())."""

    def __init__(self, work):
        self.work, self.waited = work, False

    def wait(self, *args, **kwargs):
        self.waited = True
        return self.work.wait(*args, **kwargs)

    def get_future(self):
        self.waited = True  # the future's own wait() is the learner's to call
        return self.work.get_future()

    def __getattr__(self, name):
        return getattr(self.work, name)


def _average_run(average_gradients, case, world_size: int = CHECK_RANKS):
    from ...launch import launch

    ranks = launch(averaging_worker, world_size, args=(average_gradients, case), timeout=120)
    return {"before": _flat(_average_problem(case, world_size)[0]), "ranks": [r["weights"] for r in ranks],
            "reduced": ranks[0]["reduced"]}


def _flat(model):
    from ... import tensors

    return tensors.flat_weights(model).tolist()


def _average_expected(case, world_size: int = CHECK_RANKS):
    """One process, one step on the whole global batch."""
    import torch
    import torch.nn.functional as F

    model, x, y = _average_problem(case, world_size)
    F.cross_entropy(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=case["lr"]).step()
    return _flat(model)


def _local_step(case, world_size: int, rank: int, scale: float) -> list[float]:
    """The weights after one SGD step on rank's own share, its gradient times `scale` and never all-reduced."""
    import torch
    import torch.nn.functional as F

    model, x, y = _average_problem(case, world_size)
    mine = slice(rank * case["per_rank"], (rank + 1) * case["per_rank"])
    (F.cross_entropy(model(x[mine]), y[mine]) * scale).backward()
    torch.optim.SGD(model.parameters(), lr=case["lr"]).step()
    return _flat(model)


def _average_judge_plain(got, expected, case):
    import numpy as np

    before, ranks = np.array(got["before"]), [np.array(r) for r in got["ranks"]]
    reduced = got.get("reduced", [])
    if "unwaited" in reduced:  # right or wrong weights, it raced the all-reduce
        return 0.0, ("an all_reduce(..., async_op=True) was never waited on: p.grad was read before the sum arrived; "
                     "call .wait() on each returned handle before dividing (or drop async_op)")
    ops = sorted({r[3:] for r in reduced if r.startswith("op:")} - {"SUM", "AVG"})
    if ops and max_abs_diff(ranks[0], expected) > 1e-5:
        return 0.0, (f"you all-reduced with ReduceOp.{ops[0]}: an average needs the sum, ReduceOp.SUM (the default), "
                     "divided by world_size")
    if any(max_abs_diff(r, ranks[0]) > 1e-6 for r in ranks):
        n = len(ranks)
        if all(max_abs_diff(r, _local_step(case, n, i, 1.0)) <= 1e-5 for i, r in enumerate(ranks)):
            return 0.0, _unreduced_message(got.get("reduced", []))
        if all(max_abs_diff(r, _local_step(case, n, i, 1.0 / n)) <= 1e-5 for i, r in enumerate(ranks)):
            return 0.0, (f"each rank divided its own gradient by world_size ({n}) but never all-reduced it: "
                         "all_reduce p.grad first (a sum over the ranks), then divide")
        return 0.0, ("the ranks ended with different weights: every rank must all_reduce every gradient, in place on "
                     "p.grad (an all-reduce of a copy leaves p.grad as it was)")
    if max_abs_diff(ranks[0], expected) <= 1e-5 and not _recorded(reduced):  # only a forged record gets here
        return 0.0, "the weights are right, but no dist.all_reduce call was recorded: all_reduce each p.grad"
    if max_abs_diff(ranks[0], expected) <= 1e-5:
        return 1.0, f"every rank equals one process on the global batch (max diff {max_abs_diff(ranks[0], expected):.1e})"
    update, right = ranks[0] - before, np.array(expected) - before
    ratio = float(update @ right / (right @ right))
    if abs(ratio - len(ranks)) < 0.05:
        return 0.0, (f"the update is {len(ranks)}x too large: all_reduce sums the gradients, so divide by world_size "
                     "(summed gradients act like a learning rate world_size times larger)")
    if abs(ratio * len(ranks) - 1) < 0.05:  # learner s12r4c: ReduceOp.AVG, then /= world_size (cell 52 names AVG)
        why = ("op=ReduceOp.AVG already divides the sum by world_size): keep AVG or the division, not both"
               if "op:AVG" in reduced else "once is enough): divide the summed gradient once")
        return 0.0, f"the update is {len(ranks)}x too small: the gradients were divided by world_size twice ({why}"
    divisor = _hard_coded_divisor(ratio, len(ranks))
    if divisor:
        return 0.0, (f"the gradients were divided by {divisor}, not by world_size ({len(ranks)} in this check): a "
                     f"hard-coded {divisor} is right on {divisor} ranks only; divide by the world_size argument")
    return 0.0, (f"after one step the weights differ from one process on the global batch by up to "
                 f"{max_abs_diff(ranks[0], expected):.1e}: all_reduce each p.grad, then divide by world_size")


def _recorded(reduced: list[str]) -> bool:
    """Whether `reduced` reads as averaging_worker's record of at least one call: distinct entries, sorted, naming
    what was reduced and with which op."""
    return (reduced == sorted(set(reduced)) and any(r in ("grad", "data", "other") for r in reduced)
            and any(r.startswith("op:") for r in reduced))


def _hard_coded_divisor(ratio: float, world_size: int) -> int | None:
    """The whole number k >= 2, other than world_size, that an update `ratio` times the right one was divided by."""
    if ratio <= 0:
        return None
    k = world_size / ratio
    return round(k) if 2 <= round(k) <= 64 and round(k) != world_size and abs(k - round(k)) < 0.05 * k else None


def _unreduced_message(reduced: list[str]) -> str:
    """Why p.grad stayed each rank's own, named from what the all_reduce calls were given (learner s13r6c: one
    message for p.data and for a copy of p.grad was hard to parse)."""
    said = "each rank stepped on its own gradient, as it was: p.grad was never all-reduced"
    if "data" in reduced:
        return (f"{said}; you all-reduced p.data, the weights, which every rank already shares before the step: "
                "all_reduce p.grad instead")
    if "other" in reduced:
        return (f"{said}; you all-reduced a copy (p.grad.clone(), or a new tensor), and p.grad kept its own value: "
                "all_reduce p.grad itself, in place, or copy the result back into it")
    return f"{said}: call dist.all_reduce(p.grad) for every parameter"


def _naming(judge, generic: tuple[str, ...] = ()):
    """`judge` whose failing messages name their mistake (all but those starting with `generic`) marked Named, so
    check() adds no Hint: that repeats or hands over the answer (learner s12r3c; lab 00's rule)."""
    def named(got, expected, case):
        fraction, message = judge(got, expected, case)
        return fraction, message if fraction >= 1.0 or message.startswith(generic) else Named(message)
    return named


_average_judge = _naming(_average_judge_plain)  # every message names the mistake and its fix


AVERAGE_GRADIENTS = Exercise("03", "average_gradients", _average_cases, _average_run, _average_expected,
                             _average_judge, "all_reduce each gradient (a sum), then divide by world_size",
                             setup=SETUP, ranks=CHECK_RANKS,
                             shape=lambda weights, case: {"before": weights, "ranks": [weights] * CHECK_RANKS,
                                                          "reduced": ANY})


# ---- shard ----------------------------------------------------------------------------------------------------------

def _shard_cases(rng):
    return [[rng.randint(1, 40), rng.randint(2, 6)] for _ in range(6)] + [[rng.randint(900, 1100), 7], [2, 4]]


def _shard_run(shard, cases):
    return [[[int(i) for i in shard(n, r, w)] for r in range(w)] for n, w in cases]


def _shard_judge_plain(got, expected, cases):
    for shares, (n, w) in zip(got, cases):
        flat = sorted(i for share in shares for i in share)
        if flat != list(range(n)):
            missing, repeated = set(range(n)) - set(flat), len(flat) - len(set(flat))
            if not missing:  # nothing left out: the blocks overlap, whatever the remainder
                return 0.0, (f"n={n}, world_size={w}: {repeated} index(es) read by more than one rank: the blocks "
                             "overlap; each rank's block must start where the previous rank's stops")
            left = n % w
            if left and missing == set(range(n - left, n)) and not repeated:  # floor blocks
                every = " (n < world_size: n // world_size is 0, so every index is left over)" if n < w else ""
                return 0.0, (f"n={n}, world_size={w}: the last {left} index(es), the n % world_size left over "
                             f"after equal blocks, are on no rank{every}; give {left} of the ranks one row more")
            return 0.0, (f"n={n}, world_size={w}: {len(missing)} index(es) missing and {repeated} repeated; "
                         "every index must land on exactly one rank")
        sizes = [len(share) for share in shares]
        if max(sizes) - min(sizes) > 1:
            return 0.0, f"n={n}, world_size={w}: shard sizes {sizes}; they may differ by one at most"
        scattered = next((r for r, share in enumerate(shares)
                          if share and share != list(range(share[0], share[0] + len(share)))), None)
        if scattered is not None:
            return 0.0, (f"n={n}, world_size={w}: rank {scattered} reads {_shown(shares[scattered])}, not one row "
                         "range: each rank reads consecutive rows (start, start + 1, ..., stop - 1), as when each "
                         "rank reads its own block of a file; every world_size-th index is DistributedSampler's way")
    return 1.0, "every index on exactly one rank, sizes balanced"


def _shown(indices: list[int]) -> str:
    return str(indices if len(indices) <= 6 else [*indices[:5], "..."]).replace("'...'", "...")


_shard_judge = _naming(_shard_judge_plain)


SHARD = Exercise("03", "shard", _shard_cases, _shard_run, lambda cases: [[ANY] * w for _, w in cases], _shard_judge,
                 "one range of consecutive indices per rank, every index on exactly one rank, shares differing by "
                 "one at most")


# ---- the epoch loop --------------------------------------------------------------------------------------------------

def _epoch_cases(rng):
    return {"seed": rng.randrange(10**6), "n": rng.choice([24, 30, 40]), "rank": rng.randint(0, 1), "epochs": rng.randint(3, 4)}


def _epoch_problem(case):
    """A DistributedSampler over a tiny seeded dataset, a model that trains on it, and its optimizer."""
    import torch

    from ... import data

    dataset = data.to_dataset(*data.synthetic_images(case["n"], image_shape=(1, 4, 4), seed=case["seed"]))
    sampler: torch.utils.data.DistributedSampler[int] = torch.utils.data.DistributedSampler(
        dataset, num_replicas=2, rank=case["rank"], shuffle=True, seed=case["seed"])
    torch.manual_seed(case["seed"])
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 10))
    return dataset, sampler, model, torch.optim.SGD(model.parameters(), lr=0.01)


def _epoch_run(run_epochs, case):
    import torch

    dataset, sampler, model, optimizer = _epoch_problem(case)
    orders: list[list[int]] = []
    late: list[int] = []  # late: epochs whose set_epoch came only after their order was drawn
    set_to: list = []  # every value the sampler's epoch was set to (by set_epoch or `sampler.epoch =`), in order

    class RecordingSampler(type(sampler)):  # type: ignore[misc]
        """The same sampler; records every epoch it is given and whether it came after its order was drawn."""

        @property
        def epoch(self):
            return self.__dict__["epoch"]

        @epoch.setter
        def epoch(self, epoch):
            set_to.append(epoch)
            if epoch == len(orders) - 1 and self.__dict__["epoch"] != epoch:  # its `for` has drawn its order
                late.append(epoch)
            self.__dict__["epoch"] = epoch

    sampler.__class__ = RecordingSampler

    class RecordingLoader:
        """Draws the sampler's order when an epoch's `for` starts, as a DataLoader does; yields two small batches."""

        def __iter__(self):
            orders.append(list(sampler))
            batches = [orders[-1][:4], orders[-1][4:8]]
            return iter([(torch.stack([dataset[i][0] for i in b]), torch.stack([dataset[i][1] for i in b]))
                         for b in batches])

    run_epochs(sampler, RecordingLoader(), model, optimizer, case["epochs"])
    return {"orders": orders, "late": late, "seed": sampler.seed, "set_to": set_to}


def _epoch_expected(case):
    _, sampler, _, _ = _epoch_problem(case)
    orders: list[list[int]] = []
    for epoch in range(case["epochs"]):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return {"orders": orders, "late": [], "seed": case["seed"]}


def _epoch_judge_plain(got, expected, case):
    got_orders, orders = got["orders"], expected["orders"]
    if len(got_orders) != len(orders):
        return 0.0, f"the loop ran {len(got_orders)} epochs instead of {len(orders)}"
    if close(got_orders, orders) and not set(range(1, len(orders))) <= set(got.get("set_to", [])):
        return 0.0, "the orders are right, but no set_epoch call was recorded for every epoch"  # only a forgery
    if close(got_orders, orders):
        return 1.0, "a new order every epoch, the one set_epoch gives"
    if got["late"]:
        return 0.0, (f"sampler.set_epoch({got['late'][0]}) came too late: the `for x, y in loader` of epoch "
                     f"{got['late'][0]} had already asked the sampler for its order (a loader draws it when the loop "
                     "starts), so that epoch read the previous epoch's order; call it before the inner loop")
    if all(g == got_orders[0] for g in got_orders):
        return 0.0, ("every epoch reads the data in the same order: call sampler.set_epoch(epoch) at the start of each "
                     "epoch (DistributedSampler ignores torch's global seed: it shuffles with its own seed + epoch)")
    shifted = _shifted_epochs(got_orders, case)
    if shifted:
        return 0.0, (f"the orders are those of sampler.set_epoch(epoch {'+' if shifted > 0 else '-'} {abs(shifted)}): each epoch does get a new order, "
                     "but not the one its number gives, so a run resumed at epoch e (or one process checked against "
                     "the ranks) draws another order than the run that never stopped; pass the loop's own epoch")
    called = list(dict.fromkeys(got.get("set_to", [])))  # each value once, in order
    if called and called != list(range(len(orders))):  # learner s13r6c: set_epoch(random) got the generic hint
        shown = ", ".join(map(str, called[:4])) + (", ..." if len(called) > 4 else "")
        return 0.0, (f"the sampler's epoch was set to {shown}, not the loop's epoch numbers 0, 1, 2, ...: each "
                     "epoch does get a new order, but one that another rank (or a resumed run) cannot derive; pass "
                     "the loop's own epoch")
    if got.get("seed", expected["seed"]) != expected["seed"]:
        return 0.0, ("the loop changed sampler.seed: leave it and call sampler.set_epoch(epoch), which reseeds the "
                     "shuffle with seed + epoch, so every rank (and a resumed run) derives the same new order per "
                     "epoch from the one seed they share")
    return 0.0, "the orders differ from those sampler.set_epoch(epoch) gives for epoch = 0, 1, 2 in turn"


def _shifted_epochs(orders, case) -> int | None:
    """The offset k (-2..2, not 0) for which `orders` are those of set_epoch(epoch + k), else None."""
    _, sampler, _, _ = _epoch_problem(case)
    for k in (1, -1, 2, -2):
        drawn = []
        for epoch in range(len(orders)):
            sampler.set_epoch(epoch + k)
            drawn.append(list(sampler))
        if drawn == orders:
            return k
    return None


_epoch_judge = _naming(_epoch_judge_plain, ("the orders differ",))


RUN_EPOCHS = Exercise("03", "run_epochs", _epoch_cases, _epoch_run, _epoch_expected, _epoch_judge,
                      "reshuffle at the start of every epoch", setup=SETUP,
                      shape=lambda right, case: {"orders": right["orders"], "late": ANY, "seed": ANY,
                                                 "set_to": ANY})


register(AVERAGE_GRADIENTS, SHARD, RUN_EPOCHS)


# ---- a metric over all ranks, run in real ranks --------------------------------------------------------------------

def _mean_cases(rng):
    """Two ranks with different counts and clearly different means, so that the mean of the means, the sum, or one
    rank's own mean is never the global mean."""
    counts = rng.sample(range(1, 51), 2)
    means = [rng.uniform(0.5, 1.5), rng.uniform(2.0, 3.0)]
    return {"totals": [round(m * c, 4) for m, c in zip(means, counts)], "counts": counts}


def metric_worker(rank, world_size, global_mean, case):
    """Each rank calls the learner's global_mean on its own (total, count)."""
    from ...launch import process_group

    with process_group(timeout_s=60):
        mean = global_mean(case["totals"][rank], case["counts"][rank])
        kind = "float" if isinstance(mean, (int, float)) and not isinstance(mean, bool) else type(mean).__name__
        return [kind, float(mean)]


def _mean_run(global_mean, case):
    from ...launch import launch

    return launch(metric_worker, len(case["counts"]), args=(global_mean, case), timeout=120)


def _mean_judge_plain(kinds_and_values, expected, case):
    totals, counts = case["totals"], case["counts"]
    got = [value for _, value in kinds_and_values]
    right = all(abs(g - expected) <= 1e-6 * abs(expected) for g in got)  # float32 sums are exact to about 1e-7
    kind = next((k for k, _ in kinds_and_values if k != "float"), None)
    if right and kind is not None:
        return 0.0, (f"the value is right, but your global_mean returned a {kind}, not a float: return a Python "
                     "number (tensor.item()), which is what a log line or a metric needs")
    if right:
        return 1.0, "the same mean over every rank's samples, on every rank"
    guesses = {"each rank returned its own mean: all_reduce the sum and the count first":
               [t / c for t, c in zip(totals, counts)],
               "that is the sum of the totals: divide by the summed count": [sum(totals)] * len(got),
               "that is the mean of the ranks' means: ranks that saw more samples must weigh more (sum totals and "
               "counts, then divide)": [sum(t / c for t, c in zip(totals, counts)) / len(counts)] * len(got),
               "that divides the summed totals by world_size, not by the number of samples":
               [sum(totals) / len(counts)] * len(got),
               "each rank divided the summed total by its own count: all_reduce the count too, so that every rank "
               "divides by the number of samples over all ranks": [sum(totals) / c for c in counts],
               "each rank divided the all-reduced total by its own count times world_size, as if every rank saw as "
               "many samples: they did not, so all_reduce the count too and divide by the summed count":
               [sum(totals) / (c * len(counts)) for c in counts]}
    for what, value in guesses.items():
        if all(abs(g - v) <= 1e-6 * max(1.0, abs(v)) for g, v in zip(got, value)):
            return 0.0, what
    worst = max(abs(g - expected) for g in got)
    disagree = max(got) - min(got) > 1e-6 * max(1.0, abs(expected))
    return 0.0, (f"the ranks returned {got}; expected {expected!r} on every rank (off by up to {worst:.2e})"
                 + (": the ranks disagree, so something each rank divides by (or adds) was not all-reduced"
                    if disagree else ""))


_mean_judge = _naming(_mean_judge_plain, ("the ranks returned",))


GLOBAL_MEAN = Exercise("03", "global_mean", _mean_cases, _mean_run,
                       lambda case: sum(case["totals"]) / sum(case["counts"]), _mean_judge,
                       "all_reduce the total and the count (sums), then divide one by the other", setup=SETUP, ranks=2,
                       shape=lambda mean, case: [[ANY, mean]] * len(case["counts"]))

register(GLOBAL_MEAN)


# ---- gradient accumulation with DDP, run in real ranks --------------------------------------------------------------

ACCUMULATION_STEPS = 2  # optimizer steps per check: a gradient left over from the first reaches the second


def _accumulate_cases(rng):
    return {"seed": rng.randrange(10**6), "micro": rng.choice([2, 3, 4]), "k": rng.choice([3, 4]),
            "lr": rng.choice([0.05, 0.1, 0.2])}


def _accumulate_problem(case, world_size):
    """A seeded model and, per optimizer step, a global batch of world_size x k micro-batches of `micro` images."""
    import torch

    from ... import spec

    gen = torch.Generator().manual_seed(case["seed"])
    shape = (ACCUMULATION_STEPS, world_size, case["k"], case["micro"])
    x, y = torch.rand(*shape, 1, 8, 8, generator=gen), torch.randint(0, 10, shape, generator=gen)
    return spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=case["seed"]), x, y


def _counted(events, name, method):
    """`method`, logging `name` in `events` at each call."""
    def counting(*args, **kwargs):
        events.append(name)
        return method(*args, **kwargs)
    return counting


def _logging_hook(events, bucket):
    """DDP's averaging of one bucket, logged as an "allreduce" event."""
    import torch.distributed as dist

    events.append("allreduce")
    grads = bucket.buffer().div_(dist.get_world_size())
    return dist.all_reduce(grads, async_op=True).get_future().then(lambda f: f.value()[0])


def accumulating_worker(rank, world_size, accumulation_step, case):
    """Two optimizer steps of the learner's accumulation_step on this rank's micro-batches, in a real DDP model; the
    weights, and the order of its forwards, all-reduces, zero_grads and steps."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ... import tensors
    from ...launch import process_group

    with process_group(timeout_s=60) as ctx:  # on GPU ranks, the model and the data on this rank's GPU
        model, x, y = _accumulate_problem(case, world_size)
        model, x, y = model.to(ctx.device), x.to(ctx.device), y.to(ctx.device)
        ddp_model = DDP(model, device_ids=[ctx.device] if ctx.device.startswith("cuda") else None)
        events: list[str] = []
        ddp_model.register_comm_hook(events, _logging_hook)
        ddp_model.register_forward_pre_hook(lambda module, args: events.append("forward"))
        optimizer = torch.optim.SGD(ddp_model.parameters(), lr=case["lr"])
        optimizer.step = _counted(events, "step", optimizer.step)  # type: ignore[method-assign]
        optimizer.zero_grad = _counted(events, "zero_grad", optimizer.zero_grad)  # type: ignore[method-assign]
        ddp_model.zero_grad = _counted(events, "zero_grad", ddp_model.zero_grad)  # type: ignore[method-assign]
        model.zero_grad = _counted(events, "zero_grad", model.zero_grad)
        ddp_model.no_sync = _counted(events, "no_sync", ddp_model.no_sync)  # type: ignore[method-assign]
        backward = torch.autograd.backward  # loss.backward() calls it: one event per backward pass
        torch.autograd.backward = _counted(events, "backward", backward)
        try:
            for step in range(ACCUMULATION_STEPS):
                events.append("call")
                accumulation_step(ddp_model, optimizer,
                                  [(x[step, rank, i], y[step, rank, i]) for i in range(case["k"])])
        finally:
            torch.autograd.backward = backward
        return {"weights": tensors.flat_weights(model).cpu().tolist(), "events": events}


def _accumulate_run(accumulation_step, case, world_size: int = 2):
    from ...launch import launch

    return launch(accumulating_worker, world_size, args=(accumulation_step, case), timeout=120)


def _accumulate_one_process(case, world_size: int = 2, *, scale: float = 1.0, rank: int | None = None):
    """One process, one plain step per global batch (its mean loss times `scale`); rank: that rank's data alone."""
    import torch
    import torch.nn.functional as F

    model, x, y = _accumulate_problem(case, world_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"])
    for step in range(ACCUMULATION_STEPS):
        mine = slice(None) if rank is None else slice(rank, rank + 1)
        xs, ys = x[step, mine].flatten(0, 2), y[step, mine].flatten(0, 2)
        optimizer.zero_grad()
        (F.cross_entropy(model(xs), ys) * scale).backward()
        optimizer.step()
    return _flat(model)


def _per_call(events):
    """The events of each call of accumulation_step."""
    calls: list[list[str]] = []
    for event in events:
        if event == "call":
            calls.append([])
        elif calls:
            calls[-1].append(event)
    return calls


def _synced_backwards(call):
    """How many of a call's micro-batches were all-reduced (an all-reduce after their forward, before the next)."""
    return sum("allreduce" in part for part in " ".join(call).split("forward")[1:])


def _backward_only_no_sync(call):
    """Whether a micro-batch's forward ran outside no_sync and its backward inside (no_sync entered, then its
    all-reduce ran anyway: DDP decides at the forward)."""
    return any("no_sync" in part and "allreduce" in part.split("no_sync", 1)[1]
               for part in " ".join(call).split("forward")[1:])


def _graphs_held(call):
    """The most forwards whose graphs were held at once: forwards in a row with no backward between them."""
    held = most = 0
    for event in call:
        held = held + 1 if event == "forward" else 0 if event == "backward" else held
        most = max(most, held)
    return most


def _zeroed_midway(call):
    """Whether a zero_grad ran after the call's first forward and before its step."""
    if "forward" not in call:
        return False
    stop = call.index("step") if "step" in call else len(call)
    return "zero_grad" in call[call.index("forward") + 1:stop]


def _accumulate_judge_plain(got, expected, case):
    import numpy as np

    k, n = case["k"], len(got)
    ranks = [np.array(r["weights"]) for r in got]
    calls = [c for r in got for c in _per_call(r["events"])]  # every rank's calls, in turn
    if len(calls) != n * ACCUMULATION_STEPS or len(ranks) != n or any(len(r) != len(expected) for r in ranks):
        return 0.0, "the ranks' record is incomplete: a rank's weights or calls are missing"
    steps, synced = [c.count("step") for c in calls], [_synced_backwards(c) for c in calls]
    if any(s > 1 for s in steps):
        return 0.0, (f"optimizer.step() ran {max(steps)} times in one call: that steps every micro-batch, each on "
                     f"a part of the batch; accumulate all {k} micro-batches' gradients, then step once")
    if any(s == 0 for s in steps):
        return 0.0, "optimizer.step() never ran: step once, after the last micro-batch's backward"
    if any(_zeroed_midway(c) for c in calls):
        return 0.0, ("zero_grad ran between micro-batches: it erased the gradients accumulated so far, so only the "
                     "last micro-batch's reached the step; zero the gradients once, before the first micro-batch")
    if not any(synced):
        return 0.0, ("no all-reduce ran: every backward was inside ddp_model.no_sync(), so each rank stepped on its "
                     "own gradients and the ranks now differ; run the last micro-batch's forward and backward outside "
                     "no_sync")
    if any(max_abs_diff(r, ranks[0]) > 1e-6 for r in ranks):
        return 0.0, ("the ranks ended with different weights: the last micro-batch's forward and backward must run "
                "outside no_sync, so that its backward all-reduces the accumulated gradients")
    gap = max_abs_diff(ranks[0], expected)
    if gap <= 1e-5:
        if any(_backward_only_no_sync(c) for c in calls):
            return 0.0, (f"the weights are right, but {max(synced)} of the {k} micro-batches were all-reduced: "
                         "no_sync() wrapped only loss.backward(), and DDP decides during the forward whether the "
                         "backward all-reduces; run each micro-batch's forward inside no_sync() too")
        held = max(_graphs_held(c) for c in calls)
        if held > 1:  # learner s13r7c: the k losses summed, one backward(), passed as 'one all-reduce a step'
            return 0.0, (f"the weights are right, but {held} micro-batches' forwards ran before one backward(): "
                         f"all {held} graphs (every activation of every micro-batch) were held in memory at once, "
                         "the memory accumulation exists to save; call backward() on each micro-batch's loss "
                         "(divided by k) before the next forward")
        if max(synced) > 1:
            return 0.0, (f"the weights are right, but {max(synced)} of the {k} micro-batches were all-reduced "
                         f"where 1 will do: run all but the last micro-batch inside ddp_model.no_sync() "
                         f"({k - 1} fewer all-reduces a step, counted here)")
        return 1.0, f"every rank equals one process on the global batch (max diff {gap:.1e}), one all-reduce a step"
    if max_abs_diff(ranks[0], _accumulate_one_process(case, n, scale=k)) <= 1e-5:
        return 0.0, (f"each update is {k}x too large: the loss was not divided by the number of micro-batches ({k}), "
                     "so the accumulated gradient is the sum of their means, not their mean")
    if not any("zero_grad" in c for c in calls):
        return 0.0, ("zero_grad never ran: the first step's gradient stayed in p.grad and was added to the second's; "
                     "zero the gradients once at the start of each step")
    return 0.0, (f"after {ACCUMULATION_STEPS} steps the weights differ from one process on the global batch by up to "
                 f"{gap:.1e}: zero once, divide each micro-batch's loss by {k}, no_sync on all but the last, step once")


_accumulate_judge = _naming(_accumulate_judge_plain, ("after ",))  # the last fallback keeps the hint


ACCUMULATION_STEP = Exercise("03", "accumulation_step", _accumulate_cases, _accumulate_run, _accumulate_one_process,
                             _accumulate_judge, "zero once; each micro-batch's loss divided by their number; the forward and "
                             "backward of all but the last micro-batch inside no_sync(); one optimizer.step()",
                             setup=SETUP + "\nimport contextlib\nimport torch.nn.functional as F", ranks=2,
                             shape=lambda weights, case: [{"weights": weights, "events": ANY}] * 2)

register(ACCUMULATION_STEP)
