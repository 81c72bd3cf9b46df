"""Lab 13's exercises: the solutions pass and score 1; each plausible wrong answer fails with its own message."""
import random

import pytest
import torch
import torch.distributed as dist

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


# ---- halo_rows -------------------------------------------------------------------------------------------------------

def test_halo_rows_solution_passes_and_scores_full():
    def halo_rows(kernel, padding, stride):
        return padding, max(0, kernel - padding - stride)
    assert check(halo_rows)
    assert score(halo_rows)[0] == 1.0


def test_halo_rows_k_half_on_each_side_fails():
    def halo_rows(kernel, padding, stride):
        return kernel // 2, kernel // 2
    assert_wrong(halo_rows, "stride", "k // 2 on each side", "(1, 1)")
    assert score(halo_rows)[0] == 0.0


def test_halo_rows_ignoring_the_stride_fails():
    def halo_rows(kernel, padding, stride):
        return padding, kernel - 1 - padding
    # learner s12r3d, lab 13 finding 7: three mistakes, one message: each formula named, with the i*s arithmetic
    said = assert_wrong(halo_rows, "below = k - 1 - p holds for stride 1 only", "i*s + s - 1").message
    assert "k - p - s" not in said, said  # the message names the mistake; the answer stays the learner's
    assert "k // 2" not in said and "[1, 1]" not in said, said


def test_halo_rows_swapped_fails():
    def halo_rows(kernel, padding, stride):
        return max(0, kernel - padding - stride), padding
    assert_wrong(halo_rows, "swapped")


def test_halo_rows_negative_rows_fail():
    def halo_rows(kernel, padding, stride):
        return padding, kernel - padding - stride
    assert_wrong(halo_rows, "negative")


def test_halo_rows_padding_both_sides_fails():
    def halo_rows(kernel, padding, stride):
        return padding, padding
    said = assert_wrong(halo_rows, "the padding on both sides", "rows below are not the padding").message
    assert "k // 2" not in said and "k - 1 - p" not in said, said


# ---- exchange_halo, in 2 and 3 real ranks ----------------------------------------------------------------------------

def exchange_halo(slab, above, below, padding, rank, world_size):
    n, c, _, w = slab.shape
    top = slab.new_zeros(n, c, above if rank > 0 else padding, w)
    bottom = slab.new_zeros(n, c, below if rank < world_size - 1 else padding, w)
    requests = []
    if rank > 0:
        requests.append(dist.irecv(top, rank - 1))
        requests.append(dist.isend(slab[:, :, :below].contiguous(), rank - 1))
    if rank < world_size - 1:
        requests.append(dist.irecv(bottom, rank + 1))
        requests.append(dist.isend(slab[:, :, -above:].contiguous(), rank + 1))
    for request in requests:
        request.wait()
    return torch.cat([top, slab, bottom], dim=2)


def test_exchange_halo_solution_passes_and_scores_full():
    result = check(exchange_halo)
    assert result, result
    assert score(exchange_halo)[0] == 1.0


def test_exchange_halo_wrong_ends_of_the_slab_fail():
    def exchange_halo(slab, above, below, padding, rank, world_size):
        n, c, _, w = slab.shape
        top = slab.new_zeros(n, c, above if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, below if rank < world_size - 1 else padding, w)
        requests = []
        if rank > 0:
            requests.append(dist.irecv(top, rank - 1))
            requests.append(dist.isend(slab[:, :, -below:].contiguous(), rank - 1))  # last rows up: wrong end
        if rank < world_size - 1:
            requests.append(dist.irecv(bottom, rank + 1))
            requests.append(dist.isend(slab[:, :, :above].contiguous(), rank + 1))   # first rows down: wrong end
        for request in requests:
            request.wait()
        return torch.cat([top, slab, bottom], dim=2)
    assert_wrong(exchange_halo, "wrong end")


