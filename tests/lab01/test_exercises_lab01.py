"""Lab 01's train_step and top_self_cpu_op: wrong answers found by a new learner get a hint that names their own
mistake (not another one), and score 0."""

import statistics

import pytest
import torch.nn.functional as F

from lab_utils.exercises import check
from answers import grade


def _step(loss_of):
    def train_step(model, x, y, optimizer):
        optimizer.zero_grad()
        loss = loss_of(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return train_step


NLL_ON_LOGITS = _step(lambda logits, y: F.nll_loss(logits, y))
SOFTMAX_FIRST = _step(lambda logits, y: F.cross_entropy(F.softmax(logits, dim=1), y))
SUMMED = _step(lambda logits, y: F.cross_entropy(logits, y, reduction="sum"))


@pytest.mark.parametrize("wrong, named", [(NLL_ON_LOGITS, "nll_loss expects log-probabilities"),
                                          (SOFTMAX_FIRST, "a softmax before F.cross_entropy"),
                                          (SUMMED, "reduction='sum'")], ids=["nll_loss", "softmax", "summed"])
def test_a_wrong_loss_is_named(wrong, named):
    result = check(wrong)
    assert not result.passed and named in result.message, result.message
    assert grade(wrong)[0] == 0.0


def top_self_cpu_op_most_calls(prof):
    return max(prof.key_averages(), key=lambda e: e.count).key


top_self_cpu_op_most_calls.__name__ = top_self_cpu_op_most_calls.__qualname__ = "top_self_cpu_op"


def test_ranking_by_call_count_is_named_as_such_not_as_total_time():
    result = check(top_self_cpu_op_most_calls)
    assert not result.passed and "called most often" in result.message, result.message
    assert "largest *total*" not in result.message
    for seed in (1, 2, 3):
        fraction, message = grade(top_self_cpu_op_most_calls, seed)
        assert fraction == 0.0 and "called most often" in message, message


def top_self_cpu_op_first_row(prof):
    return prof.key_averages()[0].key


def top_self_cpu_op_minimum(prof):
    return min(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key


def top_self_cpu_op_aten_only(prof):
    return max((e for e in prof.key_averages() if e.key.startswith("aten::")), key=lambda e: e.self_cpu_time_total).key


def top_self_cpu_op_single_call(prof):
    return max(prof.events(), key=lambda e: e.self_cpu_time_total).key  # one call, not the operator's sum


def top_self_cpu_op_per_call(prof):
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total / e.count).key  # a learner's: time per call


def top_self_cpu_op_from_events(prof):
    return max(prof.events().key_averages(), key=lambda e: e.self_cpu_time_total).key  # right on a real profile too


for _fn in (top_self_cpu_op_first_row, top_self_cpu_op_minimum, top_self_cpu_op_aten_only,
            top_self_cpu_op_single_call, top_self_cpu_op_per_call, top_self_cpu_op_from_events):
    _fn.__name__ = _fn.__qualname__ = "top_self_cpu_op"


@pytest.mark.parametrize("wrong, named", [(top_self_cpu_op_first_row, "the first entry of key_averages()"),
                                          (top_self_cpu_op_minimum, "the smallest self CPU time"),
                                          (top_self_cpu_op_aten_only, "aten:: operators only"),
                                          (top_self_cpu_op_single_call, "the largest single call"),
                                          (top_self_cpu_op_per_call, "time per call")],
                         ids=["first-row", "minimum", "aten-only", "single-call", "per-call"])
def test_each_profile_mistake_gets_its_own_hint(wrong, named):
    for seed in (None, 1, 2, 3, 15, 97):  # drew profiles where two mistakes picked the same operator everywhere
        result = check(wrong) if seed is None else None
        fraction, message = (result.details["fraction"], result.message) if result else grade(wrong, seed)
        assert fraction == 0.0 and named in message, message
        assert "called most often" not in message and "*total*" not in message, message


def test_a_profile_read_through_events_works_as_on_a_real_profiler():
    assert check(top_self_cpu_op_from_events).passed
    assert grade(top_self_cpu_op_from_events)[0] == 1.0


def throughput_one_step_too_many(batch_size, step_times, warmup):
    return batch_size / statistics.median(step_times[warmup + 1:])


def throughput_last_steps_dropped(batch_size, step_times, warmup):
    return batch_size / statistics.median(step_times[:-warmup])


def throughput_median_low(batch_size, step_times, warmup):
    return batch_size / statistics.median_low(step_times[warmup:])


def throughput_median_seconds(batch_size, step_times, warmup):
    return statistics.median(step_times[warmup:])  # a learner's: the time, not the rate


def throughput_times_batch(batch_size, step_times, warmup):
    return batch_size * statistics.median(step_times[warmup:])


def throughput_one_step_too_few(batch_size, step_times, warmup):
    return batch_size / statistics.median(step_times[warmup - 1:])  # learner s15r9a's: keeps the last warm-up step


for _fn in (throughput_one_step_too_many, throughput_one_step_too_few, throughput_last_steps_dropped, throughput_median_low,
            throughput_median_seconds, throughput_times_batch):
    _fn.__name__ = _fn.__qualname__ = "throughput"


@pytest.mark.parametrize("wrong, named", [(throughput_one_step_too_many, "one step too many dropped"),
                                          (throughput_last_steps_dropped, "the last `warmup` steps dropped"),
                                          (throughput_median_low, "statistics.median_low"),
                                          (throughput_median_seconds, "the median step time in seconds, not a rate"),
                                          (throughput_times_batch, "the batch size times the median step time")],
                         ids=["warmup+1", "last-dropped", "median_low", "seconds", "times-batch"])
def test_each_throughput_slip_is_named(wrong, named):
    result = check(wrong)
    assert not result.passed and named in result.message, result.message
    assert "Hint:" not in result.message  # learner s13r5a: the recipe's hint repeated after a named mistake
    assert grade(wrong)[0] == 0.0


def throughput_upper_median(batch_size, step_times, warmup):
    steps = sorted(step_times[warmup:])
    return batch_size / steps[len(steps) // 2]  # learner s8c's: the upper of the two middle steps


throughput_upper_median.__name__ = throughput_upper_median.__qualname__ = "throughput"


@pytest.mark.parametrize("wrong, named", [(throughput_upper_median, "the upper of the two middle steps"),
                                          (throughput_one_step_too_many, "one step too many dropped"),
                                          (throughput_median_low, "statistics.median_low"),
                                          # learner s15r9a: [warmup - 1:] was told 'one step too many dropped'
                                          (throughput_one_step_too_few, "step_times[warmup - 1:] keeps the last")],
                         ids=["upper-median", "warmup+1", "median_low", "warmup-1"])
def test_a_median_slip_is_named_as_such_whatever_the_cases(wrong, named):
    # learner s8c: sorted(t)[n // 2] was told 'one step too many dropped' (dropping the first steady step can leave
    # the upper middle one as the median); every seed's cases must tell the three apart
    for seed in (None, 1, 2, 3, 7, 15, 42, 97, 12345):
        result = check(wrong) if seed is None else None
        fraction, message = (result.details["fraction"], result.message) if result else grade(wrong, seed)
        assert fraction == 0.0 and named in message, (seed, message)


def zero_grad_between_backward_and_step(model, x, y, optimizer):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # throws the gradients away before the step
    optimizer.step()
    return loss.detach()


zero_grad_between_backward_and_step.__name__ = zero_grad_between_backward_and_step.__qualname__ = "train_step"


def no_step(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach()


no_step.__name__ = no_step.__qualname__ = "train_step"


def test_zero_grad_between_backward_and_step_is_named_not_told_to_call_step():
    """Learner s9d: it got the 'no step' message, which opens with 'call optimizer.step()' (it was called)."""
    result = check(zero_grad_between_backward_and_step)
    assert not result.passed and "between loss.backward() and optimizer.step()" in result.message, result.message
    assert "call optimizer.step()" not in result.message
    # learner s12r3a, finding 7: the order it asks for is the exercise's ("anywhere before the backward pass")
    assert "before the forward pass" not in result.message and "before loss.backward()" in result.message
    missing = check(no_step)
    assert not missing.passed and "call optimizer.step()" in missing.message, missing.message
    assert "gradients your backward pass computed were gone" not in missing.message
    assert "zero" not in missing.message  # learner s12r3a: a clause about zeroing that does not apply here


def throughput_mean_step(batch_size, step_times, warmup):
    return batch_size / statistics.mean(step_times[warmup:])


throughput_mean_step.__name__ = throughput_mean_step.__qualname__ = "throughput"


def test_a_rate_from_the_mean_step_says_the_slow_step_pulls_the_rate_down():
    """Learner s10i: 'the mean step time (one slow step pulls it down)' read as muddled for a rate."""
    result = check(throughput_mean_step)
    assert not result.passed, result.message
    assert "pulls the mean time up, and so the rate down" in result.message, result.message
    assert grade(throughput_mean_step)[0] == 0.0


def no_zero_grad(model, x, y, optimizer):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


no_zero_grad.__name__ = no_zero_grad.__qualname__ = "train_step"


def test_a_train_step_message_that_names_the_mistake_gets_no_hint_repeating_the_recipe():
    """Learner s12r3a, lab 01 T4/T8: 'call optimizer.step() after loss.backward()' then a Hint with the whole order."""
    for wrong, said in ((no_step, "call optimizer.step() after loss.backward()"),
                        (zero_grad_between_backward_and_step, "between loss.backward() and optimizer.step()"),
                        (no_zero_grad, "gradients add up across backward() calls")):
        result = check(wrong)
        assert not result.passed and said in result.message and "Hint:" not in result.message, result.message


def _run_use_cell(throughput):
    """Lab 01's use cell of throughput on a training run of 217 timed steps (odd, as in the quiet run)."""
    import io
    from contextlib import redirect_stdout
    from pathlib import Path

    import nbformat

    from lab_utils import measure
    from lab_utils.exercises import passes

    notebook = Path(__file__).parents[2] / "solutions" / "01_single_device_cnn.ipynb"
    source = next(c.source for c in nbformat.read(notebook, 4).cells
                  if c.cell_type == "code" and "your throughput of the training run" in c.source)
    steps = [0.01, 0.005, 0.003] + [0.001 + i * 1e-6 for i in range(217)]
    history = type("History", (), {"batch_size": 64, "step_seconds": steps, "warmup_steps": 3, "timed_steps": 217,
                                    "samples_per_s": 64 / statistics.median(steps[3:])})()
    names = {"throughput": throughput, "history": history, "passes": passes, "measure": measure}
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(source, "lab 01 throughput use cell", "exec"), names)
    return out.getvalue()


def test_the_use_cell_agrees_with_the_self_check():
    """Learner s12r4a, lab 01 finding 6: the median of per-step rates FAILed its self-check, and the next cell printed
    'equals the training rate above: True' (217 timed steps: odd, so the two medians coincide)."""
    def throughput(batch_size, step_times, warmup):
        return statistics.median(batch_size / t for t in step_times[warmup:])

    said = _run_use_cell(throughput)
    assert not check(throughput).passed
    assert "True" not in said and "failed its self-check" in said and "217 timed steps" in said, said

    def throughput(batch_size, step_times, warmup):  # noqa: F811 -- the right answer
        return batch_size / statistics.median(step_times[warmup:])

    assert _run_use_cell(throughput).strip().endswith("equals the training rate above: True")


# ---- efficiency (learner s12r4a, lab 01 'make it a 5': an exercise on the reference workload itself) ---------------

def _efficiency(rule):
    rule.__name__ = rule.__qualname__ = "efficiency"
    return rule


@pytest.mark.parametrize("wrong, named", [
    (lambda one, many, n: one / many, "not divided by the threads"),
    (lambda one, many, n: many / one / n, "upside down"),
    (lambda one, many, n: 100 * one / many / n, "a percentage"),
    (lambda one, many, n: one / many / (n - 1), "threads - 1"),
    (lambda one, many, n: (one / many - 1) / n, "the speedup minus 1"),
    (lambda one, many, n: min(one / many / n, 1.0), "clamped at 1.0"),
    # learner s15r9a: round(x, 2) got the hint about a ratio upside down
    (lambda one, many, n: round(one / many / n, 2), "the right efficiency rounded to 2 decimal places"),
    (lambda one, many, n: round(one / many / n, 3), "the right efficiency rounded to 3 decimal places"),
], ids=["speedup", "inverted", "percent", "n-1", "gain", "clamped", "rounded-2", "rounded-3"])
def test_a_wrong_efficiency_is_named(wrong, named):
    result = check(_efficiency(wrong))
    assert not result.passed and named in result.message and "Hint" not in result.message, result.message
    assert grade(_efficiency(wrong))[0] == 0.0


def test_the_efficiency_use_cell_reads_the_self_check_and_the_reference_s_refusal():
    import io
    from contextlib import redirect_stdout
    from pathlib import Path

    import nbformat

    from lab_utils import measure
    from lab_utils.exercises import passes
    from lab_utils.labs.lab01 import reports
    from lab_utils.measure.timing import Timing

    right = _efficiency(lambda one, many, n: one / many / n)
    assert check(right).passed and grade(right)[0] == 1.0
    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "01_single_device_cnn.ipynb", 4).cells
    source = next(c.source for c in cells if c.cell_type == "code" and "by your efficiency" in c.source)
    timings = {"1 process x 1 thread": Timing(times=[0.040] * 3, warmup=3),
               "1 process x 2 threads": Timing(times=[0.0228] * 3, warmup=3)}
    threads = {"1 process x 1 thread": 1, "1 process x 2 threads": 2}

    def said(answer, threads_line="1.75x, within"):
        report = reports.ReferenceReport([], {}, "1 process x 2 threads", threads_line)
        out = io.StringIO()
        with redirect_stdout(out):
            exec(source, {"efficiency": answer, "passes": passes, "measure": measure, "reference": report, "reports": reports,
                          "ref_timings": timings, "ref_threads": threads})
        return out.getvalue()

    assert "by your efficiency: 88% on 2 threads" in said(right)
    assert "within the predicted efficiency of 50%-100% (a speedup above 1x, at most 2x)" in said(right).replace("\n    ", " ")
    assert "failed its self-check" in said(_efficiency(lambda one, many, n: one / many))
    refused = f"{measure.NOT_MEASURABLE}: other programs used 1.2 of 2 cores while this measured"
    assert "ruled the threads' ratio out" in said(right, refused), said(right, refused)


def test_a_float_loss_passes_as_the_exercise_text_now_says():
    """Learner s12r4a, lab 01 finding 14: loss.item() passed while the text asked for a detached loss; the text now
    names both (a detached tensor, or the float loss.item()), and the check keeps accepting both."""
    from pathlib import Path

    import nbformat

    def train_step(model, x, y, optimizer):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    assert check(train_step).passed
    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "01_single_device_cnn.ipynb", 4).cells
    text = " ".join(next(c.source for c in cells if "### Exercise 1 — the training step" in c.source).split())
    assert "`loss.detach()`, or the float `loss.item()`" in text


