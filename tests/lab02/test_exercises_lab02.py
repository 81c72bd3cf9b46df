"""Lab 02's scatter and reduce_gradients: wrong answers found by a new learner fail the self-check with a hint that
names their mistake, and score 0."""

import pytest
import torch

from lab_utils.exercises import check
from answers import grade, named


@named("scatter")
def scatter_never_moved(batch, devices):
    return list(torch.tensor_split(batch, len(devices)))  # the right rows, left on the batch's device


@named("scatter")
def scatter_moved(batch, devices):
    return [chunk.to(device) for chunk, device in zip(torch.tensor_split(batch, len(devices)), devices)]


def test_scatter_that_never_moves_the_chunks_fails_even_on_a_cpu():
    result = check(scatter_never_moved)
    assert not result.passed and "still on the batch's device" in result.message, result.message
    assert grade(scatter_never_moved)[0] == 0.0
    assert check(scatter_moved).passed and grade(scatter_moved)[0] == 1.0


@named("reduce_gradients")
@torch.no_grad()
def reduce_overwrites(model, replicas):
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad = q.grad.clone()  # replaces instead of adding


@named("reduce_gradients")
@torch.no_grad()
def reduce_first_replica_only(model, replicas):
    for p, q in zip(model.parameters(), replicas[0].parameters()):
        p.grad += q.grad


@named("reduce_gradients")
@torch.no_grad()
def reduce_into_the_parameters(model, replicas):
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p += q.grad  # into the weight, not into p.grad


@named("reduce_gradients")
@torch.no_grad()
def reduce_and_step(model, replicas):
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad += q.grad
    for p in model.parameters():
        p -= 0.1 * p.grad  # an optimizer step inside the reduction


@named("reduce_gradients")
@torch.no_grad()
def reduce_divided_by_len_replicas(model, replicas):  # learner s10j: sum, then divide by len(replicas) (k - 1)
    for params in zip(model.parameters(), *(r.parameters() for r in replicas)):
        for q in params[1:]:
            params[0].grad += q.grad
        params[0].grad /= len(replicas)


@named("reduce_gradients")
@torch.no_grad()
def reduce_divided_in_the_loop(model, replicas):
    for params in zip(model.parameters(), *(r.parameters() for r in replicas)):
        for q in params[1:]:
            params[0].grad = (params[0].grad + q.grad) / len(replicas)


@pytest.mark.parametrize("wrong, named_as", [(reduce_divided_by_len_replicas, "you divided by the number of replicas"),
                                             (reduce_divided_in_the_loop, "you divided by the number of replicas"),
                                             (reduce_overwrites, "each replica overwrote it"),
                                             (reduce_first_replica_only, "only the first replica was added"),
                                             (reduce_into_the_parameters, "into the model's parameters (p += q.grad)"),
                                             (reduce_and_step, "the model's weights changed")],
                         ids=["divided-after", "divided-in-loop", "overwrite", "first-only", "into-parameters",
                              "stepped"])
def test_reduce_gradients_mistakes_are_named(wrong, named_as):
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert grade(wrong)[0] == 0.0


@named("reduce_gradients")
@torch.no_grad()
def reduce_never_moved(model, replicas):  # learner s11r2b: right sum, no .to(p.device); passed on a CPU
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad += q.grad


@named("reduce_gradients")
@torch.no_grad()
def reduce_moved(model, replicas):
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad += q.grad.to(p.device)


@named("reduce_gradients")
@torch.no_grad()
def reduce_copied_then_moved(model, replicas):  # copy_ crosses devices in torch: no mark may fail it
    for params in zip(model.parameters(), *(r.parameters() for r in replicas)):
        params[0].grad.copy_(params[0].grad + sum(q.grad.to(params[0].grad.device) for q in params[1:]))


@named("reduce_gradients")
@torch.no_grad()
def reduce_averaged_never_moved(model, replicas):
    for params in zip(model.parameters(), *(r.parameters() for r in replicas)):
        params[0].grad = (params[0].grad + sum(q.grad for q in params[1:])) / len(params)


