"""Lab 08's exercises: each solution passes its self-check and scores 1; each classic wrong answer fails and scores 0."""
import random

import pytest
import torch

from lab_utils.exercises import check, get, to_plain
from lab_utils.labs.lab08 import exercises as lab08
from lab_utils.labs.lab08 import lesson as lesson08
from lab_utils.variants import variant
from test_judges import solution_function


def score(fn, seed=1):
    exercise = get(fn.__name__)
    inputs = exercise.cases(random.Random(seed))
    return exercise.score(to_plain(exercise.run(fn, inputs)), inputs)


def assert_right(fn):
    result = check(fn)
    assert result, result
    assert score(fn)[0] == 1.0


def assert_wrong(fn, words):
    result = check(fn)
    assert not result and words in result.message, result
    # the grader's judge: on the self-check's own draw for an in-rank answer (one launch, not two)
    assert (result.details.get("fraction", 0.0) if get(fn.__name__).ranks else score(fn)[0]) == 0.0


# ---- average_and_apply (one launch of a real parameter server per check: 3, then 4 workers) ---------------------

def test_average_and_apply_solution():
    assert_right(solution_function(get("average_and_apply")))  # the solution notebook's


def test_average_and_apply_in_arrival_order_fails_with_the_order_named():
    # learner s5B: the mean over gradients.values() (arrival order) passed although the text asks for rank order
    def average_and_apply(weights, optimizer, gradients):
        weights.grad = sum(gradients.values()) / len(gradients)
        optimizer.step()
    assert_wrong(average_and_apply, "summed in the order they arrived")


def test_average_and_apply_sum():
    def average_and_apply(weights, optimizer, gradients):
        weights.grad = sum(gradients.values())
        optimizer.step()
    assert_wrong(average_and_apply, "SUM")


def test_average_and_apply_one_worker():
    def average_and_apply(weights, optimizer, gradients):
        weights.grad = gradients[min(gradients)]
        optimizer.step()
    assert_wrong(average_and_apply, "only one worker")


def test_average_and_apply_steps_per_gradient():
    def average_and_apply(weights, optimizer, gradients):
        for w in sorted(gradients):
            weights.grad = gradients[w]
            optimizer.step()
    assert_wrong(average_and_apply, "once per gradient")


def test_average_and_apply_accumulates():
    def average_and_apply(weights, optimizer, gradients):
        mean = sum(gradients.values()) / len(gradients)
        weights.grad = mean if weights.grad is None else weights.grad + mean
        optimizer.step()
    assert_wrong(average_and_apply, "pile up")


def test_average_and_apply_zeroing_the_gradient_before_the_step_is_named():
    # learner s7: zero_grad() after setting weights.grad was told to "call optimizer.step()", which it did
    def average_and_apply(weights, optimizer, gradients):
        weights.grad = sum(gradients[w] for w in sorted(gradients)) / len(gradients)
        optimizer.zero_grad()
        optimizer.step()
    assert_wrong(average_and_apply, "never changed: after setting weights.grad, call optimizer.step(), with no "
                                    "optimizer.zero_grad() in between")


def test_average_and_apply_one_step_per_worker_with_its_share_is_named():
    # learner s7: one optimizer.step() per worker, each with gradient / n, got the generic "weights differ" message
    def average_and_apply(weights, optimizer, gradients):
        for w in sorted(gradients):
            weights.grad = gradients[w] / len(gradients)
            optimizer.step()
    assert_wrong(average_and_apply, "once per worker, each with its share")


def test_average_and_apply_divides_by_a_fixed_two():
    def average_and_apply(weights, optimizer, gradients):
        weights.grad = sum(gradients[w] for w in sorted(gradients)) / 2  # the notebook's 2 workers, hard-coded
        optimizer.step()
    assert_wrong(average_and_apply, "fixed 2")


def test_average_and_apply_updates_the_weights_by_hand():
    def average_and_apply(weights, optimizer, gradients):
        with torch.no_grad():
            weights -= optimizer.param_groups[0]["lr"] * sum(gradients.values()) / len(gradients)
    assert_wrong(average_and_apply, "updated them yourself")