def test_the_use_cell_of_an_unwritten_throughput_does_not_raise():
    """The student notebook's stub raises NotImplementedError: its use cell asks the self-check first, so it says
    'failed its self-check' instead of a traceback."""
    def throughput(batch_size, step_times, warmup):
        raise NotImplementedError("Exercise: write your solution here, then run the self-check below.")

    assert "failed its self-check" in _run_use_cell(throughput)


def test_the_efficiency_is_read_against_the_predictions_bounds_not_lab_00s_mark():
    """Learner s13r5a, lab 01 finding 3: Exercise 4's bounds (50-100 %, from 'faster than one thread') and Lab 00's
    [!] below 0.50x (25 %) were never told apart, and the lab never said the bounds after the prediction."""
    from pathlib import Path

    import nbformat

    from lab_utils.labs.lab01 import reports

    assert reports.efficiency_against_prediction(0.87, 2) == "within the predicted efficiency of 50%-100% (a speedup above 1x, at most 2x)"
    assert reports.efficiency_against_prediction(0.40, 2).startswith("below the predicted efficiency of 50%-100%")  # slower: not predicted
    assert reports.efficiency_against_prediction(1.04, 2).startswith("above the predicted efficiency of 50%-100%")
    assert reports.efficiency_against_prediction(0.30, 4).startswith("within the predicted efficiency of 25%-100%")
    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "01_single_device_cnn.ipynb", 4).cells
    prose = " ".join(next(c.source for c in cells if c.source.startswith("### Exercise 4")).split())
    # learner s13r6a, lab 01 finding 1: '0.50x' (a speedup) and '50 %' (an efficiency) read as one bound; the prose
    # names each quantity beside its digits
    assert "Lab 00's `[!]` is another rule, about impossible figures" in prose
    assert "a *speedup* below 0.50x, which is an *efficiency* below 25 %" in prose


