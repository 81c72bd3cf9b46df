"""Lab 08: the server's synchronous averaging step (in real ranks), staleness from version counters, the learning
rate for a stale gradient."""
from __future__ import annotations

import functools
import json

import numpy as np

from ...exercises.core import Exercise, FROM_LESSON, close, max_abs_diff, named_unless, register

SETUP = "import torch"
SYNC_TOLERANCE = 1e-5


# ---- average_and_apply: the synchronous server's update, run in a real parameter server ---------------------------

WORKER_COUNTS = (3, 4)  # not the notebook's 2: an average that divides by a fixed number fails one of them


def _average_cases(rng):
    return {"seed": rng.randrange(10**6), "updates": rng.randint(3, 4), "batch_size": rng.choice([8, 16]),
            "lr": rng.choice([0.05, 0.1]), "momentum": 0.9,  # with momentum, every classic mistake leaves its own trace
            "workers": list(WORKER_COUNTS)}


def _config(case, n_workers):
    from .parameter_server import PSConfig

    return PSConfig(mode="sync", gradients=n_workers * case["updates"], batch_size=case["batch_size"], lr=case["lr"],
                    momentum=case["momentum"], seed=case["seed"], warmup=0, timeout_s=60)


AVERAGE_LINES = ("        parameter_server.average_and_apply(weights, optimizer, {w: g for w, (_, g) in waiting.items()})"
                 "  # exercise 1\n")


def serve_with(average_step):
    """Lab 08's serve (lab_utils.labs.lab08.lesson, generated from its notebook), its update replaced by
    `average_step(weights, optimizer, {worker: gradient})`: the edit the exercise asks for, made to the lesson's code."""
    from .lesson import serve
    from ...variants import variant

    edited = variant(serve, {AVERAGE_LINES: "        average_step(weights, optimizer, {w: g for w, (_, g) in waiting.items()})\n"},
                     name="the update is average_step", show=False)
    edited.__globals__["average_step"] = average_step
    return edited


def _average_run(average_and_apply, case):
    """One launch: a synchronous run of lab 08's parameter server with each number of workers, your update."""
    from .lesson import run_all, work
    from .parameter_server import run

    configs = [_config(case, n) for n in case["workers"]]
    servers = run(run_all, configs, serve_with(average_and_apply), work, n_workers=case["workers"], timeout_s=120)
    return {"runs": [server["weights"] for server in servers], "rank_order": order_probe(average_and_apply)}


# gradients that arrived in the order 3, 1, 2, whose float32 sum depends on the order: in rank order
# 1e8 - 1e8 + 1 = 1, in arrival order 1 + 1e8 (rounds to 1e8) - 1e8 = 0. The real runs' gradients differ only in
# their last bits, which a tolerance cannot tell from the reference's own rounding; these cannot hide it
ORDER_PROBE = {3: 1.0, 1: 1e8, 2: -1e8}


def order_probe(average_and_apply) -> float:
    """The weight after one update of a zero weight (SGD, lr 1, no momentum) with ORDER_PROBE's gradients, given in
    their arrival order: -1/3 when summed in rank order, 0 in arrival order."""
    import torch

    weights = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weights], lr=1.0)
    average_and_apply(weights, optimizer, {w: torch.tensor([g]) for w, g in ORDER_PROBE.items()})
    return float(weights.detach()[0])


def _average_expected(case):
    from . import parameter_server

    return {"runs": [parameter_server.single_process_weights(_config(case, n), n, case["updates"]).tolist()
                     for n in case["workers"]],
            "rank_order": -sum(ORDER_PROBE[w] for w in sorted(ORDER_PROBE)) / len(ORDER_PROBE)}


