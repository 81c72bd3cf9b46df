"""Lab 05's self-checks pass right answers and fail the classic mistakes with a useful hint (2 logical CPU replicas)."""
import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json
    from lab_utils import tf_distribute, tf_checks
    devices = tf_distribute.configure_devices(2)
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(list(devices.names))
    results = {}

    def record(name, result):
        results[name] = {"passed": bool(result), "hint": result.hint}

    def batch_ok(g, r):
        if g % r:
            raise ValueError(f"a global batch of {g} does not split over {r} replicas; use a multiple of {r}")
        return g // r

    record("batch ok", tf_checks.check_per_replica_batch(batch_ok))
    record("batch float", tf_checks.check_per_replica_batch(lambda g, r: g / r))
    record("batch times", tf_checks.check_per_replica_batch(lambda g, r: g * r))
    record("batch no error", tf_checks.check_per_replica_batch(lambda g, r: g // r))

    record("local ok", tf_checks.check_local_values(
        lambda s, v: [t.numpy() for t in s.experimental_local_results(v)], strategy))
    record("local tensors", tf_checks.check_local_values(lambda s, v: list(s.experimental_local_results(v)), strategy))
    record("local reversed", tf_checks.check_local_values(
        lambda s, v: [t.numpy() for t in s.experimental_local_results(v)][::-1], strategy))
    record("local object", tf_checks.check_local_values(lambda s, v: v, strategy))

    def step(scale):
        def replica_step(model, optimizer, images, labels, global_batch):
            with tf.GradientTape() as tape:
                per_example = keras.losses.sparse_categorical_crossentropy(labels, model(images), from_logits=True)
                if scale == "global":
                    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                elif scale == "mean":
                    loss = tf.reduce_mean(per_example)
                else:
                    loss = tf.reduce_sum(per_example)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return replica_step

    for scale in ("global", "mean", "sum"):
        record(f"step {scale}", tf_checks.check_replica_step(step(scale), strategy))
    record("step no update", tf_checks.check_replica_step(lambda m, o, x, y, g: tf.constant(0.0), strategy))
    print("RESULTS" + json.dumps(results))
''')


@pytest.fixture(scope="module")
def results():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("RESULTS", 1)[1])


def test_right_answers_pass(results):
    assert all(results[name]["passed"] for name in ("batch ok", "local ok", "step global")), results


def test_per_replica_batch_mistakes_fail_with_a_hint(results):
    assert not results["batch float"]["passed"] and "integer division" in results["batch float"]["hint"]
    assert not results["batch times"]["passed"] and "not multiplied" in results["batch times"]["hint"]
    assert not results["batch no error"]["passed"] and "raise ValueError" in results["batch no error"]["hint"]


def test_local_values_mistakes_fail(results):
    assert not results["local tensors"]["passed"] and ".numpy()" in results["local tensors"]["hint"]
    assert not results["local reversed"]["passed"]
    assert not results["local object"]["passed"] and "list" in results["local object"]["hint"]


def test_the_loss_scaling_bug_is_named(results):
    assert not results["step mean"]["passed"] and "2x too large" in results["step mean"]["hint"]
    assert not results["step sum"]["passed"] and "GLOBAL batch" in results["step sum"]["hint"]
    assert not results["step no update"]["passed"] and "did not change" in results["step no update"]["hint"]
