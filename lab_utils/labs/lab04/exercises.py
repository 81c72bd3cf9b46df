"""Lab 04: a stage's backward op with recomputation, run in real ranks; the GPipe order, the bubble of a timeline,
the best split."""
from __future__ import annotations

import math

from ...exercises.core import ANY, Exercise, Named, max_abs_diff, register

SETUP = "import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F"
GROUP_TIMEOUT_S = 10  # a send or recv that waits longer than this is a deadlock, not a slow machine


# ---- recompute_backward_op, run in real ranks -------------------------------------------------------------------------

class StageFailed(RuntimeError):
    """A rank's failure told in the lab's words; `rank` and `message` let the self-check print it whole (last_line
    keeps a failed rank's message up to 400 characters, another error's up to 300: cut mid-sentence)."""

    def __init__(self, rank: int, message: str):
        super().__init__(f"rank {rank} failed: {message}")
        self.rank, self.message, self.hint = rank, message, ""


def _recompute_cases(rng):
    return {"seed": rng.randrange(10**6), "schedule": rng.choice(["1f1b", "gpipe"]), "micro_batches": rng.choice([2, 4]),
            "per_micro": rng.choice([2, 3])}


def _recompute_problem(case):
    """Three stages of the small course CNN on 8x8 images: first, middle and last stage all take part."""
    from . import pipeline as pl

    return pl.PipelineRun("exercise", case["schedule"], case["micro_batches"], case["micro_batches"] * case["per_micro"],
                          split=(2, 5), model="cnn2d_2layer_fullconnected_2layer", image_side=8, seed=case["seed"])


RAN_UNDER_NO_GRAD = ("the stage ran again under torch.no_grad(), so autograd recorded no graph from x through the "
                     "weights to the output (out.requires_grad_() only makes out a new leaf, cut from both): run the "
                     "stage outside torch.no_grad(), so that backward reaches the weights and x.grad")


def _watched(backward_op):
    """The learner's op, run with its sends checked (the gradient of a stage's input goes back to the stage before)
    and, when backward finds no autograd history, a message that says which tensor had none."""
    import torch

    from ...measure import collective_calls

    def op(ctx, micro):
        sends = []

        def check_destination(name, arguments):
            if name in ("recv", "irecv"):  # the gradient of the stage's output comes from the stage after it
                src = arguments.get("src", arguments.get("group_src"))
                if ctx.last:
                    raise ValueError(f"stage {ctx.rank}, the last, waited in dist.{name} for a gradient from rank "
                                     f"{src}: the last stage computes the loss itself and receives no gradient")
                if src is not None and src != ctx.rank + 1:
                    raise ValueError(f"stage {ctx.rank} waited in dist.{name} for the gradient of its output from "
                                     f"rank {src}: that gradient comes from the stage its output went to, the next one "
                                     f"(src=ctx.rank + 1, rank {ctx.rank + 1}); rank {src} never sends it, so this "
                                     "recv would wait until the group's timeout")
                return
            dst = arguments.get("dst", arguments.get("group_dst"))
            sends.append(dst)
            if name == "send":
                raise ValueError(f"stage {ctx.rank} sent the gradient back with a blocking dist.send: under 1F1B the "
                                 "stage before may be blocked sending you its next activation at that moment, and two "
                                 "blocking sends wait for each other forever (the deadlock this lab ran live); send "
                                 "with dist.isend and keep its request in ctx.pending")
            if ctx.first:
                raise ValueError(f"stage 0 sent a tensor to rank {dst} in its backward op: the first stage's input is "
                                 "the images, it sends no gradient back")
            if dst != ctx.rank - 1:
                raise ValueError(f"stage {ctx.rank} sent the gradient of its input to rank {dst}: it goes back to the "
                                 f"stage that sent that input, the previous one (rank {ctx.rank - 1})")

        grad_modes = []  # torch.is_grad_enabled() at each run of the stage inside the op
        hook = ctx.stage.register_forward_hook(lambda module, args, output: grad_modes.append(torch.is_grad_enabled()))
        try:
            with collective_calls(("send", "isend", "recv", "irecv"), check_destination):
                backward_op(ctx, micro)
            if grad_modes and not any(grad_modes):  # e.g. out.requires_grad_() after a no_grad run: no error, no graph
                raise RuntimeError(RAN_UNDER_NO_GRAD)
            if micro in ctx.saved:  # kept: every micro-batch's input would stay in memory until the step ends
                raise ValueError(f"stage {ctx.rank} left micro-batch {micro}'s input in ctx.saved after its backward "
                                 "op: take it out with x = ctx.saved.pop(micro), so that it is freed after this op "
                                 "(kept, every saved input stays in memory until the step ends: the memory 1F1B "
                                 "exists to save)")
            if not ctx.first and not sends:  # the stage before would wait in dist.recv until the group's timeout
                raise ValueError(f"stage {ctx.rank} sent no gradient back in its backward op: every stage but the "
                                 "first sends the gradient of its input (x.grad) to the stage before it, which waits "
                                 "for it in dist.recv")
        except Exception as exc:
            if grad_modes and not any(grad_modes):  # told first: the x.grad error it causes would point elsewhere
                raise RuntimeError(RAN_UNDER_NO_GRAD) from None
            if not isinstance(exc, RuntimeError) or "does not require grad" not in str(exc):
                raise
            if any(grad_modes):
                why = ("the loss was computed from a tensor without it (like ctx.logits, kept by the forward op "
                       "under torch.no_grad()): compute the loss from the stage's new output")
            else:
                why = "the stage did not run again, and ctx.logits has none: run the stage on the saved input"
            raise RuntimeError(f"backward found no autograd history: {why}") from None
        finally:
            hook.remove()

    return op


