"""A framework-neutral CNN description (a list of layer dicts), named presets, and the torch builder."""
from __future__ import annotations

import copy
import math
import textwrap
from typing import Any

# Each layer is a dict with a "type" and that type's parameters; these are all the types and parameters.
LAYER_PARAMS: dict[str, dict[str, Any]] = {
    "conv2d": {"filters": None, "kernel_size": 3, "stride": 1, "padding": "same", "activation": "relu"},
    "maxpool2d": {"pool_size": 2},
    "batchnorm": {},
    "dropout": {"rate": 0.5},
    "flatten": {},
    "dense": {"units": None, "activation": "relu"},
}
ACTIVATIONS = (None, "relu")


def conv2d(filters, kernel_size=3, stride=1, padding="same", activation="relu") -> dict:
    """A 2-D convolution layer spec."""
    return {"type": "conv2d", "filters": filters, "kernel_size": kernel_size, "stride": stride,
            "padding": padding, "activation": activation}


def maxpool2d(pool_size=2) -> dict:
    """A max-pooling layer spec."""
    return {"type": "maxpool2d", "pool_size": pool_size}


def dense(units, activation="relu") -> dict:
    """A fully connected layer spec."""
    return {"type": "dense", "units": units, "activation": activation}


def flatten() -> dict:
    """Flatten (C, H, W) to a vector."""
    return {"type": "flatten"}


def cnn2d_2layer_fullconnected_2layer(num_classes: int = 10) -> list[dict]:
    """The original material's small network: 2 conv + 2 fully connected layers."""
    return [conv2d(16), maxpool2d(), conv2d(32), maxpool2d(), flatten(),
            dense(64), dense(num_classes, activation=None)]


def cnn2d_3layer_fullconnected_3layer(num_classes: int = 10) -> list[dict]:
    """The original material's larger network: 3 conv + 3 fully connected layers."""
    return [conv2d(16), maxpool2d(), conv2d(32), maxpool2d(), conv2d(64), maxpool2d(), flatten(),
            dense(128), dense(64), dense(num_classes, activation=None)]


def with_batchnorm(layers: list[dict]) -> list[dict]:
    """The same layers with a BatchNorm after every convolution."""
    return [x for layer in layers for x in ([layer, {"type": "batchnorm"}] if layer["type"] == "conv2d" else [layer])]


PRESETS = {f.__name__: f for f in (cnn2d_2layer_fullconnected_2layer, cnn2d_3layer_fullconnected_3layer)}


