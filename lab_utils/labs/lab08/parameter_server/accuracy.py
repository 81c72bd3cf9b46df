"""Accuracy of a run's weights: test accuracy of flat weights, a run's accuracy curve, runs that diverged, when a curve
first reaches a target."""
from __future__ import annotations

import numpy as np
import torch
from torch.nn.utils import vector_to_parameters

from .... import data
from .shards import build_model


@torch.no_grad()
def accuracy_of(flat_weights, split: data.Split, model=None) -> float:
    """Test accuracy of the course CNN holding these flat weights."""
    model = model or build_model(split, seed=0)
    vector_to_parameters(torch.as_tensor(np.asarray(flat_weights)).clone(), model.parameters())
    logits = model(torch.from_numpy(split.x_test))
    return float((logits.argmax(1) == torch.from_numpy(split.y_test)).float().mean())


def accuracy_curve(result: dict, split: data.Split) -> dict:
    """{'samples', 'seconds', 'accuracy'} at each weight snapshot a run kept (no seconds for a replay, which has no
    clock)."""
    model = build_model(split, seed=0)
    return {"samples": list(result["snapshot_samples"]), "seconds": list(result.get("snapshot_seconds", [])),
            "accuracy": [accuracy_of(w, split, model) for w in result["snapshots"]]}


LATE = 3  # a run's late accuracy: the mean test accuracy of its last this many weight snapshots


def late_accuracy(result: dict, split: data.Split, last: int = LATE, model=None) -> float:
    """Mean test accuracy of a run's last `last` weight snapshots (its final weights where it kept none): an
    asynchronous run's accuracy swings from one snapshot to the next, so its final snapshot alone is a noisy figure."""
    model = model or build_model(split, seed=0)
    snapshots = list(result.get("snapshots", []))[-last:] or [result["weights"]]
    return float(np.mean([accuracy_of(w, split, model) for w in snapshots]))


def diverged(accuracy: float, num_classes: int = 10) -> bool:
    """True for an accuracy below twice chance: the run diverged (or never learned), it did not just lag."""
    return accuracy < 2 / num_classes


def divergence_flags(accuracies, num_classes: int = 10) -> list[str]:
    """A warning naming the runs of a setting that diverged (accuracy near chance), or none."""
    accuracies = list(accuracies)
    bad = [a for a in accuracies if diverged(a, num_classes)]
    if not bad:
        return []
    return [f"{len(bad)} of {len(accuracies)} runs diverged (late accuracy {', '.join(f'{a:.0%}' for a in bad)}, "
            f"chance is {1 / num_classes:.0%}): stale gradients with momentum can throw the weights off"]


def first_reaching(curve: dict, target: float):
    """(samples, seconds) at the first snapshot with accuracy >= target, or None."""
    for samples, seconds, accuracy in zip(curve["samples"], curve["seconds"], curve["accuracy"]):
        if accuracy >= target:
            return samples, seconds
    return None
