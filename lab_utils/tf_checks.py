"""Self-checks for lab 05's tf.distribute exercises (TensorFlow is imported only when a check runs)."""
from __future__ import annotations

import numpy as np

from . import spec
from .checks import CheckResult, report

_SHAPE = (1, 8, 8)  # the digits' (C, H, W)


def check_per_replica_batch(learner_fn) -> CheckResult:
    """per_replica_batch(global_batch, replicas) splits evenly and refuses a batch that does not split."""
    for global_batch, replicas in [(128, 2), (64, 1), (96, 8), (100, 4)]:
        try:
            got = learner_fn(global_batch, replicas)
        except Exception as exc:
            return report("per-replica batch", False, f"per_replica_batch({global_batch}, {replicas}) raised "
                          f"{type(exc).__name__}: {exc}")
        if got != global_batch // replicas or isinstance(got, float):
            hint = f"per_replica_batch({global_batch}, {replicas}) gave {got!r}, expected {global_batch // replicas}"
            if got == global_batch * replicas:
                hint += ": the global batch is split over the replicas, not multiplied"
            elif isinstance(got, float):
                hint += ": return an int (integer division //), a batch size is a count"
            return report("per-replica batch", False, hint)
    try:
        got = learner_fn(10, 4)
    except ValueError as exc:
        if "10" not in str(exc) or "4" not in str(exc):
            return report("per-replica batch", False, "say what is wrong in the ValueError: include the global batch "
                          "and the replica count, and how to fix it")
        return report("per-replica batch: global / replicas, uneven batches refused", True)
    except Exception as exc:
        return report("per-replica batch", False, f"per_replica_batch(10, 4) raised {type(exc).__name__}; raise ValueError")
    return report("per-replica batch", False, f"per_replica_batch(10, 4) returned {got!r}: 10 samples do not split over "
                  "4 replicas; raise ValueError with a message saying so")


def check_local_values(learner_fn, strategy) -> CheckResult:
    """local_values(strategy, value) returns one numpy array per replica, in replica order."""
    import tensorflow as tf

    def replica_value():
        ctx = tf.distribute.get_replica_context()
        return tf.fill([3], tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 0.5)

    per_replica = tf.function(lambda: strategy.run(replica_value))()
    expected = [np.full(3, r + 0.5, dtype=np.float32) for r in range(strategy.num_replicas_in_sync)]
    try:
        got = learner_fn(strategy, per_replica)
    except Exception as exc:
        return report("local values", False, f"raised {type(exc).__name__}: {exc}")
    if not isinstance(got, (list, tuple)):
        return report("local values", False, f"return a list (one entry per replica), got {type(got).__name__}: "
                      "strategy.experimental_local_results(value) gives the per-replica tensors")
    if len(got) != len(expected):
        return report("local values", False, f"expected {len(expected)} values (one per replica), got {len(got)}")
    if not all(isinstance(v, np.ndarray) for v in got):
        return report("local values", False, "convert each tensor to numpy with .numpy()")
    if not all(np.array_equal(a, b) for a, b in zip(got, expected)):
        return report("local values", False, f"expected {[e.tolist() for e in expected]}, got {[g.tolist() for g in got]}")
    return report("local values: one numpy array per replica, in replica order", True)


def _replica_step_problem(strategy, global_batch: int, seed: int):
    """A seeded model and optimizer made in the strategy's scope, and one global batch."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    x = rng.random((global_batch, *_SHAPE[1:], _SHAPE[0]), dtype=np.float32)
    y = rng.integers(0, 10, global_batch)
    with strategy.scope():
        model = spec.build_keras(spec.cnn2d_2layer_fullconnected_2layer(), _SHAPE, seed=seed)
        optimizer = tf.keras.optimizers.SGD(0.1)
    return model, optimizer, x, y


def _flat(model) -> np.ndarray:
    return np.concatenate([np.asarray(v.numpy()).ravel() for v in model.trainable_variables])


def single_device_update(global_batch: int = 32, seed: int = 0) -> dict:
    """The reference: one plain-SGD step of the seeded CNN on the whole batch on one device; its update and loss."""
    import tensorflow as tf

    model, optimizer, x, y = _replica_step_problem(tf.distribute.get_strategy(), global_batch, seed)
    start = _flat(model)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return {"update": (_flat(model) - start).tolist(), "loss": float(loss)}


def distributed_update(learner_step, strategy, global_batch: int = 32, seed: int = 0) -> dict:
    """The same step run by the learner's replica_step on every replica of `strategy`; its update and summed loss."""
    import tensorflow as tf

    model, optimizer, x, y = _replica_step_problem(strategy, global_batch, seed)
    start = _flat(model)
    batches = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch))
    images, labels = next(iter(batches))

    @tf.function
    def step(a, b):
        per_replica = strategy.run(lambda i, j: learner_step(model, optimizer, i, j, global_batch), args=(a, b))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    loss = float(step(images, labels))
    return {"update": (_flat(model) - start).tolist(), "loss": loss}


def check_replica_step(learner_step, strategy, global_batch: int = 32, seed: int = 0) -> CheckResult:
    """One distributed step with the learner's replica_step equals one single-device step on the global batch."""
    replicas = strategy.num_replicas_in_sync
    if global_batch % replicas:
        raise ValueError(f"global_batch={global_batch} must be a multiple of the {replicas} replicas")
    reference = single_device_update(global_batch, seed)
    ref_update, ref_loss = np.array(reference["update"]), reference["loss"]
    try:
        got = distributed_update(learner_step, strategy, global_batch, seed)
    except Exception as exc:
        return report("distributed train step", False, f"raised {type(exc).__name__}: {str(exc)[:300]}")
    update, loss = np.array(got["update"]), got["loss"]
    if not np.abs(update).max():
        return report("distributed train step", False, "the weights did not change: apply the gradients with "
                      "optimizer.apply_gradients(zip(grads, model.trainable_variables))")
    ratio = float(np.dot(update, ref_update) / np.dot(ref_update, ref_update))
    if np.abs(update - ref_update).max() > 1e-5:
        hint = (f"the update differs from one device's on the whole batch (it is {ratio:.2f}x as large): "
                "scale the per-example losses by the GLOBAL batch, tf.nn.compute_average_loss(per_example, "
                "global_batch_size=global_batch); the replicas' gradients are then summed")
        if abs(ratio - replicas) < 0.05:
            hint = (f"the update is {replicas}x too large: a per-replica mean (reduce_mean) is summed over {replicas} "
                    "replicas; divide by the global batch instead (tf.nn.compute_average_loss)")
        return report("distributed train step", False, hint)
    if abs(loss - ref_loss) > 1e-5:
        return report("distributed train step", False, f"the weights are right but the summed loss is {loss:.4f}, "
                      f"expected {ref_loss:.4f}: return the scaled loss (the one you differentiated)")
    return report("distributed train step: loss scaled by the global batch, same update as one device", True)