def _recompute_run(recompute_backward_op, case):
    from . import pipeline as pl
    from ...launch import RankError
    from .lesson import recompute_forward_op, stage_worker  # lab 04's notebook gives the learner both

    run = _recompute_problem(case)
    try:
        measured = pl.run_pipelines([run], 3, stage_worker, recompute_forward_op, _watched(recompute_backward_op),
                                    rounds=1, warmup=0, timeout=120, group_timeout=GROUP_TIMEOUT_S)[run.label]
    except RankError as exc:
        if exc.message.startswith("NotImplementedError"):
            raise NotImplementedError(exc.message) from None
        if "Timed out" in exc.message or "timed out" in exc.message:
            raise RuntimeError(f"the stages waited for each other for {GROUP_TIMEOUT_S} s (a deadlock): every dist.recv "
                               "needs its neighbour's matching send (a gradient received that nobody sends, or sent "
                               "that nobody receives)") from None
        if exc.rank > 0 and "'NoneType' object has no attribute" in exc.message:
            raise StageFailed(exc.rank, "x.grad is None: backward never reached the saved "
                               "input x. Run the stage again on x itself (the tensor the forward op saved), not on a "
                               "copy (x.detach(), x.clone()): backward fills the copy's .grad and leaves x.grad None"
                               ) from None
        if exc.rank == 0 and "'NoneType' object has no attribute" in exc.message:
            raise StageFailed(0, "an error, likely on x.grad, which is None there: the first stage's input is the "
                               "images, which need no gradient, so stage 0 sends nothing back (if not ctx.first). It "
                               f"said: {exc.message.splitlines()[0][:100]}") from None
        raise StageFailed(exc.rank, exc.message.splitlines()[0][:380]) from None
    assert measured.logits is not None  # a run of hand-built ops records them
    return {"grads": [g.tolist() for g in measured.stage_grads], "logits": measured.logits.tolist()}


def _recompute_expected(case):
    from . import pipeline as pl

    _, logits, grads = pl.reference(_recompute_problem(case))
    return {"grads": grads.tolist(), "logits": logits.tolist()}


