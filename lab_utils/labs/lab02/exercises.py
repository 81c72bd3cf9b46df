"""Lab 02: DataParallel's scatter, gather and gradient reduce."""
from __future__ import annotations

from ...exercises.core import Exercise, close, named_unless, register


# ---- scatter ------------------------------------------------------------------------------------------------------

def _scatter_cases(rng):
    cases = [(rng.randint(2, 6) * k + rng.randint(1, k - 1), k) for k in (2, 3, 4, 5)]  # uneven on purpose
    # 4a + 1 over 4 devices: torch.chunk's sizes (a + 1, a + 1, a + 1, a - 2) always differ from the balanced split
    # (a + 1, a, a, a), while some draws above give chunk's sizes by chance (every n over 2 devices does)
    return cases + [(k, k) for k in (rng.randint(2, 5),)] + [(rng.randint(2, 5) * 4, 4), (rng.randint(2, 6) * 4 + 1, 4)]


def _place_of_move(func, args, kwargs) -> str:
    """Where a move (.to, .cpu, .cuda) sends a tensor: "device i" for a device with index i, else "host"; a .to()
    that names no device (a dtype only) leaves it where it was."""
    import torch

    if func is not torch.Tensor.to:
        return "host"
    targets = [a for a in (*args[1:], kwargs.get("device")) if isinstance(a, (torch.device, str))]
    if not targets:
        return getattr(args[0], "place", "host")
    index = torch.device(targets[0]).index
    return "host" if index is None else f"device {index}"


def _on_host(batch):
    """The batch marked as living on the host (on a CPU every device is the CPU, so without the mark a scatter that
    forgets `.to(device)` would pass): slices keep the mark, and a move to devices[i] (the check's devices are cpu:i)
    marks the result as device i's, so that a chunk moved to the wrong device fails as well."""
    import torch

    class Placed(torch.Tensor):
        place = "host"

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **kwargs)
            if func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
                place = _place_of_move(func, args, kwargs)
            else:
                places = {a.place for a in (*args, *kwargs.values()) if isinstance(a, cls)}
                place = places.pop() if len(places) == 1 else "host"
            return _placed(out, cls, place)

    return _placed(batch, Placed, "host")


def _placed(out, cls, place: str):
    """`out` (a tensor, or a tuple or list of them) as instances of `cls` marked with `place`."""
    import torch

    if isinstance(out, torch.Tensor):
        marked = out.as_subclass(cls)
        marked.place = place
        return marked
    if isinstance(out, (tuple, list)) and not isinstance(out, torch.Size) and out \
            and all(isinstance(o, torch.Tensor) for o in out):
        return type(out)(_placed(o, cls, place) for o in out)
    return out


def _scatter_run(scatter, cases):
    import torch

    out = []
    for n, k in cases:
        batch = _on_host(torch.arange(n * 3, dtype=torch.float32).reshape(n, 3))
        returned = scatter(batch, [torch.device("cpu", index) for index in range(k)])
        kind = "list" if isinstance(returned, (list, tuple)) else type(returned).__name__  # a generator: read once
        chunks = list(returned) if kind != "list" and hasattr(returned, "__iter__") else returned
        out.append({"kind": kind, "rows": [c.as_subclass(torch.Tensor).tolist() for c in chunks],
                    "places": [getattr(c, "place", "host") for c in chunks]})
    return out


def _misplaced(places: list[str]) -> str:
    """What is wrong with where the chunks are (chunk i belongs on device i), or "" if nothing."""
    if all(place == "host" for place in places):
        return ("the rows are right, but the chunks are still on the batch's device: move chunk i to devices[i] "
                "(chunk.to(devices[i])); the replica on device i can only read its own device's memory")
    wrong = [(i, place) for i, place in enumerate(places) if place != f"device {i}"]
    if not wrong:
        return ""
    if len(set(places)) == 1:
        return (f"the rows are right, but every chunk is on {places[0].replace('device ', 'devices[')}]: moving the "
                "whole batch before splitting puts all the chunks on that one device; split first, then move chunk "
                "i to devices[i]")
    i, place = wrong[0]
    where = "the batch's device" if place == "host" else place.replace("device ", "devices[") + "]"
    return f"the rows are right, but chunk {i} is on {where}, not devices[{i}]: move chunk i to devices[i]"


