"""Lab 06's room: collectives drawn from the ranks' own tensors, bytes on the wire, the tensor-parallel plan of the
course CNN (bad splits refused before any rank starts), reference implementations of the ring all-reduce and of the
tensor-parallel layers (for the grader, and the benchmark and GPU check under lab_utils/instructor/).

The lesson's versions of the ring and of the split layers are written in the notebook; these are the references.
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import measure, spec

RING_BYTES = 4 << 20  # the benchmark's message: 4 MiB of float32


# ---- drawing collectives from the ranks' tensors -------------------------------------------------------------------

def contributors(value) -> list[int]:
    """The ranks whose values a cell holds, for tensors made as (1 ... n) x 10**rank: digit r comes from rank r."""
    digits, rank, number = [], 0, int(round(abs(float(value))))
    while number:
        if number % 10:
            digits.append(rank)
        number, rank = number // 10, rank + 1
    return digits


def format_ranks(tensors) -> list[str]:
    """One line per rank: its tensor as integers."""
    return [f"rank {r}: [{' '.join(f'{int(round(float(v)))}' for v in np.ravel(t))}]" for r, t in enumerate(tensors)]


def describe_collective(name: str, before, after) -> str:
    """The collective's name, then each rank's tensor before -> after."""
    left, right = format_ranks(before), format_ranks(after)
    width = max(len(line) for line in left)
    return "\n".join([name] + [f"  {a:<{width}}  ->  {b.split(': ', 1)[1]}" for a, b in zip(left, right)])


RANK_COLORS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:red")
COMPLETE_COLOR = "#9fd89f"  # green: a cell that holds every rank's value


def _cell_color(value, world_size: int):
    from matplotlib.colors import to_rgb

    ranks = contributors(value)
    if world_size > 1 and len(ranks) == world_size:
        return COMPLETE_COLOR
    mixed = np.mean([to_rgb(RANK_COLORS[r % len(RANK_COLORS)]) for r in ranks], axis=0) if ranks else np.ones(3)
    return tuple(0.45 * mixed + 0.55)  # lightened, so the numbers stay readable


def _draw_tensors(ax, tensors, world_size: int, title: str, boundaries=(), width=None, fontsize=7) -> None:
    """Each rank's tensor as a row of cells, coloured by the ranks whose values a cell holds."""
    from matplotlib.patches import Rectangle

    width = width or max(len(np.ravel(t)) for t in tensors)
    for r, tensor in enumerate(tensors):
        for i, v in enumerate(np.ravel(tensor)):
            ax.add_patch(Rectangle((i, r), 1, 1, facecolor=_cell_color(v, world_size), edgecolor="white"))
            ax.text(i + 0.5, r + 0.5, f"{int(round(float(v)))}", ha="center", va="center", fontsize=fontsize)
    for x in boundaries:
        ax.plot([x, x], [0, len(tensors)], color="black", lw=1.5)
    ax.set_xlim(0, width)
    ax.set_ylim(len(tensors), 0)
    ax.set_yticks([r + 0.5 for r in range(len(tensors))], [f"rank {r}" for r in range(len(tensors))], fontsize=8)
    ax.set_xticks([])
    ax.set_frame_on(False)
    ax.set_title(title, fontsize=9)


