"""Lab 05: the per-replica batch, reading a PerReplica value, the replica step run in MultiWorkerMirroredStrategy
worker processes (TensorFlow imported lazily)."""
from __future__ import annotations

import re

import numpy as np

from ...exercises.core import ANY, CannotRunHere, Exercise, close, max_abs_diff, named_unless, register


SETUP = ("from lab_utils import tf_distribute\ntf_distribute.configure_devices(2)\n"
         "import keras\nimport numpy as np\nimport tensorflow as tf")


def mirrored_strategy():
    """A MirroredStrategy over the logical devices this process already configured (configure_devices)."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus or tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([d.name for d in devices])


# ---- per-replica batch ----------------------------------------------------------------------------------------------

def _batch_cases(rng):
    even = [[r * rng.randint(2, 40), r] for r in (rng.randint(1, 8) for _ in range(4))]
    r = rng.randint(2, 8)
    return {"even": even, "uneven": [r * rng.randint(2, 20) + rng.randint(1, r - 1), r]}


def _batch_run(per_replica_batch, case):
    values = [per_replica_batch(g, r) for g, r in case["even"]]
    g, r = case["uneven"]
    try:
        per_replica_batch(g, r)
        uneven = "no error"
    except ValueError as exc:
        uneven = "ValueError" + (" naming both numbers" if str(g) in str(exc) and str(r) in str(exc) else "")
        uneven += " and a fix" if says_a_fix(str(exc), g, r) else ""
    except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
        uneven = type(exc).__name__
    return {"values": values, "types": [type(v).__name__ for v in values], "uneven": uneven}


FIX_WORDS = ("multiple", "divisible", "divide", "drop", "use ", "choose", "pick", "set ", "change", "try", "instead")


def says_a_fix(message: str, global_batch: int, replicas: int) -> bool:
    """Whether an uneven batch's error says how to fix it: a fix word, or a global batch that would split."""
    numbers = {int(n) for n in re.findall(r"\d+", message)} - {global_batch, replicas, 0}
    return any(w in message.lower() for w in FIX_WORDS) or any(n % replicas == 0 for n in numbers)


