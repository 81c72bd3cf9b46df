"""Lab 06: the ring all-reduce's send/receive step with both transfers non-blocking (in 3 real ranks), the
output-channel split of a convolution into blocks that need not be equal, the row-parallel layer's forward (in 2 real
ranks)."""
from __future__ import annotations

import contextlib

from ...exercises.core import ANY, Exercise, close, last_line, max_abs_diff, named_unless, register


SETUP = "import torch\nimport torch.distributed as dist\nfrom torch import nn\nimport torch.nn.functional as F"
DEADLOCK_TIMEOUT_S = 10  # a ring step that deadlocks is stopped after this long


# ---- my_ring_step, run in 3 real ranks ------------------------------------------------------------------------------

def _ring_cases(rng):
    sizes = [rng.randint(1, 5), rng.randint(7, 40), rng.randint(1000, 3000)]
    return {"seed": rng.randrange(10**6), "world_size": 3, "sizes": [n + 1 if n % 3 == 0 else n for n in sizes]}


def _ring_input(seed: int, rank: int, n: int):
    import torch

    return torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed * 131 + rank * 7919 + n))


def _probe_value(rank: int, chunk: int) -> float:
    """The probe's chunk `chunk` on `rank` is filled with this value (so a received value names its origin)."""
    return 100.0 * (rank + 1) + chunk


def _probe_chunks(rank: int, world_size: int):
    import torch

    return [torch.full((i + 2,), _probe_value(rank, i), dtype=torch.float64) for i in range(world_size)]


class _Request:
    """A request returned by isend / irecv inside the step, with whether it was waited for."""

    def __init__(self, name: str, work, guard=None):
        self.name, self.work, self.waited, self.guard = name, work, False, guard

    def wait(self, *args, **kwargs):
        self.waited = True
        if self.guard is not None:  # what the rank is blocked in, should this wait time out
            self.guard.blocked_in = f"{self.name}.wait()"
        return self.work.wait(*args, **kwargs)

    def __getattr__(self, attribute):
        return getattr(self.work, attribute)