def _scatter_expected(cases):
    from . import data_parallel

    return _scatter_run(data_parallel.scatter, cases)


def _chunk_sizes(n: int, k: int) -> list[int]:
    """The sizes Tensor.chunk(k) gives a batch of n: chunks of ceil(n/k), the last smaller, maybe fewer than k."""
    size, sizes = -(-n // k), []
    while n > 0:
        sizes.append(min(size, n))
        n -= size
    return sizes


def _scatter_judge(got, expected, cases):
    kinds = {g["kind"] for g in got} - {"list"}
    if kinds:  # learner s12r4b: a generator drew the generic 'shape differs' message
        return 0.0, (f"scatter returned a {kinds.pop()}, not a list: return a list (a list comprehension [...]); "
                     "the step indexes the chunks (chunk i for device i) and reads them more than once, and a "
                     "generator can be read only once")
    for moved_and_rows, expected_rows, (n, k) in zip(got, expected, cases):
        g, e = moved_and_rows["rows"], expected_rows["rows"]
        if close(g, e):
            misplaced = _misplaced(moved_and_rows["places"])
            if misplaced:
                return 0.0, misplaced
            continue
        sizes, right = [len(c) for c in g], [len(c) for c in e]
        if sizes == right:
            return 0.0, ("the sizes are right but the chunks hold the wrong rows: chunk i holds the next consecutive rows "
                         "of the batch, in order (not every k-th row)")
        if sizes == _chunk_sizes(n, k):
            return 0.0, (f"a batch of {n} over {k} devices gave sizes {sizes}: that is torch.chunk, which makes chunks of "
                         "ceil(n/k) and can leave a device with less work or none")
        if len(g) != k:
            return 0.0, f"a batch of {n} over {k} devices gave {len(g)} chunks: return exactly one chunk per device"
        if sum(sizes) != n:
            return 0.0, f"a batch of {n} over {k} devices: the chunks hold {sum(sizes)} rows; the remainder n % k is dropped or repeated"
        return 0.0, (f"a batch of {n} over {k} devices: sizes {sizes}, expected {right}: the n % k extra rows go to the "
                     "first devices, one each")
    return 1.0, "one chunk per device, consecutive rows, sizes balanced (uneven batches too)"


GENERIC = ("expected the model's gradient plus the sum",)  # the one message that names no mistake: its hint stays


SCATTER = Exercise("02", "scatter", _scatter_cases, _scatter_run, _scatter_expected,
                   named_unless(*GENERIC)(_scatter_judge),
                   "one chunk per device, consecutive rows, sizes differing by one at most, chunk i moved to "
                   "devices[i] (on a CPU the check marks the batch as the host's and each chunk with the device it was "
                   "moved to, so a missing or wrong move fails here as it would on GPUs)", setup="import torch")


# ---- gather -------------------------------------------------------------------------------------------------------

def _gather_cases(rng):
    return {"seed": rng.randrange(10**6), "sizes": [rng.randint(1, 6) for _ in range(rng.randint(2, 4))]}


def _gather_inputs(case):
    import torch

    gen = torch.Generator().manual_seed(case["seed"])
    return [torch.randn(size, 4, generator=gen) for size in case["sizes"]]


def _device_marks(why: str, mixed: list | None = None, moved: list | None = None):
    """A tensor class whose instances carry a device label (on a CPU every device is the CPU, so without the labels
    a phase that forgets `.to(device)` would pass): an op that mixes two labels raises as torch does for two devices
    (copy_ excepted: torch copies across devices), or, given `mixed`, is noted there and runs, its result labelled
    as its inputs; a move (.to, .cpu, .cuda) gives a plain tensor, always a new one (as a move to another device
    does on GPUs, where an in-place add into the moved tensor is lost), and its label is noted in `moved`."""
    import torch
    from torch.utils._pytree import tree_flatten

    class OnDevice(torch.Tensor):
        label = ""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with torch._C.DisableTorchFunctionSubclass():
                if func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
                    out = func(*args, **kwargs)
                    if moved is not None and isinstance(args[0], OnDevice):
                        moved.append(args[0].label)
                    return (out.clone() if out is args[0] else out).as_subclass(torch.Tensor)
                labels = sorted({a.label for a in tree_flatten((args, kwargs))[0] if isinstance(a, OnDevice)})
                if len(labels) > 1 and func is not torch.Tensor.copy_ and mixed is not None:
                    mixed.append(labels)
                elif len(labels) > 1 and func is not torch.Tensor.copy_:
                    raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                                       f"devices, {labels[0]} and {labels[1]} ({why})")
                out = func(*args, **kwargs)
            if mixed is not None and labels and type(out) is torch.Tensor:  # a result stays on its inputs' device
                out = _mark(out, cls, int(labels[0].split()[-1]))
            return out

    return OnDevice


