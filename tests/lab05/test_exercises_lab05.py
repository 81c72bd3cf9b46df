"""Lab 05's exercises in a TensorFlow process (2 logical CPU replicas): the solutions pass and get full marks; each
plausible wrong answer fails its self-check and scores 0 (or the partial credit named).

Everything runs in tests/lab05/conftest.py's one TensorFlow process (shared with test_tf.py). The replica step runs in
2 MultiWorkerMirroredStrategy worker processes, in one launch (test_tf.py's worker jobs are in it too) whose jobs are
the wrong answers and the notebook's solution on the judges' draw, each job what the grader's and the self-check's
`run` launches (replica_step_worker in WORKERS workers, read by step_answer), scored by the same judge. (The
solution's `check` passing is nbval's: the notebook's cell runs check(replica_step) and its PASS line is a checked
output; the "Hint:" a failing check adds is tests/test_exercises.py's.)"""

import pytest
from test_judges import JUDGED_WITH_TENSORFLOW, seeds

from lab_utils import exercises

# the script of tests/lab05/conftest.py runs every check, judge and launch of this file (and test_tf.py's) in one
# TensorFlow process: minutes on a loaded machine
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def results(lab05_tf):
    return lab05_tf["exercises"]


@pytest.mark.slow
@pytest.mark.parametrize("label", ["batch ok", "local ok", "step ok"])
def test_solutions_pass_and_get_full_marks(results, label):
    """(The replica step: the notebook's solution, launched as the grader's run launches it, on the judges' draw.)"""
    assert results[label]["passed"] and results[label]["grade"] == 1.0, results[label]


@pytest.mark.slow
@pytest.mark.parametrize("name", JUDGED_WITH_TENSORFLOW)
def test_forged_empty_nan_and_constant_answers_score_zero(results, name):
    """tests/test_judges.py's judge of every exercise, on lab 05's draws made in this file's TensorFlow process."""
    draws = [(inputs, got) for inputs, got in results["draws"][name]]
    assert draws and len(draws) == len(seeds(exercises.get(name)))
    assert results["forgeries"][name] == "all scored 0"  # assert_forgeries_score_zero, run in that process


@pytest.mark.parametrize("label, grade, says", [
    ("batch float", 0.0, "return an int"), ("batch times", 0.0, "not multiplied"),
    ("batch no error", 0.5, "raise ValueError"), ("local tensors", 0.5, ".numpy()"),
    ("local reversed", 0.0, "in reverse order"), ("local .values", 0.0, "on one replica (the default strategy)"), ("step mean", 0.0, "2x too large"), ("step sum", 0.0, "GLOBAL batch"),
    ("step no apply", 0.0, "did not change"), ("step mean / global", 0.0, "GLOBAL batch"),
    ("step no logits", 0.0, "from_logits=True"),
    ("step no global batch", 0.0, "wrong on a short last batch"),
    ("step keras default", 0.0, "wrong on a short last batch")])
@pytest.mark.slow
def test_wrong_answers_fail_with_their_hint(results, label, grade, says):
    assert not results[label]["passed"] and results[label]["grade"] == grade, results[label]
    assert says in results[label]["message"], results[label]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("label", ["step keras default", "step no global batch"])
def test_a_slice_size_divisor_is_right_on_the_full_batch_and_fails_only_on_the_short_one(results, label):
    """Keras 3's default reduction (slice mean / num_replicas_in_sync) and compute_average_loss without
    global_batch_size equal one device on even slices (section 3): the check fails them on its short last batch only."""
    outcome = results[label]
    assert "right on a full global batch" in outcome["message"] and "global_batch_size=global_batch" in outcome["message"]


def test_an_assert_instead_of_a_value_error_is_named():
    """Learner s8d: `assert global_batch % replicas == 0` got only 'raise a ValueError whose message names ...'."""
    from lab_utils.labs.lab05.exercises import _batch_expected, _batch_judge, _batch_run

    def per_replica_batch(global_batch, replicas):
        assert global_batch % replicas == 0, f"{global_batch} does not split over {replicas}"
        return global_batch // replicas

    case = {"even": [[8, 2], [12, 3]], "uneven": [9, 2]}
    grade, said = _batch_judge(_batch_run(per_replica_batch, case), _batch_expected(case), case)
    assert grade == 0.5 and "raised AssertionError" in said and "raise ValueError" in said


