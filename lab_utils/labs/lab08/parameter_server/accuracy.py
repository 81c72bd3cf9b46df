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


def clocks_legend(clocks, target: float | None = None) -> str:
    """What the accuracy table's rows show of its two clocks (defined in the markdown above it): `clocks` are (run
    clock s, steady-rate s) of the rows that reached `target` (the others have no clocks); one short computed line."""
    clocks = list(clocks)
    clocks = [(round(run, 2), round(steady, 2)) for run, steady in clocks]  # as the table prints them
    # one unit of the printed 0.01 s apart is the table's rounding, not a finding (learner s11g: 0.07 vs 0.08)
    larger = sum(run - steady > 0.015 for run, steady in clocks)
    smaller = sum(steady - run > 0.015 for run, steady in clocks)
    reached = f" that reached {target:.0%}" if target is not None else ""
    text = (f"run clock s above steady-rate s (the first gradients ran slower): {larger} of the "
            f"{len(clocks)} rows{reached}")
    if smaller:  # the run's first stretch ran faster than its own later rate (a busier machine later, say)
        text += f"; below it in {smaller} (the first gradients ran faster)"
    same = len(clocks) - larger - smaller
    if same:  # learner s10l: 'in the others' stood for one row
        text += ("; equal within 0.01 s in the other one: its first gradients cost nothing extra"
                 if same == 1 else
                 f"; equal within 0.01 s in {'all' if same == len(clocks) else 'the other'} {same}: their first "
                 "gradients cost nothing extra")
    return text + "."
