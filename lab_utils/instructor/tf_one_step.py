"""One step, checked: a replica step (lab 05's exercise) or lab 05's make_train_step run on every replica of a
tf.distribute strategy, against one plain-SGD step on one device (the exercise check, the GPU check, the tests).

Moved from lab_utils/tf_distribute.py: the learner's module holds only what a lab imports. TensorFlow is imported
inside the functions."""
from __future__ import annotations

DIGITS_SHAPE = (1, 8, 8)  # (C, H, W)


def _step_problem(strategy, global_batch: int, seed: int):
    """A seeded digits CNN (the torch builder's weights, copied) and plain SGD made in the strategy's scope; a batch."""
    import numpy as np
    import tensorflow as tf

    from .. import spec

    rng = np.random.default_rng(seed)
    x = rng.random((global_batch, *DIGITS_SHAPE[1:], DIGITS_SHAPE[0]), dtype=np.float32)
    y = rng.integers(0, 10, global_batch)
    layers = spec.cnn2d_2layer_fullconnected_2layer()
    with strategy.scope():
        model = spec.build_keras(layers, DIGITS_SHAPE)
        spec.copy_torch_weights_to_keras(spec.build_torch(layers, DIGITS_SHAPE, seed=seed), model, layers, DIGITS_SHAPE)
        optimizer = tf.keras.optimizers.SGD(0.1)
    return model, optimizer, x, y


def _flat(model):
    import numpy as np

    return np.concatenate([np.asarray(v.numpy()).ravel() for v in model.trainable_variables])


def single_device_update(global_batch: int, seed: int) -> dict:
    """The reference: one plain-SGD step of the seeded CNN on the whole batch on one device; its update and loss."""
    import tensorflow as tf

    model, optimizer, x, y = _step_problem(tf.distribute.get_strategy(), global_batch, seed)
    start = _flat(model)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return {"update": (_flat(model) - start).tolist(), "loss": float(loss)}


def one_step_update(replica_step, strategy, global_batch: int, seed: int, *, make_train_step=None) -> dict:
    """The same step run by `replica_step(model, optimizer, images, labels, global_batch)` on every replica of
    `strategy` (or, given make_train_step instead, the step it makes: lab 05's); its update and summed loss."""
    import tensorflow as tf

    model, optimizer, x, y = _step_problem(strategy, global_batch, seed)
    start = _flat(model)
    options = tf.data.Options()  # workers shard the global batch by element (in-memory arrays have no files to split)
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch).with_options(options)
    images, labels = next(iter(strategy.experimental_distribute_dataset(dataset)))
    if make_train_step is not None:
        loss = float(make_train_step(strategy, model, optimizer, global_batch)((images, labels)))
        return {"update": (_flat(model) - start).tolist(), "loss": loss, "replicas": strategy.num_replicas_in_sync}

    @tf.function
    def step(a, b):
        per_replica = strategy.run(lambda i, j: replica_step(model, optimizer, i, j, global_batch), args=(a, b))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    loss = float(step(images, labels))
    return {"update": (_flat(model) - start).tolist(), "loss": loss, "replicas": strategy.num_replicas_in_sync}
