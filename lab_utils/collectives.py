"""Lab 06's room: collectives drawn from the ranks' own tensors, bytes on the wire, the tensor-parallel plan of the
course CNN (bad splits refused before any rank starts), the course batch and the unsplit CNN trained on it.

The ring all-reduce and the tensor-parallel layers are written in the notebook (its cells tagged `lesson`, exported to
lab_utils.lessons.lab06, which the grader, the benchmark and the GPU check run); none is copied here.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import measure, spec

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
                     split=(2,), micro_batches: int = 4, forward_op=None, backward_op=None) -> dict:
    """What this rank sends in one step of Lab 04's GPipe pipeline (one stage per rank), counted as it is sent.

    The ops default to Lab 04's forward_op and backward_op as its notebook defines them (the learner's copy beside
    this notebook, else the course's solution)."""
    from . import lessons, pipeline

    if forward_op is None or backward_op is None:
        lab04 = lessons.notebook_path("04_model_parallel_pipeline.ipynb")
        forward_op = forward_op or lessons.from_notebook(lab04, "forward_op").function
        backward_op = backward_op or lessons.from_notebook(lab04, "backward_op").function

    rank, world_size = dist.get_rank(), dist.get_world_size()
    run = pipeline.PipelineRun("gpipe", "gpipe", micro_batches, batch_size, tuple(split), model, seed=seed)
    if len(pipeline.stage_layers(run.model_spec(), run.split)) != world_size:
        raise ValueError(f"split {list(split)} makes {len(split) + 1} stages, but {world_size} ranks run: "
                         "one stage per rank")
    stage = pipeline.build_stage(run.model_spec(), run.input_shape, run.split, rank, seed=seed).to(device)
    ctx = pipeline.StageContext.for_run(run, stage, rank, world_size, device, dist.get_backend())
    with count_traffic() as traffic:
        pipeline.run_schedule(ctx, pipeline.gpipe(world_size, micro_batches).ops[rank], forward_op, backward_op)
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


# ---- the course batch, and the unsplit CNN trained on it ------------------------------------------------------

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
