"""Lab 05's exercises in a TensorFlow process of their own (2 logical CPU replicas): the solutions pass and get full
marks; each plausible wrong answer fails its self-check and scores 0 (or the partial credit named).

The replica step runs in 2 MultiWorkerMirroredStrategy worker processes, in two launches in all: one wrong answer
through `check` (the self-check's path: `run`, then `score`), and one launch whose jobs are the other wrong answers and
the notebook's solution on the judges' draw, each job what the grader's `run` launches (replica_step_worker in
WORKERS workers, read by step_answer) and scored by the same judge. (The solution's `check` passing is nbval's: the
notebook's cell runs check(replica_step) and its PASS line is a checked output.)"""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_judges import JUDGED_WITH_TENSORFLOW, assert_forgeries_score_zero, seeds

from lab_utils import exercises

SCRIPT = textwrap.dedent('''
    import json, random, sys
    from lab_utils import tf_distribute
    tf_distribute.configure_devices(2)
    import keras
    import tensorflow as tf
    from lab_utils import exercises
    from lab_utils.exercises import check, to_plain
    from lab_utils.labs.lab05 import exercises as lab05

    def as_(name):
        def rename(fn):
            fn.__name__ = name
            return fn
        return rename

    @as_("per_replica_batch")
    def batch_ok(g, r):
        if g % r:
            raise ValueError(f"a global batch of {g} does not split over {r} replicas; use a multiple of {r}")
        return g // r

    @as_("per_replica_batch")
    def batch_float(g, r):
        return g / r

    @as_("per_replica_batch")
    def batch_times(g, r):
        return g * r

    @as_("per_replica_batch")
    def batch_no_error(g, r):
        return g // r

    @as_("local_values")
    def local_ok(strategy, value):
        return [t.numpy() for t in strategy.experimental_local_results(value)]

    @as_("local_values")
    def local_tensors(strategy, value):
        return list(strategy.experimental_local_results(value))

    @as_("local_values")
    def local_reversed(strategy, value):
        return [t.numpy() for t in reversed(strategy.experimental_local_results(value))]

    def step(scale):
        def replica_step(model, optimizer, images, labels, global_batch):
            loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=scale != "no logits", reduction="none")
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(images, training=True))
                if scale == "keras default":               # Keras 3: mean over the slice / num_replicas_in_sync
                    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, model(images))
                elif scale in ("global", "no logits"):
                    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                elif scale == "mean":                      # a mean over this replica's slice
                    loss = tf.reduce_mean(per_example)
                elif scale == "sum":                       # no scaling at all
                    loss = tf.reduce_sum(per_example)
                else:                                      # "mean / global": scaled twice
                    loss = tf.reduce_mean(per_example) / global_batch
            if scale != "no apply":
                optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return as_("replica_step")(replica_step)

    def graded(fn, seed=99):
        exercise = exercises.get(fn.__name__)
        inputs = exercise.cases(random.Random(seed))
        return exercise.score(to_plain(exercise.run(fn, inputs)), inputs)[0]

    sys.path.insert(0, TESTS)
    from test_judges import JUDGED_WITH_TENSORFLOW, draws, seeds, solution_function

    results = {}
    for label, fn in [("batch ok", batch_ok), ("batch float", batch_float), ("batch times", batch_times),
                      ("batch no error", batch_no_error), ("local ok", local_ok), ("local tensors", local_tensors),
                      ("local reversed", local_reversed)]:
        result = check(fn)
        results[label] = {"passed": result.passed, "message": result.message, "grade": graded(fn)}
    result = check(step("mean"))  # the self-check's own launch: run on the workers, scored, the hint added
    results["step mean, self-check"] = {"passed": result.passed, "message": result.message}
    results["step mean"] = {"passed": result.passed, "message": result.message, "grade": result.details["fraction"]}

    # one launch for the rest of the replica step: each job is what the grader's run launches for one answer
    wrong = {"step sum": step("sum"), "step no apply": step("no apply"), "step mean / global": step("mean / global"),
             "step keras default": step("keras default"), "step no logits": step("no logits")}
    exercise = exercises.get("replica_step")
    case = exercise.cases(random.Random(99))
    solution = solution_function(exercise)  # the notebook's replica_step, as the judges' draws take it
    draw_cases = [exercise.cases(random.Random(seed)) for seed in seeds(exercise)]
    jobs = ([(lab05.replica_step_worker, (fn, case)) for fn in wrong.values()]
            + [(lab05.replica_step_worker, (solution, c)) for c in draw_cases])
    runs = tf_distribute.launch_worker_jobs(jobs, lab05.WORKERS, timeout=300)
    for label, workers in zip(wrong, runs):
        fraction, message = exercise.score(to_plain(lab05.step_answer(workers)), case)
        results[label] = {"passed": fraction >= 1.0, "message": message, "grade": fraction}
    solved = [(c, to_plain(lab05.step_answer(workers))) for c, workers in zip(draw_cases, runs[len(wrong):])]
    fraction, message = exercise.score(solved[0][1], solved[0][0])
    results["step ok"] = {"passed": fraction >= 1.0, "message": message, "grade": fraction}
    # the judges' draws of lab 05's exercises (tests/test_judges.py), from this TensorFlow process
    results["draws"] = {name: solved if name == "replica_step" else draws(name) for name in JUDGED_WITH_TENSORFLOW}
    print(json.dumps(results))
''')


# one TensorFlow process runs every check, judge and launch of this file: 2-3 minutes quiet, more on a loaded machine
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def results():
    script = SCRIPT.replace("TESTS", repr(str(Path(__file__).resolve().parent.parent)))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    assert_forgeries_score_zero(exercises.get(name), draws)


@pytest.mark.parametrize("label, grade, says", [
    ("batch float", 0.0, "return an int"), ("batch times", 0.0, "not multiplied"),
    ("batch no error", 0.5, "raise ValueError"), ("local tensors", 0.5, ".numpy()"),
    ("local reversed", 0.0, "replica order"), ("step mean", 0.0, "2x too large"), ("step sum", 0.0, "GLOBAL batch"),
    ("step no apply", 0.0, "did not change"), ("step mean / global", 0.0, "GLOBAL batch"),
    ("step no logits", 0.0, "from_logits=True")])
@pytest.mark.slow
def test_wrong_answers_fail_with_their_hint(results, label, grade, says):
    assert not results[label]["passed"] and results[label]["grade"] == grade, results[label]
    assert says in results[label]["message"], results[label]["message"]


@pytest.mark.slow
def test_the_self_check_runs_the_replica_step_on_workers_and_names_the_per_replica_mean(results):
    outcome = results["step mean, self-check"]
    assert not outcome["passed"] and "2x too large" in outcome["message"] and "Hint:" in outcome["message"]


@pytest.mark.slow
def test_keras_own_loss_with_its_default_reduction_is_right_inside_a_strategy(results):
    """Keras 3 divides a loss object's mean by num_replicas_in_sync inside a replica: the same as compute_average_loss."""
    outcome = results["step keras default"]
    assert outcome["passed"] and outcome["grade"] == 1.0, outcome
