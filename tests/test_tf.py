"""TensorFlow: the Keras builder matches the torch one; devices are configured before TF initialises, or a clear error."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from lab_utils import spec, tf_distribute

tf_distribute.quiet()
keras = pytest.importorskip("keras")

SPECS = {name: spec.preset(name) for name in spec.PRESETS}
SPECS["with batchnorm"] = [x for layer in spec.cnn2d_3layer_fullconnected_3layer()
                           for x in ([layer, {"type": "batchnorm"}] if layer["type"] == "conv2d" else [layer])]


@pytest.mark.parametrize("name", list(SPECS))
def test_keras_builder_gives_the_torch_architecture_and_function(name):
    model_spec = SPECS[name]
    torch_model = spec.build_torch(model_spec, (1, 28, 28), seed=0).eval()
    keras_model = spec.build_keras(model_spec, (1, 28, 28), seed=0)
    trainable = sum(int(np.prod(w.shape)) for w in keras_model.trainable_weights)
    assert trainable == sum(p.numel() for p in torch_model.parameters()) == sum(spec.parameter_counts(model_spec, (1, 28, 28)))
    keras_shapes = [tuple(layer.output.shape[1:]) for layer in keras_model.layers]
    torch_shapes = [s if len(s) == 1 else (s[1], s[2], s[0]) for s in spec.output_shapes(model_spec, (1, 28, 28))]
    assert keras_shapes == torch_shapes
    spec.copy_torch_weights_to_keras(torch_model, keras_model, model_spec, (1, 28, 28))
    x = np.random.default_rng(0).random((4, 1, 28, 28), dtype=np.float32)
    expected = torch_model(torch.from_numpy(x)).detach().numpy()
    got = np.asarray(keras_model(x.transpose(0, 2, 3, 1), training=False))
    assert np.abs(expected - got).max() <= 1e-5


def test_keras_builder_refuses_what_the_torch_builder_refuses():
    with pytest.raises(ValueError, match="add a 'flatten' layer"):
        spec.build_keras([spec.conv2d(4), spec.dense(3)], (1, 8, 8))


def _python(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_logical_cpu_devices_are_made_before_tensorflow_starts():
    done = _python("""
        from lab_utils import tf_distribute
        devices = tf_distribute.configure_devices(3)
        import tensorflow as tf
        print(devices.kind, len(devices.names), len(tf.distribute.MirroredStrategy(devices.names).extended.worker_devices))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["logical-cpu", "3", "3"]


def test_configuring_after_tensorflow_started_says_to_restart_the_kernel():
    done = _python("""
        import tensorflow as tf
        tf.config.list_logical_devices()  # initialises the runtime
        from lab_utils import tf_distribute
        tf_distribute.configure_devices(2)
    """)
    assert done.returncode != 0
    assert "already initialised" in done.stderr and "Restart the kernel" in done.stderr


def test_device_counts_are_checked():
    with pytest.raises(ValueError, match="positive integer"):
        tf_distribute.configure_devices(0)


def test_two_multiworker_workers_train_identical_weights_close_to_one_worker():
    from lab_utils.tf_distribute import TFTrainConfig, launch_workers, train_worker

    cfg = TFTrainConfig(steps=3, global_batch=32, image_side=8)
    workers = launch_workers(train_worker, 2, args=(cfg,), timeout=240)
    assert [w["replicas"] for w in workers] == [2, 2]
    assert np.abs(workers[0]["weights"] - workers[1]["weights"]).max() <= 1e-6
    single = launch_workers(train_worker, 1, args=(TFTrainConfig(steps=3, global_batch=32, image_side=8, multiworker=False),),
                            timeout=240)[0]
    assert np.abs(single["weights"] - workers[0]["weights"]).max() <= 1e-4  # same global batches, other sum order
    assert single["losses"][0] == pytest.approx(workers[0]["losses"][0], abs=1e-5)


def test_a_failing_worker_is_named_and_a_hung_one_times_out_leaving_nothing():
    import multiprocessing

    from lab_utils.launch import RankError
    from lab_utils.tf_distribute import failing_worker, hanging_worker, launch_workers

    with pytest.raises(RankError, match="worker 1 could not read its shard") as info:
        launch_workers(failing_worker, 2, timeout=60)
    assert info.value.rank == 1
    with pytest.raises(TimeoutError):
        launch_workers(hanging_worker, 2, timeout=20)
    assert multiprocessing.active_children() == []


def test_tf_config_names_every_worker_on_loopback():
    config = tf_distribute.tf_config([1111, 2222], 1)
    assert config == {"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]}, "task": {"type": "worker", "index": 1}}


def test_tensorflow_start_up_lines_are_filtered_and_other_stderr_kept(tmp_path):
    fake = tmp_path / "tensorflow.py"
    fake.write_text("import os\nos.write(2, b'WARNING: All log messages before absl::InitializeLog() is called\\n"
                    "I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on\\na real warning\\n')\n")
    done = _python(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from lab_utils import tf_distribute
        print(tf_distribute.import_tensorflow().__file__)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(fake)
    assert done.stderr.strip() == "a real warning"


def test_configuring_devices_prints_nothing_on_stderr():
    done = _python("""
        from lab_utils import tf_distribute
        tf_distribute.configure_devices(2)
        import tensorflow as tf
        print(len(tf.config.list_logical_devices("CPU")))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "2" and done.stderr == ""


def test_keras_fit_cannot_drive_multiworker_strategy_so_the_lab_says_so():
    # keras-team/keras#20585: when Keras learns this, lab 05's section 5 must change
    from lab_utils.tf_distribute import TFTrainConfig, keras_fit_worker, launch_workers

    workers = launch_workers(keras_fit_worker, 2, args=(TFTrainConfig(steps=2, global_batch=32, image_side=8),), timeout=240)
    assert all(w["error"] and "PerReplica" in w["error"] for w in workers), workers


def test_unknown_dataset_is_refused():
    with pytest.raises(ValueError, match="'digits' or 'synthetic'"):
        tf_distribute.train_custom_loop(tf_distribute.TFTrainConfig(dataset="mnist", multiworker=False))