def test_exchange_halo_zero_padding_between_slabs_fails():
    def exchange_halo(slab, above, below, padding, rank, world_size):
        n, c, _, w = slab.shape  # every slab padded as if it were the whole image: no exchange
        return torch.cat([slab.new_zeros(n, c, padding, w), slab, slab.new_zeros(n, c, padding, w)], dim=2)
    assert_wrong(exchange_halo, "zeros where the neighbour below's first rows belong")


def test_exchange_halo_without_the_image_edge_padding_fails():
    def exchange_halo(slab, above, below, padding, rank, world_size):
        parts = [slab]
        requests = []
        if rank > 0:
            top = torch.empty_like(slab[:, :, :above])
            requests += [dist.irecv(top, rank - 1), dist.isend(slab[:, :, :below].contiguous(), rank - 1)]
            parts.insert(0, top)
        if rank < world_size - 1:
            bottom = torch.empty_like(slab[:, :, :below])
            requests += [dist.irecv(bottom, rank + 1), dist.isend(slab[:, :, -above:].contiguous(), rank + 1)]
            parts.append(bottom)
        for request in requests:
            request.wait()
        return torch.cat(parts, dim=2)
    assert_wrong(exchange_halo, "shape", "zero rows at the image's own top and bottom edge")


def test_exchange_halo_above_and_below_mixed_up_fails():
    def exchange_halo(slab, above, below, padding, rank, world_size):
        n, c, _, w = slab.shape  # `below` rows from the neighbour above and `above` rows from the one below
        top = slab.new_zeros(n, c, below if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, above if rank < world_size - 1 else padding, w)
        requests = []
        if rank > 0:
            requests += [dist.irecv(top, rank - 1), dist.isend(slab[:, :, :above].contiguous(), rank - 1)]
        if rank < world_size - 1:
            requests += [dist.irecv(bottom, rank + 1), dist.isend(slab[:, :, -below:].contiguous(), rank + 1)]
        for request in requests:
            request.wait()
        return torch.cat([top, slab, bottom], dim=2)
    assert_wrong(exchange_halo, "receive buffer", "the rows from rank - 1 are `above` rows")  # before gloo sees it


def test_exchange_halo_without_waiting_names_the_missing_wait():
    def exchange_halo(slab, above, below, padding, rank, world_size):
        n, c, _, w = slab.shape
        top = slab.new_zeros(n, c, above if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, below if rank < world_size - 1 else padding, w)
        if rank > 0:
            dist.irecv(top, rank - 1)
            dist.isend(slab[:, :, :below].contiguous(), rank - 1)
        if rank < world_size - 1:
            dist.irecv(bottom, rank + 1)
            dist.isend(slab[:, :, -above:].contiguous(), rank + 1)
        return torch.cat([top, slab, bottom], dim=2)  # no request waited for
    # named on return, whether or not the rows arrived in time (no timeout to wait for)
    assert_wrong(exchange_halo, "returned from the step without waiting for its dist.irecv", ".wait()")


def test_exchange_halo_with_its_sends_never_waited_is_told_so_as_lab_06_does():
    """Learner s9f, lab 13 exercise 3: the isend requests never waited got, after 11 s, 'waited 10 s for a message
    that never came: every irecv needs the neighbour's matching isend', which sent them looking for a wrong row or
    peer. Now lab 06's words, at once."""
    def exchange_halo(slab, above, below, padding, rank, world_size):
        n, c, _, w = slab.shape
        top = slab.new_zeros(n, c, above if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, below if rank < world_size - 1 else padding, w)
        receives = []
        if rank > 0:
            if above:
                receives.append(dist.irecv(top, rank - 1))
            if below:
                dist.isend(slab[:, :, :below].contiguous(), rank - 1)
        if rank < world_size - 1:
            if below:
                receives.append(dist.irecv(bottom, rank + 1))
            if above:
                dist.isend(slab[:, :, -above:].contiguous(), rank + 1)
        for request in receives:
            request.wait()
        return torch.cat([top, slab, bottom], dim=2)
    result = assert_wrong(exchange_halo, "returned from the step without waiting for its dist.isend", ".wait()")
    assert "never came" not in result.message, result.message