def test_a_mean_throughput_is_named_without_the_recipes_hint():
    """Learner s13r5a, lab 01 Ex2: every message ended with the same 'Hint: drop the warm-up steps, then divide...',
    even where the only mistake was the mean; a named mistake now stands alone."""
    def throughput(batch_size, step_times, warmup):
        return batch_size / statistics.mean(step_times[warmup:])

    result = check(throughput)
    assert not result.passed and "the batch over the mean step time" in result.message, result.message
    assert "Hint:" not in result.message, result.message


def test_all_samples_over_all_the_time_is_named_as_what_the_learner_wrote():
    """Learner s13r6a, lab 01 Ex2: total samples / total time was caught as 'the batch over the mean step time', true
    (the two are equal) but not what they wrote; the message now names both forms."""
    def throughput(batch_size, step_times, warmup):
        timed = step_times[warmup:]
        return batch_size * len(timed) / sum(timed)

    result = check(throughput)
    assert not result.passed and "all samples over all the time" in result.message, result.message
    assert "Hint:" not in result.message, result.message


def test_the_profile_use_cell_reads_the_self_check_first():
    """Learner s13r7a, lab 01 finding 1: the follow-up of exercise 3 printed a wrong answer's operator (total time,
    first row, smallest) as 'the operator with the largest self CPU time here', right under its FAIL."""
    import io
    from contextlib import redirect_stdout
    from pathlib import Path

    import nbformat

    from lab_utils.exercises import passes

    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "01_single_device_cnn.ipynb", 4).cells
    source = next(c.source for c in cells if c.cell_type == "code" and "largest self CPU time here" in c.source)
    profile = object()  # never read by a wrong answer: the cell must refuse it before calling it

    def said(answer):
        out = io.StringIO()
        with redirect_stdout(out):
            exec(source, {"top_self_cpu_op": answer, "passes": passes, "prof": profile})
        return out.getvalue()

    def total_time(prof):
        return max(prof.key_averages(), key=lambda e: e.cpu_time_total).key

    def entry(prof):
        return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total)

    for wrong in (total_time, entry, top_self_cpu_op_first_row, top_self_cpu_op_minimum):
        wrong.__name__ = wrong.__qualname__ = "top_self_cpu_op"
        assert not check(wrong).passed
        text = said(wrong)
        assert "failed its self-check" in text and "time here:" not in text, text

    def right(prof):
        return "aten::convolution_backward" if prof is profile else \
            max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key

    right.__name__ = right.__qualname__ = "top_self_cpu_op"
    assert said(right).strip() == "the operator with the largest self CPU time here: aten::convolution_backward"