def _recompute_judge(got, expected, case):
    import numpy as np

    blocks = [np.asarray(g, dtype=float) for g in got["grads"]]
    flat, right = np.concatenate(blocks), np.asarray(expected["grads"], dtype=float)
    if flat.shape != right.shape:
        return 0.0, f"the stages returned {flat.size} gradient values, the model has {right.size}"
    if max_abs_diff(got["logits"], expected["logits"]) > 1e-5:
        return 0.0, "the last stage's outputs changed: the forward op is given, leave ctx.logits as it is"
    if max_abs_diff(flat, right) <= 1e-5:
        return 1.0, "every stage's gradients and the outputs equal the unsplit model's (within 1e-5)"
    m = case["micro_batches"]
    ratio = float(flat @ right / (right @ right))
    if abs(ratio - m) < 0.05 * m:
        return 0.0, (f"every gradient is {m}x too large with {m} micro-batches: the last stage's recomputed loss is one "
                     "micro-batch's share of the batch's mean loss, so divide it by ctx.micro_batches")
    wrong = [s for s, (b, r) in enumerate(zip(blocks, np.split(right, np.cumsum([len(b) for b in blocks])[:-1])))
             if max_abs_diff(b, r) > 1e-5]
    if len(wrong) < len(blocks) and len(blocks) - 1 not in wrong:
        rights = np.split(right, np.cumsum([len(b) for b in blocks])[:-1])
        scales = [float(blocks[s] @ rights[s] / (rights[s] @ rights[s])) for s in wrong]
        if all(any(abs(scale * m ** k - 1) < 0.05 for k in range(1, len(blocks))) for scale in scales):
            return 0.0, (f"the last stage's gradients are right but stage(s) {wrong} are {m}x (or {m}x{m}x) too "
                         "small: run backward with the received gradient as it arrived (it already belongs to the "
                         "batch's mean loss), without dividing it again")
        return 0.0, (f"the last stage's gradients are right but stage(s) {wrong} are not, so what they received is not "
                     "the gradient of their output: send back x.grad (the gradient of the stage's input, not x "
                     "itself), and run backward with the received gradient as it arrived")
    return 0.0, (f"the gradients of stage(s) {wrong} differ from the unsplit model's by up to {max_abs_diff(flat, right):.1e}: "
                 "the last stage starts backward from its recomputed loss; the others from the received gradient")


RECOMPUTE_BACKWARD_OP = Exercise(
    "04", "recompute_backward_op", _recompute_cases, _recompute_run, _recompute_expected, _recompute_judge,
    "run the stage again on the saved input; backward from the loss share (last stage) or from the received "
    "gradient; send x.grad back (all but the first stage)", setup=SETUP, ranks=3,
    shape=lambda right, case: {"grads": [ANY] * 3, "logits": right["logits"]})


# ---- the GPipe order ------------------------------------------------------------------------------------------------

def _gpipe_cases(rng):
    return [[rng.randint(1, 4), rng.randint(1, 8)] for _ in range(4)] + [[3, 2]]


def _gpipe_run(gpipe_order, cases):
    return [[[str(op) for op in ops] for ops in gpipe_order(k, m)] for k, m in cases]


def _gpipe_expected(cases):
    from . import pipeline as pl

    return [[[str(op) for op in ops] for ops in pl.gpipe(k, m).ops] for k, m in cases]


def _gpipe_judge_said(got, expected, cases):
    from . import pipeline as pl

    for g, e, (k, m) in zip(got, expected, cases):
        if g == e:
            continue
        if len(g) != k:
            return 0.0, f"return one list per stage ({k} lists for {k} stages), got {len(g)}"
        if g == [[str(op) for op in ops] for ops in pl.one_f_one_b(k, m).ops]:
            return 0.0, "that is 1F1B; GPipe runs every forward first (F0 ... F(M-1)), then every backward"
        forwards = [f"F{i}" for i in range(m)]
        if all(ops == forwards + [f"B{i}" for i in reversed(range(m))] for ops in g) and m > 1:
            return 0.0, (f"your backwards run B{m - 1} first (B{m - 1} ... B0), the way a backward pass unwinds the "
                         f"layers; here GPipe's backwards run B0 first, in the forwards' order: F0 ... F{m - 1}, then "
                         f"B0 ... B{m - 1}. Both orders add up the same gradients; this lab's GPipe (like "
                         "torch.distributed.pipelining's ScheduleGPipe) takes the forwards' order, so that every stage "
                         "sends and receives the gradients in one agreed order")
        one_based = [f"F{i}" for i in range(1, m + 1)] + [f"B{i}" for i in range(1, m + 1)]
        if g and all(ops == one_based for ops in g):
            return 0.0, (f"your micro-batches are numbered 1 to {m}; they are numbered from 0, like the lists that "
                         f"hold them: F0 ... F{m - 1}")
        if g and sorted(g[0]) == sorted(e[0]):
            return 0.0, ("every op is there, in the wrong order: all forwards F0 ... F(M-1), then all backwards "
                         "B0 ... B(M-1), the same on every stage")
        return 0.0, f"gpipe_order({k}, {m}) should give {e[0]} on each stage, got {g[0] if g else g}"
    return 1.0, "all forwards, then all backwards, on every stage"


