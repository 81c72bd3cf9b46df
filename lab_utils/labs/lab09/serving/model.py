"""Lab 09's model and requests: the wide-head CNN every server runs, and the images its requests carry."""
from __future__ import annotations

from .... import spec

DEFAULT_SHAPE = (1, 28, 28)


def wide_head_cnn(width: int = 2048, num_classes: int = 10) -> list[dict]:
    """The course CNN's two conv layers with a wide head: two dense layers of `width` (as in AlexNet/VGG)."""
    return [spec.conv2d(16), spec.maxpool2d(), spec.conv2d(32), spec.maxpool2d(), spec.flatten(),
            spec.dense(width), spec.dense(width), spec.dense(num_classes, activation=None)]


def wide_head_model(width: int = 2048, image_shape=DEFAULT_SHAPE, seed: int = 0, device: str = "cpu"):
    """The wide-head CNN in eval mode on `device`; the same seed gives the same weights in every process."""
    return spec.build_torch(wide_head_cnn(width), image_shape, seed=seed).eval().to(device)


def request_images(n: int = 256, image_shape=DEFAULT_SHAPE, seed: int = 0):
    """`n` procedural images as one float32 tensor (N, C, H, W); requests take one image each."""
    import torch

    from .... import data

    return torch.from_numpy(data.synthetic_images(n, image_shape=image_shape, seed=seed)[0])


def largest_dense_times(model, sizes, *, repeats: int = 5, device: str = "cpu") -> tuple[str, dict]:
    """The model's largest dense layer alone, timed at each batch size in `sizes` (interleaved rounds, on random
    inputs: speed does not depend on the values): its shape as text, and {size: measure.Timing}."""
    import functools

    import torch

    from .... import measure

    layer = max((m for m in model.modules() if isinstance(m, torch.nn.Linear)), key=lambda m: m.weight.numel())
    inputs = {b: torch.randn(b, layer.in_features, device=device) for b in sizes}
    with torch.inference_mode():
        times = measure.time_interleaved({b: functools.partial(layer, x) for b, x in inputs.items()},
                                         warmup=1, repeats=repeats, device=device)
    return f"{layer.in_features}x{layer.out_features}", times


def dense_line(shape: str, small_batch: int, small, large_batch: int, large, *, per_sample: bool = False) -> str:
    """One line on a pair of batch sizes whose figures invert theory's order in every round: the largest dense layer
    alone (measure.Timing at each size, same rounds) and whether it inverted the same way in every round (more time at
    the smaller batch; with `per_sample`, more time per sample at the larger batch), so explains it, or not."""
    if per_sample:
        every = all(lg / large_batch > sm / small_batch for sm, lg in zip(small.times, large.times))
        figures = (f"{small.median / small_batch * 1e3:.2f} vs {large.median / large_batch * 1e3:.2f} ms per sample "
                   f"at batch {small_batch} and {large_batch}")
    else:
        every = all(sm > lg for sm, lg in zip(small.times, large.times))
        figures = f"{small.median * 1e3:.2f} vs {large.median * 1e3:.2f} ms at batch {small_batch} and {large_batch}"
    return (f"the {shape} dense layer alone: {figures} (medians of {len(small.times)} rounds): "
            + ("the same in every round, so the matrix multiply itself explains it (the math library picks its "
               "kernel by the batch size)" if every else "not the same in every round, so this layer does not explain "
               "it: the gap lies in the model's other layers, which this lab does not time one by one"))