def test_reduce_that_never_moves_the_gradients_fails_even_on_a_cpu():
    result = check(reduce_never_moved)
    assert not result.passed and "q.grad.to(p.device)" in result.message, result.message
    assert "device 0 and device 1" in result.message, result.message
    assert grade(reduce_never_moved)[0] == 0.0
    assert check(reduce_moved).passed and grade(reduce_moved)[0] == 1.0
    assert check(reduce_copied_then_moved).passed


def test_a_reduce_with_two_mistakes_names_both():
    message = check(reduce_averaged_never_moved).message
    assert "you averaged" in message and "q.grad.to(p.device)" in message, message


@named("gather")
def gather_stacked(outputs, device):
    return torch.stack([out.to(device) for out in outputs])


@named("gather")
def gather_summed(outputs, device):
    return sum(out.to(device) for out in outputs)


@named("gather")
def gather_side_by_side(outputs, device):
    return torch.cat([out.to(device) for out in outputs], dim=1)


@named("gather")
def gather_first_only(outputs, device):
    return outputs[0].to(device)


@pytest.mark.parametrize("wrong, named_as", [(gather_stacked, "returns shape (2, 3, 4), not (6, 4): that stacks"),
                                             (gather_summed, "returns shape (3, 4), not (6, 4): that adds them up"),
                                             (gather_side_by_side, "returns shape (3, 8), not (6, 4): that joins them "
                                                                   "side by side"),
                                             (gather_first_only, "that is the first output only")],
                         ids=["stack", "sum", "cat-dim-1", "first-only"])
def test_gather_mistakes_name_the_shape_returned(wrong, named_as):
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert "do not stack" not in result.message and "stacks" not in result.message.replace(named_as, "")
    # learner s13r5b: torch's error cut with "…", then a hint about a move that was not the mistake
    assert "…" not in result.message and "Hint" not in result.message and "out.to(device)" not in result.message
    assert grade(wrong)[0] == 0.0


@named("scatter")
def scatter_by_chunk(batch, devices):  # learner s12r3b: torch.chunk, named exactly, then a 3-line generic Hint
    return [c.to(d) for c, d in zip(batch.chunk(len(devices)), devices)]


@named("gather")
def gather_reversed(outputs, device):
    return torch.cat([o.to(device) for o in outputs[::-1]])


@named("reduce_gradients")
def reduce_garbled(model, replicas):  # no recognised mistake: the generic message keeps its hint
    for p in model.parameters():
        p.grad.mul_(3.0)


def test_a_message_that_names_the_mistake_gets_no_hint_and_a_generic_one_keeps_it():
    """Learner s12r3b: every FAIL repeated the exercise's long 'Hint: ...' after a message that already named the
    mistake (lab 00's rule, 179bfda: a named message stands alone)."""
    named = check(scatter_by_chunk)
    assert not named.passed and "that is torch.chunk" in named.message and "Hint:" not in named.message
    reversed_ = check(gather_reversed)
    assert not reversed_.passed and "out of order" in reversed_.message and "Hint:" not in reversed_.message
    averaged = check(reduce_overwrites)
    assert not averaged.passed and "Hint:" not in averaged.message
    generic = check(reduce_garbled)
    assert not generic.passed and "expected the model's gradient plus the sum" in generic.message
    assert "Hint: add (not average)" in generic.message


@named("scatter")
def scatter_generator(batch, devices):  # learner s12r4b: a generator drew the generic "shape differs" message
    return (chunk.to(device) for chunk, device in zip(torch.tensor_split(batch, len(devices)), devices))


@named("scatter")
def scatter_tuple(batch, devices):  # a tuple indexes and reads twice like a list: right
    return tuple(chunk.to(device) for chunk, device in zip(torch.tensor_split(batch, len(devices)), devices))


@named("reduce_gradients")
@torch.no_grad()
def reduce_model_counted_twice(model, replicas):  # learner s12r4b: looped over [model] + replicas
    for replica in [model] + list(replicas):
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad += q.grad.to(p.device)


def test_a_generator_and_a_model_counted_twice_are_named():
    result = check(scatter_generator)
    assert not result.passed and "returned a generator, not a list: return a list" in result.message, result.message
    assert "shape differs" not in result.message and grade(scatter_generator)[0] == 0.0
    assert check(scatter_tuple).passed
    result = check(reduce_model_counted_twice)
    assert not result.passed and "the model's own gradient was counted twice" in result.message, result.message
    assert grade(reduce_model_counted_twice)[0] == 0.0