def _batch_expected(case):
    return {"values": [g // r for g, r in case["even"]], "types": ["int"] * len(case["even"]),
            "uneven": "ValueError naming both numbers and a fix"}


@named_unless("should give")
def _batch_judge(got, expected, case):
    right = expected["values"]
    if got["values"] != right:
        if got["values"] == [g * r for g, r in case["even"]]:
            return 0.0, "the global batch is split over the replicas, not multiplied"
        if got["values"] == [r // g for g, r in case["even"]]:  # learner s13r5e, lab 05 Ex 1
            return 0.0, ("the arguments are swapped: replicas // global_batch is 0; divide the global batch by the "
                         "replicas, global_batch // replicas")
        return 0.0, f"per_replica_batch should give {right}, got {got['values']}"
    if got["types"] != expected["types"]:
        return 0.0, "return an int (integer division //): a batch size is a count"
    if got["uneven"] == "no error":
        return 0.5, f"per_replica_batch{tuple(case['uneven'])} does not split evenly: raise ValueError saying so"
    if got["uneven"] == "AssertionError":
        return 0.5, (f"per_replica_batch{tuple(case['uneven'])} raised AssertionError (an assert), not ValueError: "
                     "raise ValueError naming both numbers (an assert is for your own bugs, and python -O removes it)")
    if got["uneven"] == "ValueError naming both numbers":  # learner s12r3e: the exercise asks for the fix too
        g, r = case["uneven"]
        return 0.5, (f"your ValueError names {g} and {r} but not how to fix it: say what global batch would split "
                     f"over {r} replicas")
    if got["uneven"] != expected["uneven"]:
        return 0.5, "raise a ValueError whose message names the global batch and the replica count"
    return 1.0, "global / replicas, uneven batches refused"


PER_REPLICA_BATCH = Exercise("05", "per_replica_batch", _batch_cases, _batch_run, _batch_expected, _batch_judge,
                             "integer division, and a ValueError (naming both numbers) when the batch does not split")


# ---- reading a PerReplica value ---------------------------------------------------------------------------------------

def _local_cases(rng):
    return {"scale": rng.randint(2, 9), "offset": round(rng.uniform(-3, 3), 2), "size": rng.randint(2, 5)}


def _local_run(local_values, case):
    import tensorflow as tf

    strategy = mirrored_strategy()

    def replica_value():
        ctx = tf.distribute.get_replica_context()
        return tf.fill([case["size"]], tf.cast(ctx.replica_id_in_sync_group, tf.float32) * case["scale"] + case["offset"])

    got = local_values(strategy, tf.function(lambda: strategy.run(replica_value))())
    one = tf.distribute.get_strategy()  # the default strategy: one replica, whose run returns a plain tensor
    try:
        single = local_values(one, tf.function(lambda: one.run(replica_value))())
        single = [np.asarray(v).tolist() for v in single] if isinstance(single, (list, tuple)) else type(single).__name__
    except (AttributeError, TypeError) as exc:  # e.g. value.values: a plain tensor has no .values
        single = f"{type(exc).__name__}: {exc}"
    if not isinstance(got, (list, tuple)):
        return {"replicas": strategy.num_replicas_in_sync, "type": type(got).__name__, "types": [], "values": [],
                "single": single}
    return {"replicas": strategy.num_replicas_in_sync, "type": "list", "types": [type(v).__name__ for v in got],
            "values": [np.asarray(v).tolist() for v in got], "single": single}


REPLICAS = 2  # the probe's set-up configures two devices


def _local_expected(case):
    values = [[r * case["scale"] + case["offset"]] * case["size"] for r in range(REPLICAS)]
    return {"replicas": REPLICAS, "type": "list", "types": ["ndarray"] * REPLICAS, "values": values,
            "single": [[case["offset"]] * case["size"]]}


@named_unless()
def _local_judge(got, expected, case):
    if got["type"] != "list":
        return 0.0, (f"return a list (one entry per replica), got {got['type']}: "
                     "strategy.experimental_local_results(value) gives the per-replica tensors")
    right = expected["values"]
    if got["replicas"] != expected["replicas"] or len(got["values"]) != len(right):
        combined = len(got["values"]) == 1 and len(right) > 1
        return 0.0, (f"expected {len(right)} values (one per replica), got {len(got['values'])}"
                     + (": strategy.reduce combines the replicas into one; you want each replica's own, from "
                        "strategy.experimental_local_results(value)" if combined else ""))
    if not close(got["values"], right, 1e-6):
        if close(got["values"][::-1], right, 1e-6):  # learner s13r6e, lab 05 Ex 2: a generic message for reversed
            return 0.0, ("the replicas' values in reverse order: keep the order experimental_local_results gives "
                         "(replica 0 first)")
        return 0.0, "the values are not the replicas' own values, in replica order"
    if got["types"] != expected["types"]:
        return 0.5, "the values are right: convert each tensor to numpy with .numpy()"
    single = got.get("single")
    if not isinstance(single, list) or not close(single, expected["single"], 1e-6):
        return 0.0, (f"right for {len(right)} replicas, but on one replica (the default strategy) it gave {single!r}: "
                     "there strategy.run returns a plain tensor, not a PerReplica, and a plain tensor has no .values; "
                     "strategy.experimental_local_results(value) reads both")
    return 1.0, "one numpy array per replica, in replica order"


LOCAL_VALUES = Exercise("05", "local_values", _local_cases, _local_run, _local_expected, _local_judge,
                        "strategy.experimental_local_results, then .numpy() on each", setup=SETUP,
                        shape=lambda right, case: {**right, "single": ANY})  # one replica's: a list, or the error


# ---- one step, checked: a replica step (this exercise) or lab 05's make_train_step (the GPU check, the tests) run on
# every replica of a tf.distribute strategy, against one plain-SGD step on one device (TensorFlow imported inside)

DIGITS_SHAPE = (1, 8, 8)  # (C, H, W)


def _step_batch(global_batch: int, seed: int):
    """A seeded random batch of digit-sized images (channels last) and labels."""
    rng = np.random.default_rng(seed)
    return (rng.random((global_batch, *DIGITS_SHAPE[1:], DIGITS_SHAPE[0]), dtype=np.float32),
            rng.integers(0, 10, global_batch))


def _seeded_model(seed: int):
    """The digits CNN in Keras with the seeded torch builder's weights, copied (built in the caller's scope)."""
    from ... import spec

    layers = spec.cnn2d_2layer_fullconnected_2layer()
    model = spec.build_keras(layers, DIGITS_SHAPE)
    spec.copy_torch_weights_to_keras(spec.build_torch(layers, DIGITS_SHAPE, seed=seed), model, layers, DIGITS_SHAPE)
    return model


STEP_LR = 0.1


def _one_device_step(strategy, model, optimizer, global_batch):
    """The reference's step: the mean loss over the whole batch on one device, its gradient applied (no replicas)."""
    import tensorflow as tf

    @tf.function
    def step(batch):
        images, labels = batch
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, model(images),
                                                                                  from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step


def len_named(replica_step):
    """The learner's replica step, its TypeError from len() of a symbolic tensor told as the mistake it is."""
    def replica(model, optimizer, images, labels, global_batch):
        try:
            return replica_step(model, optimizer, images, labels, global_batch)
        except TypeError as exc:
            if "len is not well defined" not in str(exc):
                raise
            raise TypeError("len() of a tensor inside the replica step: the step runs as a traced graph, where a "
                            "tensor's length is not a Python number. Nor is this replica's batch the divisor: each "
                            "replica scales its per-example losses by the GLOBAL batch, "
                            "tf.nn.compute_average_loss(per_example, global_batch_size=global_batch), or the "
                            f"replicas' summed update is too large (TensorFlow said: {str(exc)[:120]})") from None

    return replica


def _around(replica_step):
    """A make_train_step (lab 05's signature) that runs the learner's `replica_step(model, optimizer, images, labels,
    global_batch)` on every replica and sums their losses."""
    import tensorflow as tf

    replica = len_named(replica_step)

    def make(strategy, model, optimizer, global_batch):
        @tf.function
        def step(batch):
            per_replica = strategy.run(lambda i, j: replica(model, optimizer, i, j, global_batch), args=batch)
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        return step

    return make


def _run_step(make_step, strategy, global_batch: int, seed: int, samples: int | None = None) -> dict:
    """Lab 05's one_step (lab_utils.labs.lab05.lesson) of the seeded problem, on its first `samples` (default: a full
    global batch; fewer: a short last batch): its update, its loss, the replicas."""
    from .lesson import one_step

    images, labels = _step_batch(global_batch, seed)
    images, labels = images[:samples], labels[:samples]
    update, loss = one_step(make_step, strategy, lambda: _seeded_model(seed), images, labels, global_batch, STEP_LR)
    return {"update": update.tolist(), "loss": loss, "replicas": strategy.num_replicas_in_sync}


def single_device_update(global_batch: int, seed: int) -> dict:
    """The reference: one plain-SGD step of the seeded CNN on the whole batch on one device; its update and loss."""
    import tensorflow as tf

    done = _run_step(_one_device_step, tf.distribute.get_strategy(), global_batch, seed)
    return {"update": done["update"], "loss": done["loss"]}


def short_batch_update(global_batch: int, seed: int, samples: int) -> list[float]:
    """The reference on a short last batch of `samples`: every sample weighs 1 / global_batch, as in a full batch."""
    import tensorflow as tf

    done = _run_step(_one_device_step, tf.distribute.get_strategy(), global_batch, seed, samples)
    return (np.array(done["update"]) * samples / global_batch).tolist()  # plain SGD: the update scales with the loss


def one_step_update(replica_step, strategy, global_batch: int, seed: int, *, make_train_step=None) -> dict:
    """The same step run by `replica_step(model, optimizer, images, labels, global_batch)` on every replica of
    `strategy` (or, given make_train_step instead, the step it makes: lab 05's); its update and summed loss."""
    return _run_step(make_train_step or _around(replica_step), strategy, global_batch, seed)


# ---- the distributed train step --------------------------------------------------------------------------------------

def replica_step_worker(rank: int, world_size: int, replica_step, case: dict) -> dict:
    """A MultiWorkerMirroredStrategy worker (TF_CONFIG set by the launcher): one step with the learner's replica step."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    global_batch = case["per_replica"] * world_size
    full = one_step_update(replica_step, strategy, global_batch, case["seed"])
    short = _run_step(_around(replica_step), strategy, global_batch, case["seed"], short_samples(global_batch))
    return {**full, "short_update": short["update"]}


def short_samples(global_batch: int) -> int:
    """The check's short last batch: one sample short, so the workers' slices differ in size."""
    return global_batch - 1


WORKERS = 2


def _step_cases(rng):
    return {"seed": rng.randrange(10**6), "per_replica": rng.choice([6, 8, 12])}


def step_answer(workers: list[dict]) -> dict:
    """What the judge sees of one run of the workers: worker 0's update and loss, and how far the others differ."""
    differ = max(max_abs_diff(np.array(w[key]), np.array(workers[0][key]))
                 for w in workers for key in ("update", "short_update"))
    return {**workers[0], "workers_differ_by": differ}


def _step_run(replica_step, case):
    from ...launch import RankError
    from ...tf_distribute import launch_workers

    try:
        return step_answer(launch_workers(replica_step_worker, WORKERS, args=(replica_step, case), timeout=180))
    except RankError as err:
        if err.message.startswith("NotImplementedError"):  # the stub, raised in a worker: say so as the stub
            raise NotImplementedError(err.message) from None
        if any(sign in f"{err.message}\n{err.traceback_text}" for sign in SCRIPT_STARTED_TENSORFLOW):
            raise CannotRunHere(SCRIPT_ADVICE) from None
        raise


# a worker unpickles replica_step by importing the learner's script (__main__): its top level ran again there, and
# started TensorFlow (or processes) before the worker could set TensorFlow's threads
SCRIPT_STARTED_TENSORFLOW = ("Intra op parallelism cannot be modified after initialization",
                             "Inter op parallelism cannot be modified after initialization",
                             "An attempt has been made to start a new process before the")
SCRIPT_ADVICE = ("the check starts 2 TensorFlow worker processes, and each imports the file that defined replica_step "
                 "to find it; that file's top level started TensorFlow (configure_devices, a TensorFlow call) before "
                 "the worker could set up its own TensorFlow. Run the check in the notebook, or in a script keep only "
                 "imports and definitions at the top level and put the rest (configure_devices, check(...)) under "
                 "`if __name__ == \"__main__\":`")


def _step_expected(case):
    """One device, one step on the whole global batch (WORKERS replicas' worth), and on a short last batch."""
    global_batch = case["per_replica"] * WORKERS
    return {**single_device_update(global_batch, case["seed"]), "replicas": WORKERS, "workers_differ_by": 0.0,
            "short_update": short_batch_update(global_batch, case["seed"], short_samples(global_batch))}


@named_unless("replicas in sync")
def _step_judge(got, expected, case):
    reference = expected
    update, right = np.array(got["update"], dtype=float), np.array(reference["update"])
    if got["replicas"] != WORKERS:
        return 0.0, f"expected {WORKERS} replicas in sync (one per worker), got {got['replicas']}"
    if got["workers_differ_by"] > 1e-6:
        return 0.0, "the workers ended with different weights: apply the gradients inside the replica step"
    if not np.abs(update).max():
        return 0.0, "the weights did not change: apply the gradients with optimizer.apply_gradients(...)"
    if max_abs_diff(update, right) > 1e-5:
        ratio = float(update @ right / (right @ right))
        cosine = float(update @ right / (np.linalg.norm(update) * np.linalg.norm(right)))
        if cosine < 0.999:  # not a matter of scale: another loss function was differentiated
            return 0.0, (f"the update points elsewhere than one device's (cosine {cosine:.3f}), so this is not a "
                         "matter of scaling: the loss itself is another function. The CNN returns logits, so the "
                         "per-example loss needs from_logits=True, as on one device")
        if abs(ratio - got["replicas"]) < 0.05:
            return 0.0, (f"the update is {got['replicas']}x too large: a per-replica mean (reduce_mean) is summed over "
                         f"{got['replicas']} replicas; divide by the global batch (tf.nn.compute_average_loss)")
        return 0.0, (f"the update is {ratio:.2f}x one device's on the whole batch (the check's global batch: "
                     f"{case['per_replica'] * WORKERS} samples): scale the per-example losses by the "
                     "GLOBAL batch, tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)")
    if abs(got["loss"] - reference["loss"]) > 1e-5:
        return 0.5, "the update is right; return the scaled loss (the one you differentiated)"
    global_batch = case["per_replica"] * WORKERS
    if max_abs_diff(np.array(got["short_update"], dtype=float), np.array(reference["short_update"])) > 1e-5:
        return 0.0, (f"right on a full global batch, wrong on a short last batch ({short_samples(global_batch)} "
                     f"samples for a global batch of {global_batch}, so the {WORKERS} workers' slices differ in "
                     "size): each replica divided by its own slice size x replicas, so the workers weigh their "
                     "samples differently (section 3's table, 'What each replica sees'). Divide by the GLOBAL "
                     "batch: tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)")
    return 1.0, f"global batch: {WORKERS} workers update as one device, on a full and a short last batch"


REPLICA_STEP = Exercise("05", "replica_step", _step_cases, _step_run, _step_expected, _step_judge,
                        "the step's three parts: per-example losses from the logits, scaled by the GLOBAL batch; "
                        "the gradients of that loss; those gradients applied with the optimizer",
                        setup=SETUP, ranks=WORKERS)

register(PER_REPLICA_BATCH, LOCAL_VALUES, REPLICA_STEP)
