"""Lab 05's training run for `bench tf` and the tests: a custom loop around lab 05's make_train_step
(lab_utils.lessons.lab05, generated from its notebook), one per MultiWorkerMirroredStrategy worker.

Moved from lab_utils/tf_distribute.py: the learner's module holds only what a lab imports. TensorFlow and the generated
module are imported inside the functions, in the worker processes that tf_distribute.launch_workers prepares."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TFTrainConfig:
    """A small custom-loop training run of the spec'd CNN."""

    model: str = "cnn2d_2layer_fullconnected_2layer"
    dataset: str = "synthetic"  # "synthetic" (procedural image_side x image_side images) or "digits"
    global_batch: int = 128
    steps: int = 20
    lr: float = 0.05
    momentum: float = 0.9
    image_side: int = 28
    seed: int = 0
    multiworker: bool = True  # False: the default (single-device) strategy in the same loop


def _train_test(cfg: TFTrainConfig):
    """Channels-last train and test arrays for `cfg.dataset`."""
    from ... import data

    if cfg.dataset == "digits":
        split = data.load_digits_split()
    elif cfg.dataset == "synthetic":
        split = data.synthetic_split(cfg.global_batch * cfg.steps, 512,
                                     image_shape=(1, cfg.image_side, cfg.image_side), seed=cfg.seed)
    else:
        raise ValueError(f"dataset must be 'digits' or 'synthetic', got {cfg.dataset!r}")
    return (split.x_train.transpose(0, 2, 3, 1), split.y_train, split.x_test.transpose(0, 2, 3, 1), split.y_test)


def channels_first(shape) -> tuple[int, int, int]:
    """(H, W, C) as the spec's (C, H, W)."""
    h, w, c = shape
    return (c, h, w)


def train_custom_loop(cfg: TFTrainConfig) -> dict:
    """Train `cfg.steps` steps with lab 05's make_train_step; returns losses, weights, step times."""
    import time

    import numpy as np
    import tensorflow as tf

    from ... import spec
    from ...lessons.lab05 import make_train_step  # lab 05's step, generated from its notebook (imports TensorFlow)

    strategy = tf.distribute.MultiWorkerMirroredStrategy() if cfg.multiworker else tf.distribute.get_strategy()
    x, y, x_test, y_test = _train_test(cfg)
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if cfg.dataset == "digits":  # the same shuffle on every worker (same seed), reshuffled each pass
        dataset = dataset.shuffle(len(x), seed=cfg.seed).repeat()
    options = tf.data.Options()
    # from_tensor_slices has no files to split, so shard by element (AUTO would warn, then do the same)
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.batch(cfg.global_batch, drop_remainder=True).with_options(options)
    batches = iter(strategy.experimental_distribute_dataset(dataset))
    with strategy.scope():
        model = spec.build_keras(spec.preset(cfg.model), channels_first(x.shape[1:]), seed=cfg.seed)
        optimizer = tf.keras.optimizers.SGD(cfg.lr, momentum=cfg.momentum)

    step = make_train_step(strategy, model, optimizer, cfg.global_batch)

    losses, seconds = [], []
    for _ in range(cfg.steps):
        batch = next(batches)
        start = time.perf_counter()
        losses.append(float(step(batch)))
        seconds.append(time.perf_counter() - start)
    weights = np.concatenate([v.numpy().ravel() for v in model.trainable_variables])
    logits = model.predict(x_test, batch_size=256, verbose=0)
    return {"losses": losses, "step_seconds": seconds, "weights": weights, "replicas": strategy.num_replicas_in_sync,
            "test_accuracy": float((logits.argmax(axis=1) == y_test).mean())}


def train_worker(rank: int, world_size: int, cfg: TFTrainConfig) -> dict:
    """One worker of launch_workers running the reference custom loop; its results."""
    return {"worker": rank, **train_custom_loop(cfg)}
