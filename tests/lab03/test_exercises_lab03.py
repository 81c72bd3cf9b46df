"""Lab 03's shard and global_mean: answers the exercise's text rules out (strided shares, a tensor for a float) and a
count never reduced fail the self-check with a hint that names the mistake, and score 0."""
import pytest
import torch
import torch.distributed as dist

from lab_utils.exercises import check
from lab_utils.exercises.core import Named
from answers import grade, named


@named("shard")
def shard_strided(n, rank, world_size):
    return list(range(rank, n, world_size))  # DistributedSampler's way, not one row range per rank


def test_strided_shares_are_not_row_ranges():
    result = check(shard_strided)
    assert not result.passed and "not one row range" in result.message, result.message
    assert result.details["fraction"] == 0.0


@named("global_mean")
def global_mean_tensor(total, count):
    both = torch.tensor([float(total), float(count)], dtype=torch.float64)
    dist.all_reduce(both)
    return both[0] / both[1]  # a 0-d tensor, not a float


@named("global_mean")
def global_mean_count_not_reduced(total, count):
    t = torch.tensor([float(total)], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() / count


@named("global_mean")
def global_mean_total_only(total, count):
    t = torch.tensor([float(total)], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() / (count * dist.get_world_size())  # as if every rank saw as many samples (learner s9d)


@pytest.mark.slow  # each check launches two real ranks
@pytest.mark.parametrize("wrong, named_as", [(global_mean_tensor, "returned a Tensor, not a float"),
                                             (global_mean_count_not_reduced, "all_reduce the count too"),
                                             (global_mean_total_only, "its own count times world_size")],
                         ids=["tensor", "count-not-reduced", "total-only"])
def test_global_mean_mistakes_are_named(wrong, named_as):
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert result.details["fraction"] == 0.0


@named("run_epochs")
def run_epochs_set_inside_the_batch_loop(sampler, loader, model, optimizer, epochs):
    from lab_utils.train import train_step

    for epoch in range(epochs):
        for x, y in loader:
            sampler.set_epoch(epoch)  # called every epoch, but after the loop drew this epoch's order
            train_step(model, x, y, optimizer)


@named("run_epochs")
def run_epochs_set_at_the_start_and_again_inside(sampler, loader, model, optimizer, epochs):
    from lab_utils.train import train_step

    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            sampler.set_epoch(epoch)  # harmless: the order was already drawn with this epoch
            train_step(model, x, y, optimizer)


def test_set_epoch_inside_the_batch_loop_is_told_it_came_too_late():
    result = check(run_epochs_set_inside_the_batch_loop)
    assert not result.passed and "came too late" in result.message, result.message
    assert "same order" not in result.message
    for seed in (1, 2, 3):
        fraction, message = grade(run_epochs_set_inside_the_batch_loop, seed)
        assert fraction == 0.0 and "came too late" in message, message


def test_a_repeated_set_epoch_after_the_right_one_passes():
    assert check(run_epochs_set_at_the_start_and_again_inside).passed
    assert grade(run_epochs_set_at_the_start_and_again_inside)[0] == 1.0


@named("average_gradients")
def average_the_weights(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.data)  # the weights, equal on every rank already: p.grad stays local
        p.data /= world_size


@named("average_gradients")
def average_a_copy(model, world_size):
    for p in model.parameters():
        g = p.grad.clone()
        dist.all_reduce(g)
        g /= world_size  # never written back to p.grad


@named("average_gradients")
def divide_only(model, world_size):
    for p in model.parameters():
        p.grad /= world_size


@named("average_gradients")
def average_then_divide(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)  # already the mean
        p.grad /= world_size  # divided a second time


@pytest.mark.slow  # launches two real ranks
def test_avg_then_a_division_is_named_divided_twice():
    result = check(average_then_divide)
    assert not result.passed and "3x too small" in result.message and "divided by world_size twice" in result.message
    assert "ReduceOp.AVG already divides" in result.message and "Hint" not in result.message, result.message
    assert result.details["fraction"] == 0.0


@named("average_gradients")
def divide_by_a_fixed_two(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= 2  # the lesson's world size, hard-coded


@named("average_gradients")
def async_never_waited(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad, async_op=True)  # the handle is dropped: the sum may not have arrived
        p.grad /= world_size


@named("average_gradients")
def divide_then_max(model, world_size):
    for p in model.parameters():
        p.grad /= world_size
        dist.all_reduce(p.grad, op=dist.ReduceOp.MAX)


@named("average_gradients")
def async_then_wait(model, world_size):
    handles = [(p, dist.all_reduce(p.grad, async_op=True)) for p in model.parameters()]
    for p, handle in handles:
        handle.wait()
        p.grad /= world_size


@pytest.mark.slow  # each check launches real ranks
@pytest.mark.parametrize("wrong, named_as", [
    (divide_by_a_fixed_two, "divided by 2, not by world_size (3 in this check)"),
    (async_never_waited, "async_op=True) was never waited on"),
    (divide_then_max, "you all-reduced with ReduceOp.MAX")], ids=["fixed-two", "async-unwaited", "max"])
def test_average_gradients_mistakes_learners_made_are_named(wrong, named_as):
    """A learner walk: a hard-coded 2 passed a 2-rank check; an unwaited handle and ReduceOp.MAX got other names."""
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert "AVG" not in result.message and "a copy" not in result.message, result.message
    assert result.details["fraction"] == 0.0


@pytest.mark.slow  # launches real ranks
def test_async_all_reduces_each_waited_on_pass():
    result = check(async_then_wait)
    assert result.passed, result.message


def test_a_hard_coded_divisor_is_read_from_the_update_ratio():
    """On 3 ranks a division by 2 makes the update 1.5x the right one; the right one and a double division name none."""
    from lab_utils.labs.lab03 import exercises as lab03

    assert lab03._hard_coded_divisor(1.5, 3) == 2
    assert lab03._hard_coded_divisor(0.75, 3) == 4
    assert lab03._hard_coded_divisor(1.0, 3) is None and lab03._hard_coded_divisor(3.0, 3) is None
    assert lab03._hard_coded_divisor(1.23, 3) is None and lab03._hard_coded_divisor(-1.0, 3) is None


@pytest.mark.slow  # each check launches real ranks
@pytest.mark.parametrize("wrong, named_as", [(average_the_weights, "you all-reduced p.data, the weights"),
                                             (average_a_copy, "you all-reduced a copy (p.grad.clone()"),
                                             (divide_only, "divided its own gradient by world_size (3) but never")],
                         ids=["weights", "copy", "divide-only"])
def test_gradients_never_all_reduced_are_named(wrong, named_as):
    """Learner s13r6c: p.data and a copy of p.grad shared one message; each now names which the answer reduced."""
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert result.details["fraction"] == 0.0
    if wrong is not divide_only:  # one mistake named, not both
        assert ("p.data" in result.message) != ("a copy" in result.message), result.message


def test_the_unreduced_message_names_what_the_all_reduce_was_given():
    """The judge reads what each all_reduce call was given (averaging_worker records it): no launch needed."""
    from lab_utils.labs.lab03 import exercises as lab03

    assert "you all-reduced p.data" in lab03._unreduced_message(["data"])
    assert "you all-reduced a copy" in lab03._unreduced_message(["other"])
    assert "call dist.all_reduce(p.grad) for every parameter" in lab03._unreduced_message([])


@named("run_epochs")
def run_epochs_random_epoch(sampler, loader, model, optimizer, epochs):
    import random

    from lab_utils.train import train_step

    for epoch in range(epochs):
        sampler.set_epoch(random.randint(10, 10**6))  # at the start, but not the epoch number (learner s13r6c)
        for x, y in loader:
            train_step(model, x, y, optimizer)


def test_set_epoch_with_a_random_number_is_told_to_pass_the_epoch():
    """Learner s13r6c: set_epoch(random) at the start of each epoch got 'Hint: reshuffle at the start of every
    epoch', which it did; the message names the values it passed and asks for the loop's epoch."""
    result = check(run_epochs_random_epoch)
    assert not result.passed and "not the loop's epoch numbers 0, 1, 2" in result.message, result.message
    assert "Hint" not in result.message and result.details["fraction"] == 0.0, result.message


@named("run_epochs")
def run_epochs_seed_set(sampler, loader, model, optimizer, epochs):
    from lab_utils.train import train_step

    for epoch in range(epochs):
        sampler.seed = epoch  # a new order every epoch, but not DistributedSampler's documented way (learner s11c)
        for x, y in loader:
            train_step(model, x, y, optimizer)


def test_setting_the_samplers_seed_is_told_why_set_epoch():
    result = check(run_epochs_seed_set)
    assert not result.passed and "changed sampler.seed" in result.message, result.message
    assert "reseeds the shuffle with seed + epoch" in result.message and "...." not in result.message


@named("shard")
def shard_overlapping(n, rank, world_size):
    size = -(-n // world_size)
    return list(range(max(0, rank * size - 1), min(n, (rank + 1) * size)))  # one row shared with the previous rank


def test_overlapping_blocks_are_told_they_overlap_without_a_remainder_hint():
    result = check(shard_overlapping)
    assert not result.passed and "the blocks overlap" in result.message, result.message
    assert "remainder" not in result.message and "missing" not in result.message, result.message


# ---- exercise 5: gradient accumulation with DDP (learner s11r2c: none of the exercises touched no_sync) ----------

@named("accumulation_step")
def accumulation_right(ddp_model, optimizer, micro_batches):
    import contextlib

    import torch.nn.functional as F

    optimizer.zero_grad()
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if i == k - 1 else ddp_model.no_sync():
            (F.cross_entropy(ddp_model(x), y) / k).backward()
    optimizer.step()


@named("accumulation_step")
def accumulation_undivided(ddp_model, optimizer, micro_batches):
    import contextlib

    import torch.nn.functional as F

    optimizer.zero_grad()
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if i == len(micro_batches) - 1 else ddp_model.no_sync():
            F.cross_entropy(ddp_model(x), y).backward()  # not divided by k
    optimizer.step()


@named("accumulation_step")
def accumulation_no_sync_everywhere(ddp_model, optimizer, micro_batches):
    import torch.nn.functional as F

    optimizer.zero_grad()
    for x, y in micro_batches:
        with ddp_model.no_sync():  # the last one too: nothing is ever all-reduced
            (F.cross_entropy(ddp_model(x), y) / len(micro_batches)).backward()
    optimizer.step()


@named("accumulation_step")
def accumulation_sync_everywhere(ddp_model, optimizer, micro_batches):
    import torch.nn.functional as F

    optimizer.zero_grad()
    for x, y in micro_batches:  # no no_sync: right, but one all-reduce per micro-batch
        (F.cross_entropy(ddp_model(x), y) / len(micro_batches)).backward()
    optimizer.step()


@named("accumulation_step")
def accumulation_no_sync_backward_only(ddp_model, optimizer, micro_batches):
    import contextlib

    import torch.nn.functional as F

    optimizer.zero_grad()
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        loss = F.cross_entropy(ddp_model(x), y) / k  # the forward outside no_sync: DDP already chose to all-reduce
        with contextlib.nullcontext() if i == k - 1 else ddp_model.no_sync():
            loss.backward()
    optimizer.step()


@named("accumulation_step")
def accumulation_zero_grad_inside(ddp_model, optimizer, micro_batches):
    import contextlib

    import torch.nn.functional as F

    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        optimizer.zero_grad()  # erases what the earlier micro-batches accumulated
        with contextlib.nullcontext() if i == k - 1 else ddp_model.no_sync():
            (F.cross_entropy(ddp_model(x), y) / k).backward()
    optimizer.step()


@named("accumulation_step")
def accumulation_step_each(ddp_model, optimizer, micro_batches):
    import contextlib

    import torch.nn.functional as F

    optimizer.zero_grad()
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if i == k - 1 else ddp_model.no_sync():
            (F.cross_entropy(ddp_model(x), y) / k).backward()
        optimizer.step()  # a step per micro-batch


@named("accumulation_step")
def accumulation_never_zeroed(ddp_model, optimizer, micro_batches):
    import contextlib

    import torch.nn.functional as F

    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if i == k - 1 else ddp_model.no_sync():
            (F.cross_entropy(ddp_model(x), y) / k).backward()
    optimizer.step()  # the first step's gradient stays for the second


@pytest.mark.slow  # each check launches two real ranks
@named("accumulation_step")
def accumulation_losses_summed(ddp_model, optimizer, micro_batches):
    import torch.nn.functional as F

    optimizer.zero_grad()  # learner s13r7c: no no_sync, all k graphs held at once, one backward: it passed
    loss = sum(F.cross_entropy(ddp_model(x), y) for x, y in micro_batches) / len(micro_batches)
    loss.backward()
    optimizer.step()


def test_graphs_held_counts_forwards_before_a_backward():
    """The record of the summed-loss answer (k forwards, one backward) fails; one backward per forward passes."""
    from lab_utils.labs.lab03.exercises import _graphs_held

    assert _graphs_held(["zero_grad", "forward", "forward", "forward", "backward", "allreduce", "step"]) == 3
    assert _graphs_held(["zero_grad", "no_sync", "forward", "backward", "forward", "backward", "allreduce",
                         "step"]) == 1


def test_the_accumulation_answer_passes_with_one_all_reduce_a_step():
    result = check(accumulation_right)
    assert result.passed and "one all-reduce a step" in result.message, result.message
    assert result.details["fraction"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("wrong, named_as", [
    (accumulation_sync_everywhere, "micro-batches were all-reduced where 1 will do"),
    (accumulation_losses_summed, "graphs (every activation of every micro-batch) were held in memory at once"),
    (accumulation_no_sync_backward_only, "no_sync() wrapped only loss.backward()")],
    ids=["no-no-sync", "losses-summed", "no-sync-backward-only"])
def test_right_weights_with_extra_all_reduces_fail_and_name_why(wrong, named_as):
    """The task asks for one all-reduce a step (learner s12r3c: the backward-only no_sync passed with a note that
    named nothing); the message names the mistake, and no Hint: follows it."""
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert "Hint:" not in result.message, result.message
    assert result.details["fraction"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("wrong, named_as", [
    (accumulation_undivided, "the loss was not divided by the number of micro-batches"),
    (accumulation_no_sync_everywhere, "no all-reduce ran"),
    (accumulation_zero_grad_inside, "zero_grad ran between micro-batches"),
    (accumulation_step_each, "steps every micro-batch"),
    (accumulation_never_zeroed, "zero_grad never ran")],
    ids=["undivided", "no-sync-everywhere", "zero-grad-inside", "step-each", "never-zeroed"])
def test_accumulation_mistakes_are_named(wrong, named_as):
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert result.details["fraction"] == 0.0


@named("run_epochs")
def run_epochs_shifted(sampler, loader, model, optimizer, epochs):
    from lab_utils.train import train_step

    for epoch in range(epochs):
        sampler.set_epoch(epoch + 1)  # a new order every epoch, but not epoch's (learner s11r2c)
        for x, y in loader:
            train_step(model, x, y, optimizer)


@named("run_epochs")
def run_epochs_global_seed(sampler, loader, model, optimizer, epochs):
    import torch

    from lab_utils.train import train_step

    for epoch in range(epochs):
        torch.manual_seed(epoch)  # DistributedSampler does not read it
        for x, y in loader:
            train_step(model, x, y, optimizer)


def test_set_epoch_off_by_one_and_the_global_seed_are_told_why():
    """Learner s11r2c: set_epoch(epoch + 1) got 'the orders differ', torch.manual_seed(epoch) the set_epoch text."""
    shifted = check(run_epochs_shifted)
    assert not shifted.passed and "set_epoch(epoch + 1)" in shifted.message and "resumed" in shifted.message
    seeded = check(run_epochs_global_seed)
    assert not seeded.passed and "ignores torch's global seed" in seeded.message, seeded.message


@named("average_gradients")
def average_gradients_undivided(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad)  # a sum: the update is world_size times too large


@pytest.mark.parametrize("wrong, named_as", [
    (shard_strided, "not one row range"), (average_gradients_undivided, "too large")], ids=["shard", "average"])
def test_a_message_that_names_the_mistake_gets_no_hint_that_hands_the_answer_over(wrong, named_as):
    """Learner s12r3c, the brief's rule (lab 00's): 'the update is 2x too large: ... divide by world_size' was followed
    by 'Hint: all_reduce each gradient (a sum), then divide by world_size'; a named mistake stands alone."""
    result = check(wrong)
    assert not result.passed and named_as in result.message and "Hint:" not in result.message, result.message
    assert result.details["named"], result.details


def test_a_message_that_names_nothing_keeps_the_hint():
    from lab_utils.labs.lab03 import exercises as lab03

    fraction, message = lab03._mean_judge([["float", 1.0], ["float", 2.0]], 5.0, {"totals": [3, 7], "counts": [1, 1]})
    assert fraction == 0.0 and message.startswith("the ranks returned") and not isinstance(message, Named)


def test_floor_blocks_are_told_the_left_over_indices_even_when_n_is_below_world_size():
    """Learner s13r6c: '(the remainder n % world_size = 3 too)' read oddly for n=3, world_size=4, where every index
    is left over; the message names the left-over indices and, for n < world_size, why all of them are."""
    from lab_utils.labs.lab03 import exercises as lab03

    def floor_blocks(n, w):
        size = n // w
        return [list(range(r * size, (r + 1) * size)) for r in range(w)]

    _, small = lab03._shard_judge_plain([floor_blocks(3, 4)], None, [[3, 4]])
    assert "the last 3 index(es)" in small and "n // world_size is 0, so every index is left over" in small, small
    _, big = lab03._shard_judge_plain([floor_blocks(10, 4)], None, [[10, 4]])
    assert "the last 2 index(es)" in big and "n < world_size" not in big, big


@named("run_epochs")
def run_epochs_epoch_assigned(sampler, loader, model, optimizer, epochs):
    from lab_utils.train import train_step

    for epoch in range(epochs):
        sampler.epoch = epoch  # what set_epoch does: harmless
        for x, y in loader:
            train_step(model, x, y, optimizer)


@named("run_epochs")
def run_epochs_epoch_assigned_late(sampler, loader, model, optimizer, epochs):
    from lab_utils.train import train_step

    for epoch in range(epochs):
        for x, y in loader:
            train_step(model, x, y, optimizer)
        sampler.epoch = epoch  # after this epoch's order was drawn


def test_the_epoch_record_sees_an_assignment_as_set_epoch_does():
    """The epoch record (a forged, emptied one scores 0: tests/test_judges.py) counts `sampler.epoch =` too, so that
    right answer passes and the same assignment after the loop is told it came too late."""
    assert check(run_epochs_epoch_assigned).passed
    late = check(run_epochs_epoch_assigned_late)
    assert not late.passed and "came too late" in late.message, late.message


def test_a_forged_all_reduce_record_is_not_read_as_one():
    """The record holds what each call reduced and its op, once each: a repeated or op-less record is forged."""
    from lab_utils.labs.lab03 import exercises as lab03

    assert lab03._recorded(["grad", "op:SUM"]) and lab03._recorded(["op:SUM", "other"])
    assert not lab03._recorded(["grad", "grad"]) and not lab03._recorded(["op:SUM", "op:SUM"])
    assert not lab03._recorded(["grad"]) and not lab03._recorded([])