def wrong_update_weights(case, n_workers: int, rule: str):
    """The weights a synchronous server of n_workers ends with when its update follows `rule` (a classic mistake):
    "sum", "first", "last", "each", "each share" (one step per worker with gradient / n), "accumulate", "no_step",
    "manual at LR" (weights -= LR x mean, no optimizer)
    or "divide by K" (the sum divided by a fixed K)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.utils import vector_to_parameters

    from . import parameter_server
    from ... import tensors

    cfg = _config(case, n_workers)
    split = parameter_server.dataset_split(cfg.dataset, cfg.seed)
    weights: torch.Tensor = torch.nn.Parameter(parameter_server.initial_weights(split, cfg.seed))
    optimizer = torch.optim.SGD([weights], lr=cfg.lr, momentum=cfg.momentum)
    model = parameter_server.build_model(split, seed=0)
    workers = range(1, n_workers + 1)
    for step in range(case["updates"]):
        grads = {}
        for w in workers:
            vector_to_parameters(weights.detach().clone(), model.parameters())
            model.zero_grad()
            x, y = parameter_server.worker_batch(split, w, n_workers, step, cfg.batch_size)
            F.cross_entropy(model(x), y).backward()
            grads[w] = tensors.flat_grads(model)
        total: torch.Tensor = sum(grads[w] for w in workers)  # type: ignore[assignment]  # 0 + tensors: a tensor
        mean = total / n_workers
        if rule == "no_step":
            continue
        if rule.startswith("manual at "):
            with torch.no_grad():
                weights -= float(rule.removeprefix("manual at ")) * mean
            continue
        if rule in ("each", "each share"):
            for w in workers:
                weights.grad = grads[w] if rule == "each" else grads[w] / n_workers
                optimizer.step()
            continue
        if rule.startswith("divide by "):
            weights.grad = total / int(rule.removeprefix("divide by "))
        else:
            weights.grad = {"sum": total, "first": grads[1], "last": grads[n_workers],
                            "accumulate": mean if weights.grad is None else weights.grad + mean}[rule]
        optimizer.step()
    return weights.detach().numpy()


@functools.lru_cache(maxsize=256)
def _wrong_weights(case_json: str, n_workers: int, rule: str) -> tuple:
    """wrong_update_weights, once per case (the judge tries every rule on each answer it does not accept)."""
    return tuple(wrong_update_weights(json.loads(case_json), n_workers, rule).tolist())


MISTAKES = {
    "sum": "the update is the SUM of the workers' gradients: divide by the number of workers (a sum acts like a "
           "learning rate n_workers times larger)",
    "first": "only one worker's gradient (the lowest rank) was applied: average over every worker in `gradients`",
    "last": "only one worker's gradient (the last) was applied: average over every worker in `gradients`",
    "each": "you stepped once per gradient: that is the asynchronous server; average first, then ONE optimizer step",
    "accumulate": "the gradients pile up from one update to the next: set weights.grad to the average (=), do not "
                  "add it to the previous update's gradient",
    "each share": "you stepped once per worker, each with its share of the average (gradient / n): with momentum, n "
                  "small steps are not one step on the average; set weights.grad to the mean and call "
                  "optimizer.step() ONCE",
    "no_step": "the weights never changed: after setting weights.grad, call optimizer.step(), with no "
               "optimizer.zero_grad() in between (it erases the gradient you set)",
}
MANUAL = ("the weights moved by a learning rate x the average, without momentum: you updated them yourself. The "
          "server's optimizer holds the momentum and the learning rate the server sets: set weights.grad and call "
          "optimizer.step()")


def _mistakes(case, n_workers: int) -> dict:
    """Every rule wrong_update_weights knows, with its message, for a run of n_workers."""
    fixed = {f"divide by {k}": (f"the sum was divided by a fixed {k}, but this run has {n_workers} workers: divide by "
                                "len(gradients)") for k in (2, 3, 4, 8) if k != n_workers}
    manual = {f"manual at {lr:g}": MANUAL for lr in sorted({case["lr"], 0.05, 0.1})}  # the case's, or the notebook's
    return {**MISTAKES, **fixed, **manual}


def _average_judge(got, expected, case):
    runs = got.get("runs") if isinstance(got, dict) else None
    if not isinstance(runs, list) or len(runs) != len(case["workers"]):
        return 0.0, f"expected the weights of {len(case['workers'])} runs, got something else"
    for weights, right, n_workers in zip(runs, expected["runs"], case["workers"]):
        diff = max_abs_diff(weights, right)
        if diff <= SYNC_TOLERANCE:
            continue
        for rule, message in _mistakes(case, n_workers).items():
            if max_abs_diff(weights, _wrong_weights(json.dumps(case, sort_keys=True), n_workers, rule)) <= SYNC_TOLERANCE:
                return 0.0, f"with {n_workers} workers: {message}"
        return 0.0, (f"with {n_workers} workers, after {case['updates']} updates the weights differ from one process "
                     f"on the global batch by up to {diff:.1e}: weights.grad = the mean of the workers' gradients, "
                     "then optimizer.step()")
    probe = got.get("rank_order")
    if not isinstance(probe, (int, float)) or not abs(probe - expected["rank_order"]) <= 1e-6:
        arrival = -float(sum(np.float32(g) for g in ORDER_PROBE.values())) / len(ORDER_PROBE)  # float32, arrival order
        said = ("summed in the order they arrived" if isinstance(probe, (int, float)) and abs(probe - arrival) <= 1e-6
                else f"not summed in rank order (the weight became {probe})")
        return 0.0, (f"gradients that arrived from workers 3, 1, 2 ({', '.join(f'{g:g}' for g in ORDER_PROBE.values())} "
                     f"in float32) were {said}: a float sum depends on its order (1 + 1e8 - 1e8 is 0, 1e8 - 1e8 + 1 "
                     "is 1), so the update would depend on which worker came first; sum gradients[w] for w in "
                     "sorted(gradients)")
    return 1.0, (f"{case['updates']} synchronous updates with {' and with '.join(map(str, case['workers']))} workers "
                 f"equal one process on the global batch within {SYNC_TOLERANCE:g}, summed in rank order")


AVERAGE_AND_APPLY = Exercise("08", "average_and_apply", _average_cases, _average_run, _average_expected,
                             named_unless("differ from one process on the global batch by up to",  # generic: a hint
                                          "expected the weights of")(_average_judge), "weights.grad = the mean of the gradients (summed in rank order, divided "
                             "by how many there are), then one optimizer.step()", setup=SETUP,
                             ranks=1 + max(WORKER_COUNTS))


# ---- staleness_from_order ------------------------------------------------------------------------------------------

def _staleness_cases(rng):
    cases = [[1, 2, 1, 2, 1, 2], [1, 1, 1, 2, 1, 1, 1, 2]]
    for _ in range(5):
        n = rng.randint(2, 4)
        cases.append([rng.randint(1, n) for _ in range(rng.randint(8, 25))])
    return cases


def _staleness_run(staleness_from_order, cases):
    out = [staleness_from_order(list(order)) for order in cases]
    kind = next((type(o).__name__ for o in out if not isinstance(o, list)), None)
    return f"returned a {kind}" if kind else [[int(s) for s in o] for o in out]


def _never_pulled(order):
    return list(range(len(order)))


def _others_since_start(order):
    """Each gradient's count of the other workers' gradients applied before it since the start (no pulls at all)."""
    return [sum(1 for v in order[:i] if v != w) for i, w in enumerate(order)]


def _pulled_before_update(order):
    pulled: dict[int, int]
    version, pulled, out = 0, {}, []
    for w in order:
        out.append(version - pulled.get(w, 0))
        pulled[w] = version
        version += 1
    return out


def _staleness_judge(got, expected, cases):
    if isinstance(got, str):  # learner s12r3g: a tuple passed, then the lab's list comparison printed False
        return 0.0, (f"{got}: return a list (the server records staleness as a list, and the lab compares yours "
                     "with it: a tuple never equals a list)")
    for g, e, order in zip(got, expected, cases):
        if g == e:
            continue
        if len(g) != len(order):
            return 0.0, f"return one staleness per applied gradient: {len(order)} for an order of {len(order)}, got {len(g)}"
        if g == [s + 1 for s in e]:
            return 0.0, ("every value is one too large: compute the staleness BEFORE the version counter moves on "
                         "(a gradient computed on the weights the server still holds has staleness 0)")
        if g == _never_pulled(order):
            return 0.0, ("that counts every update since the start: after its gradient is applied, a worker pulls the "
                         "new weights, so remember the version each worker pulled last")
        if g == _others_since_start(order) and g != e:  # learner s12r4g: got a message restating the rule
            return 0.0, (f"for the order {order} expected {e}, got {g}: that counts the other workers' gradients since "
                         "the start; a worker pulls fresh weights after each of its own gradients, so count only "
                         "the updates since its last pull")
        if g == _pulled_before_update(order):
            return 0.0, (f"for the order {order} expected {e}, got {g}: each value is one too large after a worker's "
                         "first gradient; the weights it pulls next are the ones its own update produced, so record "
                         "the version after the counter moves on, the one its own update produced")
        first = [0 if order.index(w) == i else s for i, (w, s) in enumerate(zip(order, e))]
        if g == first and first != e:
            return 0.0, (f"for the order {order} expected {e}, got {g}: each worker's first gradient counted as fresh, "
                         "but every worker pulls version 0 at the start, so its first gradient is as stale as the "
                         "updates the server applied before it")
        if not any(g) and any(e):
            return 0.0, (f"for the order {order} expected {e}, got only zeros: a gradient is stale by the updates "
                         "applied since its worker pulled (the server's version now - the version it pulled)")
        return 0.0, (f"for the order {order} expected {e}, got {g}: staleness = the server's version when the gradient "
                     "is applied - the version its worker pulled (every worker pulls version 0 at the start, and "
                     "again after each of its own gradients is applied)")
    return 1.0, "staleness = the server's version now - the version the worker pulled"


STALENESS_FROM_ORDER = Exercise("08", "staleness_from_order", _staleness_cases, _staleness_run, FROM_LESSON,
                                named_unless("staleness = the server's version when the gradient is applied",
                                             "return one staleness per")(_staleness_judge), "keep the server's version and, per worker, the version it pulled "
                                "last; staleness = version now - version pulled")


# ---- damped_lr ---------------------------------------------------------------------------------------------------

def _lr_cases(rng):
    return [[rng.choice([0.01, 0.05, 0.1]), s] for s in [0, 1, 2, 4] + [rng.randint(3, 12) for _ in range(3)]]


def _lr_run(damped_lr, cases):
    out: list[float | str] = []
    for base, staleness in cases:
        try:
            out.append(float(damped_lr(base, staleness)))
        except ZeroDivisionError:
            out.append("ZeroDivisionError")
    return out


def _lr_judge(got, expected, cases):
    if "ZeroDivisionError" in got:
        return 0.0, ("staleness 0 divides by zero: a fresh gradient (staleness 0) must get the full learning rate, "
                     "and your rule has to hold there too")
    stale = [(g, base, s) for g, (base, s) in zip(got, cases) if s]
    # divided by the staleness itself: at staleness 1 that is the full rate, so name the division, not staleness 1
    if stale and all(close(g, base / s, 1e-9) for g, base, s in stale):
        return 0.0, ("that divides by the staleness itself: base_lr / s gives a gradient of staleness 1 the full rate, "
                     "the same step as a fresh one, though it spans two updates")
    for g, e, (base, s) in zip(got, expected, cases):
        if close(g, e, 1e-9):
            continue
        if close(g, base, 1e-9):
            return 0.0, f"damped_lr({base}, {s}) returned the base rate: a stale gradient must get a smaller step"
        if close(g, base * (1 + s), 1e-9):
            return 0.0, "that grows with staleness: the older the gradient, the SMALLER its learning rate"
        if close(g, base // (1 + s), 1e-9) and not close(g, e, 1e-9):  # learner s13r7g: only 'should be 0.05, got 0'
            return 0.0, (f"damped_lr({base}, {s}) gave {g:g}: that is integer division; use /, not //, so that "
                         f"{base} / {s + 1} keeps its fraction")
        if close(g, base / 2 ** s, 1e-9):  # learner s12r4g: got only 'should be ... got ...'
            return 0.0, (f"that halves the rate for every version of staleness: at staleness {s} it gives "
                         f"1/{2 ** s} of the base rate; an even share of one step over the {s + 1} updates the "
                         f"gradient spans gives 1/{s + 1}")
        if close(g, base / (1 + s) ** 2, 1e-9):
            return 0.0, ("that damps with a square: a stale step shrinks far below an even share of one step over "
                         "the updates it spans")
        return 0.0, f"damped_lr({base}, {s}) should be {e:g}, got {g:g}"
    return 1.0, "fresh gradients get the base rate, stale ones an even share of one step"


DAMPED_LR = Exercise("08", "damped_lr", _lr_cases, _lr_run, FROM_LESSON, named_unless("should be")(_lr_judge),
                     "a fresh gradient (staleness 0) gets base_lr; one s versions old spans s + 1 updates (the s since its "
                     "weights and its own): share one fresh step evenly over them")

register(AVERAGE_AND_APPLY, STALENESS_FROM_ORDER, DAMPED_LR)