def _gpipe_judge(got, expected, cases):
    """_gpipe_judge_said's score; a message that names the mistake is Named, so check() adds no hint repeating it."""
    fraction, message = _gpipe_judge_said(got, expected, cases)
    generic = fraction >= 1.0 or message.startswith('gpipe_order(')
    return fraction, message if generic else Named(message)


GPIPE_ORDER = Exercise("04", "gpipe_order", _gpipe_cases, _gpipe_run, _gpipe_expected, _gpipe_judge,
                       "GPipe: all forwards, then all backwards, on every stage")


# ---- the bubble of a measured timeline ---------------------------------------------------------------------------------

def _bubble_cases(rng):
    cases = []
    for stages in (2, 3, 4):
        intervals, clock = [], round(rng.uniform(0, 3), 3)  # the first op need not start at 0
        for op in range(2 * stages + 2):
            start = round(clock + rng.uniform(0, 0.5), 4)
            clock = round(start + rng.uniform(0.5, 2), 4)
            intervals.append([f"stage {op % stages}", "forward" if op < stages + 1 else "backward", start, clock])
        # in no particular order, as ops gathered from several ranks are: the first op in the list is never the
        # earliest, nor the last the latest
        rng.shuffle(intervals)
        for place, which in ((1, min(intervals, key=lambda i: i[2])), (2, max(intervals, key=lambda i: i[3]))):
            at = intervals.index(which)
            intervals[at], intervals[place] = intervals[place], intervals[at]
        cases.append({"stages": stages, "intervals": intervals})
    return cases


def _bubble_run(bubble, cases):
    from ...plots import Interval

    return [float(bubble([Interval(*i) for i in c["intervals"]], c["stages"])) for c in cases]


def _bubble_expected(cases):
    from . import pipeline as pl
    from ...plots import Interval

    return [pl.bubble_fraction([Interval(*i) for i in c["intervals"]], c["stages"]) for c in cases]


def _bubble_judge_said(got, expected, cases):
    for g, e, c in zip(got, expected, cases):
        if abs(g - e) <= 1e-9:
            continue
        busy = sum(b - a for _, _, a, b in c["intervals"])
        last = max(b for *_, b in c["intervals"])
        if abs(g - (1 - e)) <= 1e-9:
            return 0.0, "that is the busy share (utilisation); the bubble is the idle share: 1 minus it"
        if abs(g - (1 - busy / (c["stages"] * last))) <= 1e-9:
            return 0.0, "the makespan runs from the first start, not from time 0: last end - first start"
        in_list_order = c["intervals"][-1][3] - c["intervals"][0][2]
        if in_list_order > 0 and abs(g - (1 - busy / (c["stages"] * in_list_order))) <= 1e-9:
            return 0.0, ("your makespan is the last interval's end minus the first's start, in list order; the "
                         "intervals come in no particular order: take the earliest start and the latest end "
                         "(min and max over all of them)")
        span = last - min(a for _, _, a, _ in c["intervals"])
        if abs(g - (1 - busy / span)) <= 1e-9:
            return 0.0, (f"expected {e:.4f}, got {g:.4f}: every one of the {c['stages']} stages is idle or busy for the "
                         "whole makespan, so the time available is the makespan once per stage, not once")
        spans: dict[str, tuple[float, float]] = {}
        for row, _, a, b in c["intervals"]:
            lo, hi = spans.get(row, (a, b))
            spans[row] = (min(lo, a), max(hi, b))
        longest = max(hi - lo for lo, hi in spans.values())
        if longest < span and abs(g - (1 - busy / (c["stages"] * longest))) <= 1e-9:
            return 0.0, ("your makespan is the longest single stage's span; the makespan is the whole step's, from "
                         "the first op's start on any stage to the last op's end on any stage")
        return 0.0, (f"on a {c['stages']}-stage timeline expected {e:.4f}, got {g:.4f}: bubble = 1 - (sum of op "
                     "durations) / (stages x makespan)")
    return 1.0, "idle share of stages x makespan"


