"""Lab 12: read a hang table; make ranks with uneven data finish as one process would (real ranks); find the
parameter that gets no gradient."""
from __future__ import annotations

import re

from .debugging import LAYERS, branchy_model, hang_table, one_process, place_of
from .harness import uneven_worker
from ...exercises.core import Exercise, named_unless, register

SETUP = ("import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F\n"
         "from torch.distributed.algorithms import Join")


# ---- read a hang table ------------------------------------------------------------------------------------------------

def _table_cases(rng):
    """Tables of 3 or 4 ranks where one rank went its own way: it skipped the collective the others wait in. The
    first table's odd rank is rank 0 (an answer that compares every rank with rank 0 fails it); in the second the
    odd rank waits in another collective, not in barrier (an answer that looks for barrier fails it); the third's lines
    are a notebook cell's, "cell [n], line k", as the notebook's own tables write them (an answer that reads only
    "file:line" fails it)."""
    cases = []
    collectives = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
    for i in range(4):
        world = rng.choice([3, 4])
        odd = 0 if i == 0 else rng.randrange(1, world) if i == 1 else rng.randrange(world)
        waited, other = rng.sample(collectives, 2)
        now = other if i == 1 else "barrier"
        done, line_others, line_odd = rng.randint(2, 9), rng.randint(10, 30), rng.randint(31, 50)
        cases.append({"world": world, "odd": odd, "waited": waited, "now": now, "done": done,
                      "line_others": line_others, "line_odd": line_odd, "cell": rng.randint(3, 40) if i == 2 else None})
    return cases


def _table_run(culprit, cases):
    answers = []
    for case in cases:
        try:
            answers.append(list(culprit(hang_table(case))))
        except Exception as exc:  # noqa: BLE001  # name the table it failed on: its odd rank's collective
            if case["cell"]:
                raise RuntimeError(f"{type(exc).__name__} on a table whose lines are a notebook cell's "
                                   f"({place_of(case, case['line_odd'])!r}, as this notebook's tables write them): "
                                   "read the place as the table writes it, spaces and all") from exc
            if case["now"] == "barrier":
                raise
            raise RuntimeError(f"{type(exc).__name__} on a table where the odd rank is in {case['now']}, not in "
                               "barrier: find the rank whose call differs from the others', whatever that call "
                               "is") from exc
    return answers


def _table_expected(cases):
    return [[c["odd"], c["waited"], place_of(c, c["line_odd"])] for c in cases]


def _table_judge(got, expected, cases):
    for g, e, case in zip(got, expected, cases):
        rank, op, line = g
        if not isinstance(rank, int) or isinstance(rank, bool):
            return 0.0, (f"the rank {rank!r} is a {type(rank).__name__}: give it as an int ({e[0]!r}), the collective "
                         "and the line as strings")
        if rank != e[0]:
            if e[0] == 0:
                return 0.0, (f"rank {rank}'s call #{case['done'] + 1} differs from rank 0's, but so does every other "
                             "rank's: here rank 0 is the odd one. Compare each rank with the others, not with rank 0")
            if rank == 0 or rank == case["world"] - 1:
                return 0.0, (f"rank {rank} is one of the ranks that agree: the culprit is the one rank whose call "
                             f"#{case['done'] + 1} differs from all the others'")
            return 0.0, f"rank {rank} is not the rank whose call #{case['done'] + 1} differs from the others'"
        if op == case["now"]:
            return 0.0, (f"{op} is where the odd rank is now; the collective it skipped is the one every other rank "
                         "waits in")
        if op != e[1]:
            return 0.0, f"{op!r}: name the collective the other ranks wait in, as the table spells it ({e[1]!r})"
        if line == place_of(case, case["line_others"]):
            return 0.0, "that is the other ranks' line; the fix starts at the odd rank's line, where it went its own way"
        if line != e[2]:
            return 0.0, (f"{line!r}: give the odd rank's line as the table writes it (file:line, or in a notebook "
                         "'cell [n], line k')")
    return 1.0, "the odd rank, the collective it skipped and its line"


HANG_CULPRIT = Exercise("12", "hang_culprit", _table_cases, _table_run, _table_expected,
                         named_unless("is not the rank whose call")(_table_judge),
                        "read the 'first difference' line: which rank's call differs, what the others wait in, "
                        "and where that rank is")


# ---- uneven data, in real ranks ----------------------------------------------------------------------------------------

UNEVEN_TIMEOUT_S = 25  # a train_all that hangs is stopped after this long (the check says up front that it waits)


def _uneven_cases(rng):
    return {"seed": rng.randrange(10**6), "batch": rng.choice([4, 8]), "steps": rng.choice([2, 3]),
            "lr": rng.choice([0.05, 0.1])}


def _uneven_run(train_all, case, world_size: int = 2):
    from ...launch import launch

    try:
        return launch(uneven_worker, world_size, args=(train_all, case), timeout=UNEVEN_TIMEOUT_S)
    except TimeoutError as exc:  # a hang, not an error: say so in one line, with the table's first difference
        text = str(exc)
        first = text.split(", so every rank")[0]
        difference = next((line.strip() for line in text.splitlines() if line.startswith("first difference")), "")
        # short enough for check's one line (400 characters) to end whole: paths as file names, and the launcher's
        # three general causes of a call never made cut to this exercise's one
        difference = re.sub(r" at \S*/(\S+:\d+)", r" at \1", difference)
        if "never made call" in difference:
            difference = (re.split(r": a rank skipped| and sit at a backward", difference)[0] + ": it waits in DDP's gradient all-reduce (C++: "
                          "not in the record) for a rank that left the loop")
        raise TimeoutError(f"it hung, nothing raised: {first}; {difference}") from None


