"""Lab 05's one TensorFlow run, shared by test_tf.py and test_exercises_lab05.py: a fresh Python that configures 2
logical CPU devices before TensorFlow starts, runs what both files judge in it, and launches 2 TensorFlow workers once
for every worker job of both (each TensorFlow process costs seconds of CPU to start). Under xdist the first worker to
ask runs it and the other reads what it printed."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent('''
    import json, random, sys
    from lab_utils import tf_distribute
    devices = tf_distribute.configure_devices(2)  # before anything else touches TensorFlow
    import keras
    import numpy as np
    import tensorflow as tf
    from lab_utils import exercises
    from lab_utils.exercises import check, to_plain
    from lab_utils.labs.lab05 import exercises as lab05

    def cluster_job(rank, world_size, seed):
        import tensorflow as tf

        from lab_utils import spec

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = spec.build_keras(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=seed + rank)
        total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(float(rank + 1))), axis=None)
        return {"replicas": strategy.num_replicas_in_sync, "sum": float(total),
                "first_weight": float(model.trainable_variables[0].numpy().ravel()[0])}


    def fit_worker(rank, world_size):
        import numpy as np
        import tensorflow as tf

        from lab_utils import spec

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = spec.build_keras(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=0)
            model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        try:
            model.fit(np.zeros((64, 8, 8, 1), np.float32), np.zeros(64, np.int64), batch_size=32, epochs=1, verbose=0)
        except ValueError as err:
            return str(err)[:200]
        return None


    def quiet_worker(rank, world_size):
        import tensorflow as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return float(strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None))


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

    @as_("local_values")
    def local_dot_values(strategy, value):
        return [t.numpy() for t in value.values]  # learner s9e: a PerReplica's attribute; one replica has none

    def step(scale):
        def replica_step(model, optimizer, images, labels, global_batch):
            loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=scale != "no logits", reduction="none")
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(images, training=True))
                if scale == "keras default":               # Keras 3: mean over the slice / num_replicas_in_sync
                    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, model(images))
                elif scale in ("global", "no logits"):
                    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                elif scale == "no global batch":           # slice size x replicas: right only for even slices
                    loss = tf.nn.compute_average_loss(per_example)
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

    # ---- the Keras builder against the torch one (tests/lab05/test_tf.py), here: no xdist worker imports TensorFlow
    import torch
    from lab_utils import spec
    specs = {name: spec.preset(name) for name in spec.PRESETS}
    specs["with batchnorm"] = [x for layer in spec.cnn2d_3layer_fullconnected_3layer()
                               for x in ([layer, {"type": "batchnorm"}] if layer["type"] == "conv2d" else [layer])]
    builder = {}
    for name, model_spec in specs.items():
        torch_model = spec.build_torch(model_spec, (1, 28, 28), seed=0).eval()
        keras_model = spec.build_keras(model_spec, (1, 28, 28), seed=0)
        spec.copy_torch_weights_to_keras(torch_model, keras_model, model_spec, (1, 28, 28))
        x = np.random.default_rng(0).random((4, 1, 28, 28), dtype=np.float32)
        expected = torch_model(torch.from_numpy(x)).detach().numpy()
        got = np.asarray(keras_model(x.transpose(0, 2, 3, 1), training=False))
        builder[name] = {"keras_trainable": sum(int(np.prod(w.shape)) for w in keras_model.trainable_weights),
                         "torch_trainable": sum(p.numel() for p in torch_model.parameters()),
                         "spec_trainable": sum(spec.parameter_counts(model_spec, (1, 28, 28))),
                         "keras_shapes": [list(layer.output.shape[1:]) for layer in keras_model.layers],
                         "torch_shapes": [list(s if len(s) == 1 else (s[1], s[2], s[0]))
                                          for s in spec.output_shapes(model_spec, (1, 28, 28))],
                         "max_diff": float(np.abs(expected - got).max())}
    try:
        spec.build_keras([spec.conv2d(4), spec.dense(3)], (1, 8, 8))
        builder["refused"] = "built"
    except ValueError as err:
        builder["refused"] = str(err)

    # ---- devices (tests/lab05/test_tf.py): made before TensorFlow started; the GPU check's step; configuring late
    out = {"builder": builder, "devices": [devices.kind, len(devices.names), len(tf.config.list_logical_devices("CPU"))],
           "mirrored_replicas": len(tf.distribute.MirroredStrategy(devices.names).extended.worker_devices)}
    from lab_utils.labs.lab05.gpu_check import GPU_TOLERANCE, _cuda_present
    from lab_utils.labs.lab05.lesson import make_train_step
    made = dict(make_train_step=make_train_step)
    mirrored = lab05.one_step_update(None, tf.distribute.MirroredStrategy(list(devices.names)), 64, 0, **made)
    single = lab05.one_step_update(None, tf.distribute.OneDeviceStrategy("/cpu:0"), 64, 0, **made)
    reference = lab05.single_device_update(64, 0)
    gap = max(np.abs(np.array(u["update"]) - reference["update"]).max() for u in (mirrored, single))
    out["step"] = [bool(np.abs(reference["update"]).max() > 0), bool(gap <= GPU_TOLERANCE)]
    try:
        tf_distribute.configure_devices(3)  # TensorFlow has run ops by now (the same 2 again would change nothing)
        out["again"] = "no error"
    except RuntimeError as err:
        out["again"] = str(err)
    if not _cuda_present():  # what `python -m lab_utils.labs.lab05.gpu_check` runs: its last line printed
        import contextlib, io, runpy, warnings
        printed = io.StringIO()
        with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported above
            runpy.run_module("lab_utils.labs.lab05.gpu_check", run_name="__main__")
        out["gpu_check_main"] = printed.getvalue()

    # ---- the exercises (tests/lab05/test_exercises_lab05.py)
    sys.path.insert(0, TESTS)
    from test_judges import JUDGED_WITH_TENSORFLOW, draws, seeds, solution_function

    results = {}
    for label, fn in [("batch ok", batch_ok), ("batch float", batch_float), ("batch times", batch_times),
                      ("batch no error", batch_no_error), ("local ok", local_ok), ("local tensors", local_tensors),
                      ("local reversed", local_reversed), ("local .values", local_dot_values)]:
        result = check(fn)
        results[label] = {"passed": result.passed, "message": result.message, "grade": graded(fn)}
    # one launch for the replica step: each job is what the grader's (and the self-check's) run launches for one
    # answer, scored by the same judge (check() adds only the "Hint:" prefix, which tests/test_exercises.py checks)
    wrong = {"step mean": step("mean"), "step sum": step("sum"), "step no apply": step("no apply"), "step mean / global": step("mean / global"),
             "step keras default": step("keras default"), "step no logits": step("no logits"),
             "step no global batch": step("no global batch")}
    exercise = exercises.get("replica_step")
    case = exercise.cases(random.Random(99))
    solution = solution_function(exercise)  # the notebook's replica_step, as the judges' draws take it
    draw_cases = [exercise.cases(random.Random(seed)) for seed in seeds(exercise)]
    exercise_jobs = ([(lab05.replica_step_worker, (fn, case)) for fn in wrong.values()]
                     + [(lab05.replica_step_worker, (solution, c)) for c in draw_cases])
    # test_tf.py's jobs share the launch: a sum first (the workers' quiet start), three cluster jobs; Keras fit last
    tf_jobs = [(quiet_worker, ())] + [(cluster_job, (seed,)) for seed in (0, 1, 2)]
    every = tf_distribute.launch_worker_jobs(tf_jobs + exercise_jobs + [(fit_worker, ())], lab05.WORKERS, timeout=600)
    out["quiet"], out["jobs"] = every[0], every[1:len(tf_jobs)] + every[-1:]
    runs = every[len(tf_jobs):-1]
    for label, workers in zip(wrong, runs):
        fraction, message = exercise.score(to_plain(lab05.step_answer(workers)), case)
        results[label] = {"passed": fraction >= 1.0, "message": message, "grade": fraction}
    solved = [(c, to_plain(lab05.step_answer(workers))) for c, workers in zip(draw_cases, runs[len(wrong):])]
    fraction, message = exercise.score(solved[0][1], solved[0][0])
    results["step ok"] = {"passed": fraction >= 1.0, "message": message, "grade": fraction}
    # the judges' draws of lab 05's exercises (tests/test_judges.py), from this TensorFlow process
    results["draws"] = {name: solved if name == "replica_step" else draws(name) for name in JUDGED_WITH_TENSORFLOW}
    # and its forgeries scored here too, where the references' TensorFlow already runs (no xdist worker imports it)
    from test_judges import assert_forgeries_score_zero
    results["forgeries"] = {}
    for name in JUDGED_WITH_TENSORFLOW:
        try:
            assert_forgeries_score_zero(exercises.get(name), results["draws"][name])
            results["forgeries"][name] = "all scored 0"
        except AssertionError as err:
            results["forgeries"][name] = f"AssertionError: {err}"
    out["exercises"] = results
    print(json.dumps(out))
''')


def _run() -> dict:
    script = SCRIPT.replace("TESTS", repr(str(TESTS)))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=840)
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


@pytest.fixture(scope="session")
def lab05_tf_run(tmp_path_factory, worker_id) -> dict:
    """The run's exit code, stdout and stderr (its last stdout line: everything it measured, as JSON)."""
    if worker_id == "master":  # no xdist
        return _run()
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / "lab05_tf_run.json"
    with FileLock(str(shared) + ".lock"):
        if not shared.is_file():
            shared.write_text(json.dumps(_run()))
        return json.loads(shared.read_text())


@pytest.fixture(scope="session")
def lab05_tf(lab05_tf_run) -> dict:
    """What the run measured; it must have succeeded."""
    assert lab05_tf_run["returncode"] == 0, lab05_tf_run["stderr"][-3000:]
    return json.loads(lab05_tf_run["stdout"].strip().splitlines()[-1])