def test_average_and_apply_updates_the_weights_by_hand_with_the_notebooks_lr():
    def average_and_apply(weights, optimizer, gradients):
        weights.data -= 0.1 * sum(gradients.values()) / len(gradients)
    assert_wrong(average_and_apply, "updated them yourself")


# ---- staleness_from_order ------------------------------------------------------------------------------------------

def staleness_edited(edits, name):
    """The reference staleness_from_order, edited as a learner might get it wrong."""
    return variant(lesson08.staleness_from_order, edits, name=name, show=False)


def test_staleness_solution():
    assert_right(lesson08.staleness_from_order)


def test_staleness_off_by_one():
    assert_wrong(staleness_edited({"        staleness.append(version - pulled.get(worker, 0))\n        version += 1\n":
                                   "        version += 1\n        staleness.append(version - pulled.get(worker, 0))\n"},
                                  "counted after the update"), "one too large")


def test_staleness_never_pulled():
    def staleness_from_order(order):
        return [version for version, _ in enumerate(order)]
    assert_wrong(staleness_from_order, "since the start")


def test_staleness_pulled_before_update():
    assert_wrong(staleness_edited({"        version += 1\n        pulled[worker] = version\n":
                                   "        pulled[worker] = version\n        version += 1\n"},
                                  "pulled before the update"), "after the counter moves on")
    # learner s10l: the message was correct but hard to parse; it leads with expected and got, as the others do
    assert_wrong(staleness_edited({"        version += 1\n        pulled[worker] = version\n":
                                   "        pulled[worker] = version\n        version += 1\n"},
                                  "pulled before the update"), "expected [")


def test_staleness_counting_positions_is_named():  # learner B kept no versions and got a hint about versions only
    def staleness_from_order(order):
        last = {}
        staleness = []
        for i, worker in enumerate(order):
            staleness.append(i - last.get(worker, 0))
            last[worker] = i
        return staleness
    # learner s13r7g: the tail '(with positions in the order: i - last - 1)' was cryptic; the plain reason stays
    assert_wrong(staleness_from_order, "one too large after a worker's first gradient")
    assert_wrong(staleness_from_order, "the one its own update produced")


# ---- damped_lr -----------------------------------------------------------------------------------------------------

def test_staleness_first_gradient_fresh_and_all_zeros_are_named():
    # learner s5B: both got only "expected [...], got [...]"
    def staleness_from_order(order):
        seen, version, pulled, out = set(), 0, {}, []
        for w in order:
            out.append(0 if w not in seen else version - pulled[w])
            seen.add(w)
            version += 1
            pulled[w] = version
        return out
    assert_wrong(staleness_from_order, "every worker pulls version 0 at the start")

    def staleness_from_order(order):
        return [0] * len(order)
    assert_wrong(staleness_from_order, "got only zeros")


def test_staleness_returned_as_a_tuple_is_named():
    """Learner s12r3g, finding 12: `return tuple(out)` passed, then the lab's `== r["staleness"]` (a list) printed
    False with no explanation."""
    def staleness_from_order(order):
        version, pulled, out = 0, {}, []
        for w in order:
            out.append(version - pulled.get(w, 0))
            version += 1
            pulled[w] = version
        return tuple(out)
    assert_wrong(staleness_from_order, "returned a tuple: return a list")


# ---- damped_lr -----------------------------------------------------------------------------------------------------

def test_damped_lr_solution():
    assert_right(lesson08.damped_lr)


