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


def layer_name(module, before=()) -> str:
    """A leaf layer of the model by its kind and shape ('dense 1568x2048', 'conv2d 1->16'); a layer without weights by
    its kind and how many of that kind come before it in `before` ('relu #2')."""
    import torch

    if isinstance(module, torch.nn.Linear):
        return f"dense {module.in_features}x{module.out_features}"
    if isinstance(module, torch.nn.Conv2d):
        return f"conv2d {module.in_channels}->{module.out_channels}"
    kind = type(module).__name__.lower()
    return f"{kind} #{1 + sum(type(m) is type(module) for m in before)}"


def layer_times_by_batch(model, images, sizes, *, repeats: int = 5, device: str = "cpu") -> dict:
    """Every leaf layer of the model alone, timed at each batch size in `sizes` on the inputs the model gives it
    (interleaved rounds): {layer name: {size: measure.Timing}}, in the model's order."""
    import functools

    import torch

    from .... import measure

    leaves = [m for m in model.modules() if not list(m.children())]
    inputs: dict = {}
    hooks = [m.register_forward_pre_hook(lambda m, args: inputs.setdefault((id(m), len(args[0])), args[0]))
             for m in leaves]
    try:
        with torch.inference_mode():
            for b in sizes:
                model(images[:b].to(device))
    finally:
        for hook in hooks:
            hook.remove()
    counted = [(layer_name(m, leaves[:i]), m) for i, m in enumerate(leaves)]
    fns = {(name, b): functools.partial(m, inputs[(id(m), b)]) for name, m in counted for b in sizes}
    with torch.inference_mode():
        times = measure.time_interleaved(fns, warmup=1, repeats=repeats, device=device)
    return {name: {b: times[(name, b)] for b in sizes} for name, _ in counted}


def layer_line(layers: dict, small_batch: int, large_batch: int, gap_s: float, *, per_sample: bool = False) -> str:
    """Which layer carries a pair's inversion, from layer_times_by_batch: the one whose own time inverts most (less
    time at the larger batch; with `per_sample`, more than the batch ratio times its time at the smaller one), named where it
    inverts in every round and by at least half the whole forward's gap `gap_s` (seconds, the sweep's medians: a
    tiny layer can invert in every round by chance); else that no layer alone does (learner s13r6h: 'the model's
    other layers, which this lab does not time one by one')."""
    import statistics

    work = large_batch / small_batch

    def excess(timings) -> list[float]:  # per round: how far this layer inverts theory's order (> 0: it does)
        small, large = timings[small_batch].times, timings[large_batch].times
        return [lg - work * sm if per_sample else sm - lg for sm, lg in zip(small, large)]

    def carries(timings) -> bool:
        return all(e > 0 for e in excess(timings)) and statistics.median(excess(timings)) >= 0.5 * gap_s

    def rank(item) -> tuple[bool, float]:  # a layer that carries it first, then by its median excess
        return carries(item[1]), statistics.median(excess(item[1]))

    name, timings = max(layers.items(), key=rank)
    small, large = timings[small_batch].median, timings[large_batch].median
    figures = (f"{small / small_batch * 1e3:.3f} vs {large / large_batch * 1e3:.3f} ms per sample" if per_sample else
               f"{small * 1e3:.3f} vs {large * 1e3:.3f} ms per batch")
    share = statistics.median(excess(timings)) / gap_s if gap_s > 0 else 0.0
    rounds = len(timings[small_batch].times)
    head = f"each layer alone at batch {small_batch} and {large_batch} (medians of {rounds} rounds): "
    if carries(timings):
        return (head + f"the {name} layer carries it, {figures} ({share:.0%} of the whole pass's gap), in every "
                "round: its own kernel does it (the math library picks one by the batch size)")
    inverted = sum(e > 0 for e in excess(timings))
    spread = max(timings[small_batch].spread, timings[large_batch].spread)
    # learner s13r7h: 'no one layer carries it (the most: ..., 136% of the whole pass's gap, in 3 of 5 rounds)'
    # read as self-contradictory; the layer's own scatter is why its medians name no cause
    return (head + f"no layer inverts in every round, so none is named the cause; the nearest, the {name} layer "
            f"({figures}), did in {inverted} of {rounds} rounds only (its repeats spread {spread:.0%})")
