"""Lab 05's exercises in a TensorFlow process of their own (2 logical CPU replicas): the solutions pass and get full
marks; each plausible wrong answer fails its self-check and scores 0 (or the partial credit named)."""
import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, random
    from lab_utils import tf_distribute
    tf_distribute.configure_devices(2)
    import tensorflow as tf
    from lab_utils import exercises
    from lab_utils.exercises import check, to_plain

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

    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step(scale):
        def replica_step(model, optimizer, images, labels, global_batch):
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(images, training=True))
                if scale == "global":
                    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                elif scale == "mean":
                    loss = tf.reduce_mean(per_example)
                else:
                    loss = tf.reduce_sum(per_example)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return replica_step

    results = {}
    for label, fn in [("batch ok", batch_ok), ("batch float", batch_float), ("batch times", batch_times),
                      ("batch no error", batch_no_error), ("local ok", local_ok), ("local tensors", local_tensors),
                      ("local reversed", local_reversed), ("step ok", as_("replica_step")(step("global"))),
                      ("step mean", as_("replica_step")(step("mean"))), ("step sum", as_("replica_step")(step("sum")))]:
        exercise = exercises.get(fn.__name__)
        inputs = exercise.cases(random.Random(99))
        result = check(fn)
        results[label] = {"passed": result.passed, "message": result.message,
                          "grade": exercise.score(to_plain(exercise.run(fn, inputs)), inputs)[0]}
    print(json.dumps(results))
''')


@pytest.fixture(scope="module")
def results():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("label", ["batch ok", "local ok", "step ok"])
def test_solutions_pass_and_get_full_marks(results, label):
    assert results[label]["passed"] and results[label]["grade"] == 1.0, results[label]


@pytest.mark.parametrize("label, grade, says", [
    ("batch float", 0.0, "return an int"), ("batch times", 0.0, "not multiplied"),
    ("batch no error", 0.5, "raise ValueError"), ("local tensors", 0.5, ".numpy()"),
    ("local reversed", 0.0, "replica order"), ("step mean", 0.0, "2x too large"), ("step sum", 0.0, "GLOBAL batch")])
def test_wrong_answers_fail_with_their_hint(results, label, grade, says):
    assert not results[label]["passed"] and results[label]["grade"] == grade
    assert says in results[label]["message"], results[label]["message"]
