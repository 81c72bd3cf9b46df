"""Lab 04's in-rank exercise (recompute_backward_op on three real gloo ranks): the solution passes its self-check and
gets full marks; each plausible wrong answer fails the self-check and scores 0. (gpipe_order, bubble and best_split
are covered in test_exercises.py; best_split's wrong answers found later are here.)"""
import itertools

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from lab_utils.exercises import check
from answers import grade


def named(fn):
    fn.__name__ = fn.__qualname__ = "recompute_backward_op"
    return fn


def _recv_grad(ctx, out):
    grad = torch.empty(out.shape, device=ctx.wire)
    dist.recv(grad, src=ctx.rank + 1)
    return grad.to(ctx.device)


def _send_input_grad(ctx, x):
    if not ctx.first:
        ctx.pending.append(dist.isend(x.grad.to(ctx.wire), dst=ctx.rank - 1))


def _recompute_and_backward(ctx, micro):
    """The right recompute and backward of one micro-batch; returns its input (with its gradient)."""
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    return x


@named
def input_sent_instead_of_its_gradient(ctx, micro):
    x = _recompute_and_backward(ctx, micro)
    if not ctx.first:
        ctx.pending.append(dist.isend(x.detach().to(ctx.wire), dst=ctx.rank - 1))  # the input, not its gradient


@named
def recompute_backward_op(ctx, micro):
    _send_input_grad(ctx, _recompute_and_backward(ctx, micro))


