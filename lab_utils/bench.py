"""Benchmarks run side by side in one process: medians of interleaved repeats, warm-up excluded."""
from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from . import data, measure, spec, train


def _plain_epoch(model, loader, optimizer) -> None:
    """The hand-written PyTorch loop the helper is compared with."""
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def _helper_epoch(model, loader, optimizer) -> None:
    """One epoch through lab_utils.train.fit (progress bar off, no evaluation)."""
    train.fit(model, loader, epochs=1, optimizer=optimizer, progress=False)


def overhead(*, samples: int = 2048, batch_size: int = 64, repeats: int = 7, seed: int = 0) -> dict:
    """Samples/s of lab_utils' loop vs a plain loop on the same model, data and steps."""
    split = data.synthetic_split(samples, 1, image_shape=(1, 28, 28), seed=seed)
    loader = data.make_loader(data.to_dataset(split.x_train, split.y_train), batch_size, seed=seed)
    model_spec = spec.cnn2d_2layer_fullconnected_2layer()
    loops = {"plain": _plain_epoch, "lab_utils": _helper_epoch}
    models = {name: spec.build_torch(model_spec, (1, 28, 28), seed=seed) for name in loops}
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for name, m in models.items()}
    timings = measure.time_interleaved(
        {name: (lambda name=name: loop(models[name], loader, optimizers[name])) for name, loop in loops.items()},
        warmup=1, repeats=repeats)
    rate = {name: measure.samples_per_second(samples, t.median) for name, t in timings.items()}
    return {"benchmark": "overhead", "samples_per_epoch": samples, "batch_size": batch_size, "repeats": repeats,
            "threads": torch.get_num_threads(), "plain_samples_per_s": round(rate["plain"], 1),
            "lab_utils_samples_per_s": round(rate["lab_utils"], 1),
            "ratio": round(rate["lab_utils"] / rate["plain"], 4)}


def print_overhead(result: dict) -> None:
    """The table, then the JSON line (last line of output)."""
    print(f"{'loop':<10} {'samples/s':>10}   (median of {result['repeats']} interleaved epochs of "
          f"{result['samples_per_epoch']} samples, batch {result['batch_size']}, {result['threads']} threads)")
    print(f"{'plain':<10} {result['plain_samples_per_s']:>10.1f}")
    print(f"{'lab_utils':<10} {result['lab_utils_samples_per_s']:>10.1f}")
    print(f"ratio lab_utils/plain = {result['ratio']:.3f} (1.0 means the helper costs nothing)")
    print(json.dumps(result))