def preset(name: str, num_classes: int = 10) -> list[dict]:
    """A named preset spec."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name](num_classes)


def validate(spec: list[dict]) -> list[dict]:
    """Check every layer and fill in defaults; returns a new, complete spec."""
    if not spec:
        raise ValueError("a model spec needs at least one layer")
    full = []
    for i, layer in enumerate(spec):
        kind = layer.get("type") if isinstance(layer, dict) else None
        if kind not in LAYER_PARAMS:
            raise ValueError(f"layer {i}: unknown type {kind!r}; known types: {sorted(LAYER_PARAMS)}")
        unknown = set(layer) - set(LAYER_PARAMS[kind]) - {"type"}
        if unknown:
            raise ValueError(f"layer {i} ({kind}): unknown parameter(s) {sorted(unknown)}; allowed: {sorted(LAYER_PARAMS[kind])}")
        params = {**LAYER_PARAMS[kind], **copy.deepcopy(layer)}
        missing = [k for k, default in LAYER_PARAMS[kind].items() if default is None and params[k] is None]
        if missing:
            raise ValueError(f"layer {i} ({kind}): missing required parameter(s) {missing}")
        if params.get("activation", None) not in ACTIVATIONS:
            raise ValueError(f"layer {i} ({kind}): activation must be one of {ACTIVATIONS}, got {params['activation']!r}")
        if kind == "conv2d" and params["padding"] not in ("same", "valid"):
            raise ValueError(f"layer {i} (conv2d): padding must be 'same' or 'valid', got {params['padding']!r}")
        if kind == "conv2d" and params["padding"] == "same" and (params["stride"] != 1 or params["kernel_size"] % 2 == 0):
            raise ValueError(f"layer {i} (conv2d): padding='same' needs stride 1 and an odd kernel_size")
        full.append(params)
    return full


class _Shrunk(ValueError):
    """A layer shrinks the input to nothing."""


def _shapes(spec: list[dict], input_shape) -> list[tuple[int, ...]]:
    shape = tuple(input_shape)
    shapes = []
    for i, layer in enumerate(validate(spec)):
        kind = layer["type"]
        if kind in ("conv2d", "maxpool2d", "batchnorm") and len(shape) != 3:
            raise ValueError(f"layer {i} ({kind}) needs a (C, H, W) input but gets {shape}; put it before 'flatten'")
        if kind == "dense" and len(shape) != 1:
            raise ValueError(f"layer {i} (dense) needs a flat input but gets {shape}; add a 'flatten' layer before it")
        if kind == "conv2d":
            c, h, w = shape
            k, s = layer["kernel_size"], layer["stride"]
            if layer["padding"] == "valid":
                h, w = (h - k) // s + 1, (w - k) // s + 1
            shape = (layer["filters"], h, w)
        elif kind == "maxpool2d":
            p = layer["pool_size"]
            shape = (shape[0], shape[1] // p, shape[2] // p)
        elif kind == "flatten":
            shape = (math.prod(shape),)
        elif kind == "dense":
            shape = (layer["units"],)
        if min(shape) < 1:
            raise _Shrunk(f"layer {i} ({kind}) shrinks the input {tuple(input_shape)} to {shape}")
        shapes.append(shape)
    return shapes


def min_image_side(spec: list[dict], channels: int = 1, limit: int = 4096) -> int:
    """The smallest square image side the spec takes (its poolings and valid convolutions leave >= 1 pixel)."""
    for side in range(1, limit + 1):
        try:
            _shapes(spec, (channels, side, side))
            return side
        except _Shrunk:
            continue
    raise ValueError(f"the spec takes no square image up to {limit}x{limit}")


def output_shapes(spec: list[dict], input_shape) -> list[tuple[int, ...]]:
    """The output shape (without batch) after each layer, for an input of (C, H, W)."""
    try:
        return _shapes(spec, input_shape)
    except _Shrunk as err:
        side = min_image_side(spec, tuple(input_shape)[0])
        raise ValueError(textwrap.fill(  # under 100 columns as 'ValueError: ...' (learners: a line of 178 characters)
            f"{err}: this model needs images of at least {side}x{side} pixels; use larger images, or a model with "
            "fewer pooling layers", 88, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)) from None


def parameter_counts(spec: list[dict], input_shape) -> list[int]:
    """Trainable parameters of each layer, computed from the spec alone."""
    counts = []
    shape = tuple(input_shape)
    for layer, out in zip(validate(spec), output_shapes(spec, input_shape)):
        kind = layer["type"]
        if kind == "conv2d":
            counts.append(layer["filters"] * (shape[0] * layer["kernel_size"] ** 2 + 1))
        elif kind == "dense":
            counts.append(layer["units"] * (shape[0] + 1))
        elif kind == "batchnorm":
            counts.append(2 * shape[0])
        else:
            counts.append(0)
        shape = out
    return counts


def describe(spec: list[dict], input_shape, *, defaults: bool = True) -> str:
    """A table of layers, output shapes and parameter counts; defaults=False leaves out arguments at their default."""
    full = validate(spec)
    names = [layer["type"] + "(" + ", ".join(f"{k}={v}" for k, v in layer.items() if k != "type" and (
        defaults or LAYER_PARAMS[layer["type"]].get(k) is None or v != LAYER_PARAMS[layer["type"]][k])) + ")"
             for layer in full]
    names = [n.replace("()", "") for n in names]
    width = max(len(n) for n in names + ["layer"])
    counts = parameter_counts(spec, input_shape)
    lines = [f"{'#':>2}  {'layer':<{width}}  {'output':<13} {'params':>8}",
             f"{'':>2}  {'input':<{width}}  {str(tuple(input_shape)):<13}"]
    for i, (name, shape, n) in enumerate(zip(names, output_shapes(spec, input_shape), counts)):
        lines.append(f"{i:>2}  {name:<{width}}  {str(shape):<13} {n:>8,}")
    lines.append(f"total trainable parameters: {sum(counts):,}")
    if not defaults:
        lines.append("(arguments at their defaults left out: lab_utils.spec.LAYER_PARAMS lists them)")
    return "\n".join(lines)


def init_weights(model, seed: int):
    """Re-draw conv and dense weights as torch's default init does; one `seed` gives the same weights anywhere."""
    import torch
    from torch import nn

    generator = torch.Generator().manual_seed(seed)  # not the global one: concurrent builds cannot interleave draws
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                # torch's reset_parameters: kaiming_uniform_(a=sqrt(5)) for the weight, U(-1/sqrt(fan_in), ...) for the bias
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:
                    bound = 1 / math.sqrt(module.weight[0].numel())
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
    return model