def _mark(tensor, cls, index: int):
    """`tensor` as an instance of `cls` labelled device `index`."""
    marked = tensor.as_subclass(cls)
    marked.label = f"device {index}"
    return marked


def _on_devices(outputs):
    """The outputs marked as living on devices 0, 1, ... (see _device_marks)."""
    cls = _device_marks("each output is still on the device that computed it")
    return [_mark(out, cls, index) for index, out in enumerate(outputs)]


def _shape_of(value) -> list[int]:
    """The shape of a tensor given as nested lists."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def _what_shape_says(shape, sizes, features: int = 4) -> str:
    """The mistake a gather's output shape points at, for outputs of `sizes` rows of `features` each ("" if none)."""
    if len(shape) == 3:
        return "that stacks them (torch.stack adds a dimension)"
    if len(shape) == 2 and shape[1] != features:
        return f"that joins them side by side, along dim 1 (the {features} features)"
    if len(shape) == 2 and shape[0] == sizes[0] != sum(sizes):
        return "that is the first output only"
    return ""


def _gather_shape_hint(gather) -> str:
    """What the learner's gather returns on two outputs of equal size, where stack, a sum and a cat along dim 1 all
    run: said after the error it raised on the check's uneven outputs."""
    import torch

    outputs = [torch.arange(12.0).reshape(3, 4), torch.arange(12.0, 24.0).reshape(3, 4)]
    try:
        out = gather([o.clone() for o in outputs], torch.device("cpu"))
    except Exception:
        return ""
    if not isinstance(out, torch.Tensor):
        return ""
    shape = list(out.shape)
    said = "that adds them up" if torch.equal(out, outputs[0] + outputs[1]) else _what_shape_says(shape, [3, 3])
    return f"; on two (3, 4) outputs it returns shape {tuple(shape)}, not (6, 4){': ' + said if said else ''}"


def _gather_run(gather, case):
    import torch

    try:
        out = gather(_on_devices(_gather_inputs(case)), torch.device("cpu"))
    except RuntimeError as exc:
        if "at least two devices" in str(exc):
            raise
        hint = _gather_shape_hint(gather)
        if not hint:
            raise
        # the mistake is named by the shape, so neither torch's error nor the generic hint (a move) is shown
        return {"type": "raised", "value": f"your gather raised on outputs of unequal size ({case['sizes']} rows)"
                                           f"{hint}; concatenate along dim 0 (torch.cat)"}
    return {"type": "Tensor" if isinstance(out, torch.Tensor) else type(out).__name__,
            "value": out.as_subclass(torch.Tensor) if isinstance(out, torch.Tensor) else out}


def _gather_expected(case):
    import torch

    return {"type": "Tensor", "value": torch.cat(_gather_inputs(case)).tolist()}


