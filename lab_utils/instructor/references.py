"""Reference answers of lab exercises that no lab imports (the notebooks define their own): the exercise checks
(lab_utils/exercises/) and the tests compare against them.

Moved from the learner modules (parameter_server, memory, serving): those hold only what a lab imports."""
from __future__ import annotations

import itertools


# ---- lab 07 ------------------------------------------------------------------------------------------------------------

def cheapest_checkpoints(freed, extra, total: float, budget: float) -> list[int] | None:
    """The blocks to checkpoint so that total - sum(freed) fits `budget` with the least extra time (None: nothing
    fits). Every subset is tried: a few blocks only."""
    best = None
    for k in range(len(freed) + 1):
        for chosen in itertools.combinations(range(len(freed)), k):
            if total - sum(freed[i] for i in chosen) <= budget:
                cost = sum(extra[i] for i in chosen)
                if best is None or cost < best[0] - 1e-12:
                    best = (cost, list(chosen))
    return None if best is None else best[1]


# ---- lab 08 ------------------------------------------------------------------------------------------------------------

def staleness_from_order(order) -> list[int]:
    """Staleness of each gradient of an asynchronous run, from the order in which the workers' gradients were applied.

    Every worker first pulls version 0; after its gradient is applied it pulls the version that update made.
    """
    pulled: dict
    version, pulled, staleness = 0, {}, []
    for worker in order:
        staleness.append(version - pulled.get(worker, 0))
        version += 1
        pulled[worker] = version
    return staleness


def damped_lr(base_lr: float, staleness: int) -> float:
    """A gradient computed `staleness` versions ago gets 1 / (1 + staleness) of the learning rate."""
    return base_lr / (1 + staleness)


# ---- lab 09 ------------------------------------------------------------------------------------------------------------

def choose_max_wait(rows, budget_ms: float, keep_up: float = 0.95):
    """The largest max_wait_ms whose p99 fits the budget while the server keeps up with the load, or None."""
    fits = [r["max_wait_ms"] for r in rows
            if r["p99_ms"] <= budget_ms and r["achieved_rps"] >= keep_up * r["offered_rps"]]
    return max(fits) if fits else None
