"""Lab 13's instruments: its data set of larger images, bytes counted per message, activation bytes counted from
tensors, and the comparison every library result passes before it is printed. The lesson (the halo exchange, its
autograd.Function, the slab split) is in the notebook, exported to lab_utils/labs/lab13/lesson.py."""
from __future__ import annotations

import contextlib
import csv
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import data, detectors, measure
from ...measure.verdicts import shown

DIGITS_LEVELS = 16  # the built-in digits' grey levels run 0..16


# ---- data: the course's digits, upscaled, written as a pixel CSV and read back through data.load_csv ---------------

def upscaled_digits_csv(directory, side: int, n: int) -> Path:
    """Write the first `n` built-in digits, upscaled (bilinear) from 8x8 to side x side with grey levels 0..255, to
    <directory>/digits_<side>px_<n>.csv (label last, as datasets/digits); written once, deterministically."""
    if not isinstance(side, int) or side < 8:
        raise ValueError(f"side must be an int of at least 8 pixels (the digits are 8x8), got {side!r}")
    train_csv, _ = data.digits_csvs()
    images, labels = data.load_csv(train_csv)
    if not 1 <= n <= len(images):
        raise ValueError(f"n must be between 1 and {len(images)} (the digits' training rows), got {n!r}")
    path = Path(directory) / f"digits_{side}px_{n}.csv"
    if path.exists():
        return path
    import torch
    import torch.nn.functional as F

    big = F.interpolate(torch.from_numpy(images[:n]).float(), size=(side, side), mode="bilinear", align_corners=True)
    pixels = np.rint(big.numpy().reshape(n, -1) * (255 / DIGITS_LEVELS)).clip(0, 255).astype(np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with partial.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([f"pixel{i}" for i in range(side * side)] + ["label"])
        writer.writerows([*row, int(label)] for row, label in zip(pixels.tolist(), labels[:n]))
    partial.replace(path)  # a run stopped half-way leaves no half-written data set behind
    return path


def load_upscaled_digits(directory, side: int, n: int) -> tuple[np.ndarray, np.ndarray, Path]:
    """(images (n, 1, side, side) in [0, 1], labels, the CSV's path): the CSV validated line by line (data.load_csv)."""
    path = upscaled_digits_csv(directory, side, n)
    images, labels = data.load_csv(path, image_shape=(1, side, side))
    return (images / 255.0).astype(np.float32), labels, path


# ---- activation bytes, counted from tensors ----------------------------------------------------------------------

def layer_outputs(model, images) -> list[tuple[str, tuple, int]]:
    """(layer, output shape, output bytes) of each leaf module of `model` on `images`, from the tensors themselves."""
    import torch

    rows: list[tuple[str, tuple, int]] = []
    hooks = [module.register_forward_hook(
        lambda module, args, out, name=name: rows.append((name, tuple(out.shape), out.numel() * out.element_size())))
        for name, module in model.named_modules() if not list(module.children())]
    try:
        with torch.no_grad():
            model(images)
    finally:
        for hook in hooks:
            hook.remove()
    return rows


@contextlib.contextmanager
def saved_for_backward():
    """Count the bytes autograd keeps for the backward pass in the block (each storage once). Yields a dict whose
    "bytes" is the total."""
    import torch

    seen: dict = {}
    counted = {"bytes": 0}

    def pack(tensor):
        key = (tensor.untyped_storage().data_ptr(), tensor.device)
        if key not in seen:
            seen[key] = tensor.untyped_storage().nbytes()
            counted["bytes"] += seen[key]
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield counted


# ---- bytes sent, message by message ------------------------------------------------------------------------------

COUNTED_CALLS = ("isend", "send", "all_reduce")


class Sends:
    """Every isend, send and all_reduce this rank calls in the block, with its phase, shape and bytes."""

    def __init__(self):
        self.calls: list[dict] = []
        self._phase = ""

    @contextlib.contextmanager
    def phase(self, name: str):
        """Calls in the block are counted under `name`."""
        before, self._phase = self._phase, name
        try:
            yield self
        finally:
            self._phase = before

    def record(self, function: str, arguments: dict) -> None:
        tensor = arguments["tensor"]
        self.calls.append({"phase": self._phase, "call": function, "shape": list(tensor.shape),
                           "bytes": tensor.numel() * tensor.element_size()})

    def rows(self) -> list[dict]:
        """The calls as plain data (they travel back from the rank)."""
        return [dict(c) for c in self.calls]


@contextlib.contextmanager
def count_sends():
    """`with count_sends() as sends:` counts this rank's isend, send and all_reduce calls (measure.collective_calls)."""
    sends = Sends()
    with measure.collective_calls(COUNTED_CALLS, sends.record):
        yield sends


# ---- when each rank enters and leaves each blocking call: the ranks' arrival skew -------------------------------

CLOCKED_CALLS = ("all_reduce", "isend", "irecv")


class CallClock:
    """Per step, every blocking call this rank made: (call, entered, left), time.perf_counter() seconds. On Linux
    perf_counter reads CLOCK_MONOTONIC, one clock for every process of the machine: ranks' times compare directly."""

    def __init__(self):
        self.steps: list[list[tuple[str, float, float]]] = []

    def step(self) -> None:
        """The calls after this belong to a new step."""
        self.steps.append([])

    def record(self, call: str, entered: float, left: float) -> None:
        self.steps[-1].append((call, entered, left))


class _ClockedRequest:
    """An isend's or irecv's request whose wait() is clocked: that is where a halo exchange blocks."""

    def __init__(self, request, clock: CallClock, call: str):
        self._request, self._clock, self._call = request, clock, call

    def wait(self, *args, **kwargs):
        entered = time.perf_counter()
        result = self._request.wait(*args, **kwargs)
        self._clock.record(self._call, entered, time.perf_counter())
        return result


@contextlib.contextmanager
def clock_calls():
    """`with clock_calls() as clock:` clocks this rank's all_reduce calls and its isend/irecv waits; call clock.step()
    before each step."""
    import torch.distributed as dist

    clock = CallClock()
    originals = {name: getattr(dist, name) for name in CLOCKED_CALLS}

    def all_reduce(*args, **kwargs):
        entered = time.perf_counter()
        result = originals["all_reduce"](*args, **kwargs)
        clock.record("all_reduce", entered, time.perf_counter())
        return result

    def requester(name):
        return lambda *args, **kwargs: _ClockedRequest(originals[name](*args, **kwargs), clock, name)

    dist.all_reduce, dist.isend, dist.irecv = all_reduce, requester("isend"), requester("irecv")
    try:
        yield clock
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def arrival_skew(per_rank: list[list[list]]) -> dict | None:
    """Two ranks' clocked steps (CallClock.steps, one list per rank) taken apart, medians over the steps, seconds:
    "skew": how far apart the ranks reached each blocking wait, |rank 0's - rank 1's|, added up over the step (the
    rank that came first waits that long); "inside": each rank's time inside the waits; "together": the time a rank
    spent inside them with both ranks there, (both ranks' inside - skew) / 2 from those medians, so that it follows
    from the printed figures (learner s13r7d, lab 13 finding 3: a median of per-step values did not); "kinds": the
    waits a step, by call.
    None where the ranks' waits do not pair up (not 2 ranks, or another count of waits)."""
    if len(per_rank) != 2 or not per_rank[0] or len(per_rank[0]) != len(per_rank[1]):
        return None
    skews: list[float] = []
    inside: list[list[float]] = [[], []]
    for first, second in zip(*per_rank):
        if len(first) != len(second) or not first:
            return None
        skews.append(sum(abs(a[1] - b[1]) for a, b in zip(first, second)))
        for r, calls in enumerate((first, second)):
            inside[r].append(sum(left - entered for _, entered, left in calls))
    kinds: dict[str, int] = {}
    for call, _, _ in per_rank[0][0]:
        kinds[call] = kinds.get(call, 0) + 1
    medians = [float(np.median(t)) for t in inside]
    return {"skew": float(np.median(skews)), "inside": medians,
            "together": (sum(medians) - float(np.median(skews))) / 2, "calls": len(per_rank[0][0]), "kinds": kinds, "steps": len(skews)}


def wait_clause(skew: dict) -> str:
    """Where the clocked waits go (arrival_skew's figures), in one clause: time with both ranks inside a wait, or a
    partner arriving late (the skew), whichever is the larger share of a rank's time inside the waits."""
    if skew["together"] >= skew["skew"] / 2:
        return "clocked: mostly both ranks inside the wait, not a late partner"
    return "clocked: mostly a partner arriving late"


def halo_bytes_by_layer(per_rank: list[list[dict]], phase: str) -> dict[tuple[int, int], int]:
    """{(channels, width): bytes} of the halo messages (isend) every rank sent in `phase`, summed over the ranks."""
    out: dict[tuple[int, int], int] = {}
    for calls in per_rank:
        for c in calls:
            if c["phase"] == phase and c["call"] in ("isend", "send"):
                key = (c["shape"][1], c["shape"][3])
                out[key] = out.get(key, 0) + c["bytes"]
    return out


def bytes_of(per_rank: list[list[dict]], phase: str, call: str) -> int:
    """Bytes of one kind of call in one phase, summed over the ranks (the tensor handed to the call)."""
    return sum(c["bytes"] for calls in per_rank for c in calls if c["phase"] == phase and c["call"] == call)


# ---- a library's result is printed only through a comparison with the unsplit model -----------------------------

@dataclass(frozen=True)
class LibraryCheck:
    """A library's output beside the unsplit model's: what it claims (placements, global shape), what it holds
    (local and gathered shapes) and how far its values are from the reference. The only way this lab prints a
    library result."""

    name: str
    placements: str
    claimed_shape: tuple
    local_shapes: tuple
    gathered_shape: tuple
    reference_shape: tuple
    max_diff: float | None  # None: the shapes differ, nothing to compare element by element
    tolerance: float
    wrong_columns: tuple = ()  # the last dimension's indices where the values differ (shapes equal)

    @classmethod
    def compare(cls, name: str, result: dict, reference, tolerance: float = 1e-5) -> "LibraryCheck":
        """Check a probe's `result` (placements, claimed_shape, local_shape per rank, gathered) against `reference`."""
        if reference is None:
            raise ValueError(f"{name}: a library result needs the unsplit model's output to be compared with")
        want = np.asarray(reference)
        got = np.asarray(result["gathered"])
        diff: float | None = None
        columns: tuple[int, ...] = ()
        if got.shape == want.shape:
            error = np.abs(got - want).reshape(-1, want.shape[-1]) if want.ndim else np.abs(got - want).reshape(1, 1)
            diff = float(error.max()) if error.size else 0.0
            columns = tuple(int(i) for i in np.flatnonzero(~(error <= tolerance).all(axis=0)))
        return cls(name, str(result["placements"]), tuple(result["claimed_shape"]),
                   tuple(tuple(s) for s in result["local_shapes"]), tuple(got.shape), tuple(want.shape), diff,
                   tolerance, columns)

    @property
    def right(self) -> bool:
        """The gathered result has the reference's shape and values (within the tolerance)."""
        return self.max_diff is not None and math.isfinite(self.max_diff) and self.max_diff <= self.tolerance

    def problems(self) -> list[str]:
        """What the comparison found wrong, in words (empty when right)."""
        out = []
        if self.claimed_shape != self.reference_shape:
            out.append(f"claims shape {self.claimed_shape}, the unsplit model's output is {self.reference_shape}")
        if self.gathered_shape != self.reference_shape:
            out.append(f"its full_tensor() has shape {self.gathered_shape}, not {self.reference_shape}")
        if "Replicate" in self.placements and len(set(self.local_shapes)) == 1 and \
                self.local_shapes[0] != self.claimed_shape:
            out.append(f"its placement says {self.placements} (every rank the whole tensor) while each rank holds "
                       f"{self.local_shapes[0]}")
        if self.max_diff is not None and not self.right:
            where = f" at columns {list(self.wrong_columns)} of {self.reference_shape[-1]}" \
                if len(self.wrong_columns) < self.reference_shape[-1] else " everywhere"
            out.append(f"its values differ from the unsplit model's by up to {self.max_diff:.2e}{where}")
        return out

    def __str__(self) -> str:
        """The name and right or WRONG on the first line; what is wrong, one problem a line under it (each wrapped at
        measure.lines.WIDTH)."""
        head = f"library vs unsplit model, {self.name}:"
        if self.right:
            return measure.lines.wrap(f"{head} right (max |difference| {self.max_diff:.1e} <= {self.tolerance:g})")
        glue = measure.lines.NO_BREAK  # a shape (2, 4, 8, 8) and the outcome's words stay on one line when wrapped
        problems = [re.sub(r"(?<=\d), (?=\d)", "," + glue, p) for p in self.problems()]
        return measure.lines.stacked(f"{head} " + "WRONG, with no error raised:".replace(" ", glue),
                                     [p + (";" if i < len(problems) - 1 else "") for i, p in enumerate(problems)])


# ---- data parallel beside one device: the comparison no verdict makes ----------------------------------------------

def data_parallel_vs_one_line(name: str, images: int, data_parallel, one_device, ranks: int = 2) -> str:
    """Data parallel's step over one device's on paired rounds (times in seconds, round i beside round i), read against
    theory: one image leaves the other ranks idle, so data parallel is one device's work plus an all-reduce (no
    faster); with more images each rank computes its share, and the line says what the split saved and what it added
    (medians, in ms)."""
    ratios = measure.paired_ratios(one_device, data_parallel)  # data parallel's time over one device's, per round
    low, high, _ = measure.ratio_range(ratios)
    middle = float(np.median(ratios))
    head = (f"{name}: data parallel took {middle:.2f}x one device's time (range "
            f"{shown(low, (1.0,))}-{shown(high, (1.0,))} over {len(ratios)} paired rounds)")
    within = low <= 1 <= high
    small = not within and 1 / (1 + measure.MIN_EFFECT) < middle < 1 + measure.MIN_EFFECT  # the verdicts' rule
    one_ms, dp_ms = float(np.median(one_device)) * 1e3, float(np.median(data_parallel)) * 1e3
    if images < 2:
        side = ("the range holds 1: the difference is within the rounds' spread" if within else
                f"the whole range lies {'above' if low > 1 else 'below'} 1, but within {measure.MIN_EFFECT:.0%} of 1, "
                "too small an effect to call, as for the verdicts" if small else
                "the whole range lies below 1, which the work does not explain (rank 0's is the same): the "
                "difference is the conditions each step met (its place in the round, the caches and memory it found)"
                if high < 1 else "the whole range lies above 1: the all-reduce, which waits for the partner as the floor "
                "line's calls do, far longer than a bare message")
        return (f"{head}; rank 0 does one device's whole work plus an all-reduce (the other ranks have no image), "
                f"so theory puts it at 1x or slower: {side}")
    saved = one_ms * (ranks - 1) / ranks  # at most: the compute the other ranks take off rank 0
    added = dp_ms - (one_ms - saved)  # data parallel's step beyond one rank's share of the compute
    verdict = ("the range holds 1: no difference this run can tell" if within else
               f"within {measure.MIN_EFFECT:.0%} of 1: too small an effect to call" if small else
               f"too few images to share out: it adds {added / saved:.1f}x what the split saves"
               if low > 1 else "enough images to share out: the split saves more than it adds")
    return (f"{head}; each rank computes about {images // ranks} of the {images} images, which saves at most "
            f"{ranks - 1}/{ranks} of one device's {one_ms:.2f} ms ({saved:.2f} ms), while the all-reduce and the wait "
            f"for the slower rank add {added:.2f} ms (data parallel's {dp_ms:.2f} ms minus one rank's share, "
            f"{one_ms - saved:.2f} ms; medians{_medians_ratio_clause(dp_ms / one_ms, middle)}): {verdict}")


def _medians_ratio_clause(of_medians: float, paired: float) -> str:
    """Where two medians' ratio shows otherwise than the paired figure beside it, the clause that says why."""
    if f"{of_medians:.2f}" == f"{paired:.2f}":
        return ""
    return (f", whose ratio, {of_medians:.2f}x, is not the paired {paired:.2f}x: a pair sets one round's two steps "
            "side by side")


# ---- the spatial code on 1 rank, and the floor of a small image's step ---------------------------------------------

def overhead_lines(alone: dict[str, dict[str, list]]) -> list[str]:
    """The spatial code on 1 rank over the unsplit model's time, per workload (paired rounds of one launch,
    {workload: {"spatial": times, "one device": times}}): what the code costs apart from any message."""
    lines = []
    for name, times in alone.items():
        ratios = measure.paired_ratios(times["one device"], times["spatial"])  # spatial's time over the unsplit's
        low, high, _ = measure.ratio_range(ratios)
        lines.append(f"  {name}: {float(np.median(ratios)):.2f}x (range {shown(low, (1.0,))}-{shown(high, (1.0,))} "
                     f"over {len(ratios)} paired rounds)")
    return ["spatial code on 1 rank over the unsplit model's time (no partner: no halo, each all-reduce a copy;",
            "  the median of the paired ratios, the figure the step's decomposition below uses):"] + lines


def code_cost_summary(overhead: list[str], name: str) -> str:
    """The summary's line for the spatial code's own cost on `name` (from overhead_lines), or the busy line as is."""
    found = [line.strip() for line in overhead if line.strip().startswith(f"{name}:")]
    return (measure.lines.wrap(f"spatial code on 1 rank over the unsplit model's time, {found[0]}", hang="  ")
            if found else measure.lines.wrap(overhead[0], hang="    "))  # the busy line, at 100 columns as above


def floor_line(name: str, two_ranks, one_rank, calls: dict[str, int], message, skew: dict | None = None) -> str:
    """The small image's floor in one figure and one sentence: what the partner adds to its spatial step (its time on
    2 ranks less the same code's on 1 rank, medians, seconds), per call that waits for it beside one bare 4-byte
    all-reduce, and what it means for the verdicts; skew (arrival_skew's) adds where the waits go, in one clause."""
    two_ms, one_ms = float(np.median(two_ranks)) * 1e3, float(np.median(one_rank)) * 1e3
    message_ms = float(np.median(message)) * 1e3
    floor = two_ms - one_ms
    n = sum(calls.values())
    each = floor / n
    return (f"{name}: the floor, what the partner adds to a spatial step (2 ranks' time less 1 rank's), is "
            f"{floor:.2f} ms: {n} calls wait for it, {each:.2f} ms each against {message_ms:.2f} ms for a bare "
            f"4-byte all-reduce{'' if skew is None else f' ({wait_clause(skew)})'}. It does not shrink with the image: spatial pays only where half the "
            "compute saves more (the verdicts below)")


def split_costs_line(name: str, spatial_s: float, one_device_s: float, code_ratio: float, floor_s: float,
                     ranks: int = 2, shared: tuple[float, float] | None = None, skew: dict | None = None) -> str:
    """The large image's spatial step taken apart (medians, seconds): its share of one device's compute at the code's
    own 1-rank cost, the small image's floor, what ranks computing at once cost each other (shared: the unsplit model
    on one slab, (rank 0 alone, every rank at once), shared_medians), and the rest (longer waits), which skew
    (arrival_skew, the large image's) takes apart where given."""
    share = one_device_s / ranks * code_ratio
    both = 0.0 if shared is None else shared[1] - shared[0]
    rest = spatial_s - share - floor_s - both
    measured = ("" if shared is None else
                f" + {ranks} ranks computing at once ({both * 1e3:.1f} ms: the unsplit model on one slab took "
                f"{shared[0] * 1e3:.1f} ms with the other rank idle, {shared[1] * 1e3:.1f} ms with every rank computing "
                "its own, no message either way: the ranks share the memory bus and caches)")
    costs = [(floor_s, "the floor"), (rest, "the rest")] + ([(both, "computing at once")] if shared else [])
    theory = ("waits longer than a small image's: between two calls each rank computes far longer than on a small "
              "image, so the two ranks reach each call further apart, and the earlier one waits"
              + (", and two ranks sharing one memory bus and cache" if shared is None else ""))
    if rest < 0:
        rest_words = (f"- {-rest * 1e3:.1f} ms (medians, each of its own rounds, so the parts need not add up: here "
                      "they overlap)")
    elif skew is None:
        rest_words = (f"+ {rest * 1e3:.1f} ms more, the rest (medians; this run does not take it apart: theory names "
                      f"{theory})")
    else:
        rest_words = f"+ {rest * 1e3:.1f} ms more, the rest (medians; {wait_clause(skew)})"
    return (f"{name}: spatial {spatial_s * 1e3:.1f} ms = one device's {one_device_s * 1e3:.1f} ms / {ranks} x the "
            f"code's own {code_ratio:.2f}x (from above; {share * 1e3:.1f} ms) + the floor ({floor_s * 1e3:.1f} ms, from "
            f"the small image){measured} {rest_words}"
            + f". So the split saved {(one_device_s - share) * 1e3:.1f} ms of compute (one device's less this share) "
            f"and added "
            f"{(spatial_s - share) * 1e3:.1f} ms, most of it {max(costs)[1]}: spatial gains where the first exceeds "
            "the second")


def crossover_line(side: int, spatial_s: float, one_device_s: float, code_ratio: float, floor_s: float,
                   shared: tuple[float, float] | None, verdict: str | None = None) -> str:
    """Where spatial on 2 ranks would beat one device, extrapolated from split_costs_line's parts (learner s13r5d,
    lab 13 'what would make it a 5'): the floor and the rest held fixed, the half-image compute and the cost of
    computing at once grown with the area. A prediction from this run's medians, said to be one. verdict: spatial vs
    one device's on this image; where it did not hold, a gain by the medians is said to lie inside its noise, so the
    cell draws one conclusion."""
    both = 0.0 if shared is None else shared[1] - shared[0]
    saved = one_device_s * (1 - code_ratio / 2)  # split_costs_line's 'saved'
    grows = saved - both  # per image area: what the split saves, less what grows with it
    less = f"{saved * 1e3:.1f} - {both * 1e3:.1f} = " if shared is not None else ""
    fixed = max(0.0, spatial_s - one_device_s / 2 * code_ratio - both)  # the floor and the rest
    head = "where spatial would pay, extrapolated from these parts (a prediction, not a measurement): "
    if grows <= 0:
        return (head + "nowhere: the costs that grow with the area (the code's own and computing at once) already "
                "take back all the split saves, whatever the image")
    area = fixed / grows  # the image's area, in this image's areas, where the saving covers the fixed costs
    if area <= 1:
        gain = one_device_s - spatial_s  # = the saving less computing at once, less the fixed costs
        why = (f"the fixed costs (the floor and the rest, {fixed * 1e3:.1f} ms) are below the saving less computing "
               f"at once ({less}{grows * 1e3:.1f} ms)")
        if verdict is not None and verdict != measure.HOLDS:
            return (head + f"by these medians spatial gains {gain * 1e3:.1f} ms ({gain / one_device_s:.0%}) at {side} "
                    f"px already ({why}), but inside the noise of its verdict above ({verdict}): raise `repeats` to "
                    "decide")
        return head + f"at {side} px already, by these medians ({why})"
    at = side * area ** 0.5
    try_side = _round_side(2 * at)
    scale = (try_side / side) ** 2  # the tried image's area, in this image's
    predicted = one_device_s * scale / (one_device_s * scale - grows * scale + fixed)
    return (head + f"the saving less computing at once ({less}{grows * 1e3:.1f} ms here: both grow with the area) covers "
            f"the fixed costs (the floor and the rest, {fixed * 1e3:.1f} ms) above about {at:.0f} px a side. Set "
            f"large_side to {try_side} (twice that, rounded up to 256 px) in the parameters cell to see it: there "
            f"these parts predict spatial {predicted:.2f}x as fast as one device, clear of the "
            f"{measure.MIN_EFFECT:.0%} a verdict needs (the rest may grow too, which this run cannot tell)")


def _round_side(side: float) -> int:
    """A side to try, rounded up to a multiple of 256 px."""
    return int(-(-side // 256) * 256)


def shared_medians(per_rank: list[dict], name: str) -> tuple[float, float] | None:
    """The unsplit model on one slab (speed_worker's "shared"), median seconds: (rank 0 alone, every rank at once, each
    round on the slower rank); None where the launch had one rank."""
    if "shared" not in per_rank[0][name]:
        return None
    at_once = np.max([r[name]["shared"]["slabs at once"] for r in per_rank], axis=0)
    return float(np.median(per_rank[0][name]["shared"]["slab alone"])), float(np.median(at_once))


MEDIANS_NOTE = ("ms per step: each strategy's median over its own rounds. Compare strategies by the verdicts below, "
                "the median of the paired ratios (lab 00), not by dividing two of these medians: a pair shares "
                "one round's conditions, so the two figures can differ")


def halo_formula_line(counted: dict[str, int], formula: dict[str, list[int]]) -> str:
    """The halo column read against exercise 4's formula: per workload, the formula over the convolutions (first
    layer first), less the first convolution's backward half, which is never sent (the image needs no gradient)."""
    parts, unexplained = [], []
    for name, per_layer in formula.items():
        total, first_back = sum(per_layer), per_layer[0] // 2
        parts.append(f"{total:,} - {first_back:,} = {total - first_back:,} ({name})")
        if total - first_back != counted[name]:
            unexplained.append(f"{counted[name]:,} ({name})")
    line = ("halo bytes: exercise 4's halo_bytes_per_step over the convolutions, less conv1's backward half (the "
            "image needs no gradient, so that halo is never sent back): " + ", ".join(parts))
    if unexplained:
        return line + ", but the table counts " + ", ".join(unexplained) + ": check exercises 1 and 4"
    return line + ", the table's figures"


def speed_table(per_rank: list[dict], names: list[str], fc_bytes: int, oversubscribed: bool,
                formula: dict[str, list[int]] | None = None):
    """The 2-rank timing as the lab prints it: (rounds, speed, lines). rounds[name][strategy]: each round's time
    on the slower rank; speed[name, strategy]: its median step, spread and flags; lines: the table of milliseconds
    and bytes, what its medians are, the halo column against exercise 4's `formula` (per workload, bytes per
    convolution), its noise line and the all-reduce bytes line."""
    rounds: dict = {}
    speed: dict = {}
    lines = ["bytes: sent in one step",
             f"{'workload':<22} {'strategy':<14} {'ms per step':>11} {'spread':>7} {'halo bytes':>11} "
             f"{'all-reduce bytes':>17}"]
    for name in names:
        rounds[name] = {s: np.max([r[name]["times"][s] for r in per_rank], axis=0) for s in per_rank[0][name]["times"]}
        for strategy, times in rounds[name].items():
            sent = [r[name]["sent"][strategy] for r in per_rank]
            halo = bytes_of(sent, "", "isend")
            reduced = max(bytes_of([s], "", "all_reduce") for s in sent)  # the tensors one rank all-reduces
            step_s, spread = float(np.median(times)), measure.spread(times)
            flags = measure.plausibility(oversubscribed=oversubscribed)
            speed[name, strategy] = {"step_s": step_s, "spread": spread, "flags": flags}
            lines.append(measure.table_row(f"{name:<22} {strategy:<14} {step_s * 1e3:>11.2f} {spread:>7.0%} "
                                           f"{halo:>11,} {reduced:>17,}", flags))
    lines.append(measure.lines.wrap(MEDIANS_NOTE, hang="  "))
    if formula:
        lines.append(measure.lines.wrap(halo_formula_line(
            {name: bytes_of([r[name]["sent"]["spatial"] for r in per_rank], "", "isend") for name in formula},
            formula), hang="  "))
    noise = detectors.noise_line([v["spread"] for v in speed.values()])
    middle = detectors.middle_half_line({f"{name}, {strategy}": times for name in names
                                         for strategy, times in rounds[name].items()}) if noise else ""
    lines += [noise] if noise else []
    lines += [measure.lines.wrap("why: each round takes the slower rank's time, so a hold-up "
                                 "on either rank counts; " + middle, hang="    ")] if middle else []
    added = {name: max(bytes_of([r[name]["sent"]["spatial"]], "", "all_reduce") for r in per_rank)
             - max(bytes_of([r[name]["sent"]["data parallel"]], "", "all_reduce") for r in per_rank) + fc_bytes
             for name in names}
    lines.append(measure.lines.wrap(
        f"all-reduce bytes: spatial leaves out the classifier's gradients ({fc_bytes:,} bytes, whole on every rank) "
        "and adds BatchNorm's statistics (forward, and their gradients backward) and the area's and mean's sums: "
        + ", ".join(f"{b:,} bytes ({n})" for n, b in added.items()), hang="  "))
    return rounds, speed, lines


def clocked_skew(per_rank: list[dict], name: str) -> dict | None:
    """arrival_skew of the spatial steps speed_worker clocked on `name` (its "clocked"), or None."""
    if any("clocked" not in r.get(name, {}) for r in per_rank):
        return None
    return arrival_skew([r[name]["clocked"] for r in per_rank])


def cost_lines(alone: dict, per_rank: list[dict], rounds: dict, small: str) -> tuple[list[str], list[str]]:
    """The two lines under the speed table, where the load allows them: (overhead, lines). overhead: overhead_lines
    of the 1-rank launch `alone`; lines: those, then the small image's floor_line from rank 0's calls in one spatial
    step (per_rank: the 2-rank launch's results; rounds: speed_table's)."""
    overhead = overhead_lines({n: {s: alone[n]["times"][s] for s in ("spatial", "one device")}
                               for n in alone if n != "one message"})
    calls: dict[str, int] = {}
    for row in per_rank[0][small]["sent"]["spatial"]:  # rank 0's calls in one spatial step on the small image
        calls[row["call"]] = calls.get(row["call"], 0) + 1
    floor = floor_line(small, rounds[small]["spatial"], alone[small]["times"]["spatial"], calls,
                       per_rank[0]["one message"], clocked_skew(per_rank, small))
    return overhead, overhead + [measure.lines.wrap(floor, hang="  ")]


def after_verdicts_lines(verdicts: dict, speed: dict, rounds: dict, alone: dict, images: dict[str, int], small: str,
                         large: str, many: str, busy: str | None, ranks: int = 2,
                         shared: tuple[float, float] | None = None, large_side: int | None = None,
                         skew: dict | None = None) -> list[str]:
    """The lines under the verdicts: the large image's spatial step taken apart (split_costs_line; the [!]'s cause
    where its verdict is reversed; with large_side, the crossover_line under it), then data parallel beside one device on the large and the many images
    (data_parallel_vs_one_line); each refused where the load refused its verdicts. images: per workload, its
    number of images; shared: the large image's shared_medians; skew: its clocked_skew."""
    out = []
    if busy or verdicts[large, "spatial", "one device"].verdict == measure.CANNOT_SEE:
        out.append(f"{large}: spatial's step taken apart: {measure.NOT_MEASURABLE}, as its verdict above")
    else:  # the medians of the table and of the two lines under it, added up
        floor_s = speed[small, "spatial"]["step_s"] - float(np.median(alone[small]["times"]["spatial"]))
        code_ratio = measure.paired_median(alone[large]["times"]["one device"], alone[large]["times"]["spatial"])
        lost = verdicts[large, "spatial", "one device"].verdict == measure.REVERSED  # the line is the [!]'s cause
        out.append(measure.lines.wrap(("why the [!] above, measured: " if lost else "") + split_costs_line(
            large, speed[large, "spatial"]["step_s"], speed[large, "one device"]["step_s"], code_ratio, floor_s,
            ranks, shared, skew), hang="  "))
        if large_side is not None and ranks == 2:
            out.append(measure.lines.wrap(crossover_line(
                large_side, speed[large, "spatial"]["step_s"], speed[large, "one device"]["step_s"], code_ratio,
                floor_s, shared, verdicts[large, "spatial", "one device"].verdict), hang="  "))
    for name in (large, many):  # no claim of its own: read against theory, on the same rounds
        if any(v.verdict == measure.CANNOT_SEE for (w, _, _), v in verdicts.items() if w == name):
            out.append(f"{name}: data parallel beside one device: {measure.NOT_MEASURABLE}, as its verdicts above")
            continue
        line = data_parallel_vs_one_line(name, images[name], rounds[name]["data parallel"], rounds[name]["one device"],
                                         ranks)
        if name == large and verdicts[large, "spatial", "data parallel"].verdict == measure.HOLDS and \
                verdicts[large, "spatial", "one device"].verdict != measure.HOLDS:  # a win over a loser only
            tie = verdicts[large, "spatial", "one device"].verdict != measure.REVERSED
            line += (". So 'spatial faster' than data parallel, above, holds because data parallel lost to one device "
                     "here, not because spatial gained: " + ("its gain over one device was too small to tell (its "
                                                            "verdict above)" if tie else "spatial lost to one device"))
        out.append(measure.lines.wrap(line, hang="  "))
    return out
