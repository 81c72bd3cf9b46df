"""Lab 06's collectives, drawn from the ranks' own tensors, and the bytes they put on the wire.
The ring all-reduce and tensor-parallel layers are the notebook's (lab_utils.labs.lab06.lesson), not copied here; the
lab's tensor-parallel plan is lab_utils.labs.lab06.tensor_parallel."""
from __future__ import annotations

import contextlib
from typing import NamedTuple

import numpy as np
import torch.distributed as dist

from . import measure
from .tensors import tensor_bytes

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
    """states[name] = {"before": per-rank tensors, "after": ...}: a figure, one row of two panels per collective."""
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


TRACE_FONTSIZE = 10  # the ring trace's digits: one panel per row, so they print at a readable size


def draw_ring_trace(traces, titles):
    """traces[rank] = the rank's tensor after each ring step: one panel per step, stacked top to bottom so that each
    keeps the figure's width and its digits their size; chunks separated by black lines."""
    import matplotlib.pyplot as plt

    world_size, steps = len(traces), len(traces[0])
    numel = len(np.ravel(traces[0][0]))
    fig, axes = plt.subplots(steps, 1, figsize=(1.2 + 0.6 * numel, 0.6 + steps * (0.45 + 0.4 * world_size)),
                             squeeze=False)
    for s in range(steps):
        _draw_tensors(axes[s][0], [traces[r][s] for r in range(world_size)], world_size, titles[s],
                      chunk_boundaries(numel, world_size), fontsize=TRACE_FONTSIZE)
    fig.suptitle("cell colour: the ranks whose values it sums\n(mixed: a partial sum; green: every rank's sum)",
                 fontsize=9)
    fig.tight_layout()
    return fig


# ---- bytes on the wire: one counter, one vocabulary (lab 06's tensor parallel, lab 07's DDP / ZeRO / FSDP) -----------

# A ring all-reduce is a reduce-scatter then an all-gather: it moves the buffer twice, the others once.
RING_PASSES = {"all-reduce": 2, "all-gather": 1, "reduce-scatter": 1, "broadcast": 1, "reduce": 1, "send": 1}


def ring_bytes_sent(collective: str, nbytes: float, world_size: int) -> float:
    """Bytes each rank sends when a ring carries `collective` over a full buffer of `nbytes` bytes."""
    # nbytes: the all-reduced tensor, the gathered output, the scattered input; a point-to-point message itself
    if collective not in RING_PASSES:
        raise ValueError(f"unknown collective {collective!r}; known: {sorted(RING_PASSES)}")
    if collective == "send":
        return float(nbytes)
    return RING_PASSES[collective] * (world_size - 1) / world_size * nbytes


# torch.distributed function -> (collective, the full buffer's bytes from its bound arguments and the world size)
COUNTED = {
    "all_reduce": ("all-reduce", lambda a, n: tensor_bytes(a["tensor"])),
    "all_gather": ("all-gather", lambda a, n: tensor_bytes(a["tensor"]) * n),
    "all_gather_into_tensor": ("all-gather", lambda a, n: tensor_bytes(a["output_tensor"])),
    "all_gather_single": ("all-gather", lambda a, n: tensor_bytes(a["output_tensor"])),
    "reduce_scatter": ("reduce-scatter", lambda a, n: tensor_bytes(a["output"]) * n),
    "reduce_scatter_tensor": ("reduce-scatter", lambda a, n: tensor_bytes(a["input"])),
    "reduce_scatter_single": ("reduce-scatter", lambda a, n: tensor_bytes(a["input"])),
    "broadcast": ("broadcast", lambda a, n: tensor_bytes(a["tensor"])),
    "reduce": ("reduce", lambda a, n: tensor_bytes(a["tensor"])),
    "send": ("send", lambda a, n: tensor_bytes(a["tensor"])),
    "isend": ("send", lambda a, n: tensor_bytes(a["tensor"])),
}


class Call(NamedTuple):
    """One counted call: the phase it ran in, the collective, its full buffer's bytes, the group's size."""

    phase: str
    collective: str
    nbytes: int
    world_size: int

    @property
    def sent(self) -> float:
        """Bytes this rank sent for it, as a ring algorithm sends them (ring_bytes_sent)."""
        return ring_bytes_sent(self.collective, self.nbytes, self.world_size)


class Traffic:
    """The collectives this rank calls through torch.distributed's Python functions in `with traffic.phase(name):`."""

    def __init__(self):
        self.calls: list[Call] = []

    @contextlib.contextmanager
    def phase(self, name: str = ""):
        """Count the collectives this process calls inside the block under `name`."""
        def record(function, arguments):
            collective, buffer_bytes = COUNTED[function]
            world_size = dist.get_world_size()
            self.calls.append(Call(name, collective, int(buffer_bytes(arguments, world_size)), world_size))

        # only Python calls are seen: DDP's C++ all-reduce is counted only through a Python comm hook
        # (default_hooks.allreduce_hook); DTensor's internal collectives are not seen
        with measure.collective_calls(COUNTED, record):
            yield self

    @property
    def sent(self) -> float:
        """Bytes this rank sent, as a ring algorithm sends them (ring_bytes_sent)."""
        return sum(c.sent for c in self.calls)

    def by_collective(self) -> dict:
        """{collective: [calls, bytes this rank sent]}."""
        out: dict
        out = {}
        for c in self.calls:
            calls, total = out.get(c.collective, (0, 0.0))
            out[c.collective] = [calls + 1, total + c.sent]
        return out

    def table(self, steps: int = 1) -> dict[str, dict]:
        """{"phase collective": {"calls": calls in all `steps`, "bytes": buffer bytes per step}}, first seen first."""
        # calls are a total: per step they may vary (DDP, for one, regroups its buckets after the first step)
        rows: dict
        rows = {}
        for c in self.calls:
            row = rows.setdefault(f"{c.phase} {c.collective}".strip(), {"calls": 0, "bytes": 0.0})
            row["calls"] += 1
            row["bytes"] += c.nbytes / steps
        return rows

    def ring_bytes(self, steps: int = 1) -> float:
        """Buffer bytes per step times ring passes (in Psi x bytes: DDP 2, FSDP 3); each rank sends (N-1)/N of it."""
        return sum(RING_PASSES[c.collective] * c.nbytes for c in self.calls) / steps


@contextlib.contextmanager
def count_traffic():
    """Count the bytes this rank sends through torch.distributed's Python calls in the block. Yields a Traffic."""
    traffic = Traffic()
    with traffic.phase():
        yield traffic