def _gather_judge(got, expected, case):
    if got["type"] == "raised":  # _gather_run named the mistake from the shape it returns on equal outputs
        return 0.0, got["value"]
    if got["type"] != "Tensor":
        return 0.0, f"return one tensor with every output's rows, got a {got['type']}"
    if close(got["value"], expected["value"]):
        return 1.0, "outputs concatenated in device order"
    shape, right = _shape_of(got["value"]), _shape_of(expected["value"])
    if shape != right:
        said = _what_shape_says(shape, case["sizes"])
        return 0.0, (f"your tensor has shape {tuple(shape)}, expected {tuple(right)} (every output's rows one after "
                     f"another){': ' + said if said else ''}; concatenate along dim 0 (torch.cat)")
    return 0.0, "the rows are out of order: concatenate the outputs in device order"


GATHER = Exercise("02", "gather", _gather_cases, _gather_run, _gather_expected,
                  named_unless(*GENERIC)(_gather_judge),
                  "move each output to `device` (out.to(device)), then concatenate along the batch dimension, in "
                  "device order (on a CPU the check marks each output with the device that computed it, so a missing "
                  "move fails here as it would on GPUs)", setup="import torch")


# ---- reduce_gradients ---------------------------------------------------------------------------------------------

def _reduce_cases(rng):  # two replicas or more: with one, dividing its gradient by len(replicas) changes nothing
    return {"seed": rng.randrange(10**6), "replicas": rng.randint(2, 3)}


def _reduce_problem(case):
    import copy
    import textwrap

    import torch

    from ... import spec

    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=case["seed"])
    replicas = [copy.deepcopy(model) for _ in range(case["replicas"])]
    gen = torch.Generator().manual_seed(case["seed"])
    for m in (model, *replicas):
        for p in m.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
    return model, replicas


def _grads_on_devices(model, replicas) -> tuple[list, list]:
    """The model's gradients marked as device 0's, replica i's as device i + 1's (see _device_marks), the list where
    each op that mixes two devices is noted (on a CPU a reduce that forgets the move to device 0 would pass), and the
    list of the labels of the gradients moved."""
    mixed: list = []
    moved: list = []
    cls = _device_marks("", mixed, moved)
    for index, m in enumerate((model, *replicas)):
        for p in m.parameters():
            p.grad = _mark(p.grad, cls, index)
    return mixed, moved


def _flat_grads(model):
    from ... import tensors

    return tensors.flat_grads(model).tolist()


def _flat_weights(model):
    from ... import tensors

    return tensors.flat_weights(model).tolist()


def _reduce_run(reduce_gradients, case):
    """The model's gradients after reduce_gradients, and its weights (which summing gradients must leave alone)."""
    model, replicas = _reduce_problem(case)
    mixed, moved = _grads_on_devices(model, replicas)
    reduce_gradients(model, replicas)
    moved_model = "device 0" in moved  # read before _flat_grads, whose .cpu() moves every gradient
    return {"gradients": _flat_grads(model), "weights": _flat_weights(model),
            "unmoved": " and ".join(mixed[0]) if mixed else "", "moved_model": moved_model}


def _reduce_expected(case):
    from . import data_parallel

    return _reduce_run(data_parallel.reduce_gradients, case)


def _divided_as_added(own, others, k):
    """The gradient of p.grad = (p.grad + q.grad) / k over the replicas q in turn (a divide inside the loop)."""
    total = list(own)
    for grads in others:
        total = [(t + g) / k for t, g in zip(total, grads)]
    return total


MOVED_THE_MODEL = ("you moved the model's gradient (p.grad.to(...)) instead of the replica's: on GPUs that makes a "
                   "copy on the replica's device, the add lands in the copy, and the model's gradient does not "
                   "change; move the replica's gradient to the model's device: p.grad += q.grad.to(p.device)")


def _reduce_judge(got, expected, case):
    score, said = _reduce_value_judge(got, expected, case)
    if not score and got.get("moved_model") and said.startswith(("the model's gradients did not change", GENERIC[0])):
        said = MOVED_THE_MODEL
    if not got["unmoved"]:
        return score, said
    moved = (f"an operation mixed {got['unmoved']}: each replica's gradient lives on its own device; move it to "
             "the model's (q.grad.to(p.device)) before adding (on GPUs torch raises here)")
    return 0.0, moved if score else f"{said}; and {moved}"