def draw_collectives(states: dict):
    """states[name] = {"before": per-rank tensors, "after": per-rank tensors}: one row of two panels per collective."""
    import matplotlib.pyplot as plt

    world_size = len(next(iter(states.values()))["before"])
    widths = {when: max(len(np.ravel(t)) for state in states.values() for t in state[when])
              for when in ("before", "after")}
    fig, axes = plt.subplots(len(states), 2, figsize=(10, 0.4 + 0.5 * (world_size + 1) * len(states)), squeeze=False,
                             gridspec_kw={"width_ratios": [widths["before"], widths["after"]]})
    for row, (name, state) in enumerate(states.items()):
        for col, when in enumerate(("before", "after")):
            _draw_tensors(axes[row][col], state[when], world_size, f"{name}: {when}", width=widths[when])
    fig.suptitle("cell colour: the rank whose value it holds (mixed: partial sums; green: every rank's sum)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def chunk_boundaries(numel: int, world_size: int) -> list[int]:
    """Where torch.tensor_split cuts `numel` elements into `world_size` chunks (the inner boundaries)."""
    sizes = [numel // world_size + (1 if i < numel % world_size else 0) for i in range(world_size)]
    return list(np.cumsum(sizes)[:-1])


def draw_ring_trace(traces, titles):
    """traces[rank] = the rank's tensor after each ring step: one panel per step, chunks separated by black lines."""
    import matplotlib.pyplot as plt

    world_size, steps = len(traces), len(traces[0])
    numel = len(np.ravel(traces[0][0]))
    fig, axes = plt.subplots(1, steps, figsize=(0.45 * numel * steps, 0.7 + 0.45 * world_size), squeeze=False)
    for s in range(steps):
        _draw_tensors(axes[0][s], [traces[r][s] for r in range(world_size)], world_size, titles[s],
                      chunk_boundaries(numel, world_size), fontsize=6)
    fig.tight_layout()
    return fig


# ---- bytes on the wire ----------------------------------------------------------------------------------------------

def ring_bytes_sent(collective: str, nbytes: float, world_size: int) -> float:
    """Bytes each rank sends when a ring carries the collective; nbytes is the full tensor (the all-reduced tensor,
    the gathered output, the scattered input; a point-to-point message itself).

    all_reduce: 2 (N - 1) / N x S;  all_gather, reduce_scatter: (N - 1) / N x S;  send: S.
    """
    n = world_size
    factors = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "send": 1.0}
    if collective not in factors:
        raise ValueError(f"unknown collective {collective!r}; known: {sorted(factors)}")
    return factors[collective] * nbytes


@dataclass
class Traffic:
    """What this rank sent through torch.distributed inside a `count_traffic()` block."""

    world_size: int
    calls: list = field(default_factory=list)  # (collective, full tensor bytes, bytes this rank sent)

    def record(self, collective: str, nbytes: int) -> None:
        self.calls.append((collective, int(nbytes), ring_bytes_sent(collective, nbytes, self.world_size)))

    @property
    def sent(self) -> float:
        """Bytes this rank sent, as a ring algorithm sends them."""
        return sum(sent for *_, sent in self.calls)

    def by_collective(self) -> dict:
        """{collective: [calls, bytes sent]}."""
        out = {}
        for name, _, sent in self.calls:
            calls, total = out.get(name, (0, 0.0))
            out[name] = [calls + 1, total + sent]
        return out


def _payload(name: str, arguments: dict, world_size: int) -> int:
    """The full tensor's bytes of one call (see ring_bytes_sent), from its bound arguments."""
    if name == "all_gather":
        return arguments["tensor"].nbytes * world_size
    first = next(iter(arguments.values()))
    if name == "reduce_scatter":
        return first.nbytes * world_size
    return first.nbytes  # all_reduce, all_gather_into_tensor (the output), send, isend


COUNTED = {"all_reduce": "all_reduce", "all_gather": "all_gather", "all_gather_into_tensor": "all_gather",
           "reduce_scatter": "reduce_scatter", "send": "send", "isend": "send"}


@contextlib.contextmanager
def count_traffic():
    """Count the bytes this rank sends through torch.distributed's Python calls in the block (DDP's Python comm
    hooks included; DTensor's internal collectives are not seen). Yields a Traffic."""
    traffic = Traffic(dist.get_world_size())
    with measure.collective_calls(COUNTED, lambda name, arguments: traffic.record(
            COUNTED[name], _payload(name, arguments, traffic.world_size))):
        yield traffic


def pipeline_traffic(batch_size: int, seed: int, device, *, model: str = "cnn2d_2layer_fullconnected_2layer",
                     split=(2,), micro_batches: int = 4) -> dict:
    """What this rank sends in one step of Lab 04's GPipe pipeline (one stage per rank), counted as it is sent."""
    from . import pipeline

    rank, world_size = dist.get_rank(), dist.get_world_size()
    run = pipeline.PipelineRun("gpipe", "gpipe", micro_batches, batch_size, tuple(split), model, seed=seed)
    if len(pipeline.stage_layers(run.model_spec(), run.split)) != world_size:
        raise ValueError(f"split {list(split)} makes {len(split) + 1} stages, but {world_size} ranks run: "
                         "one stage per rank")
    stage = pipeline.build_stage(run.model_spec(), run.input_shape, run.split, rank, seed=seed).to(device)
    ctx = pipeline.StageContext.for_run(run, stage, rank, world_size, device, dist.get_backend())
    with count_traffic() as traffic:
        pipeline.run_schedule(ctx, pipeline.gpipe(world_size, micro_batches).ops[rank])
    return traffic.by_collective()


# ---- the tensor-parallel plan of the course CNN ----------------------------------------------------------------------

@dataclass(frozen=True)
class SplitLayer:
    """How one layer of the spec'd CNN is split over the ranks, and the size that must divide evenly."""

    index: int
    kind: str
    how: str   # "output channels" | "columns" | "rows" | "" (not split)
    size: int  # channels or features split over the ranks (0: not split)

    def describe(self) -> str:
        if not self.how:
            return f"layer {self.index} ({self.kind}): not split; {NOT_SPLIT.get(self.kind, 'runs whole on every rank')}"
        unit = "channels" if self.kind == "conv2d" else "features"
        return (f"layer {self.index} ({self.kind}): split by {self.how}, {self.size} {unit}, "
                f"valid world sizes {divisors(self.size)}")


NOT_SPLIT = {"maxpool2d": "it works channel by channel, so each rank pools its own channels",
             "flatten": "each rank flattens the all-gathered channels"}


def divisors(n: int) -> list[int]:
    """Every world size that splits n evenly."""
    return [d for d in range(1, n + 1) if n % d == 0]


def tensor_parallel_plan(model_spec, input_shape) -> list[SplitLayer]:
    """Convolutions split by output channels; dense layers in column/row pairs (a last unpaired one stays whole)."""
    layers = spec.validate(model_spec)
    shapes = [tuple(input_shape)] + spec.output_shapes(model_spec, input_shape)
    dense = [i for i, layer in enumerate(layers) if layer["type"] == "dense"]
    paired = dense[:len(dense) // 2 * 2]
    plan = []
    for i, layer in enumerate(layers):
        if layer["type"] == "conv2d":
            plan.append(SplitLayer(i, "conv2d", "output channels", layer["filters"]))
        elif i in paired and paired.index(i) % 2 == 0:
            plan.append(SplitLayer(i, "dense", "columns", layer["units"]))
        elif i in paired:
            plan.append(SplitLayer(i, "dense", "rows", shapes[i][0]))
        else:
            plan.append(SplitLayer(i, layer["type"], "", 0))
    return plan


def check_tensor_parallel(model_spec, input_shape, world_size: int) -> list[SplitLayer]:
    """The plan, or a ValueError naming the layer that cannot be split over `world_size` ranks and the valid sizes."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer (number of ranks), got {world_size!r}")
    plan = tensor_parallel_plan(model_spec, input_shape)
    split = [layer for layer in plan if layer.how]
    if not split:
        return plan
    valid = [d for d in divisors(min(layer.size for layer in split)) if all(l.size % d == 0 for l in split)]
    for layer in split:
        unit = "channels" if layer.kind == "conv2d" else "features"
        if world_size > layer.size:
            raise ValueError(f"world_size={world_size} is larger than layer {layer.index} ({layer.kind})'s {layer.size} "
                             f"{unit}: some ranks would own none of them. World sizes that split every layer of this "
                             f"model: {valid}")
        if layer.size % world_size:
            raise ValueError(f"layer {layer.index} ({layer.kind}, split by {layer.how}) has {layer.size} {unit}, which "
                             f"do not split evenly over {world_size} ranks (valid for this layer: "
                             f"{divisors(layer.size)}). World sizes that split every layer of this model: {valid}")
    return plan


# ---- reference implementations (for the benchmark, the grader and the GPU check) -----------------------------------

def ring_step(chunks, send_index: int, recv_index: int, rank: int, world_size: int):
    """Send chunks[send_index] to the right neighbour; return the chunk the left neighbour sends (sized like
    chunks[recv_index]: gloo needs the receive buffer to match what is sent)."""
    request = dist.isend(chunks[send_index], (rank + 1) % world_size)  # a blocking send would wait for a neighbour
    incoming = torch.empty_like(chunks[recv_index])                    # that is itself waiting to send: deadlock
    dist.recv(incoming, (rank - 1) % world_size)
    request.wait()
    return incoming


def ring_all_reduce(tensor, rank: int, world_size: int, step=ring_step):
    """Sum a contiguous `tensor` over the ranks in place: N - 1 reduce-scatter steps, then N - 1 all-gather steps.

    `step(chunks, send_index, recv_index, rank, world_size)` moves one chunk (the grader plugs a learner's in here).
    """
    chunks = torch.tensor_split(tensor.view(-1), world_size)
    for s in range(world_size - 1):
        send, recv = (rank - s) % world_size, (rank - s - 1) % world_size
        chunks[recv].add_(step(chunks, send, recv, rank, world_size))
    for s in range(world_size - 1):
        send, recv = (rank + 1 - s) % world_size, (rank - s) % world_size
        chunks[recv].copy_(step(chunks, send, recv, rank, world_size))
    return tensor


class CopyToRanks(torch.autograd.Function):
    """Megatron's f: identity forward; backward all-reduces the gradient (each rank holds a partial one)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad


class SumOverRanks(torch.autograd.Function):
    """Megatron's g: all-reduce forward (the partial sums); identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous().clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class GatherChannels(torch.autograd.Function):
    """All-gather along dim 1 forward; backward keeps this rank's block of the gradient."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        ctx.block = x.shape[1]
        return torch.cat(parts, dim=1)

    @staticmethod
    def backward(ctx, grad):
        rank = dist.get_rank()
        return grad[:, rank * ctx.block:(rank + 1) * ctx.block].contiguous()


class SplitChannels(torch.autograd.Function):
    """Keep this rank's block of dim 1 forward; backward all-gathers the gradient blocks."""

    @staticmethod
    def forward(ctx, x):
        rank, world_size = dist.get_rank(), dist.get_world_size()
        block = x.shape[1] // world_size
        return x[:, rank * block:(rank + 1) * block].contiguous()

    @staticmethod
    def backward(ctx, grad):
        parts = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, grad.contiguous())
        return torch.cat(parts, dim=1)


def block(size: int, rank: int, world_size: int) -> slice:
    """This rank's contiguous block of `size` channels or features."""
    per = size // world_size
    return slice(rank * per, (rank + 1) * per)


def shard_conv(conv: nn.Conv2d, rank: int, world_size: int, dim: int) -> nn.Conv2d:
    """dim 0: this rank's filters (and their biases); dim 1: its input channels (no bias: added once after the sum)."""
    out_c, in_c = conv.out_channels, conv.in_channels
    part = nn.Conv2d(in_c if dim == 0 else in_c // world_size, out_c // world_size if dim == 0 else out_c,
                     conv.kernel_size, conv.stride, conv.padding, bias=dim == 0, device=conv.weight.device,
                     dtype=conv.weight.dtype)
    with torch.no_grad():
        mine = block(out_c if dim == 0 else in_c, rank, world_size)
        part.weight.copy_(conv.weight[mine] if dim == 0 else conv.weight[:, mine])
        if dim == 0:
            part.bias.copy_(conv.bias[mine])
    return part


def shard_linear(linear: nn.Linear, rank: int, world_size: int, dim: int) -> nn.Linear:
    """dim 0 (column parallel): this rank's output features; dim 1 (row parallel): its input features, no bias."""
    out_f, in_f = linear.out_features, linear.in_features
    part = nn.Linear(in_f if dim == 0 else in_f // world_size, out_f // world_size if dim == 0 else out_f,
                     bias=dim == 0, device=linear.weight.device, dtype=linear.weight.dtype)
    with torch.no_grad():
        mine = block(out_f if dim == 0 else in_f, rank, world_size)
        part.weight.copy_(linear.weight[mine] if dim == 0 else linear.weight[:, mine])
        if dim == 0:
            part.bias.copy_(linear.bias[mine])
    return part


class TensorParallelCNN(nn.Module):
    """The 2-conv / 2-dense course CNN split over the ranks: convolutions by output channels (all-gathered after
    pooling), then the column/row pair of dense layers (one all-reduce forward, one backward)."""

    def __init__(self, full: nn.Sequential, rank: int, world_size: int):
        super().__init__()
        convs = [m for m in full if isinstance(m, nn.Conv2d)]
        fc1, fc2 = [m for m in full if isinstance(m, nn.Linear)]
        self.convs = nn.ModuleList(shard_conv(c, rank, world_size, 0) for c in convs)
        self.fc1, self.fc2 = shard_linear(fc1, rank, world_size, 0), shard_linear(fc2, rank, world_size, 1)
        self.fc2_bias = nn.Parameter(fc2.bias.detach().clone())

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            x = CopyToRanks.apply(x) if i else x  # the images need no gradient
            x = GatherChannels.apply(F.max_pool2d(F.relu(conv(x)), 2))
        h = F.relu(self.fc1(CopyToRanks.apply(x.flatten(1))))
        return SumOverRanks.apply(self.fc2(h)) + self.fc2_bias


def gather_cnn_state(model: TensorParallelCNN) -> list:
    """The full model's parameters, in spec.build_torch's order, rebuilt from every rank's shards."""
    def gathered(t, dim):
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t.detach().contiguous())
        return torch.cat(parts, dim=dim)

    state = []
    for conv in model.convs:
        state += [gathered(conv.weight, 0), gathered(conv.bias, 0)]
    return state + [gathered(model.fc1.weight, 0), gathered(model.fc1.bias, 0), gathered(model.fc2.weight, 1),
                    model.fc2_bias.detach()]


def course_batch(batch_size: int, seed: int, step: int = 0, image_side: int = 28):
    """The procedural images and labels of one training step (the same on every rank)."""
    from . import data

    x, y = data.synthetic_images(batch_size, image_shape=(1, image_side, image_side), seed=seed * 1000 + step)
    return torch.from_numpy(x), torch.from_numpy(y)


def single_device_training(model_spec, input_shape, batch_size: int, steps: int, lr: float, seed: int):
    """The unsplit CNN trained with SGD on the same batches: its parameters and per-step losses."""
    model = spec.build_torch(model_spec, input_shape, seed=seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        x, y = course_batch(batch_size, seed, step, input_shape[-1])
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return [p.detach() for p in model.parameters()], losses


def _max_diff(a, b) -> float:
    return max(float((x.detach().cpu().double() - y.detach().cpu().double()).abs().max()) for x, y in zip(a, b))


def _tp_conv_diff(device, seed: int) -> float:
    """Both conv splits against the unsplit conv: outputs, weight and input gradients (max |difference|)."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(seed)
    conv = spec.init_weights(nn.Conv2d(8, 8, 3, padding=1), seed)
    x, grad_y = torch.randn(4, 8, 10, 10, generator=gen), torch.randn(4, 8, 10, 10, generator=gen)
    x_ref = x.clone().requires_grad_(True)
    y_ref = conv(x_ref)
    y_ref.backward(grad_y)
    diffs = []
    for dim in (0, 1):
        part = shard_conv(conv, rank, world_size, dim).to(device)
        xi = x.to(device, copy=True).requires_grad_(True)
        if dim == 0:
            y = GatherChannels.apply(part(CopyToRanks.apply(xi)))
        else:
            y = SumOverRanks.apply(part(SplitChannels.apply(xi))) + conv.bias.detach().to(device).view(1, -1, 1, 1)
        y.backward(grad_y.to(device))
        mine = block(8, rank, world_size)
        weight_ref = conv.weight.grad[mine] if dim == 0 else conv.weight.grad[:, mine]
        diffs.append(_max_diff([y, xi.grad, part.weight.grad], [y_ref, x_ref.grad, weight_ref]))
    return max(diffs)


def _tp_mlp_diff(device, seed: int) -> float:
    """The column/row pair, by hand and with torch.distributed.tensor.parallel, against the unsplit MLP."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    rank, world_size = dist.get_rank(), dist.get_world_size()
    mlp = spec.init_weights(nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10)), seed)
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(seed))
    mlp(x).square().sum().backward()
    fc1 = shard_linear(mlp[0], rank, world_size, 0).to(device)
    fc2 = shard_linear(mlp[2], rank, world_size, 1).to(device)
    xd = x.to(device)
    y = SumOverRanks.apply(fc2(F.relu(fc1(CopyToRanks.apply(xd))))) + mlp[2].bias.detach().to(device)
    y.square().sum().backward()
    rows, cols = block(16, rank, world_size), block(16, rank, world_size)
    by_hand = _max_diff([y, fc1.weight.grad, fc2.weight.grad],
                        [mlp(x), mlp[0].weight.grad[rows], mlp[2].weight.grad[:, cols]])
    mesh_device = "cuda" if str(device).startswith("cuda") and dist.get_backend() == "nccl" else "cpu"
    library = parallelize_module(_fresh(mlp, mesh_device), init_device_mesh(mesh_device, (world_size,)),
                                 {"0": ColwiseParallel(), "2": RowwiseParallel()})
    y_lib = library(x.to(mesh_device))
    y_lib.square().sum().backward()
    with_library = _max_diff([y_lib, library[0].weight.grad.full_tensor(), library[2].weight.grad.full_tensor()],
                             [mlp(x), mlp[0].weight.grad, mlp[2].weight.grad])
    return max(by_hand, with_library)