def _bubble_judge(got, expected, cases):
    """_bubble_judge_said's score; a message that names the mistake is Named, so check() adds no hint repeating it."""
    fraction, message = _bubble_judge_said(got, expected, cases)
    generic = fraction >= 1.0 or message.startswith('on a ')
    return fraction, message if generic else Named(message)


BUBBLE = Exercise("04", "bubble", _bubble_cases, _bubble_run, _bubble_expected, _bubble_judge,
                  "idle time over stages x makespan; the makespan is last end - first start")


# ---- the best split ----------------------------------------------------------------------------------------------------

def stage_sums(times, split) -> list[float]:
    """Total time of each stage of a split."""
    bounds = [0, *split, len(times)]
    return [sum(times[a:b]) for a, b in zip(bounds, bounds[1:])]


def _splits(layers: int, stages: int):
    import itertools

    return [list(cut) for cut in itertools.combinations(range(1, layers), stages - 1)]


def _squares(times, split) -> float:
    return sum(t * t for t in stage_sums(times, split))


def _gap(times, split) -> float:
    """The slowest stage's time minus the fastest's: another way to make the stages 'as even as possible'."""
    return max(stage_sums(times, split)) - min(stage_sums(times, split))


def _split_cases(rng):
    cases = [[[5.0, 7.0, 7.0, 4.0, 0.1, 0.8, 0.1], 2], [[10.0, 1.0, 1.0, 1.0], 2],
             [[6.0, 2.0, 8.0, 1.0], 3],  # balanced by squares: 6 | 2 | 9 (slowest 9); by the slowest stage: 8 | 8 | 1
             [[5.0, 4.0, 2.0, 7.0, 1.0, 9.0, 8.0], 3],  # each known mistake and greedy search splits it differently
             [[7.0, 9.0, 4.0, 3.0, 7.0, 8.0, 8.0], 4],  # evenest by max - min, by squares, by the slowest: 3 splits
             [[3.0, 1.0, 2.0], 3]]  # one layer per stage: a search whose range stops short of len(times) finds nothing
    return cases + [[[round(rng.uniform(0.1, 9), 2) for _ in range(rng.randint(4, 8))], rng.randint(2, 4)] for _ in range(6)]


def _split_run(best_split, cases):
    out = []
    for times, stages in cases:
        try:
            got = best_split(list(times), stages)
            if got is None:
                raise TypeError("it returned None")
            out.append([int(i) for i in got])
        except (TypeError, ValueError, IndexError) as exc:  # e.g. a search that found no split kept its best at None
            raise type(exc)(f"best_split({times}, {stages}) failed: {type(exc).__name__}: {exc}. "
                            + (f"Here every layer is a stage, so the only split is {list(range(1, len(times)))}: does "
                               "your search try every cut from 1 to len(times) - 1 (range(1, len(times)))? A search "
                               "over no split leaves its best at None" if stages == len(times) else
                               "Return a tuple of split points for every case")) from None
    return out


def _split_expected(cases):
    from . import pipeline as pl

    return [list(pl.balanced_split(times, stages)) for times, stages in cases]


def _argmin_split(times, stages, cost) -> list[int]:
    return min(_splits(len(times), stages), key=lambda cut: cost(times, cut))