def _replicas_added(got, own, others, sizes) -> list[tuple[int, ...]]:
    """For each parameter, the indices of the replicas whose gradients were added to the model's own, or [] if some
    parameter's gradient is no such sum."""
    import itertools

    added, start = [], 0
    for size in sizes:
        part = slice(start, start + size)
        start += size
        subsets = (s for r in range(len(others) + 1) for s in itertools.combinations(range(len(others)), r))
        found = next((s for s in subsets if close(got[part], [o + sum(others[i][j] for i in s)
                                                              for j, o in enumerate(own[part], part.start)], 1e-5)),
                     None)
        if found is None:
            return []
        added.append(found)
    return added


def _replicas_added_says(added: list[tuple[int, ...]], replicas: int) -> str:
    """The mistake that adds the replicas `added[j]` to parameter j, out of `replicas` replicas."""
    if len(set(added)) > 1:
        shown = "; ".join(f"parameter {j}: {', '.join(f'replicas[{i}]' for i in s) or 'none'}"
                          for j, s in enumerate(added[:4]))
        return (f"each parameter got a different set of replicas' gradients ({shown}): "
                "a zip over the parameters and the replicas pairs each parameter with one replica; loop over every "
                "replica, and inside it over zip(model.parameters(), replica.parameters())")
    missing = sorted(set(range(replicas)) - set(added[0]))
    if missing == [0]:
        return ("the first replica was skipped (replicas[1:]?): `replicas` holds only the other devices' copies "
                "(device 0's is `model`), so loop over all of `replicas`")
    return (f"replica{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} never added: loop over all "
            f"{replicas} replicas")


def _reduce_value_judge(got, expected, case):
    if close(got["gradients"], expected["gradients"], 1e-5) and close(got["weights"], expected["weights"], 1e-5):
        return 1.0, "replicas' gradients summed into device 0's model"
    model, replicas = _reduce_problem(case)
    own, others = _flat_grads(model), [_flat_grads(r) for r in replicas]
    n = len(replicas) + 1
    weights = _flat_weights(model)
    if not close(got["weights"], weights, 1e-5):  # summing gradients never moves a weight
        into_weights = [w + sum(v) for w, *v in zip(weights, *others)]
        if close(got["weights"], into_weights, 1e-5):
            return 0.0, ("you added the replicas' gradients into the model's parameters (p += q.grad), not into their "
                         "gradients: add into p.grad (p.grad += q.grad); the optimizer's step moves the weights later")
        return 0.0, ("the model's weights changed: reduce_gradients only adds gradients into each p.grad, the "
                     "optimizer's step moves the weights later")
    got = got["gradients"]
    guesses = {"the model's gradients did not change: add each replica's p.grad into the model's p.grad": own,
               "you averaged: DataParallel sums (the loss was one mean over the whole gathered batch, so each "
               "replica's gradient is already its share)": [sum(v) / n for v in zip(own, *others)],
               "device 0's own gradient was replaced: add the replicas' gradients to it": [sum(v) for v in zip(*others)],
               "you divided the replicas' gradients by their number: DataParallel sums them, undivided":
                   [o + sum(v) / len(others) for o, *v in zip(own, *others)],
               f"you divided by the number of replicas (len(replicas) = {len(others)}): DataParallel sums, undivided "
               "(each gradient is already its share of the one mean loss)":
                   [(o + sum(v)) / len(others) for o, *v in zip(own, *others)],
               f"you divided by the number of replicas (len(replicas) = {len(others)}) after each addition: "
               "DataParallel sums, undivided (each gradient is already its share of the one mean loss)":
                   _divided_as_added(own, others, len(others)),
               f"the model's gradient is the last replica's alone: each replica overwrote it (p.grad = ... or "
               f"copy_); add with += so that all {n} gradients (the model's own included) end up summed": others[-1],
               "the model's gradient is the first replica's alone: it was overwritten, and the other replicas were "
               "never added; add every replica's gradient with +=": others[0],
               "the model's own gradient was counted twice: loop over `replicas` only (it holds the other "
               "devices' replicas, not `model`), or p.grad += p.grad doubled it":
                   [2 * o + sum(v) for o, *v in zip(own, *others)],
               f"only the first replica was added: loop over all {len(others)} replicas": [
                   o + r for o, r in zip(own, others[0])]}
    for what, value in guesses.items():
        if close(got, value, 1e-5):
            return 0.0, what
    added = _replicas_added(got, own, others, [p.numel() for p in model.parameters()])
    if added:
        return 0.0, _replicas_added_says(added, len(others))
    return 0.0, "expected the model's gradient plus the sum of the replicas' gradients, for every parameter"