def test_exchange_halo_with_blocking_sends_fails_even_in_an_order_that_works_here():
    def exchange_halo(slab, above, below, padding, rank, world_size):  # E6: send/recv in a chain, safe for small rows
        n, c, h, w = slab.shape
        top, bottom = slab.new_zeros(n, c, padding, w), slab.new_zeros(n, c, padding, w)
        if rank > 0:
            top = slab.new_zeros(n, c, above, w)
            dist.recv(top, rank - 1)
            dist.send(slab[:, :, :below].contiguous(), rank - 1)
        if rank < world_size - 1:
            bottom = slab.new_zeros(n, c, below, w)
            dist.send(slab[:, :, h - above:].contiguous(), rank + 1)
            dist.recv(bottom, rank + 1)
        return torch.cat([top, slab, bottom], dim=2)
    result = check(exchange_halo)
    assert not result and "blocking dist.send" in result.message and "deadlock" in result.message, result.message


def test_exchange_halo_receive_buffers_of_the_wrong_size_are_named_before_gloo_aborts():
    def exchange_halo(slab, above, below, padding, rank, world_size):  # E5: the buffers' sizes swapped
        n, c, _, w = slab.shape
        top = slab.new_zeros(n, c, below if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, above if rank < world_size - 1 else padding, w)
        requests = []
        if rank > 0:
            requests.append(dist.irecv(top, rank - 1))
            requests.append(dist.isend(slab[:, :, :below].contiguous(), rank - 1))
        if rank < world_size - 1:
            requests.append(dist.irecv(bottom, rank + 1))
            requests.append(dist.isend(slab[:, :, -above:].contiguous(), rank + 1))
        for request in requests:
            request.wait()
        return torch.cat([top, slab, bottom], dim=2)
    result = assert_wrong(exchange_halo, "sizes must match")
    # whichever rank posts its wrong buffer first is named: rank 0's holds 2 rows for 1, rank 1's 1 row for 2
    assert ("receive buffer of 1 row(s)" in result.message and "which sends 2" in result.message) or \
        ("receive buffer of 2 row(s)" in result.message and "which sends 1" in result.message), result.message


def test_exchange_halo_sending_past_the_image_edge_is_named():
    def exchange_halo(slab, above, below, padding, rank, world_size):  # E8: the send guard on the wrong side
        n, c, _, w = slab.shape
        top = slab.new_zeros(n, c, above if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, below if rank < world_size - 1 else padding, w)
        requests = []
        if rank > 0:
            requests.append(dist.irecv(top, rank - 1))
        if rank < world_size - 1:
            requests.append(dist.irecv(bottom, rank + 1))
            requests.append(dist.isend(slab[:, :, :below].contiguous(), rank - 1))
        if rank > 0:
            requests.append(dist.isend(slab[:, :, -above:].contiguous(), rank + 1))
        for request in requests:
            request.wait()
        return torch.cat([top, slab, bottom], dim=2)
    result = assert_wrong(exchange_halo, "and there is no rank", "guard that call")
    assert "rank 0 sends to rank -1" in result.message or "rank 1 sends to rank 2" in result.message, result.message


def test_exchange_halo_blocking_sends_first_are_called_a_deadlock():
    def exchange_halo(slab, above, below, padding, rank, world_size):  # E6
        n, c, _, w = slab.shape
        top = slab.new_zeros(n, c, above if rank > 0 else padding, w)
        bottom = slab.new_zeros(n, c, below if rank < world_size - 1 else padding, w)
        if rank > 0:
            dist.send(slab[:, :, :below].contiguous(), rank - 1)
        if rank < world_size - 1:
            dist.send(slab[:, :, -above:].contiguous(), rank + 1)
        if rank > 0:
            dist.recv(top, rank - 1)
        if rank < world_size - 1:
            dist.recv(bottom, rank + 1)
        return torch.cat([top, slab, bottom], dim=2)
    result = check(exchange_halo)  # refused at its first send, before it waits: no timeout to sit through
    assert not result and "blocking dist.send" in result.message and "a deadlock" in result.message, result.message


# ---- halo_bytes_per_step ---------------------------------------------------------------------------------------------