def _fresh(module: nn.Module, device) -> nn.Module:
    """A copy of `module` on `device` without gradients."""
    twin = copy.deepcopy(module).to(device)
    twin.zero_grad(set_to_none=True)
    return twin


def _tp_cnn_diff(device, steps: int, seed: int, batch_size: int = 32, lr: float = 0.05) -> float:
    """The course CNN trained tensor-parallel against the unsplit one trained on one device: max |weight difference|."""
    model_spec, input_shape = spec.cnn2d_2layer_fullconnected_2layer(), (1, 28, 28)
    model = TensorParallelCNN(spec.build_torch(model_spec, input_shape, seed=seed), dist.get_rank(),
                              dist.get_world_size()).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        x, y = course_batch(batch_size, seed, step)
        optimizer.zero_grad()
        F.cross_entropy(model(x.to(device)), y.to(device)).backward()
        optimizer.step()
    reference, _ = single_device_training(model_spec, input_shape, batch_size, steps, lr, seed)
    return _max_diff(gather_cnn_state(model), reference)


def _ring_diff(comm_device, seed: int, sizes=(1, 13, 1001)) -> float:
    """The reference ring against the float64 sum of every rank's tensor, on sizes the world size does not divide."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    worst = 0.0
    for n in sizes:
        inputs = [torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 7919 * r + n))
                  for r in range(world_size)]
        result = ring_all_reduce(inputs[rank].clone().to(comm_device), rank, world_size)
        worst = max(worst, _max_diff([result], [sum(inputs)]))
    return worst


def _ring_vs_library(nbytes: int, repeats: int, comm_device) -> dict:
    """Seconds of each repeat of the ring and of dist.all_reduce on `nbytes` of float32, interleaved, each after a
    barrier."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    start = torch.randn(max(1, nbytes // 4), generator=torch.Generator().manual_seed(rank)).to(comm_device)
    ring, library = start.clone(), start.clone()

    def reset(tensor):
        return lambda: (tensor.copy_(start), dist.barrier())

    timings = measure.time_interleaved({"ring": lambda: ring_all_reduce(ring, rank, world_size),
                                        "library": lambda: dist.all_reduce(library)},
                                       warmup=2, repeats=repeats, device=comm_device,
                                       before={"ring": reset(ring), "library": reset(library)})
    return {name: list(t.times) for name, t in timings.items()}


def reference_worker(rank: int, world_size: int, nbytes: int, repeats: int, train_steps: int, seed: int = 0,
                     timeout_s: float = 60.0) -> dict:
    """Every reference check of the lab on this rank: the ring timed beside the library's all-reduce; the ring's and the
    tensor-parallel layers' differences from unsplit computations."""
    from .launch import process_group

    with process_group(timeout_s) as ctx:
        device = torch.device(ctx.device)
        if device.type == "cuda":  # compare full float32 arithmetic, not TF32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        comm_device = device if ctx.backend == "nccl" else torch.device("cpu")  # gloo's send/recv take CPU tensors
        return {"backend": ctx.backend, "device": ctx.device, **_ring_vs_library(nbytes, repeats, comm_device),
                "ring_max_abs_diff": _ring_diff(comm_device, seed), "tp_conv_max_abs_diff": _tp_conv_diff(device, seed),
                "tp_mlp_max_abs_diff": _tp_mlp_diff(device, seed),
                "tp_cnn_weights_max_abs_diff": _tp_cnn_diff(device, train_steps, seed)}
