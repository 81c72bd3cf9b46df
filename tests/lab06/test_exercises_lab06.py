"""Lab 06's exercises: the solutions pass and score 1; each plausible wrong answer fails and scores 0."""
import random

import pytest
import torch
import torch.distributed as dist
from torch import nn

from lab_utils.exercises import check, get, to_plain


def score(fn):
    exercise = get(fn.__name__)
    inputs = exercise.cases(random.Random(7))
    return exercise.score(to_plain(exercise.run(fn, inputs)), inputs)


def assert_wrong(fn, *words):
    result = check(fn)
    assert not result and repr(result).startswith("FAIL"), result
    for word in words:
        assert word in result.message, result.message
    return result


def judged(result) -> float:
    """The grader's judge on the self-check's own draw (in-rank answers launch once here, not twice)."""
    return result.details.get("fraction", 0.0)


# ---- my_ring_step -----------------------------------------------------------------------------------------------------

def my_ring_step(chunks, send_index, recv_index, rank, world_size):
    incoming = torch.empty_like(chunks[recv_index])
    receiving = dist.irecv(incoming, (rank - 1) % world_size)
    sending = dist.isend(chunks[send_index], (rank + 1) % world_size)
    receiving.wait()
    sending.wait()
    return incoming


def test_my_ring_step_solution_passes_and_scores_full():
    assert check(my_ring_step)
    assert score(my_ring_step)[0] == 1.0


def test_my_ring_step_send_first_then_irecv_also_passes():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        sending = dist.isend(chunks[send_index], (rank + 1) % world_size)
        incoming = torch.empty_like(chunks[recv_index])
        dist.irecv(incoming, (rank - 1) % world_size).wait()
        sending.wait()
        return incoming
    assert check(my_ring_step)


def test_my_ring_step_the_lessons_blocking_recv_is_not_the_exercise():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):  # the lesson's ring_step, copied
        request = dist.isend(chunks[send_index], (rank + 1) % world_size)
        incoming = torch.empty_like(chunks[recv_index])
        dist.recv(incoming, (rank - 1) % world_size)
        request.wait()
        return incoming
    assert judged(assert_wrong(my_ring_step, "dist.irecv")) == 0.0


@pytest.mark.slow
def test_my_ring_step_blocking_send_is_named_a_deadlock():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        dist.send(chunks[send_index], (rank + 1) % world_size)
        incoming = torch.empty_like(chunks[recv_index])
        dist.recv(incoming, (rank - 1) % world_size)
        return incoming
    assert_wrong(my_ring_step, "deadlock", "isend", "dist.irecv then dist.isend, then wait for both")


@pytest.mark.slow
def test_my_ring_step_waiting_on_the_receive_before_starting_the_send_is_named():
    """Learner s9f, lab 06 finding 8: irecv(...).wait() before the isend deadlocks, and the message said 'a send that no
    receive matched ... start the send with dist.isend', which the learner had done. It names the wait now."""
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        dist.irecv(incoming, (rank - 1) % world_size).wait()
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        return incoming
    result = assert_wrong(my_ring_step, "deadlock", "waited on its irecv", "before starting its send")
    assert "no receive matched" not in result.message, result.message


def test_the_deadlock_message_names_what_the_rank_was_blocked_in():
    from lab_utils.labs.lab06.exercises import _RingGuard
    guard = _RingGuard(0, 3)
    guard.blocked_in, guard.sent = "irecv.wait()", False
    assert "rank 0 waited on its irecv 10 s before starting its send" in guard.deadlock(10)
    guard.blocked_in = "recv"
    assert "waited in a blocking dist.recv 10 s before starting its send" in guard.deadlock(10)
    guard.blocked_in, guard.sent = "send", True
    assert "in a send that no receive matched" in guard.deadlock(10)
    guard.blocked_in = "irecv.wait()"  # the send started (isend first): the receive's wait is not the mistake
    assert "before starting its send" not in guard.deadlock(10)