def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
    rows = padding + max(0, kernel - padding - stride)
    return 2 * (world_size - 1) * rows * width * channels * batch * itemsize


def test_halo_bytes_per_step_solution_passes_and_scores_full():
    assert check(halo_bytes_per_step)
    assert score(halo_bytes_per_step)[0] == 1.0


def test_halo_bytes_forward_only_fails():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return (world_size - 1) * rows * width * channels * batch * itemsize
    assert_wrong(halo_bytes_per_step, "backward")


def test_halo_bytes_one_border_per_rank_fails():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * world_size * rows * width * channels * batch * itemsize
    assert_wrong(halo_bytes_per_step, "borders")


def test_halo_bytes_counting_numbers_fails():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * (world_size - 1) * rows * width * channels * batch
    assert_wrong(halo_bytes_per_step, "itemsize")


def test_halo_bytes_k_half_per_side_whatever_the_stride_fails():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        return 2 * (world_size - 1) * 2 * (kernel // 2) * width * channels * batch * itemsize
    assert_wrong(halo_bytes_per_step, "stride")


def test_halo_bytes_without_the_batch_fails():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * (world_size - 1) * rows * width * channels * itemsize
    assert_wrong(halo_bytes_per_step, "batch")


def test_halo_bytes_fixed_four_bytes_per_number_is_named_as_such():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * (world_size - 1) * rows * width * channels * batch * 4  # float32 assumed
    result = assert_wrong(halo_bytes_per_step, "itemsize", "not a fixed 4")
    assert "half the bytes" not in result.message, result.message


def test_halo_bytes_each_border_counted_twice_is_not_called_n_borders():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * 2 * (world_size - 1) * rows * width * channels * batch * itemsize  # both ways counted twice
    result = assert_wrong(halo_bytes_per_step, "twice", "both ways")
    assert "borders between" not in result.message, result.message


def test_halo_bytes_padded_width_fails_and_says_so():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * (world_size - 1) * rows * (width + 2 * padding) * channels * batch * itemsize
    assert_wrong(halo_bytes_per_step, "without the padding")


# ---- slab_bounds -----------------------------------------------------------------------------------------------------

def test_slab_bounds_solution_passes_and_scores_full():
    def slab_bounds(height, rank, world_size, align):
        share, extra = divmod(height // align, world_size)
        start = align * (rank * share + min(rank, extra))
        stop = height if rank == world_size - 1 else start + align * (share + (rank < extra))
        return start, stop
    assert check(slab_bounds)
    assert score(slab_bounds)[0] == 1.0


def test_slab_bounds_dropping_the_rows_left_over_fails():
    def slab_bounds(height, rank, world_size, align):
        per = height // world_size // align * align
        return rank * per, (rank + 1) * per
    assert_wrong(slab_bounds, "rows left over")


def test_slab_bounds_unaligned_borders_fail():
    def slab_bounds(height, rank, world_size, align):
        share, extra = divmod(height, world_size)  # balanced rows, but borders anywhere
        start = rank * share + min(rank, extra)
        return start, start + share + (rank < extra)
    assert_wrong(slab_bounds, "not a multiple")


def test_slab_bounds_everything_extra_to_the_last_rank_fails():
    def slab_bounds(height, rank, world_size, align):
        per = height // align // world_size * align
        return rank * per, height if rank == world_size - 1 else (rank + 1) * per
    assert_wrong(slab_bounds, "differ by more than one")


def test_slab_bounds_extras_to_the_last_ranks_fail():
    def slab_bounds(height, rank, world_size, align):
        share, extra = divmod(height // align, world_size)
        first_extra = world_size - extra  # the extra blocks to the last ranks
        start = align * (rank * share + max(0, rank - first_extra))
        stop = height if rank == world_size - 1 else start + align * (share + (rank >= first_extra))
        return start, stop
    assert_wrong(slab_bounds, "first ranks")


def test_slab_bounds_inclusive_stop_is_called_an_off_by_one():
    def slab_bounds(height, rank, world_size, align):  # S6
        share, extra = divmod(height // align, world_size)
        start = align * (rank * share + min(rank, extra))
        stop = height if rank == world_size - 1 else start + align * (share + (rank < extra))
        return start, stop - 1
    assert_wrong(slab_bounds, "off-by-one", "exclusive")


def test_halo_bytes_k_half_rows_whatever_the_stride_blames_the_stride():
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):  # B3
        rows = 2 * (kernel // 2)
        return 2 * (world_size - 1) * rows * width * channels * batch * itemsize
    result = assert_wrong(halo_bytes_per_step, "stride")
    assert "twice" not in result.message, result.message


def test_halo_bytes_with_a_wrong_halo_rows_names_exercise_1_not_this_function():
    """Learner s5C: with halo_rows = (p, p), a correct halo_bytes_per_step failed with a hint about its formula."""
    scope = {}
    exec("def halo_rows(kernel, padding, stride):\n    return padding, padding\n"
         "def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):\n"
         "    above, below = halo_rows(kernel, padding, stride)\n"
         "    return 2 * (world_size - 1) * (above + below) * width * channels * batch * itemsize\n", scope)
    result = assert_wrong(scope["halo_bytes_per_step"], "exercise 1 first", "halo_rows(3, 1, 2) gives (1, 1)",
                          "the right rows are (1, 0)")
    assert "stride 1 and padding k // 2" not in result.message
    exec("def halo_rows(kernel, padding, stride):\n    return padding, max(0, kernel - padding - stride)\n", scope)
    assert check(scope["halo_bytes_per_step"]) and score(scope["halo_bytes_per_step"])[0] == 1.0
    exec("def halo_rows(kernel, padding, stride):\n    return padding, padding\n"  # wrong, but not used: no blame
         "def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):\n"
         "    rows = padding + max(0, kernel - padding - stride)\n"
         "    return 2 * (world_size - 1) * rows * width * channels * batch * itemsize\n", scope)
    assert check(scope["halo_bytes_per_step"])


def test_a_later_cell_can_ask_quietly_whether_exercise_1_passes(capsys):
    """Lab 13's equality and byte-table cells say when exercise 1 is wrong: an extra halo row changes none of their
    figures (learner s5C saw True everywhere with halo_rows = (p, p))."""
    from lab_utils.exercises import passes

    def halo_rows(kernel, padding, stride):
        return padding, padding
    assert not passes(halo_rows) and capsys.readouterr().out == ""

    def halo_rows(kernel, padding, stride):  # noqa: F811
        return padding, max(0, kernel - padding - stride)
    assert passes(halo_rows) and capsys.readouterr().out == ""


def test_halo_bytes_with_twice_the_padding_points_at_exercise_1_without_giving_its_formula():
    """Learner s6C: rows = 2 * padding got exercise 1's answer word for word ('k - padding - stride below')."""
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = 2 * padding
        return 2 * (world_size - 1) * rows * width * channels * batch * itemsize
    result = assert_wrong(halo_bytes_per_step, "halo_rows (exercise 1)")
    assert "k - padding - stride" not in result.message and "max(0" not in result.message, result.message


def test_halo_bytes_at_the_output_width_names_the_width_not_the_backward_pass():
    # learner s11d, lab 13: width // stride halved the bytes of the stride-2 case and was called "the backward pass"
    def halo_bytes_per_step(kernel, padding, stride, channels, width, batch, world_size, itemsize):
        rows = padding + max(0, kernel - padding - stride)
        return 2 * (world_size - 1) * rows * (width // stride) * channels * batch * itemsize
    result = assert_wrong(halo_bytes_per_step, "layer's input", "not of its output (width // stride = 32)")
    assert "half the bytes" not in result.message, result.message


def test_halo_rows_named_mistakes_get_no_hint_repeating_the_arithmetic():
    # a message that names the mistake already gives the i*s arithmetic: no 'Hint:' tail repeats it (lab 00's rule)
    def halo_rows(kernel, padding, stride):
        return padding, kernel - 1 - padding
    said = assert_wrong(halo_rows, "holds for stride 1 only").message
    assert "Hint:" not in said, said
