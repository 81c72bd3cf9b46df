"""Staleness and what it costs: each worker's mean staleness, and Spearman's rank correlation (staleness against
accuracy over runs)."""
from __future__ import annotations

import numpy as np


def staleness_by_worker(result: dict) -> dict[int, float]:
    """Mean staleness of each worker's applied gradients."""
    order, staleness = np.asarray(result["order"]), np.asarray(result["staleness"], dtype=float)
    return {int(w): float(staleness[order == w].mean()) for w in np.unique(order)}


def rank_correlation(xs, ys) -> float:
    """Spearman's rank correlation of two equally long sequences (ties share their mean rank); nan for fewer than 3."""
    xs, ys = np.asarray(list(xs), float), np.asarray(list(ys), float)
    if len(xs) != len(ys):
        raise ValueError(f"need as many x as y values, got {len(xs)} and {len(ys)}")
    if len(xs) < 3:
        return float("nan")

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):  # ties: the mean of their ranks
            r[v == value] = r[v == value].mean()
        return r

    rx, ry = ranks(xs), ranks(ys)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


CHANCE = 0.05  # a rank correlation this often reached by shuffled accuracies is no order of the runs


def chance_of(rho: float, xs, ys, rounds: int = 2000, seed: int = 0) -> float:
    """How often shuffling `ys` against `xs` gives a rank correlation at least as far from 0 as `rho`, on its side
    (a permutation test): a small share says the order is the runs', not chance; nan where rho is nan."""
    if not np.isfinite(rho):
        return float("nan")
    ys = list(ys)
    rng = np.random.default_rng(seed)
    shuffled = [rank_correlation(xs, rng.permutation(ys)) for _ in range(rounds)]
    return float(np.mean([s <= rho if rho < 0 else s >= rho for s in shuffled]))