@named("scatter")
def scatter_all_on_device_0(batch, devices):  # learner s15r9b: moved the whole batch, then split: passed
    return list(torch.split(batch.to(devices[0]), [len(c) for c in torch.tensor_split(batch, len(devices))]))


@named("scatter")
def scatter_shifted(batch, devices):  # chunk i on the next device: the wrong device, not one device for all
    chunks = torch.tensor_split(batch, len(devices))
    return [c.to(devices[(i + 1) % len(devices)]) for i, c in enumerate(chunks)]


@named("scatter")
def scatter_moved_then_split_again(batch, devices):  # every chunk on devices[0] first, then each to its own: right
    sizes = [len(c) for c in torch.tensor_split(batch, len(devices))]
    return [c.to(d) for c, d in zip(torch.split(batch.to(devices[0]), sizes), devices)]


@named("scatter")
def scatter_moved_then_cast(batch, devices):
    return [c.to(d).to(torch.float32) for c, d in zip(torch.tensor_split(batch, len(devices)), devices)]


def test_a_scatter_that_puts_every_chunk_on_one_device_fails():
    result = check(scatter_all_on_device_0)
    assert not result.passed and "every chunk is on devices[0]" in result.message, result.message
    assert "split first, then move chunk i to devices[i]" in result.message and "Hint:" not in result.message
    assert grade(scatter_all_on_device_0)[0] == 0.0
    shifted = check(scatter_shifted)
    assert not shifted.passed and "chunk 0 is on devices[1], not devices[0]" in shifted.message, shifted.message
    assert check(scatter_moved_then_split_again).passed and check(scatter_moved).passed
    assert check(scatter_moved_then_cast).passed  # a .to(dtype) names no device: the chunk stays where it was


@named("reduce_gradients")
@torch.no_grad()
def reduce_moves_the_wrong_tensor(model, replicas):  # learner s15r9b: on GPUs the add lands in a copy
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad.to(q.device).add_(q.grad)


@named("reduce_gradients")
@torch.no_grad()
def reduce_moves_both_and_assigns(model, replicas):  # moving the model's gradient is right when the sum is assigned
    for replica in replicas:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad = p.grad.to(p.device) + q.grad.to(p.device)


@named("reduce_gradients")
@torch.no_grad()
def reduce_skips_the_first_replica(model, replicas):  # learner s15r9b: replicas[1:], as if replicas[0] were model's
    for replica in replicas[1:]:
        for p, q in zip(model.parameters(), replica.parameters()):
            p.grad += q.grad.to(p.device)


@named("reduce_gradients")
@torch.no_grad()
def reduce_one_replica_per_parameter(model, replicas):  # learner s15r9b: a zip over parameters and replicas
    replica_params = [list(r.parameters()) for r in replicas]
    for j, (p, params) in enumerate(zip(model.parameters(), replica_params)):
        p.grad += params[j].grad.to(p.device)


def test_a_reduce_that_moves_the_models_gradient_fails_and_says_so():
    result = check(reduce_moves_the_wrong_tensor)
    assert not result.passed and "you moved the model's gradient (p.grad.to(...)) instead" in result.message, \
        result.message
    assert "q.grad.to(p.device)" in result.message and grade(reduce_moves_the_wrong_tensor)[0] == 0.0
    assert check(reduce_moves_both_and_assigns).passed and check(reduce_moved).passed


@pytest.mark.parametrize("wrong, named_as", [(reduce_skips_the_first_replica, "the first replica was skipped"),
                                             (reduce_one_replica_per_parameter,
                                              "each parameter got a different set of replicas' gradients")],
                         ids=["skipped-first", "zip"])
def test_a_reduce_that_leaves_out_replicas_names_which(wrong, named_as):
    result = check(wrong)
    assert not result.passed and named_as in result.message, result.message
    assert "expected the model's gradient plus the sum" not in result.message and "Hint:" not in result.message
    assert grade(wrong)[0] == 0.0