def _uneven_expected(case):
    return {"join": one_process(case, True), "balanced": one_process(case, False),
            "join_divided": one_process(case, True, halved=True)}


def _uneven_judge(got, expected, case):
    from ...exercises.core import max_abs_diff

    if any(max_abs_diff(r, got[0]) > 1e-6 for r in got):
        return 0.0, ("the ranks ended with different weights: every step's gradients must be all-reduced (train the "
                     "DDP model you were given, not model.module)")
    if max_abs_diff(got[0], expected["join"]) <= 1e-5:
        return 1.0, "equal to one process (Join: the extra batch is one more step, as one process would take it)"
    if max_abs_diff(got[0], expected["balanced"]) <= 1e-5:
        return 0.0, ("it finishes, but the extra batch was dropped (the lesson's balanced shards): keep every batch, "
                     "and wrap the whole loop in Join over the DDP model")
    if max_abs_diff(got[0], expected["join_divided"]) <= 1e-5:  # learner s12r4f: the message gave the whole answer
        return 0.0, ("it finishes, but the lone rank's last step was half as large as one process's: its gradient "
                     "was divided by the initial world size (DDP's default, every sample weighs the same) while only "
                     "one rank had data; this reference weighs every step the same: read join()'s keyword for that")
    return 0.0, (f"the weights differ from one process by up to {max_abs_diff(got[0], expected['join']):.1e}: each "
                 "step must be one global batch (zero_grad, forward, backward, step) on every rank")


TRAIN_ALL = Exercise("12", "train_all", _uneven_cases, _uneven_run, _uneven_expected, _uneven_judge,
                     "the rank with fewer batches must keep answering the others' all-reduces until every rank is "
                     "done (Join)", setup=SETUP, ranks=2,
                     named_errors=("must wrap the whole loop",),  # a misplaced Join is named: no hint after it
                     shape=lambda expected, case: [expected["join"]] * 2)


# ---- the parameter that gets no gradient ---------------------------------------------------------------------------------


def _unused_cases(rng):
    cases: list[dict] = []
    for _ in range(4):
        unused, frozen, zeroed = rng.sample(LAYERS, 3)
        cases.append({"seed": rng.randrange(10**6), "unused": unused, "frozen": frozen, "zeroed": zeroed,
                      "stale": len(cases) == 3})  # the last model comes with gradients left by an earlier step
    return cases


def _unused_run(parameters_without_gradient, cases):
    import torch

    answers = []
    for case in cases:
        model = branchy_model(case)
        x = torch.randn(3, 6, generator=torch.Generator().manual_seed(case["seed"]))
        if case.get("stale"):
            for p in model.parameters():
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)  # as zero_grad(set_to_none=False) leaves them
        try:
            names = parameters_without_gradient(model, x)
        except RuntimeError as exc:  # learner s12r4f: torch's words alone did not say how to get a scalar
            if "only for scalar outputs" not in str(exc):
                raise
            raise RuntimeError(f"{str(exc).splitlines()[0]}: the model's output holds one row per sample; backward needs "
                               "one number, such as model(x).sum()") from None
        answers.append(sorted(n if isinstance(n, str) else f"<{type(n).__name__}>" for n in names))
    return answers


def _unused_expected(cases):
    return [sorted(f"{c['unused']}.{p}" for p in ("weight", "bias")) if c["unused"] != c["frozen"] else []
            for c in cases]


def _unused_judge(got, expected, cases):
    for g, e, case in zip(got, expected, cases):
        if g == e:
            continue
        if any(n.startswith("<") for n in g):
            return 0.0, "return the parameters' names (str, as named_parameters gives them), not the tensors"
        used = [layer for layer in LAYERS if layer not in (case["unused"], case["frozen"], case["zeroed"])]
        if any(n.split(".")[0] in used for n in g):
            return 0.0, (f"in the check's model, {used[0]} gets a gradient, yet you listed it: p.grad is None before any backward; run one "
                         "forward and backward on x first")
        if not g and case.get("stale"):
            return 0.0, ("nothing listed, but this model came with gradients from an earlier step: they must be None "
                         "before the backward (model.zero_grad(), whose set_to_none=True is the default); "
                         "zero_grad(set_to_none=False) or no clearing leaves tensors that are never None")
        if any(n.startswith(case["frozen"] + ".") for n in g):
            return 0.0, (f"in the check's model, {case['frozen']} is frozen (requires_grad=False): DDP does not wait for it; list only "
                         "parameters that require a gradient and got none")
        if any(n.startswith(case["zeroed"] + ".") for n in g):
            return 0.0, (f"in the check's model, {case['zeroed']}'s gradient is zero, but it exists (p.grad is not None): DDP's reducer got "
                         "it; only a gradient that is None is missing")
        if not g:
            return 0.0, "nothing listed: run forward and backward first, then look for p.grad is None"
        return 0.0, f"{g}: expected the names (as named_parameters gives them) of the parameters whose .grad is None"
    return 1.0, "the parameters that need a gradient and get none"


PARAMETERS_WITHOUT_GRADIENT = Exercise(
    "12", "parameters_without_gradient", _unused_cases, _unused_run, _unused_expected,
    named_unless(": expected the names")(_unused_judge),
    "one backward pass, then look at p.grad of every parameter that requires a gradient", setup=SETUP)

register(HANG_CULPRIT, TRAIN_ALL, PARAMETERS_WITHOUT_GRADIENT)