def test_my_ring_step_isend_never_waited_is_named():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        receiving = dist.irecv(incoming, (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size)
        receiving.wait()
        return incoming
    assert_wrong(my_ring_step, "without waiting for its dist.isend")


def test_my_ring_step_irecv_never_waited_is_named():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        dist.irecv(incoming, (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        return incoming
    result = assert_wrong(my_ring_step, "without waiting for its dist.irecv")
    assert "/" not in result.message.split("Hint:")[0].replace("(rank - 1) % world_size", ""), result.message


def test_my_ring_step_buffer_sized_like_the_sent_chunk_is_refused():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[send_index])
        receiving = dist.irecv(incoming, (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        receiving.wait()
        return incoming
    assert_wrong(my_ring_step, "chunks[recv_index]", "match")


def test_my_ring_step_wrong_direction_is_refused():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        receiving = dist.irecv(incoming, (rank + 1) % world_size)
        dist.isend(chunks[send_index], (rank - 1) % world_size).wait()
        receiving.wait()
        return incoming
    # learner s13r5e: every ring FAIL appended the same 3-line generic hint after a message that names the mistake
    message = assert_wrong(my_ring_step, "left neighbour").message
    assert "Hint:" not in message
    # learner s13r7e, lab 06 finding 8: 'your my_ring_step raised ValueError' when the check's monitor raised it
    assert message.startswith("the check stopped your my_ring_step: rank ") and "ValueError" not in message, message


def test_my_ring_step_returning_the_own_chunk_fails():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        receiving = dist.irecv(incoming, (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        receiving.wait()
        return chunks[recv_index]
    assert judged(assert_wrong(my_ring_step, "own")) == 0.0


def test_my_ring_step_adding_itself_fails():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        receiving = dist.irecv(incoming, (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        receiving.wait()
        return chunks[recv_index] + incoming
    assert judged(assert_wrong(my_ring_step, "added")) == 0.0


def test_my_ring_step_receiving_into_the_own_chunk_fails():
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        receiving = dist.irecv(chunks[recv_index], (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        receiving.wait()
        return chunks[recv_index]
    assert judged(assert_wrong(my_ring_step, "new buffer")) == 0.0


def test_my_ring_step_adding_into_chunks_after_a_new_buffer_is_named():
    """Learner s13r5e, lab 06 Ex 1: a new buffer, then chunks[recv_index].add_(buf): 'receive into a new buffer' was
    advice already taken; the message names the add into chunks."""
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        incoming = torch.empty_like(chunks[recv_index])
        receiving = dist.irecv(incoming, (rank - 1) % world_size)
        dist.isend(chunks[send_index], (rank + 1) % world_size).wait()
        receiving.wait()
        chunks[recv_index].add_(incoming)
        return incoming
    result = assert_wrong(my_ring_step, "Leave chunks unchanged", "the ring adds it")
    assert "new buffer (torch.empty_like)" not in result.message and judged(result) == 0.0


def test_a_learners_own_error_still_gets_the_general_hint():
    """Learner s13r5e, lab 06 Ex 1: a named message loses the generic hint (above); a learner's own error keeps it."""
    def my_ring_step(chunks, send_index, recv_index, rank, world_size):
        raise KeyError("mine")
    assert "Hint:" in assert_wrong(my_ring_step).message  # an error of its own still gets the hint


# ---- split_output_channels --------------------------------------------------------------------------------------------

def split_output_channels(conv, rank, world_size):
    mine = torch.arange(conv.out_channels).tensor_split(world_size)[rank]
    part = nn.Conv2d(conv.in_channels, len(mine), conv.kernel_size, conv.stride, conv.padding, dtype=conv.weight.dtype)
    with torch.no_grad():
        part.weight.copy_(conv.weight[mine])
        part.bias.copy_(conv.bias[mine])
    return part


def test_split_output_channels_solution_passes_and_scores_full():
    assert check(split_output_channels)
    assert score(split_output_channels)[0] == 1.0


def test_split_output_channels_without_conv_dtype_fails_with_the_dtype_named():
    # learner s5B: a shard without dtype passed, yet the lesson's float64 conv would be rounded to float32 by it
    def split_output_channels(conv, rank, world_size):
        mine = torch.arange(conv.out_channels).tensor_split(world_size)[rank]
        part = nn.Conv2d(conv.in_channels, len(mine), conv.kernel_size, conv.stride, conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[mine])
            part.bias.copy_(conv.bias[mine])
        return part
    assert_wrong(split_output_channels, "dtype=conv.weight.dtype")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_by_input_channels_fails():
    def split_output_channels(conv, rank, world_size):
        per = conv.in_channels // world_size or 1
        part = nn.Conv2d(per, conv.out_channels, conv.kernel_size, conv.stride, conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[:, rank * per:(rank + 1) * per])
            part.bias.copy_(conv.bias)
        return part
    assert_wrong(split_output_channels)
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_interleaved_fails_with_the_order_named():
    def split_output_channels(conv, rank, world_size):
        part = nn.Conv2d(conv.in_channels, len(range(rank, conv.out_channels, world_size)), conv.kernel_size,
                         conv.stride, conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[rank::world_size])
            part.bias.copy_(conv.bias[rank::world_size])
        return part
    assert_wrong(split_output_channels, "order")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_without_bias_fails():
    def split_output_channels(conv, rank, world_size):
        mine = torch.arange(conv.out_channels).tensor_split(world_size)[rank]
        part = nn.Conv2d(conv.in_channels, len(mine), conv.kernel_size, conv.stride, conv.padding, bias=False)
        with torch.no_grad():
            part.weight.copy_(conv.weight[mine])
        return part
    assert_wrong(split_output_channels, "bias")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_even_blocks_lose_the_remainder():
    def split_output_channels(conv, rank, world_size):  # the lesson's split_conv(conv, rank, world_size, 0)
        per = conv.out_channels // world_size
        part = nn.Conv2d(conv.in_channels, per, conv.kernel_size, conv.stride, conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[rank * per:(rank + 1) * per])
            part.bias.copy_(conv.bias[rank * per:(rank + 1) * per])
        return part
    assert_wrong(split_output_channels, "lost", "tensor_split")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_last_rank_taking_the_rest_fails():
    def split_output_channels(conv, rank, world_size):
        per = conv.out_channels // world_size
        end = conv.out_channels if rank == world_size - 1 else (rank + 1) * per
        part = nn.Conv2d(conv.in_channels, end - rank * per, conv.kernel_size, conv.stride, conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[rank * per:end])
            part.bias.copy_(conv.bias[rank * per:end])
        return part
    assert_wrong(split_output_channels, "first ranks")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_random_bias_left_is_named():
    def split_output_channels(conv, rank, world_size):
        mine = torch.arange(conv.out_channels).tensor_split(world_size)[rank]
        part = nn.Conv2d(conv.in_channels, len(mine), conv.kernel_size, conv.stride, conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[mine])
        return part
    assert_wrong(split_output_channels, "random biases")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_without_padding_is_named():
    def split_output_channels(conv, rank, world_size):
        mine = torch.arange(conv.out_channels).tensor_split(world_size)[rank]
        part = nn.Conv2d(conv.in_channels, len(mine), conv.kernel_size, conv.stride)
        with torch.no_grad():
            part.weight.copy_(conv.weight[mine])
            part.bias.copy_(conv.bias[mine])
        return part
    assert_wrong(split_output_channels, "stride and padding")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_without_stride_is_named():
    def split_output_channels(conv, rank, world_size):
        mine = torch.arange(conv.out_channels).tensor_split(world_size)[rank]
        part = nn.Conv2d(conv.in_channels, len(mine), conv.kernel_size, padding=conv.padding)
        with torch.no_grad():
            part.weight.copy_(conv.weight[mine])
            part.bias.copy_(conv.bias[mine])
        return part
    assert_wrong(split_output_channels, "stride and padding")
    assert score(split_output_channels)[0] == 0.0


def test_split_output_channels_whole_layer_fails():
    def split_output_channels(conv, rank, world_size):
        return conv
    assert_wrong(split_output_channels, "all")
    assert score(split_output_channels)[0] == 0.0


# ---- row_parallel_forward ---------------------------------------------------------------------------------------------

def row_parallel_forward(x_shard, weight_shard, bias):
    partial = x_shard @ weight_shard.T
    dist.all_reduce(partial)
    return partial + bias


def test_row_parallel_forward_solution_passes_and_scores_full():
    assert check(row_parallel_forward)
    assert score(row_parallel_forward)[0] == 1.0


def test_row_parallel_forward_without_all_reduce_fails():
    def row_parallel_forward(x_shard, weight_shard, bias):
        return x_shard @ weight_shard.T + bias
    assert judged(assert_wrong(row_parallel_forward, "partial")) == 0.0


def test_row_parallel_forward_bias_on_every_rank_fails():
    def row_parallel_forward(x_shard, weight_shard, bias):
        y = x_shard @ weight_shard.T + bias
        dist.all_reduce(y)
        return y
    assert judged(assert_wrong(row_parallel_forward, "bias counts")) == 0.0


def test_row_parallel_forward_average_fails():
    def row_parallel_forward(x_shard, weight_shard, bias):
        partial = x_shard @ weight_shard.T
        dist.all_reduce(partial, op=dist.ReduceOp.AVG)
        return partial + bias
    assert judged(assert_wrong(row_parallel_forward, "average")) == 0.0


def test_row_parallel_forward_without_bias_fails():
    def row_parallel_forward(x_shard, weight_shard, bias):
        partial = x_shard @ weight_shard.T
        dist.all_reduce(partial)
        return partial
    assert judged(assert_wrong(row_parallel_forward, "bias is missing")) == 0.0


def test_row_parallel_forward_all_gather_is_named():
    def row_parallel_forward(x_shard, weight_shard, bias):
        partial = x_shard @ weight_shard.T
        pieces = [torch.empty_like(partial) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, partial)
        return torch.cat(pieces, dim=1)
    assert judged(assert_wrong(row_parallel_forward, "all_gather", "SUM")) == 0.0


def test_row_parallel_forward_with_an_async_all_reduce_never_waited_is_told_the_wait():
    # learner s9a: 'only its own partial product', with no word on the missing .wait()
    def row_parallel_forward(x_shard, weight_shard, bias):
        partial = x_shard @ weight_shard.T
        dist.all_reduce(partial, async_op=True)
        return partial + bias
    assert judged(assert_wrong(row_parallel_forward, "async_op=True", ".wait()")) == 0.0


def test_row_parallel_forward_with_an_async_all_reduce_waited_passes():
    def row_parallel_forward(x_shard, weight_shard, bias):
        partial = x_shard @ weight_shard.T
        dist.all_reduce(partial, async_op=True).wait()
        return partial + bias
    assert check(row_parallel_forward)


def test_row_parallel_forward_using_all_reduces_return_value_is_told_it_works_in_place():
    # learner s10b: only Python's "'NoneType' and 'Tensor'" TypeError
    def row_parallel_forward(x_shard, weight_shard, bias):
        return dist.all_reduce(x_shard @ weight_shard.T) + bias
    assert judged(assert_wrong(row_parallel_forward, "in place", "returns None")) == 0.0


def test_row_parallel_forward_using_an_async_handle_as_the_sum_is_told_it_is_a_handle():
    def row_parallel_forward(x_shard, weight_shard, bias):
        return dist.all_reduce(x_shard @ weight_shard.T, async_op=True) + bias
    assert judged(assert_wrong(row_parallel_forward, "work handle", "in place")) == 0.0


def test_row_parallel_forward_gathering_and_keeping_one_ranks_piece_is_named():
    # learner s10b: all_gather, concatenate, cut back to the output's width (rank 0's partial product on every rank)
    def row_parallel_forward(x_shard, weight_shard, bias):
        y = x_shard @ weight_shard.T
        parts = [torch.empty_like(y) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, y)
        return torch.cat(parts, dim=1)[:, :y.shape[1]] + bias
    assert judged(assert_wrong(row_parallel_forward, "rank 0's partial product", "SUM")) == 0.0


def test_row_parallel_forward_without_the_transpose_is_named():
    def row_parallel_forward(x_shard, weight_shard, bias):
        partial = x_shard @ weight_shard
        dist.all_reduce(partial)
        return partial + bias
    assert_wrong(row_parallel_forward, "(out_features, in_features)", "x Wᵀ")


def test_row_parallel_forward_without_the_transpose_is_named_where_the_shapes_happen_to_fit():
    from lab_utils.labs.lab06.exercises import _row_expected, _row_judge
    case = {"seed": 3, "batch": 2, "in_features": 8, "out_features": 4}  # in/N = out: x_shard @ weight_shard runs
    expected = _row_expected(case)
    assert _row_judge([expected["untransposed"]] * 2, expected, case) == (0.0, (
        "the weight shard was used as it is stored, (out_features, in_features): the layer computes x Wᵀ + b"))


@pytest.mark.parametrize("name", ["my_ring_step", "split_output_channels", "row_parallel_forward"])
def test_lab06_exercises_are_registered(name):
    assert get(name).lab == "06"


def test_a_message_that_names_the_mistake_gets_no_hint_a_generic_one_keeps_it():
    """Issue 51 (lab 00's rule, learner s12r3e): a 'Hint:' that hands over the recipe after a message that already
    named the mistake is cut; a message that names none (the result differs) keeps the hint."""
    from lab_utils.exercises import core as ex
    from lab_utils.exercises.core import Named

    for message in ("the ring's result on rank 0 (n=4) differs", "the output differs from the unsplit layer's"):
        plain = ex.named_unless("differs")(lambda got, expected, case, m=message: (0.0, m))
        assert not isinstance(plain(None, None, None)[1], Named)
    said = ex.named_unless("differs")(lambda got, expected, case: (0.0, "the bias is missing"))(None, None, None)[1]
    assert isinstance(said, Named) and said == "the bias is missing"
    assert not isinstance(ex.named_unless()(lambda g, e, c: (1.0, "right"))(None, None, None)[1], Named)


def test_an_all_gather_in_a_row_parallel_forward_is_named_where_its_shape_fails():
    """Learner s13r6e, lab 06 Ex 3: all_gather + cat failed with a shape RuntimeError and the generic hint; the message
    now says that a gather sets the partial products side by side where a row split needs their sum."""
    from lab_utils.labs.lab06 import exercises as lab06_exercises

    exc = RuntimeError("The size of tensor a (8) must match the size of tensor b (4) at non-singleton dimension 1")
    said = lab06_exercises._row_error_named(exc, {"gather"}, (3, 4), (4, 4))
    assert said is not None and "all_gather sets the partial products side by side" in said
    assert "all_reduce them (SUM), then add the bias once" in said and "must match" not in said  # s13r7e: shorter
    assert lab06_exercises._row_error_named(exc, {"blocking"}, (3, 4), (4, 4)) is None  # no gather: not named