def _inclusive_slowest(times, cut) -> float:
    bounds = [0, *cut, len(times)]
    return max(sum(times[a:b + 1]) for a, b in zip(bounds, bounds[1:]))


def _by_layer_count(rounding):
    """Split points that give each stage the same number of layers, rounded one way (floor, round or ceil)."""
    return lambda times, stages: [int(rounding(len(times) * s / stages)) for s in range(1, stages)]


def _fastest_stage_split(times, stages) -> list[int]:
    """The split whose fastest stage is slowest (the max of the stage minimums): the mirror of the right search."""
    return max(_splits(len(times), stages), key=lambda cut: min(stage_sums(times, cut)))


_SPLIT_MISTAKES = {
    "your split gives every stage the same number of layers; the layers take very different times, so balance the "
    "measured times instead: minimise the slowest stage's time (the max of the stage sums)":
        tuple(_by_layer_count(rounding) for rounding in (math.floor, round, math.ceil)),
    "your split maximises the fastest stage (the largest min of the stage sums); a pipeline runs at the pace of its "
    "slowest stage, whatever the fastest does: minimise the slowest stage's time (the max of the stage sums)":
        (_fastest_stage_split,),
    "every split has the same total time (the sum of all layers), so minimising the total keeps an arbitrary split "
    "(the first, or whichever float rounding favours): minimise the slowest stage's time (the max of the stage sums)":
        (lambda times, stages: _splits(len(times), stages)[0],  # exact sums: equal totals keep the first
         lambda times, stages: _argmin_split(times, stages, lambda t, cut: sum(stage_sums(t, cut)))),  # float sums
    "your stage sums count each boundary layer twice (times[a:b + 1]): a stage runs from its split point up to, not "
    "including, the next one (times[a:b])":
        (lambda times, stages: _argmin_split(times, stages, _inclusive_slowest),),
    "your split makes the stage times as even as possible (the smallest gap between the slowest and the fastest "
    "stage, max - min); a pipeline runs at the pace of its slowest stage, whatever the fastest does: minimise the "
    "slowest stage's time (the max of the stage sums)":
        (lambda times, stages: _argmin_split(times, stages, _gap),),
    "your split makes the stage times as even as possible (the smallest sum of squares); a pipeline runs at the pace "
    "of its slowest stage: minimise the slowest stage's time (the max of the stage sums)":
        (lambda times, stages: _argmin_split(times, stages, _squares),)}


def _greedy_splits(times, stages) -> list[list[int]]:
    """Where three greedy searches cut: as soon as a stage's running sum reaches total/stages, as soon as the running
    total reaches the next multiple of it, or just before the layer that would take a stage past it."""
    target = sum(times) / stages
    cuts: tuple[list[int], list[int], list[int]] = ([], [], [])
    running = total = before = 0.0
    for i, t in enumerate(times):
        running, total = running + t, total + t
        last = i == len(times) - 1  # no cut after the last layer; one before it is a split
        if running >= target and len(cuts[0]) < stages - 1 and not last:
            cuts[0].append(i + 1)
            running = 0.0
        if total >= target * (len(cuts[1]) + 1) and len(cuts[1]) < stages - 1 and not last:
            cuts[1].append(i + 1)
        if before + t > target and i > 0 and len(cuts[2]) < stages - 1:
            cuts[2].append(i)
            before = 0.0
        before += t
    return [list(c) for c in cuts]


def _empty_stage(g, times, stages) -> str | None:
    """The message for split points that leave a stage with no layer (a cut at 0, at len(times), or a repeated cut),
    naming the empty stage; None if every stage has a layer."""
    bounds = [0, *g, len(times)]
    empty = [s for s, (a, b) in enumerate(zip(bounds, bounds[1:])) if b <= a]
    if len(g) != stages - 1 or not empty:
        return None
    where = ("a split point of 0 leaves stage 0 empty" if empty[0] == 0 and g and g[0] == 0 else
             f"a split point of {len(times)} (= len(times)) leaves the last stage, stage {stages - 1}, empty"
             if g and g[-1] >= len(times) else f"a repeated split point leaves stage {empty[0]} empty")
    return (f"times {times}, {stages} stages: your split points {g}: {where}. Every stage needs at least one layer, so "
            f"a split point lies between 1 and len(times) - 1 = {len(times) - 1} (range(1, len(times))), increasing")


