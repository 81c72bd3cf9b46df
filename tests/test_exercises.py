"""Every exercise (labs 00-04 and 10): the solution passes its self-check and gets full marks on the grader's inputs;
each wrong answer a learner would plausibly write fails the self-check and scores 0 — one test per wrong answer."""
import itertools
import math
import random
import statistics
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from lab_utils import exercises
from lab_utils.exercises import check
from answers import grade, named


# ---- lab 00 ---------------------------------------------------------------------------------------------------------

@named("median_time")
def median_time(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _timed(fn, n, clock):
    times = []
    for _ in range(n):
        start = clock()
        fn()
        times.append(clock() - start)
    return times


@named("median_time")
def median_time_mean(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    return statistics.mean(_timed(fn, repeats, clock))


@named("median_time")
def median_time_times_warmup(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.median(_timed(fn, warmup + repeats, clock))


@named("median_time")
def median_time_minimum(fn, warmup, repeats, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    return min(_timed(fn, repeats, clock))


@named("median_time")
def median_time_no_warmup_calls(fn, warmup, repeats, clock=time.perf_counter):
    return statistics.median(_timed(fn, repeats, clock))


@named("median_time")
def median_time_milliseconds(fn, warmup, repeats, clock=time.perf_counter):
    return 1e3 * median_time(fn, warmup, repeats, clock)


# ---- lab 01 ---------------------------------------------------------------------------------------------------------

@named("train_step")
def train_step(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


@named("train_step")
def train_step_no_zero_grad(model, x, y, optimizer):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


@named("train_step")
def train_step_no_step(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach()


@named("train_step")
def train_step_summed_loss(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y, reduction="sum")
    loss.backward()
    optimizer.step()
    return loss.detach()


@named("throughput")
def throughput(batch_size, step_times, warmup):
    return batch_size / statistics.median(step_times[warmup:])


@named("throughput")
def throughput_mean(batch_size, step_times, warmup):
    return batch_size / statistics.mean(step_times[warmup:])


@named("throughput")
def throughput_with_warmup(batch_size, step_times, warmup):
    return batch_size / statistics.median(step_times)


@named("throughput")
def throughput_seconds_per_sample(batch_size, step_times, warmup):
    return statistics.median(step_times[warmup:]) / batch_size


@named("top_self_cpu_op")
def top_self_cpu_op(prof):
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key


@named("top_self_cpu_op")
def top_self_cpu_op_total(prof):
    return max(prof.key_averages(), key=lambda e: e.cpu_time_total).key


# ---- lab 02 ---------------------------------------------------------------------------------------------------------

@named("scatter")
def scatter(batch, devices):
    n, k = len(batch), len(devices)
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    return [c.to(d) for c, d in zip(torch.split(batch, sizes), devices)]


@named("scatter")
def scatter_chunk(batch, devices):
    return [c.to(d) for c, d in zip(batch.chunk(len(devices)), devices)]


@named("scatter")
def scatter_drop_remainder(batch, devices):
    size = len(batch) // len(devices)
    return [batch[i * size:(i + 1) * size].to(d) for i, d in enumerate(devices)]


@named("scatter")
def scatter_interleaved(batch, devices):
    return [batch[i::len(devices)].to(d) for i, d in enumerate(devices)]


@named("gather")
def gather(outputs, device):
    return torch.cat([o.to(device) for o in outputs])


@named("gather")
def gather_stack(outputs, device):
    return torch.stack([o[:1] for o in outputs]).to(device)


@named("gather")
def gather_reversed(outputs, device):
    return torch.cat([o.to(device) for o in reversed(outputs)])


@named("reduce_gradients")
def reduce_gradients(model, replicas):
    with torch.no_grad():
        for p, *others in zip(model.parameters(), *(r.parameters() for r in replicas)):
            for o in others:
                p.grad += o.grad.to(p.device)


@named("reduce_gradients")
def reduce_gradients_mean(model, replicas):
    with torch.no_grad():
        for p, *others in zip(model.parameters(), *(r.parameters() for r in replicas)):
            p.grad = (p.grad + sum(o.grad for o in others)) / (len(others) + 1)


@named("reduce_gradients")
def reduce_gradients_replicas_divided(model, replicas):
    with torch.no_grad():
        for p, *others in zip(model.parameters(), *(r.parameters() for r in replicas)):
            for o in others:
                p.grad += o.grad / len(replicas)


@named("reduce_gradients")
def reduce_gradients_replace(model, replicas):
    with torch.no_grad():
        for p, *others in zip(model.parameters(), *(r.parameters() for r in replicas)):
            p.grad = sum(o.grad for o in others)


# ---- lab 03 ---------------------------------------------------------------------------------------------------------

@named("average_gradients")
def average_gradients(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world_size


@named("average_gradients")
def average_gradients_summed(model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad)


@named("average_gradients")
def average_gradients_local(model, world_size):
    for p in model.parameters():
        p.grad /= world_size


@named("global_mean")
def global_mean(total, count):
    both = torch.tensor([float(total), float(count)], dtype=torch.float64)
    dist.all_reduce(both)
    return (both[0] / both[1]).item()


@named("global_mean")
def global_mean_local(total, count):
    return total / count


@named("global_mean")
def global_mean_of_means(total, count):
    mean = torch.tensor([total / count], dtype=torch.float64)
    dist.all_reduce(mean)
    return (mean / dist.get_world_size()).item()


@named("global_mean")
def global_mean_summed(total, count):
    t = torch.tensor([float(total)], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item()


@named("shard")
def shard(n, rank, world_size):
    share, extra = divmod(n, world_size)
    start = rank * share + min(rank, extra)
    return list(range(start, start + share + (rank < extra)))


@named("shard")
def shard_drop_remainder(n, rank, world_size):
    size = n // world_size
    return list(range(rank * size, (rank + 1) * size))


@named("shard")
def shard_last_takes_the_rest(n, rank, world_size):
    size = n // world_size
    return list(range(rank * size, n if rank == world_size - 1 else (rank + 1) * size))


@named("run_epochs")
def run_epochs(sampler, loader, model, optimizer, epochs):
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for _ in loader:
            pass


@named("run_epochs")
def run_epochs_no_set_epoch(sampler, loader, model, optimizer, epochs):
    for _ in range(epochs):
        for _ in loader:
            pass


@named("run_epochs")
def run_epochs_after_the_loop(sampler, loader, model, optimizer, epochs):
    for epoch in range(epochs):
        for _ in loader:
            pass
        sampler.set_epoch(epoch)


# ---- lab 04 ---------------------------------------------------------------------------------------------------------

@named("gpipe_order")
def gpipe_order(stages, micro_batches):
    return [[f"F{m}" for m in range(micro_batches)] + [f"B{m}" for m in range(micro_batches)] for _ in range(stages)]


@named("gpipe_order")
def gpipe_order_interleaved(stages, micro_batches):
    return [[op for m in range(micro_batches) for op in (f"F{m}", f"B{m}")] for _ in range(stages)]


@named("gpipe_order")
def gpipe_order_one_list(stages, micro_batches):
    return [f"F{m}" for m in range(micro_batches)] + [f"B{m}" for m in range(micro_batches)]


@named("bubble")
def bubble(intervals, stages):
    span = max(i.end_s for i in intervals) - min(i.start_s for i in intervals)
    return 1 - sum(i.end_s - i.start_s for i in intervals) / (stages * span)


@named("bubble")
def bubble_busy_share(intervals, stages):
    span = max(i.end_s for i in intervals) - min(i.start_s for i in intervals)
    return sum(i.end_s - i.start_s for i in intervals) / (stages * span)


@named("bubble")
def bubble_from_zero(intervals, stages):
    return 1 - sum(i.end_s - i.start_s for i in intervals) / (stages * max(i.end_s for i in intervals))


def _slowest(times, cut):
    bounds = [0, *cut, len(times)]
    return max(sum(times[a:b]) for a, b in zip(bounds, bounds[1:]))


@named("best_split")
def best_split(times, stages):
    return min(itertools.combinations(range(1, len(times)), stages - 1), key=lambda cut: _slowest(times, cut))


@named("best_split")
def best_split_by_count(times, stages):
    return [round(len(times) * s / stages) for s in range(1, stages)]


# ---- lab 10 ---------------------------------------------------------------------------------------------------------

def hardware(row):
    return row.world_size * (row.threads or 1)


@named("speedup_and_efficiency")
def speedup_and_efficiency(row, baseline):
    speedup = row.samples_per_s / baseline.samples_per_s
    return speedup, speedup / (hardware(row) / hardware(baseline))


@named("speedup_and_efficiency")
def speedup_inverted(row, baseline):
    speedup = baseline.samples_per_s / row.samples_per_s
    return speedup, speedup / row.world_size


@named("speedup_and_efficiency")
def efficiency_by_ranks_only(row, baseline):
    speedup = row.samples_per_s / baseline.samples_per_s
    return speedup, speedup / row.world_size


@named("speedup_and_efficiency")
def efficiency_ignores_the_baselines_threads(row, baseline):
    speedup = row.samples_per_s / baseline.samples_per_s
    return speedup, speedup / hardware(row)


@named("fit_serial_fraction")
def fit_serial_fraction(points):
    a = [1 - 1 / n for n, _ in points]
    b = [1 / s - 1 / n for n, s in points]
    return sum(x * y for x, y in zip(a, b)) / sum(x * x for x in a)  # as it is: clipped to 0..1 fails (lab 10 tests)


@named("fit_serial_fraction")
def parallel_fraction(points):
    return 1 - fit_serial_fraction(points)


@named("fit_serial_fraction")
def first_point_only(points):
    n, s = points[0]
    return (1 / s - 1 / n) / (1 - 1 / n)


@named("predict_speedup")
def predict_speedup(s, n):
    return 1 / (s + (1 - s) / n)


@named("predict_speedup")
def predict_inverse(s, n):
    return s + (1 - s) / n


@named("predict_speedup")
def predict_linear(s, n):
    return n * (1 - s)


SOLUTIONS = [median_time, train_step, throughput, top_self_cpu_op, scatter, gather, reduce_gradients, average_gradients,
             global_mean, shard, run_epochs, gpipe_order, bubble, best_split, speedup_and_efficiency,
             fit_serial_fraction, predict_speedup]
WRONG = [median_time_mean, median_time_times_warmup, median_time_minimum, median_time_no_warmup_calls,
         median_time_milliseconds, train_step_no_zero_grad, train_step_no_step, train_step_summed_loss,
         throughput_mean, throughput_with_warmup, throughput_seconds_per_sample, top_self_cpu_op_total, scatter_chunk,
         scatter_drop_remainder, scatter_interleaved, gather_stack, gather_reversed, reduce_gradients_mean,
         reduce_gradients_replace, reduce_gradients_replicas_divided, average_gradients_summed, average_gradients_local, global_mean_local,
         global_mean_of_means, global_mean_summed, shard_drop_remainder, shard_last_takes_the_rest,
         run_epochs_no_set_epoch, run_epochs_after_the_loop,
         gpipe_order_interleaved, gpipe_order_one_list, bubble_busy_share, bubble_from_zero, best_split_by_count,
         speedup_inverted, efficiency_by_ranks_only, efficiency_ignores_the_baselines_threads, parallel_fraction,
         first_point_only, predict_inverse, predict_linear]
IDS = lambda fn: f"{fn.__name__}-{fn.__code__.co_name}"  # noqa: E731


def test_every_exercise_is_tested_here_or_in_its_labs_test_file():
    from pathlib import Path

    here = {fn.__name__ for fn in SOLUTIONS}
    tests = Path(__file__).parent  # a lab's exercise tests, and what its folder's conftest runs for them (lab 05)
    elsewhere = "".join(p.read_text() for pattern in ("**/test_exercises_lab*.py", "lab*/conftest.py")
                        for p in tests.glob(pattern))
    assert [name for name in exercises.REGISTRY if name not in here and name not in elsewhere] == []


@pytest.mark.parametrize("solution", SOLUTIONS, ids=IDS)
def test_the_solution_passes_the_self_check_and_gets_full_marks(solution):
    result = check(solution)
    assert result.passed, result
    if exercises.get(solution.__name__).ranks:  # the grader's judge on the self-check's own draw: one launch, not three
        fraction, message = result.details.get("fraction", 0.0), result.message
    else:  # tests/test_judges.py grades the notebook's own solutions on two draws
        fraction, message = grade(solution)
    assert fraction == 1.0, message


def _named(wrong, result=None) -> bool:
    """Whether the judge's message for `wrong` is core.Named (no hint after it): run in this process, or, for an
    exercise run in ranks, as the self-check's result recorded it."""
    from lab_utils.exercises.core import SELF_CHECK_SEED, Named, to_plain

    exercise = exercises.get(wrong.__name__)
    if exercise.ranks:
        return bool(result is not None and result.details.get("named"))
    inputs = exercise.cases(random.Random(SELF_CHECK_SEED))
    return isinstance(exercise.score(to_plain(exercise.run(wrong, inputs)), inputs)[1], Named)


@pytest.mark.parametrize("wrong", WRONG, ids=IDS)
def test_a_plausible_wrong_answer_fails_the_self_check_and_scores_zero(wrong):
    result = check(wrong)
    assert not result.passed
    # none where no hint is set, nor after a message the judge marked Named (it names the mistake itself)
    assert ("Hint:" in result.message) == (bool(exercises.get(wrong.__name__).hint) and not _named(wrong, result))
    if exercises.get(wrong.__name__).ranks:  # the grader's judge on the self-check's own draw: one launch, not two
        fraction, message = result.details.get("fraction", 0.0), result.message
    else:
        fraction, message = grade(wrong)
    assert fraction == 0.0, message


def test_torch_chunk_fails_scatter_under_every_seed():
    """A grader draws its own cases: a class of 30 had one torch.chunk answer at full marks before every draw held a
    batch that chunk splits unevenly."""
    assert not any(check(scatter_chunk, seed=seed).passed for seed in range(40))


def test_the_self_check_names_the_mistake():
    assert "mean" in check(median_time_mean).message
    assert "warm-up" in check(median_time_times_warmup).message
    assert "zero" in check(train_step_no_zero_grad).message
    assert "torch.chunk" in check(scatter_chunk).message
    assert "averaged" in check(reduce_gradients_mean).message
    assert "too large" in check(average_gradients_summed).message
    assert "own mean" in check(global_mean_local).message
    assert "set_epoch" in check(run_epochs_no_set_epoch).message
    assert "1F1B" in check(gpipe_order_interleaved).message or "order" in check(gpipe_order_interleaved).message
    assert "busy share" in check(bubble_busy_share).message
    assert "parallel fraction" in check(parallel_fraction).message
    assert "not ranks alone" in check(efficiency_by_ranks_only).message
    assert "the baseline used" in check(efficiency_ignores_the_baselines_threads).message


def test_a_stub_is_reported_as_not_written_yet():
    @named("shard")
    def stub(n, rank, world_size):
        raise NotImplementedError("Exercise: write your solution here")

    result = check(stub)
    assert not result.passed and "not written yet" in result.message


def test_partial_credit_for_a_right_update_without_the_loss():
    @named("train_step")
    def no_loss(model, x, y, optimizer):
        train_step(model, x, y, optimizer)

    fraction, message = grade(no_loss)
    assert fraction == 0.5 and "return the batch loss" in message


def test_scores_are_finite_and_clamped():
    exercise = exercises.get("shard")
    inputs = exercise.cases(random.Random(0))
    assert exercise.score(["not", "numbers"], inputs)[0] == 0.0
    odd = exercises.Exercise("99", "odd", lambda r: 0, lambda f, i: 0, lambda i: 0, lambda g, e, i: (math.nan, "nan"), "")
    assert odd.score(0, 0) == (0.0, "the grade came out as nan, counted as 0")


def test_check_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match="takes the function you wrote"):
        check(42)
    with pytest.raises(ValueError, match="no exercise is called"):
        check(lambda: None)


def test_a_loss_still_attached_to_the_graph_gets_half_marks():
    @named("train_step")
    def attached(model, x, y, optimizer):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    fraction, message = grade(attached)
    assert fraction == 0.5 and "loss.detach()" in message


def test_a_dict_with_int_keys_is_named_as_such_not_as_no_plain_data():
    """Learner s5C: read_scheduler with int job ids got 'returned something of type dict, not plain data'."""
    @named("read_scheduler")
    def int_job_ids(text):
        return {int(line.split("|")[0]): "done" for line in text.splitlines()[1:] if "." not in line.split("|")[0]}

    result = check(int_job_ids)
    assert not result.passed and "a dict with a key of type int" in result.message, result.message
    assert "keys must be strings" in result.message and "not plain data" not in result.message
    with pytest.raises(TypeError, match="not plain data"):  # the grader's probe reads it as invalid, as before
        exercises.to_plain({4242: "done"})


def test_hints_name_rows_out_of_order_and_a_non_string_answer():
    assert "consecutive rows" in check(scatter_interleaved).message

    @named("top_self_cpu_op")
    def returns_the_event(prof):
        return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total)

    result = check(returns_the_event)
    assert not result.passed and "not plain data" in result.message and ".key" in result.message


def test_a_failed_rank_is_reported_by_its_own_message_and_hint_not_its_traceback_cut_mid_word():
    from lab_utils.exercises.core import last_line
    from lab_utils.launch import RankError

    error = RankError(1, "RuntimeError: [/build/gloo/pair.cc:553] Timed out waiting 60000ms for recv", "Traceback ...\n"
                      "RuntimeError: [/build/gloo/pair.cc:553] Timed out waiting 60000ms for recv", hint="every rank " * 60)
    line = last_line(error)
    assert line.startswith("RuntimeError: Timed out waiting 60000ms for recv (in rank 1); why: every rank")
    assert "/build" not in line and len(line) <= 400 and line.endswith("rank…")
    # learner s12r4e, lab 06 exercise 1: a message that names its rank gets no "(in rank 1)" after its advice
    named = last_line(RankError(1, "RuntimeError: deadlock: rank 1 waited 10 s in a send: wait for both", "Traceback"))
    assert named == "RuntimeError: deadlock: rank 1 waited 10 s in a send: wait for both", named
    other = last_line(RankError(1, "RuntimeError: rank 10 sends to rank 2", "Traceback"))
    assert other.endswith("(in rank 1)"), other


def test_the_reference_is_computed_once_per_inputs_and_a_judge_cannot_change_it():
    calls = []

    def expected(inputs):
        calls.append(inputs)
        return [inputs["n"], inputs["n"] + 1]

    def judge(got, reference, inputs):
        if got == "vandal":
            reference[0] = -1
        return float(got == reference), ""

    exercise = exercises.core.Exercise("99", "cache_probe", lambda rng: {"n": rng.randint(0, 9)}, None, expected,
                                       judge, "")
    assert [exercise.score(got, {"n": 3})[0] for got in ([3, 4], "vandal", [3, 4], [3, 4])] == [1.0, 0.0, 1.0, 1.0]
    assert exercise.score([5, 6], {"n": 5})[0] == 1.0 and exercise.score([3, 4], {"n": 4})[0] == 0.0
    assert calls == [{"n": 3}, {"n": 5}, {"n": 4}]
    import numpy as np  # inputs that are not plain data are never cached (a repr could elide the middle of an array)
    assert [exercise.score([7, 8], {"n": np.int64(7)})[0] for _ in range(2)] == [1.0, 1.0] and len(calls) == 5


def test_check_prints_its_line_even_when_a_print_follows_it_in_the_cell(capsys):
    """A learner's `check(f)` followed by `print(...)` in one cell: the PASS/FAIL line is printed, once."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.user_ns["check"] = check
        shell.user_ns["wrong"] = median_time_mean
        shell.run_cell("check(wrong)\nprint('after')")
        shell.run_cell("check(wrong)")  # the cell's last expression: printed by check, not displayed a second time
    finally:
        InteractiveShell.clear_instance()  # later tests in this process expect no IPython
    printed = capsys.readouterr().out
    assert printed.count("FAIL  median_time") == 2, printed
    assert "after" in printed
    assert max(len(line) for line in printed.splitlines()) <= 100, printed  # wrapped: learners read 200-character lines


def test_check_prints_a_long_message_wrapped_at_100_columns_its_words_whole(capsys):
    """Learners (issue 51): PASS lines of 120-200 characters; the line is wrapped, its later lines indented."""
    import lab_utils.exercises.core as core

    long = core.CheckResult("exchange_halo", True, "every rank's slab with its halo equals the zero-padded whole "
                            "image's rows, on 2 and 3 ranks and heights they do not divide; convolved, it equals the "
                            "unsplit convolution within 1e-5")
    original = core._checked
    core._checked = lambda answer, seed: long
    try:
        assert check(median_time_mean) is long
    finally:
        core._checked = original
    printed = capsys.readouterr().out
    assert printed.startswith("PASS  exchange_halo: every rank's slab") and "\n    " in printed
    assert max(len(line) for line in printed.splitlines()) <= 100
    assert " ".join(printed.split()) == " ".join(repr(long).split())  # the same words


def test_gather_that_never_moves_the_outputs_to_the_device_fails_even_on_a_cpu():
    @named("gather")
    def gather(outputs, device):
        return torch.cat(outputs)  # each output stays on the device that computed it

    @named("gather")
    def gather_moved_after(outputs, device):
        return torch.cat(outputs).to(device)

    for wrong in (gather, gather_moved_after):
        result = check(wrong)
        assert not result.passed and "two devices" in result.message and "out.to(device)" in result.message, result


def test_lab_05_replica_step_hint_fits_each_mistake_its_judge_names():
    """Learner s8: 'the weights did not change: apply the gradients' was followed by the hint 'scale the per-example
    losses', which fits another mistake; the hint names the step's three parts."""
    from lab_utils import exercises
    hint = exercises.get("replica_step").hint
    assert all(part in hint for part in ("logits", "GLOBAL batch", "gradients", "applied"))


def _solution_bodies() -> dict[str, str]:
    """Each exercise's solution body (between BEGIN and END SOLUTION) in the solution notebooks, by function name."""
    import json
    import re
    from pathlib import Path

    bodies = {}
    for notebook in sorted((Path(__file__).resolve().parents[1] / "solutions").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            source = "".join(cell["source"])
            name = re.search(r"def (\w+)\(", source)
            if "### BEGIN SOLUTION" in source and name:
                bodies[name.group(1)] = source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
    return bodies


def _code_lines(body: str) -> list[str]:
    """The solution's lines a hint must not print: statements, not a bare API call such as optimizer.step()."""
    import re

    return [line.strip() for line in body.splitlines()
            if len(line.strip()) > 12 and not re.fullmatch(r"[\w.]+\(\)", line.strip())]


def test_no_hint_prints_a_line_of_its_solution():
    """A learner who asks for a hint after a wrong first try gets the idea (what, which API, which pitfall), never the
    solution's code."""
    bodies = _solution_bodies()
    assert {"median_time", "one_off_cost", "speedup_verdict", "efficiency", "throughput"} <= set(bodies)
    for name, exercise in exercises.REGISTRY.items():
        leaked = [line for line in _code_lines(bodies.get(name, "")) if line in exercise.hint]
        assert not leaked, f"{name}'s hint prints its solution: {leaked}"


def test_lab_00_and_01_hints_name_no_formula_of_the_answer():
    """The hints of labs 00 and 01 point at the idea: no assignment or return of the answer's formula."""
    for exercise in exercises.for_lab("00") + exercises.for_lab("01"):
        assert exercise.hint and " = " not in exercise.hint and "return cold" not in exercise.hint, exercise.hint
        assert "/ many_threads_s" not in exercise.hint and "statistics.median(" not in exercise.hint, exercise.hint