class _RingGuard:
    """Checks every send and receive of a ring step against the ring's rules; raises with the reason, in Python,
    before gloo would abort the process on a size mismatch or wait forever on a wrong neighbour or a request that
    nobody waits for. Records which of send, isend, recv, irecv the step called."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size
        self.right, self.left = (rank + 1) % world_size, (rank - 1) % world_size
        self.chunks: list | None
        self.used: set[str]
        self.requests: list
        self.chunks, self.send_index, self.recv_index = None, 0, 0
        self.used, self.requests = set(), []
        self.sent = False  # this step started its send (send or isend) before what it is blocked in
        self.blocked_in = ""  # the blocking call or wait the rank was in last: a timeout's message names it

    def step(self, ring_step):
        def guarded(chunks, send_index, recv_index, rank, world_size):
            self.chunks, self.send_index, self.recv_index, self.requests = chunks, send_index, recv_index, []
            self.sent, self.blocked_in = False, ""
            incoming = ring_step(chunks, send_index, recv_index, rank, world_size)
            self.check_waited()
            return incoming
        return guarded

    def check_waited(self):
        names = {request.name for request in self.requests if not request.waited}
        if "irecv" in names:
            raise ValueError(f"rank {self.rank} returned from the step without waiting for its dist.irecv: irecv only "
                             "starts the receive, so the buffer may not hold the data yet. Keep its request and call "
                             ".wait() on it before returning the buffer")
        if "isend" in names:
            raise ValueError(f"rank {self.rank} returned from the step without waiting for its dist.isend: the send "
                             "may still be reading chunks[send_index], which the ring changes next, and gloo needs "
                             "every request waited for. Keep its request and call .wait() on it before returning")

    def deadlock(self, seconds: float) -> str:
        """Why the step timed out, from what the rank was blocked in: a receive waited on before its send started
        (every rank waits to receive, so none sends), or a blocking send that no receive matched."""
        if self.blocked_in in ("irecv.wait()", "recv") and not self.sent:
            waited = "waited on its irecv" if self.blocked_in == "irecv.wait()" else "waited in a blocking dist.recv"
            return (f"deadlock: rank {self.rank} {waited} {seconds} s before starting its send: every rank waited to "
                    "receive, so no rank ever sent. Start the send (dist.isend) before waiting on the receive: irecv, "
                    "isend, then wait for both")
        return (f"deadlock: rank {self.rank} waited {seconds} s in a send that no receive matched. Each rank's "
                "neighbour was itself stuck sending (a blocking dist.send returns only once the receiver takes the "
                "data): start both transfers without blocking, dist.irecv then dist.isend, then wait for both")

    def check_send(self, tensor, dst):
        if dst != self.right:
            raise ValueError(f"rank {self.rank} sends to rank {dst}: in this ring every rank sends to its right "
                             f"neighbour, (rank + 1) % world_size = {self.right}")
        assert self.chunks is not None  # set by step() before the learner's ring step runs
        want = self.chunks[self.send_index].numel()
        if tensor.numel() != want:
            raise ValueError(f"rank {self.rank} sends {tensor.numel()} element(s), but chunks[send_index] = "
                             f"chunks[{self.send_index}] has {want}: send chunks[send_index]")

    def check_recv(self, tensor, src):
        if src != self.left:
            raise ValueError(f"rank {self.rank} receives from rank {src}: in this ring every rank receives from its "
                             f"left neighbour, (rank - 1) % world_size = {self.left}")
        assert self.chunks is not None  # set by step() before the learner's ring step runs
        want = self.chunks[self.recv_index].numel()
        if tensor.numel() != want:
            raise ValueError(f"rank {self.rank} receives into a buffer of {tensor.numel()} element(s), but its left "
                             f"neighbour sends chunk {self.recv_index}, {want} element(s): gloo needs the receive "
                             f"buffer to match what is sent, so size it like chunks[recv_index]")

    @contextlib.contextmanager
    def installed(self):
        import torch.distributed as dist

        originals = {name: getattr(dist, name) for name in ("send", "isend", "recv", "irecv")}

        def wrap(name, check):
            def call(tensor, *args, **kwargs):
                peer = args[0] if args else kwargs.get("dst", kwargs.get("src"))
                check(tensor, peer)
                self.used.add(name)
                if name in ("send", "recv"):  # blocking: what the rank is in, should it time out
                    self.blocked_in = name
                result = originals[name](tensor, *args, **kwargs)
                self.sent = self.sent or name in ("send", "isend")
                if name in ("isend", "irecv"):
                    result = _Request(name, result, self)
                    self.requests.append(result)
                return result
            return call

        for name in ("send", "isend"):
            setattr(dist, name, wrap(name, self.check_send))
        for name in ("recv", "irecv"):
            setattr(dist, name, wrap(name, self.check_recv))
        try:
            yield
        finally:
            for name, original in originals.items():
                setattr(dist, name, original)


def ring_exercise_worker(rank, world_size, ring_step, case):
    """One probe exchange (chunks whose values name their rank and index), then the ring on each size."""
    from .lesson import ring_all_reduce  # lab 06's ring, generated from its notebook
    from ...launch import process_group

    with process_group(timeout_s=DEADLOCK_TIMEOUT_S) as ctx:
        device = ctx.device if ctx.backend == "nccl" else "cpu"  # gloo sends and receives CPU tensors
        guard = _RingGuard(rank, world_size)
        step = guard.step(ring_step)
        try:
            with guard.installed():
                chunks = [c.to(device) for c in _probe_chunks(rank, world_size)]
                received = step(chunks, rank, (rank - 1) % world_size, rank, world_size)
                probe: dict[str, list] = {"received": [float(v) for v in received.reshape(-1)],
                         "own_after": [float(v) for v in chunks[(rank - 1) % world_size]]}
                results = [ring_all_reduce(_ring_input(case["seed"], rank, n).to(device), rank, world_size,
                                           step).tolist() for n in case["sizes"]]
                probe["used"] = sorted(guard.used)
        except RuntimeError as exc:
            if "Timed out" in str(exc):
                raise RuntimeError(guard.deadlock(DEADLOCK_TIMEOUT_S)) from None
            raise
        return {"probe": probe, "results": results}


def _ring_run(ring_step, case):
    from ...launch import launch

    return launch(ring_exercise_worker, case["world_size"], args=(ring_step, case), timeout=60)


def _ring_expected(case):
    return [sum(_ring_input(case["seed"], r, n) for r in range(case["world_size"])).tolist() for n in case["sizes"]]


@named_unless("the ring's result on rank")
def _ring_judge(got, expected, case):
    world_size = case["world_size"]
    for rank, result in enumerate(got):
        left = (rank - 1) % world_size
        received, own_after = result["probe"]["received"], result["probe"]["own_after"]
        sent, own = _probe_value(left, left), _probe_value(rank, left)
        if received and all(v == own + sent for v in received):
            return 0.0, ("the step added the incoming chunk into this rank's own: return what arrived; the ring adds "
                         "it (reduce-scatter) or copies it (all-gather) itself")
        if received and own_after and all(v == own + sent for v in own_after):  # added into chunks itself
            return 0.0, (f"rank {rank}'s own chunk {left} changed during the step: the step added what arrived into "
                         "chunks[recv_index]. Leave chunks unchanged and return the received buffer: the ring adds it")
        if len(own_after) != left + 2 or any(v != own for v in own_after):
            return 0.0, (f"rank {rank}'s own chunk {left} changed during the step: receive into a new buffer "
                         "(torch.empty_like), not into chunks[recv_index], whose values the ring still needs")
        if received and all(v == own for v in received):
            return 0.0, "the step returned this rank's own chunks[recv_index]: return the buffer that was received"
        if len(received) != left + 2 or any(v != sent for v in received):
            return 0.0, (f"rank {rank} received {received[:3]}... where its left neighbour (rank {left}) sent its "
                         f"chunk {left}: send chunks[send_index] right, receive from the left")
    for rank, result in enumerate(got):
        used = result["probe"].get("used", [])
        if "irecv" not in used:
            return 0.0, (f"rank {rank}'s step receives with {' and '.join(u for u in used if 'recv' in u) or 'nothing'}"
                         ": this exercise asks for the receive started with dist.irecv (non-blocking), posted before "
                         "the isend, and both requests waited for")
        if "isend" not in used:
            return 0.0, (f"rank {rank}'s step sends with {' and '.join(u for u in used if 'send' in u) or 'nothing'}: "
                         "start the send with dist.isend (non-blocking) and wait for its request")
        for n, mine, want in zip(case["sizes"], result["results"], expected):
            if max_abs_diff(mine, want) > 1e-9:
                return 0.0, (f"with your step the ring's result on rank {rank} (n={n}) differs from the sum of every "
                             f"rank's tensor by up to {max_abs_diff(mine, want):.2e}")
    return 1.0, (f"the ring with your step equals the sum of {world_size} ranks' tensors on sizes {case['sizes']} "
                 "(not multiples of the world size)")


MY_RING_STEP = Exercise("06", "my_ring_step", _ring_cases, _ring_run, _ring_expected, _ring_judge,
                        "irecv from (rank - 1) % world_size into a new buffer shaped like chunks[recv_index], isend "
                        "chunks[send_index] to (rank + 1) % world_size, wait for both requests, return the buffer",
                        setup=SETUP, ranks=3,
                        shape=lambda sums, case: [{"probe": ANY, "results": sums}] * case["world_size"],
                        named_errors=("in this ring every rank", "gloo needs the receive buffer", "deadlock: rank",
                                      "returned from the step without waiting", "send chunks[send_index]"))


# ---- split_output_channels ------------------------------------------------------------------------------------------

def _split_cases(rng):
    fixed = [{"world_size": 2, "in_channels": 3, "out_channels": 4, "kernel": 3, "stride": 1},   # even, padded
             {"world_size": 3, "in_channels": 2, "out_channels": 7, "kernel": 3, "stride": 2}]   # 3 + 2 + 2, strided
    drawn = [{"world_size": n, "in_channels": rng.choice([2, 3, 4]),
              "out_channels": n * rng.randint(1, 3) + rng.randint(0, n - 1), "kernel": rng.choice([1, 3]),
              "stride": rng.choice([1, 2])} for n in (2, 4, 3)]
    # last, so that other mistakes are named first: the lesson's convolutions are float64 (its checks compare to 1e-12)
    lesson_like = [{"world_size": 2, "in_channels": 2, "out_channels": 3, "kernel": 3, "stride": 1, "dtype": "float64"}]
    return [dict(case, seed=rng.randrange(10**6)) for case in fixed + drawn + lesson_like]


def block_sizes(channels: int, world_size: int) -> list[int]:
    """torch.tensor_split's block sizes: the first channels % world_size blocks one larger."""
    return [channels // world_size + (r < channels % world_size) for r in range(world_size)]


def _split_problem(case):
    import torch
    from torch import nn

    from ... import spec

    conv = spec.init_weights(nn.Conv2d(case["in_channels"], case["out_channels"], case["kernel"],
                                       stride=case.get("stride", 1), padding=case["kernel"] // 2), case["seed"])
    x = torch.randn(2, case["in_channels"], 5, 5, generator=torch.Generator().manual_seed(case["seed"]))
    if case.get("dtype") == "float64":
        conv, x = conv.double(), x.double()
    return conv, x


def _split_run(split_output_channels, cases):
    import torch

    out: list[dict] = []
    for case in cases:
        conv, x = _split_problem(case)
        try:
            shards = [split_output_channels(conv, r, case["world_size"]) for r in range(case["world_size"])]
            dtypes = sorted({str(p.dtype).replace("torch.", "") for s in shards if isinstance(s, torch.nn.Module)
                             for p in s.parameters()})
            if dtypes and dtypes != [str(conv.weight.dtype).replace("torch.", "")]:  # before a forward that raises
                out.append({"dtypes": dtypes})
                continue
            with torch.no_grad():
                outputs = [shard(x) for shard in shards]
        except NotImplementedError:
            raise
        except Exception as exc:  # the learner's split may fail, or its module on the full input
            out.append({"error": last_line(exc)})
            continue
        four_d = all(o.dim() == 4 for o in outputs)
        out.append({"channels": [int(o.shape[1]) for o in outputs],
                    "spatial": [list(o.shape[2:]) for o in outputs] if four_d else None,
                    "parameters": [sum(p.numel() for p in s.parameters() if p.requires_grad)
                                   if isinstance(s, torch.nn.Module) else 0 for s in shards],
                    "output": torch.cat(outputs, dim=1).tolist()
                    if four_d and len({tuple(o.shape[2:]) for o in outputs}) == 1 else None})
    return out


def _split_expected(cases):
    import torch

    out = []
    for case in cases:
        conv, x = _split_problem(case)
        with torch.no_grad():
            y = conv(x)
        per_filter = conv.weight[0].numel() + 1  # its weights and its bias
        out.append({"output": y.tolist(), "without_bias": (y - conv.bias.view(1, -1, 1, 1)).tolist(),
                    "spatial": list(y.shape[2:]),
                    "parameters": [per_filter * c for c in block_sizes(case["out_channels"], case["world_size"])]})
    return out


def _channel_order(got, want):
    """For each channel of `got`, the channel of `want` it equals (None when none does)."""
    import numpy as np

    got, want = np.asarray(got), np.asarray(want)
    return [next((j for j in range(want.shape[1]) if np.allclose(got[:, i], want[:, j], atol=1e-5)), None)
            for i in range(got.shape[1])]


def _off_by_a_constant_per_channel(got, want) -> bool:
    """The outputs differ, but by one number per channel: the filters are right and the biases are not."""
    import numpy as np

    diff = np.asarray(got) - np.asarray(want)
    per_channel = diff.transpose(1, 0, 2, 3).reshape(diff.shape[1], -1)
    return bool(np.abs(per_channel - per_channel[:, :1]).max() <= 1e-5)


@named_unless("the concatenated outputs differ", "the shards' outputs are", "failed (")
def _split_judge(got, expected, cases):
    for g, e, case in zip(got, expected, cases):
        n, c_out = case["world_size"], case["out_channels"]
        sizes = block_sizes(c_out, n)
        where = f"{c_out} filters over {n} ranks"
        if "dtypes" in g:
            return 0.0, (f"{where}: conv holds {case.get('dtype', 'float32')} numbers, your shards {', '.join(g['dtypes'])}: "
                         "a new nn.Conv2d is float32 unless told otherwise, and copying into it rounds the weights; "
                         "give it conv's dtype (dtype=conv.weight.dtype), as the lesson's split_conv does")
        if "error" in g:
            return 0.0, (f"{where}: splitting, or running a shard on the full input, failed ({g['error']}). An "
                         "output-channel split keeps every input channel: slice dim 0 of the weight (the filters), "
                         "not dim 1")
        if g["channels"] == [c_out] * n:
            return 0.0, f"{where}: every rank kept all {c_out} filters; rank r keeps only its block of them"
        if g["channels"] != sizes:
            if sorted(g["channels"]) == sorted(sizes):
                return 0.0, (f"{where}: blocks of {g['channels']} filters; torch.tensor_split gives the extra filters "
                             f"to the first ranks: {sizes}")
            if sum(g["channels"]) < c_out:
                return 0.0, (f"{where}: the ranks own {sum(g['channels'])} filters in all ({g['channels']}), so "
                             f"{c_out - sum(g['channels'])} filter(s) are lost: the first {c_out % n} rank(s) take "
                             f"one more, as torch.tensor_split does ({sizes})")
            return 0.0, f"{where}: the ranks' shards have {g['channels']} output channels; expected {sizes}"
        if g["spatial"] is None or any(shape != e["spatial"] for shape in g["spatial"]):
            return 0.0, (f"{where}: the shards' outputs are {g['spatial'][0] if g['spatial'] else 'not images'} "
                         f"where the unsplit layer's are {e['spatial']}: give the new Conv2d conv's kernel_size, "
                         "stride and padding")
        if max_abs_diff(g["output"], e["output"]) > 1e-5:
            if max_abs_diff(g["output"], e["without_bias"]) <= 1e-5:
                return 0.0, f"{where}: the biases are missing; each filter's bias goes with the filter (slice the bias too)"
            if _off_by_a_constant_per_channel(g["output"], e["output"]):
                return 0.0, (f"{where}: the filters are right, the biases are not: a new nn.Conv2d starts with random "
                             "biases; copy conv's biases of this rank's filters into it")
            order = _channel_order(g["output"], e["output"])
            if None not in order and sorted(order) == list(range(c_out)):
                return 0.0, (f"{where}: the right filters, in the wrong order ({order}): rank r owns a contiguous "
                             "block of filters, so that concatenating the ranks' outputs gives the unsplit layer's "
                             "channel order")
            return 0.0, (f"{where}: the concatenated outputs differ from the unsplit layer's by up to "
                         f"{max_abs_diff(g['output'], e['output']):.2e}")
        if g["parameters"] != e["parameters"]:
            return 0.0, (f"{where}: each shard should be a module owning its filters and their biases as trainable "
                         f"parameters ({e['parameters']} numbers), got {g['parameters']}")
    return 1.0, ("each rank's block of filters, in order, the first ranks one more when they do not divide: the "
                 "outputs concatenated over the ranks equal the unsplit layer's")


SPLIT_OUTPUT_CHANNELS = Exercise("06", "split_output_channels", _split_cases, _split_run, _split_expected, _split_judge,
                                 "a new nn.Conv2d with every input channel, conv's kernel_size, stride, padding and "
                                 "dtype, and rank r's block of filters and biases, sized as torch.tensor_split sizes them",
                                 setup=SETUP, shape=lambda right, cases: [
                                     {"channels": [ANY] * c["world_size"], "spatial": [ANY] * c["world_size"],
                                      "parameters": [ANY] * c["world_size"], "output": r["output"]}
                                     for r, c in zip(right, cases)])


# ---- row_parallel_forward, run in 2 real ranks ----------------------------------------------------------------------

def _row_cases(rng):
    return {"seed": rng.randrange(10**6), "batch": rng.randint(2, 5), "in_features": 2 * rng.randint(2, 6),
            "out_features": rng.randint(3, 6)}


def _row_problem(case):
    import torch

    gen = torch.Generator().manual_seed(case["seed"])
    x = torch.randn(case["batch"], case["in_features"], generator=gen)
    weight = torch.randn(case["out_features"], case["in_features"], generator=gen)
    return x, weight, torch.randn(case["out_features"], generator=gen)


def row_exercise_worker(rank, world_size, row_parallel_forward, case):
    """This rank's block of input features and of weight columns, through the learner's forward."""
    from .lesson import block
    from ...launch import process_group

    with process_group(timeout_s=30) as ctx, _waited_all_reduces(rank) as check_waited:
        x, weight, bias = (t.to(ctx.device) for t in _row_problem(case))
        mine = block(case["in_features"], rank, world_size)
        x_shard, weight_shard = x[:, mine].contiguous(), weight[:, mine].contiguous()
        try:
            y = row_parallel_forward(x_shard, weight_shard, bias.clone())
        except (TypeError, RuntimeError) as exc:
            named = _row_error_named(exc, check_waited.calls, tuple(x_shard.shape), tuple(weight_shard.shape))
            if named is None:
                raise
            raise ValueError(named) from None
        check_waited()
        return y.detach().tolist()


def _row_error_named(exc, calls, x_shape, weight_shape) -> str | None:
    """What a learner's error in row_parallel_forward means, or None: a result of dist.all_reduce used as the sum
    (None, or a work handle with async_op=True), the partial products all-gathered instead of summed, or the weight
    shard multiplied without its transpose."""
    text = str(exc)
    if isinstance(exc, TypeError) and "NoneType" in text and "blocking" in calls:
        return ("dist.all_reduce works in place: it sums the tensor you pass it on every rank and returns None, so "
                f"its return value is not the sum ({text})")
    if isinstance(exc, TypeError) and "_Request" in text and "async" in calls:
        return ("dist.all_reduce(..., async_op=True) returns a work handle, not the sum: the tensor you pass it is "
                f"summed in place once the work is done ({text})")
    if isinstance(exc, RuntimeError) and "gather" in calls:  # learner s13r6e, lab 06 Ex 3: all_gather + cat
        # learner s13r7e, lab 06 Ex 3: torch's shape error in the middle made it 5 lines: the shapes say it
        return ("an all_gather sets the partial products side by side, so their shape no longer fits the layer's "
                "output; in a row-parallel layer each rank's partial product is a piece of a SUM over the input "
                "features: all_reduce them (SUM), then add the bias once")
    if isinstance(exc, RuntimeError) and "cannot be multiplied" in text:
        return (f"x_shard {x_shape} cannot be multiplied by weight_shard {weight_shape} as it is: the weight is "
                "stored (out_features, in_features), and the layer computes x Wᵀ + b")
    return None


@contextlib.contextmanager
def _waited_all_reduces(rank: int):
    """dist.all_reduce recorded while the block runs; the yielded check raises, naming the missing .wait(), when an
    all_reduce(..., async_op=True) was never waited for (it waits for it first, so that the group can close)."""
    import torch.distributed as dist

    original, requests, calls = dist.all_reduce, [], set()

    def all_reduce(tensor, *args, **kwargs):
        work = original(tensor, *args, **kwargs)
        calls.add("blocking" if work is None else "async")
        if work is None:  # a blocking call: done when it returns
            return work
        requests.append(_Request("all_reduce", work))
        return requests[-1]

    def check_waited():
        unwaited = [request for request in requests if not request.waited]
        for request in unwaited:
            request.work.wait()
        if unwaited:
            raise ValueError(f"rank {rank} returned without waiting for its dist.all_reduce(..., async_op=True): it "
                             "only starts the sum, so the tensor may still hold this rank's partial product. Keep the "
                             "work it returns and call .wait() on it before using the tensor (or call it without "
                             "async_op)")

    gather = dist.all_gather

    def all_gather(*args, **kwargs):
        calls.add("gather")  # a row-parallel layer sums; a gather is named where the learner's code then fails
        return gather(*args, **kwargs)

    check_waited.calls = calls  # type: ignore[attr-defined]  # which kinds of all_reduce (or all_gather) it called
    dist.all_reduce, dist.all_gather = all_reduce, all_gather
    try:
        yield check_waited
    finally:
        dist.all_reduce, dist.all_gather = original, gather


def _row_run(row_parallel_forward, case, world_size: int = 2):
    from ...launch import launch

    return launch(row_exercise_worker, world_size, args=(row_parallel_forward, case), timeout=60)


def _row_expected(case, world_size: int = 2):
    from .lesson import block

    x, weight, bias = _row_problem(case)
    blocks = [block(case["in_features"], r, world_size) for r in range(world_size)]
    partial = [x[:, mine] @ weight[:, mine].T for mine in blocks]
    square = case["out_features"] == case["in_features"] // world_size  # x_shard @ weight_shard (no .T) runs too
    untransposed = sum(x[:, mine] @ weight[:, mine] for mine in blocks) + bias if square else None
    return {"output": (x @ weight.T + bias).tolist(), "partial": [(p + bias).tolist() for p in partial],
            "bias": bias.tolist(), "untransposed": None if untransposed is None else untransposed.tolist()}


@named_unless("the output differs from the unsplit")
def _row_judge(got, expected, case):
    import numpy as np

    n = len(got)
    want, bias = np.asarray(expected["output"]), np.asarray(expected["bias"])
    if all(max_abs_diff(g, want) <= 1e-5 for g in got):
        return 1.0, "every rank holds the unsplit layer's output"
    shapes = {np.shape(g) for g in got}
    if shapes != {want.shape}:
        side_by_side = {(want.shape[0], n * want.shape[1]), (n * want.shape[0], want.shape[1])}
        if shapes <= side_by_side:
            return 0.0, (f"each rank returned shape {sorted(shapes)[0]}, the layer's output is {want.shape}: that "
                         "gathers the partial products side by side (all_gather). In a row-parallel layer each rank's "
                         "partial product is a piece of a SUM over the input features: all_reduce them (SUM); "
                         "all_gather is the column-parallel layer's step")
        return 0.0, f"each rank returned shape {sorted(shapes)[0]}, the layer's output is {want.shape}"
    if all(max_abs_diff(g, p) <= 1e-5 for g, p in zip(got, expected["partial"])):
        return 0.0, ("each rank returned only its own partial product: all_reduce the partial sums over the ranks "
                     "before adding the bias")
    for k, part in enumerate(expected["partial"]):
        if n > 1 and all(max_abs_diff(g, part) <= 1e-5 for g in got):
            return 0.0, (f"every rank returned rank {k}'s partial product plus the bias: the other ranks' partial "
                         "products never entered it. Each rank's partial product is one piece of a SUM over the "
                         "input features")
    if expected.get("untransposed") is not None and all(max_abs_diff(g, expected["untransposed"]) <= 1e-5
                                                        for g in got):
        return 0.0, ("the weight shard was used as it is stored, (out_features, in_features): the layer computes "
                     "x Wᵀ + b")
    if all(max_abs_diff(g, want + (n - 1) * bias) <= 1e-5 for g in got):
        return 0.0, (f"the bias counts {n} times: it was added on every rank before the all_reduce summed them; add it "
                     "once, after the sum")
    if all(max_abs_diff(g, want - bias) <= 1e-5 for g in got):
        return 0.0, "the bias is missing: add it once, after the all_reduce"
    if all(min(max_abs_diff(g, (want - bias) / n + bias), max_abs_diff(g, want / n)) <= 1e-5 for g in got):
        return 0.0, ("that is the average over the ranks: the partial products must be summed (ReduceOp.SUM, the "
                     "default)")
    if not all(close(g, got[0], 1e-6) for g in got):
        return 0.0, "the ranks ended with different outputs: after the all_reduce every rank holds the same sum"
    return 0.0, f"the output differs from the unsplit layer's by up to {max(max_abs_diff(g, want) for g in got):.2e}"


ROW_PARALLEL_FORWARD = Exercise("06", "row_parallel_forward", _row_cases, _row_run, _row_expected, _row_judge,
                                "multiply your block of inputs by your block of weight columns, all_reduce the "
                                "partial sums (SUM), then add the bias once", setup=SETUP, ranks=2,
                                shape=lambda right, case: [right["output"]] * 2)

register(MY_RING_STEP, SPLIT_OUTPUT_CHANNELS, ROW_PARALLEL_FORWARD)
