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