@pytest.mark.parametrize("wrong, words", [
    (lambda base_lr, staleness: base_lr, "base rate"),
    (lambda base_lr, staleness: base_lr / staleness, "divides by zero"),
    (lambda base_lr, staleness: base_lr * (1 + staleness), "grows with staleness"),
    (lambda base_lr, staleness: base_lr / (1 + staleness) ** 2, "square"),
    (lambda base_lr, staleness: base_lr // (staleness + 1), "use /, not //"),  # learner s13r7g: 'got 0' only
    (lambda base_lr, staleness: base_lr / 2 ** staleness, "gives 1/"),
], ids=["ignores staleness", "divides by staleness", "multiplies", "squares", "integer division", "halves"])
def test_damped_lr_wrong(wrong, words):
    wrong.__name__ = "damped_lr"
    assert_wrong(wrong, words)


def test_damped_lr_divided_by_the_staleness_is_named_not_staleness_1():
    # learner s9j: b/s (with staleness 0 kept at the base rate) was told "returned the base rate" at staleness 1
    def damped_lr(base_lr, staleness):
        return base_lr / staleness if staleness else base_lr
    result = check(damped_lr)
    assert not result and "divides by the staleness itself" in result.message, result
    assert "returned the base rate" not in result.message
    assert score(damped_lr)[0] == 0.0


def test_exercises_are_registered_for_lab_08():
    from lab_utils.exercises import for_lab

    assert [e.name for e in for_lab("08")] == ["average_and_apply", "staleness_from_order", "damped_lr"]
    assert get("average_and_apply").ranks == 5  # one launch: a server and up to 4 workers


def test_the_answers_are_not_on_screen_and_the_server_calls_the_courses_rules():
    # learner s10f: exercise 1's answer was a line of `serve` (cell 10), exercise 3's formula was in `serve`, `replay`
    # and the exercise text: the student notebook shows neither; `serve` and `replay` call parameter_server's
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "08_sync_async.ipynb").read_text())
    shown = "\n".join("".join(c["source"]) for c in nb["cells"])
    for answer in ("sorted(gradients)", "sorted(waiting)) /", "1 + staleness", "(1 + s)", "/ (1 +"):
        assert answer not in shown, answer
    import inspect
    assert "parameter_server.average_and_apply(" in inspect.getsource(lesson08.serve)
    assert "parameter_server.damped_lr(" in inspect.getsource(lesson08.serve)
    assert "parameter_server.damped_lr(" in inspect.getsource(lesson08.replay)


def test_the_courses_hidden_rules_pass_the_checks_that_the_learner_faces():
    from lab_utils.labs.lab08 import parameter_server

    assert_right(parameter_server.damped_lr)
    assert_right(parameter_server.average_and_apply)


def test_damped_lr_plausible_readings_of_the_even_share_are_caught():
    # exercise 3's text asks for one fresh step shared evenly over the staleness + 1 updates a gradient spans
    import math

    def damped_lr(base_lr, staleness):
        return base_lr / math.sqrt(1 + staleness)
    assert_wrong(damped_lr, "should be")

    def damped_lr(base_lr, staleness):  # noqa: F811 — the momentum's decay, not an even share
        return base_lr * 0.9 ** staleness
    assert_wrong(damped_lr, "should be")


def test_named_mistakes_get_no_hint_and_the_pass_line_does_not_print_the_formula():
    """Learner s12r4g: every FAIL ended with a 'Hint:' that was nearly the solution, ex 2's 'count since the start'
    and ex 3's '2**s' got messages that restate the rule, and ex 3's PASS line printed base_lr / (1 + staleness)."""
    def staleness_from_order(order):  # the other workers' gradients since the start, no pulls
        return [sum(1 for v in order[:i] if v != w) for i, w in enumerate(order)]
    assert_wrong(staleness_from_order, "counts the other workers' gradients since the start")
    assert "Hint" not in check(staleness_from_order).message

    def damped_lr(base_lr, staleness):
        return base_lr / 2 ** staleness
    assert_wrong(damped_lr, "halves the rate for every version of staleness")
    assert "Hint" not in check(damped_lr).message

    def damped_lr(base_lr, staleness):  # noqa: F811
        return base_lr / staleness
    said = check(damped_lr).message
    assert "divides by zero" in said and "1 + staleness" not in said and "Hint" not in said
    passed = check(lesson08.damped_lr)
    assert passed and "1 + staleness" not in str(passed) and "(1 +" not in str(passed), passed

    def damped_lr(base_lr, staleness):  # noqa: F811 — generic: keeps its hint
        return base_lr * 0.9 ** staleness
    assert "Hint" in check(damped_lr).message