REDUCE = Exercise("02", "reduce_gradients", _reduce_cases, _reduce_run, _reduce_expected,
                  named_unless(*GENERIC)(_reduce_judge),
                  "add (not average) every replica's gradient into the model's, each moved to the model's device first "
                  "(on a CPU the check marks each gradient with its replica's device, so a missing move, or a move of "
                  "the model's gradient instead, fails here as it would on GPUs)", setup="import torch")

register(SCATTER, GATHER, REDUCE)


# ---- the three phases in a real step --------------------------------------------------------------------------------

REAL_STEP_BATCH, REAL_STEP_DEVICES = 10, 4  # uneven chunks (3, 3, 2, 2), and three replicas besides device 0's


def real_step_lines(parallel_class, scatter, gather, reduce_gradients, layers, *, seed: int = 0,
                    tolerance: float = 1e-5) -> list[str]:
    """Lines that say whether a real step of `parallel_class` (lab 02's DataParallel) with these three phases, on
    REAL_STEP_DEVICES devices and a batch whose rows all differ (so that order matters), matches one device: its
    chunk sizes, its loss and its gradients; a phase that raises is reported in a line, not a traceback."""
    import copy
    import textwrap

    import torch

    from ... import compare, hardware, spec
    from .data_parallel import gradients, plan_devices, single_device_step, split_sizes

    gen = torch.Generator().manual_seed(seed)
    n, k = REAL_STEP_BATCH, REAL_STEP_DEVICES
    scale = torch.arange(1, n + 1, dtype=torch.float32).view(-1, 1, 1, 1)  # row i scaled by i + 1: no two alike
    x, y = torch.rand(n, 1, 28, 28, generator=gen) * scale, torch.randint(0, 10, (n,), generator=gen)
    model = spec.build_torch(layers, (1, 28, 28), seed=seed)
    single = copy.deepcopy(model)
    one_loss = single_device_step(single, x, y, threads=None)
    head = f"your phases in a real DataParallel step, batch {n} on {k} devices (rows that all differ):"
    try:
        with parallel_class(copy.deepcopy(model), plan_devices(k, hardware.detect()), scatter_fn=scatter,
                            gather_fn=gather, reduce_fn=reduce_gradients) as parallel:
            report = parallel.step(x, y)
            diff = compare.max_abs_diff(gradients(parallel.model), gradients(single))
    except Exception as error:  # a phase that fails in the step: its error, in one line
        said = textwrap.wrap(f"the step raised {type(error).__name__}: {(str(error) or '-').splitlines()[0][:200]}",
                             width=98, initial_indent="  ", subsequent_indent="    ")
        return [head, *said, "  all: False"]
    sizes, expected = list(report.chunk_sizes), split_sizes(n, k)
    checks = {f"chunk sizes {sizes} (expected {expected})": sizes == expected,
              f"loss equals one device's ({report.loss:.5f} vs {one_loss:.5f})":
                  abs(report.loss - one_loss) <= tolerance * max(1.0, abs(one_loss)),
              f"gradients equal one device's within {tolerance:g} (max |difference| {diff:.1e})": diff <= tolerance}
    return [head, *(f"  {what}: {ok}" for what, ok in checks.items()), f"  all: {all(checks.values())}"]