def _split_judge(got, expected, cases):
    def one_off(g, e, times, stages):
        if g != e and len(g) == len(e) and any(all(i + shift == j for i, j in zip(g, e)) for shift in (1, -1)):
            return (f"times {times}, {stages} stages: your split points {g} are each one off the best split {e}: a "
                    "split point i starts the next stage AT layer i (the stages are times[:i], times[i:...]); "
                    "check how your search turns the best split into the indices it returns")
        return None

    if got != expected:  # an answer that follows one known mistake on every case: name that mistake
        for what, ways in _SPLIT_MISTAKES.items():
            if any(got == [way(times, stages) for times, stages in cases] for way in ways):
                return 0.0, what
    shifted_everywhere = any(all(len(g) == len(e) and all(i + shift == j for i, j in zip(g, e))
                                 for g, e in zip(got, expected)) for shift in (1, -1))
    for g, e, (times, stages) in zip(got, expected, cases):
        valid = len(g) == stages - 1 and g == sorted(set(g)) and all(0 < i < len(times) for i in g)
        if not valid:
            if not shifted_everywhere and _empty_stage(g, times, stages):  # one wrong cut, not every cut shifted
                return 0.0, _empty_stage(g, times, stages)
            if one_off(g, e, times, stages):
                return 0.0, one_off(g, e, times, stages)
            return 0.0, (f"{stages} stages over {len(times)} layers need {stages - 1} increasing split point(s) "
                         f"between 1 and {len(times) - 1}, got {g}")
        best, yours = max(stage_sums(times, e)), max(stage_sums(times, g))
        if yours > best + 1e-9:
            even = [round(len(times) * s / stages) for s in range(1, stages)]
            if g == even:
                return 0.0, "that splits by layer count; balance the measured times instead"
            if g in _greedy_splits(times, stages):  # before the sum of squares: on some times the two coincide
                return 0.0, (f"times {times}, {stages} stages: your split {g} does not minimise the slowest stage: "
                             f"its slowest stage takes {yours:.2f}, the split {e}'s takes {best:.2f}. Cutting where a "
                             "running sum reaches total/stages fixes each cut before seeing the layers after it, so a "
                             "large layer just past a cut can make a stage the slowest: compare every split by its "
                             "slowest stage")
            if g == min(_splits(len(times), stages), key=lambda c: _gap(times, c)):
                return 0.0, (f"times {times}, {stages} stages: your split makes the stage times as even as possible "
                             f"(smallest gap max - min), and its slowest stage takes {yours:.2f}; a pipeline runs at "
                             f"the pace of its slowest stage, and a split exists whose slowest takes {best:.2f}")
            if g == min(_splits(len(times), stages), key=lambda c: _squares(times, c)):
                return 0.0, (f"times {times}, {stages} stages: your split makes the stage times as even as possible "
                             f"(smallest sum of squares), and its slowest stage takes {yours:.2f}; a pipeline runs at "
                             f"the pace of its slowest stage, and a split exists whose slowest takes {best:.2f}")
            if shifted_everywhere and one_off(g, e, times, stages):
                return 0.0, one_off(g, e, times, stages)
            return 0.0, (f"times {times}, {stages} stages: your split {g}'s slowest stage takes {yours:.2f}, but the "
                         f"split {e}'s slowest stage takes {best:.2f}: try every split")
    return 1.0, "the slowest stage is as fast as it can be"


BEST_SPLIT = Exercise("04", "best_split", _split_cases, _split_run, _split_expected, _split_judge,
                      "try every contiguous split and keep the one whose slowest stage is fastest",
                      setup="import itertools")

register(RECOMPUTE_BACKWARD_OP, GPIPE_ORDER, BUBBLE, BEST_SPLIT)