def test_len_of_the_labels_in_the_replica_step_is_told_as_the_local_batch_mistake():
    """learner s9e: `tf.reduce_sum(per_example) / len(labels)` met TensorFlow's own error about symbolic tensors."""
    from lab_utils.labs.lab05.exercises import len_named

    def replica_step(model, optimizer, images, labels, global_batch):
        raise TypeError("len is not well defined for a symbolic Tensor (labels:0). Please call `x.shape` rather "
                        "than `len(x)` for shape information.")

    with pytest.raises(TypeError, match=r"len\(\) of a tensor inside the replica step.*GLOBAL batch"):
        len_named(replica_step)(None, None, None, None, 16)

    def other(model, optimizer, images, labels, global_batch):
        raise TypeError("unsupported operand")

    with pytest.raises(TypeError, match="^unsupported operand$"):  # any other TypeError passes through as it was
        len_named(other)(None, None, None, None, 16)


def test_a_value_error_that_names_both_numbers_but_no_fix_is_told_to_say_the_fix():
    """Learner s12r3e, lab 05 exercise 1: the exercise asks the message to say how to fix it; that part passed unchecked."""
    from lab_utils.labs.lab05.exercises import _batch_expected, _batch_judge, _batch_run

    def no_fix(global_batch, replicas):
        if global_batch % replicas:
            raise ValueError(f"a global batch of {global_batch} does not split evenly over {replicas} replicas")
        return global_batch // replicas

    case = {"even": [[8, 2], [12, 3]], "uneven": [9, 2]}
    grade, said = _batch_judge(_batch_run(no_fix, case), _batch_expected(case), case)
    assert grade == 0.5 and "not how to fix it" in said, said
    for fix in ("use a multiple of {r}", "make it divisible by {r}", "try {g1} instead", "use {g1}"):
        def fixed(global_batch, replicas, fix=fix):
            if global_batch % replicas:
                raise ValueError(f"global batch {global_batch} over {replicas} replicas: " +
                                 fix.format(r=replicas, g1=global_batch + 1))
            return global_batch // replicas

        assert _batch_judge(_batch_run(fixed, case), _batch_expected(case), case)[0] == 1.0, fix


def test_the_batch_judge_names_its_mistakes_so_no_hint_repeats_them():
    """Issue 51 (lab 00's rule): a named mistake's message gets no 'Hint:'; the generic one keeps it."""
    from lab_utils.exercises.core import Named
    from lab_utils.labs.lab05.exercises import _batch_expected, _batch_judge, _batch_run

    case = {"even": [[8, 2], [12, 3]], "uneven": [9, 2]}
    _, floats = _batch_judge(_batch_run(lambda g, r: g / r, case), _batch_expected(case), case)
    assert isinstance(floats, Named) and "return an int" in floats
    _, wrong = _batch_judge(_batch_run(lambda g, r: g // r + 1, case), _batch_expected(case), case)
    assert not isinstance(wrong, Named) and "should give" in wrong


def test_swapped_arguments_are_named():
    """Learner s13r5e, lab 05 Ex 1: `replicas // global_batch` got 'should give [...], got [0, 0, 0, 0]' and a hint
    that did not mention the order."""
    from lab_utils.labs.lab05.exercises import _batch_expected, _batch_judge, _batch_run

    def per_replica_batch(global_batch, replicas):
        return replicas // global_batch

    case = {"even": [[8, 2], [12, 3]], "uneven": [9, 2]}
    grade, said = _batch_judge(_batch_run(per_replica_batch, case), _batch_expected(case), case)
    assert grade == 0.0 and "the arguments are swapped" in said and "global_batch // replicas" in said


def test_a_reduced_value_is_told_as_combining_the_replicas():
    """Learner s13r5e, lab 05 Ex 2: strategy.reduce(SUM, ...) got only 'expected 2 values (one per replica), got 1'."""
    from lab_utils.labs.lab05.exercises import _local_judge

    right = {"replicas": 2, "type": "list", "types": ["ndarray"] * 2, "values": [[1.0], [2.0]], "single": [[1.0]]}
    got = {**right, "values": [[3.0]]}
    grade, said = _local_judge(got, right, {})
    assert grade == 0.0 and "strategy.reduce combines the replicas into one" in said


def test_local_values_in_reverse_order_are_named_as_reversed():
    """Learner s13r6e, lab 05 Ex 2: the reversed list got the generic 'not ... in replica order'."""
    from lab_utils.labs.lab05 import exercises as lab05_exercises

    case = {"scale": 10.0, "offset": 1.0, "size": 3}
    expected = lab05_exercises._local_expected(case)
    backwards = dict(expected, values=expected["values"][::-1])
    grade, message = lab05_exercises._local_judge(backwards, expected, case)
    assert grade == 0.0 and "in reverse order" in message, message
    wrong = dict(expected, values=[[0.0] * 3, [5.0] * 3])
    assert "in reverse order" not in lab05_exercises._local_judge(wrong, expected, case)[1]