def build_torch(spec: list[dict], input_shape, *, seed: int | None = None):
    """The spec as a torch.nn.Sequential; `seed` fixes the initial weights (see init_weights)."""
    from torch import nn

    full = validate(spec)
    shapes = [tuple(input_shape)] + output_shapes(spec, input_shape)
    modules: list[nn.Module] = []
    for layer, shape in zip(full, shapes):
        kind = layer["type"]
        if kind == "conv2d":
            pad = layer["kernel_size"] // 2 if layer["padding"] == "same" else 0
            modules.append(nn.Conv2d(shape[0], layer["filters"], layer["kernel_size"], layer["stride"], pad))
        elif kind == "maxpool2d":
            modules.append(nn.MaxPool2d(layer["pool_size"]))
        elif kind == "batchnorm":
            modules.append(nn.BatchNorm2d(shape[0]))
        elif kind == "dropout":
            modules.append(nn.Dropout(layer["rate"]))
        elif kind == "flatten":
            modules.append(nn.Flatten())
        elif kind == "dense":
            modules.append(nn.Linear(shape[0], layer["units"]))
        if layer.get("activation") == "relu":
            modules.append(nn.ReLU())
    model = nn.Sequential(*modules)
    return init_weights(model, seed) if seed is not None else model


def build_keras(spec: list[dict], input_shape, *, seed: int | None = None):
    """The spec as a keras.Sequential, channels-last: input_shape (C, H, W) in torch's order becomes (H, W, C)."""
    import keras

    full = validate(spec)
    output_shapes(spec, input_shape)  # the same shape errors as the torch builder
    if seed is not None:
        keras.utils.set_random_seed(seed)
    c, h, w = input_shape if len(input_shape) == 3 else (1, *input_shape)
    layers = [keras.Input((h, w, c))]
    for layer in full:
        kind = layer["type"]
        if kind == "conv2d":
            layers.append(keras.layers.Conv2D(layer["filters"], layer["kernel_size"], strides=layer["stride"],
                                              padding=layer["padding"], activation=layer["activation"]))
        elif kind == "maxpool2d":
            layers.append(keras.layers.MaxPooling2D(layer["pool_size"]))
        elif kind == "batchnorm":
            # torch's defaults: momentum 0.1 (keras counts the other way) and eps 1e-5
            layers.append(keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5))
        elif kind == "dropout":
            layers.append(keras.layers.Dropout(layer["rate"]))
        elif kind == "flatten":
            layers.append(keras.layers.Flatten())
        elif kind == "dense":
            layers.append(keras.layers.Dense(layer["units"], activation=layer["activation"]))
    return keras.Sequential(layers)


def copy_torch_weights_to_keras(torch_model, keras_model, spec: list[dict], input_shape) -> None:
    """Give the Keras model the torch model's weights, so both compute the same function (channels-last aware)."""
    import numpy as np

    full = validate(spec)
    shapes = [tuple(input_shape)] + output_shapes(spec, input_shape)
    torch_layers = [m for m in torch_model if len(list(m.parameters())) or hasattr(m, "running_mean")]
    keras_layers = [l for l in keras_model.layers if l.weights]
    if len(torch_layers) != len(keras_layers):
        raise ValueError(f"the models differ: {len(torch_layers)} torch layers with weights, {len(keras_layers)} Keras ones")
    after_flatten = None
    layer_iter = iter(zip(torch_layers, keras_layers))
    for layer, shape in zip(full, shapes):
        kind = layer["type"]
        if kind == "flatten":
            after_flatten = shape  # (C, H, W) before flattening
            continue
        if kind not in ("conv2d", "dense", "batchnorm"):
            continue
        t, k = next(layer_iter)
        if kind == "conv2d":
            k.set_weights([t.weight.detach().numpy().transpose(2, 3, 1, 0), t.bias.detach().numpy()])
        elif kind == "batchnorm":
            k.set_weights([t.weight.detach().numpy(), t.bias.detach().numpy(), t.running_mean.numpy(), t.running_var.numpy()])
        else:
            weight = t.weight.detach().numpy()  # (out, in)
            if after_flatten is not None:  # torch flattened (C, H, W), Keras flattens (H, W, C)
                c, h, w = after_flatten
                weight = weight.reshape(-1, c, h, w).transpose(0, 2, 3, 1).reshape(weight.shape[0], -1)
                after_flatten = None
            k.set_weights([np.ascontiguousarray(weight.T), t.bias.detach().numpy()])