@named
def loss_not_divided(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        F.cross_entropy(out, ctx.labels[micro]).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def backward_from_the_logits(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    out.backward(torch.ones_like(out) if ctx.last else _recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def received_gradient_divided_again(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out) / ctx.micro_batches)
    _send_input_grad(ctx, x)


@named
def recomputed_without_autograd(ctx, micro):
    x = ctx.saved.pop(micro)
    with torch.no_grad():
        out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def recomputed_under_no_grad_then_marked(ctx, micro):
    x = ctx.saved.pop(micro)
    with torch.no_grad():  # copied from the forward op; requires_grad_ then hides the missing graph
        out = ctx.stage(x)
    out.requires_grad_()
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def two_stage_branches(ctx, micro):
    """Right on two stages: the last stage sends back, the first receives; a middle stage never sends."""
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
        _send_input_grad(ctx, x)
    else:
        out.backward(_recv_grad(ctx, out))


@named
def no_recv(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(torch.ones_like(out))
    _send_input_grad(ctx, x)


def _backward_of_the_stage(ctx, micro):
    """The right answer's recomputation and backward, without its send; returns the stage's input."""
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    return x


@named
def grad_to_the_next_stage(ctx, micro):
    x = _backward_of_the_stage(ctx, micro)
    if not ctx.first:
        ctx.pending.append(dist.isend(x.grad.to(ctx.wire), dst=ctx.rank + 1))


@named
def grad_sent_from_the_first_stage_too(ctx, micro):
    x = _backward_of_the_stage(ctx, micro)
    ctx.pending.append(dist.isend(x.grad.to(ctx.wire), dst=ctx.rank - 1))  # stage 0's x (the images) has no grad


@named
def loss_from_the_kept_logits(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(ctx.logits[micro], ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def recomputed_on_a_detached_copy(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x.detach().requires_grad_())  # learner s9e: backward fills the copy's grad, x.grad stays None
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def blocking_send(ctx, micro):
    x = _backward_of_the_stage(ctx, micro)
    if not ctx.first:
        dist.send(x.grad.to(ctx.wire), dst=ctx.rank - 1)


@named
def saved_input_not_popped(ctx, micro):
    x = ctx.saved[micro]  # read, not taken out: kept in memory until the step ends
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        out.backward(_recv_grad(ctx, out))
    _send_input_grad(ctx, x)


@named
def grad_from_the_previous_stage(ctx, micro):
    x = ctx.saved.pop(micro)
    out = ctx.stage(x)
    if ctx.last:
        (F.cross_entropy(out, ctx.labels[micro]) / ctx.micro_batches).backward()
    else:
        grad = torch.empty(out.shape, device=ctx.wire)
        dist.recv(grad, src=ctx.rank - 1)  # learner s8f: the wrong neighbour (rank -1 on stage 0)
        out.backward(grad.to(ctx.device))
    _send_input_grad(ctx, x)


def test_the_solution_passes_the_self_check_and_gets_full_marks():
    result = check(recompute_backward_op)
    assert result.passed, result
    fraction, message = grade(recompute_backward_op)
    assert fraction == 1.0, message


@pytest.mark.parametrize("wrong, named_mistake", [
    (loss_not_divided, "too large"),
    (backward_from_the_logits, "recomputed loss"),
    (received_gradient_divided_again, "without dividing it again"),
    (input_sent_instead_of_its_gradient, "send back x.grad (the gradient of the stage's input, not x itself)"),
    (recomputed_without_autograd, "outside torch.no_grad()"),
    (recomputed_under_no_grad_then_marked, "ran again under torch.no_grad()"),  # not blamed on a copy of x
    (two_stage_branches, "stage 1 sent no gradient back"),
    (blocking_send, "blocking dist.send"),
    (no_recv, "deadlock"),
    (grad_to_the_next_stage, "the previous one (rank"),
    (loss_from_the_kept_logits, "from the stage's new output"),
    (grad_sent_from_the_first_stage_too, "raised an error, likely on x.grad, which is None there"),  # s11d
    (saved_input_not_popped, "ctx.saved.pop(micro)"),
    (recomputed_on_a_detached_copy, "leaves x.grad None"),  # learner s10e: the message was cut before its end
    (grad_from_the_previous_stage, "waited in dist.recv for the gradient of its output from rank"),  # any rank may fail first
], ids=lambda v: getattr(v, "__code__", None) and v.__code__.co_name or "")
def test_a_plausible_wrong_answer_fails_the_self_check_and_scores_zero(wrong, named_mistake):
    result = check(wrong)
    assert not result.passed and named_mistake in result.message, result.message
    assert "…" not in result.message, result.message  # a message cut mid-sentence names half a mistake
    assert result.details.get("fraction", 0.0) == 0.0, "the grader's judge, on the self-check's own draw"


def test_a_stub_is_reported_as_not_written_yet():
    @named
    def stub(ctx, micro):
        raise NotImplementedError("Exercise: write your solution here")

    result = check(stub)
    assert not result.passed and "not written yet" in result.message


def _stage_sums(times, cut):
    bounds = [0, *cut, len(times)]
    return [sum(times[a:b]) for a, b in zip(bounds, bounds[1:])]


def best_split_even_squares(times, stages):
    """Makes the stage times as even as possible by the sum of squares: the same as the slowest stage on 2 stages only."""
    cuts = itertools.combinations(range(1, len(times)), stages - 1)
    return list(min(cuts, key=lambda cut: sum(t * t for t in _stage_sums(times, cut))))


best_split_even_squares.__name__ = best_split_even_squares.__qualname__ = "best_split"


def test_best_split_by_the_sum_of_squares_fails_the_self_check_and_scores_zero():
    result = check(best_split_even_squares)
    assert not result.passed and "sum of squares" in result.message, result.message
    for seed in (1, 2, 3):
        fraction, message = grade(best_split_even_squares, seed)
        assert fraction == 0.0, message


def test_best_split_off_by_one_is_named():
    def best_split(times, stages):
        cuts = itertools.combinations(range(1, len(times)), stages - 1)
        best = min(cuts, key=lambda cut: max(_stage_sums(times, cut)))
        return [i - 1 for i in best]  # the index of the last layer of each stage, not the first of the next
    result = check(best_split)
    assert not result.passed and "one off the best split" in result.message, result.message


def best_split_smallest_gap(times, stages):
    cuts = itertools.combinations(range(1, len(times)), stages - 1)
    return list(min(cuts, key=lambda cut: max(_stage_sums(times, cut)) - min(_stage_sums(times, cut))))  # s10e


def best_split_least_total(times, stages):
    cuts = itertools.combinations(range(1, len(times)), stages - 1)
    return list(min(cuts, key=lambda cut: sum(_stage_sums(times, cut))))  # every split has the same total


def best_split_inclusive_slices(times, stages):
    def slowest(cut):
        bounds = [0, *cut, len(times)]
        return max(sum(times[a:b + 1]) for a, b in zip(bounds, bounds[1:]))  # the boundary layer counted twice
    return list(min(itertools.combinations(range(1, len(times)), stages - 1), key=slowest))


def best_split_equal_layers(times, stages):
    return [len(times) * s // stages for s in range(1, stages)]  # learner s8f: the same number of layers per stage


def best_split_fastest_stage(times, stages):
    cuts = itertools.combinations(range(1, len(times)), stages - 1)
    return list(max(cuts, key=lambda cut: min(_stage_sums(times, cut))))  # learner s8f: maximises the fastest stage


for _fn in (best_split_smallest_gap, best_split_least_total, best_split_inclusive_slices, best_split_equal_layers, best_split_fastest_stage):
    _fn.__name__ = _fn.__qualname__ = "best_split"


@pytest.mark.parametrize("wrong, named_as", [(best_split_smallest_gap, "max - min"),
                                             (best_split_least_total, "every split has the same total time"),
                                             (best_split_inclusive_slices, "boundary layer twice"),
                                             (best_split_equal_layers, "same number of layers"),
                                             (best_split_fastest_stage, "maximises the fastest stage")],
                         ids=["gap", "total", "inclusive", "equal layers", "fastest stage"])
def test_best_split_mistakes_are_named_not_called_a_sum_of_squares(wrong, named_as):
    result = check(wrong)
    assert not result.passed and named_as in result.message and "squares" not in result.message, result.message
    assert "running sum" not in result.message  # the greedy search's explanation belongs to the greedy answer only
    for seed in (1, 2, 3):
        fraction, message = grade(wrong, seed)
        assert fraction == 0.0, message


def bubble_in_list_order(intervals, stages):
    span = intervals[-1].end_s - intervals[0].start_s  # assumes the intervals are sorted
    return 1 - sum(i.end_s - i.start_s for i in intervals) / (stages * span)


bubble_in_list_order.__name__ = bubble_in_list_order.__qualname__ = "bubble"


def test_a_bubble_that_assumes_sorted_intervals_fails():
    result = check(bubble_in_list_order)
    assert not result.passed and "no particular order" in result.message, result.message
    for seed in (1, 2, 3):
        fraction, message = grade(bubble_in_list_order, seed)
        assert fraction == 0.0, message


def best_split_greedy(times, stages):
    target, cuts, running = sum(times) / stages, [], 0.0
    for i, t in enumerate(times):
        running += t
        if running >= target and len(cuts) < stages - 1 and i + 1 < len(times):  # cut once a stage has its share
            cuts.append(i + 1)
            running = 0.0
    return cuts


best_split_greedy.__name__ = best_split_greedy.__qualname__ = "best_split"


def test_a_greedy_best_split_is_told_why_it_misses_the_best_not_off_by_one():
    result = check(best_split_greedy)
    assert not result.passed and "running sum reaches total/stages" in result.message, result.message
    assert "one off" not in result.message
    for seed in (1, 2, 3):
        fraction, message = grade(best_split_greedy, seed)
        assert fraction == 0.0 and "one off" not in message, message


def best_split_greedy_cut_before(times, stages):  # a learner's: cut before the layer that would pass the share
    target, cuts, running = sum(times) / stages, [], 0.0
    for i, t in enumerate(times):
        if running + t > target and len(cuts) < stages - 1 and i > 0:
            cuts.append(i)
            running = 0.0
        running += t
    return tuple(cuts)


best_split_greedy_cut_before.__name__ = best_split_greedy_cut_before.__qualname__ = "best_split"


@pytest.mark.parametrize("wrong", [best_split_greedy, best_split_greedy_cut_before], ids=["cut-after", "cut-before"])
def test_a_greedy_best_split_is_never_called_a_sum_of_squares(wrong):
    for seed in (None, 1, 2, 3, 46, 86):  # on draws 46 and 86 a greedy split also follows another mistake everywhere
        result = check(wrong) if seed is None else None
        fraction, message = (result.details["fraction"], result.message) if result else grade(wrong, seed)
        assert fraction == 0.0 and "does not minimise the slowest stage" in message, message
        assert "squares" not in message, message


def best_split_range_stops_short(times, stages):
    best, best_cost = None, float("inf")
    for cut in itertools.combinations(range(1, len(times) - 1), stages - 1):  # learner s9e: never cuts before the last layer
        bounds = [0, *cut, len(times)]
        cost = max(sum(times[a:b]) for a, b in zip(bounds, bounds[1:]))
        if cost < best_cost:
            best, best_cost = cut, cost
    return tuple(best[i] for i in range(stages - 1))


best_split_range_stops_short.__name__ = best_split_range_stops_short.__qualname__ = "best_split"


def test_best_split_whose_range_stops_short_is_told_where():
    result = check(best_split_range_stops_short)
    assert not result.passed and "range(1, len(times))" in result.message and "[3.0, 1.0, 2.0]" in result.message, \
        result.message


def test_best_split_with_an_empty_stage_names_the_empty_stage_not_one_off():
    """A search over range(0, len(times)) can keep a split point of 0 (on a tie): the message names stage 0 as empty."""
    def best_split(times, stages):
        cuts = itertools.combinations(range(0, len(times)), stages - 1)  # 0 allowed: stage 0 may be empty
        return list(min(cuts, key=lambda cut: max(_stage_sums(times, cut))))
    best_split.__name__ = best_split.__qualname__ = "best_split"
    result = check(best_split)
    assert not result.passed and "leaves stage 0 empty" in result.message, result.message
    assert "one off" not in result.message


def test_gpipe_order_with_reversed_backwards_is_told_b0_runs_first():
    def gpipe_order(stages, micro_batches):
        one = [f"F{m}" for m in range(micro_batches)] + [f"B{m}" for m in reversed(range(micro_batches))]
        return [list(one) for _ in range(stages)]
    gpipe_order.__name__ = gpipe_order.__qualname__ = "gpipe_order"
    result = check(gpipe_order)
    assert not result.passed and "B0 first" in result.message, result.message


def bubble_without_stages(intervals, stages):
    span = max(i.end_s for i in intervals) - min(i.start_s for i in intervals)
    return 1 - sum(i.end_s - i.start_s for i in intervals) / span


def bubble_longest_stage(intervals, stages):
    spans = {}
    for i in intervals:
        lo, hi = spans.get(i.row, (i.start_s, i.end_s))
        spans[i.row] = (min(lo, i.start_s), max(hi, i.end_s))
    span = max(hi - lo for lo, hi in spans.values())
    return 1 - sum(i.end_s - i.start_s for i in intervals) / (stages * span)


for _fn in (bubble_without_stages, bubble_longest_stage):
    _fn.__name__ = _fn.__qualname__ = "bubble"


@pytest.mark.parametrize("wrong, named_as", [(bubble_without_stages, "once per stage"),
                                             (bubble_longest_stage, "longest single stage's span")],
                         ids=["no stages factor", "longest stage"])
def test_bubble_mistakes_on_the_makespan_are_named(wrong, named_as):
    # learner s12r3d, lab 04 exercise 3: a missing stages factor and a one-stage makespan got 'expected x, got y'
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    for seed in (1, 2, 3):
        fraction, message = grade(wrong, seed)
        assert fraction == 0.0, message


def test_a_one_based_gpipe_order_is_told_it_is_off_by_one():
    # learner s12r3d, lab 04 exercise 2: F1..FM got 'expected vs got' with no word on the numbering
    from lab_utils.labs.lab04 import pipeline as pl

    def gpipe_order(stages, micro_batches):
        one = [pl.Op("F", m) for m in range(1, micro_batches + 1)] + [pl.Op("B", m) for m in range(1, micro_batches + 1)]
        return [list(one) for _ in range(stages)]
    result = check(gpipe_order)
    assert not result.passed and "numbered from 0" in result.message, result.message


def test_named_bubble_and_order_mistakes_get_no_hint_repeating_them():
    # a message that names the mistake gets no 'Hint:' tail that hands the formula over (lab 00's rule)
    from lab_utils.labs.lab04 import pipeline as pl

    def gpipe_order(stages, micro_batches):
        one = [pl.Op("F", m) for m in range(1, micro_batches + 1)] + [pl.Op("B", m) for m in range(1, micro_batches + 1)]
        return [list(one) for _ in range(stages)]
    for wrong in (bubble_without_stages, bubble_in_list_order, gpipe_order):
        result = check(wrong)
        assert not result.passed and "Hint:" not in result.message, result.message
