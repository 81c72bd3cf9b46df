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
