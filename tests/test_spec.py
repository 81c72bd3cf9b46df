import re

import pytest
import torch

from lab_utils import spec


@pytest.mark.parametrize("name", sorted(spec.PRESETS))
@pytest.mark.parametrize("input_shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_presets_build_and_match_the_spec(name, input_shape):
    layers = spec.preset(name, num_classes=7)
    model = spec.build_torch(layers, input_shape, seed=0)
    assert sum(p.numel() for p in model.parameters()) == sum(spec.parameter_counts(layers, input_shape))
    assert model(torch.zeros(5, *input_shape)).shape == (5, 7)
    assert spec.output_shapes(layers, input_shape)[-1] == (7,)


def test_preset_layer_counts_match_their_names():
    for name, convs, denses in [("cnn2d_2layer_fullconnected_2layer", 2, 2), ("cnn2d_3layer_fullconnected_3layer", 3, 3)]:
        kinds = [layer["type"] for layer in spec.preset(name)]
        assert kinds.count("conv2d") == convs and kinds.count("dense") == denses


def test_valid_padding_batchnorm_and_dropout():
    layers = [spec.conv2d(4, kernel_size=3, padding="valid"), {"type": "batchnorm"}, {"type": "dropout", "rate": 0.1},
              spec.flatten(), spec.dense(3, activation=None)]
    assert spec.output_shapes(layers, (2, 6, 6))[0] == (4, 4, 4)
    model = spec.build_torch(layers, (2, 6, 6))
    assert sum(p.numel() for p in model.parameters()) == sum(spec.parameter_counts(layers, (2, 6, 6)))


def test_seed_fixes_initial_weights():
    a = spec.build_torch(spec.preset("cnn2d_2layer_fullconnected_2layer"), (1, 8, 8), seed=1)
    b = spec.build_torch(spec.preset("cnn2d_2layer_fullconnected_2layer"), (1, 8, 8), seed=1)
    c = spec.build_torch(spec.preset("cnn2d_2layer_fullconnected_2layer"), (1, 8, 8), seed=2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


@pytest.mark.parametrize("layers, message", [
    ([], "at least one layer"),
    ([{"type": "conv3d"}], "unknown type 'conv3d'"),
    ([{"type": "conv2d", "filters": 4, "kernel": 3}], r"unknown parameter\(s\) \['kernel'\]"),
    ([{"type": "conv2d"}], r"missing required parameter\(s\) \['filters'\]"),
    ([spec.dense(4, activation="tanh")], "activation must be one of"),
    ([spec.conv2d(4, padding="full")], "padding must be 'same' or 'valid'"),
    ([spec.conv2d(4, kernel_size=2)], "needs stride 1 and an odd kernel_size"),
])
def test_invalid_specs_are_explained(layers, message):
    with pytest.raises(ValueError, match=message):
        spec.validate(layers)


def test_shape_errors_say_how_to_fix():
    with pytest.raises(ValueError, match="add a 'flatten' layer"):
        spec.output_shapes([spec.dense(4)], (1, 8, 8))
    with pytest.raises(ValueError, match="put it before 'flatten'"):
        spec.output_shapes([spec.flatten(), spec.conv2d(4)], (1, 8, 8))
    with pytest.raises(ValueError, match="shrinks the input"):
        spec.output_shapes([spec.maxpool2d(), spec.maxpool2d(), spec.maxpool2d()], (1, 4, 4))


@pytest.mark.parametrize("name, side", [("cnn2d_2layer_fullconnected_2layer", 4), ("cnn2d_3layer_fullconnected_3layer", 8)])
def test_too_small_images_are_refused_naming_the_smallest_the_model_takes(name, side):
    layers = spec.preset(name, num_classes=4)
    assert spec.min_image_side(layers) == side
    spec.build_torch(layers, (1, side, side))
    with pytest.raises(ValueError) as refused:
        spec.build_torch(layers, (1, side - 1, side - 1))
    said = " ".join(str(refused.value).split())  # wrapped: under 100 columns as 'ValueError: ...' (learners: 178)
    assert re.search(rf"shrinks the input \(1, {side - 1}, {side - 1}\).*this model needs images of at least "
                     rf"{side}x{side} pixels; use larger images, or a model with fewer", said), said
    assert max(len(line) for line in f"ValueError: {refused.value}".splitlines()) <= 100


def test_valid_convolutions_count_in_the_smallest_side():
    assert spec.min_image_side([spec.conv2d(4, kernel_size=5, padding="valid"), spec.maxpool2d()]) == 6


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown model preset 'resnet'"):
        spec.preset("resnet")


def test_describe_lists_every_layer_and_the_total():
    text = spec.describe(spec.preset("cnn2d_2layer_fullconnected_2layer"), (1, 8, 8))
    assert text.count("\n") == 2 + 7
    assert "total trainable parameters: 13,706" in text


def test_describe_can_leave_out_arguments_at_their_defaults():
    """Lab 08's layer table (learner s11g): 102 columns with every default spelled out; defaults=False leaves them out."""
    from lab_utils import spec as S

    layers = [{"type": "conv2d", "filters": 16, "kernel_size": 3, "stride": 1, "padding": "same", "activation": "relu"},
              {"type": "flatten"}, {"type": "dense", "units": 10, "activation": None}]
    short = S.describe(layers, (1, 8, 8), defaults=False)
    assert "conv2d(filters=16) " in short and "dense(units=10, activation=None)" in short and "stride" not in short
    assert "defaults left out" in short
    assert "conv2d(filters=16, kernel_size=3, stride=1, padding=same, activation=relu)" in S.describe(layers, (1, 8, 8))
