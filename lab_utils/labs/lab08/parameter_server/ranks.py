"""Lab 08's ranks: the server pinned beside worker 1 when cores are short, and `run`, which launches the notebook's
run_all (lab_utils.labs.lab08.lesson, passed in) for the benchmark, the GPU check, the exercise check and the tests,
every config in turn in one launch (`interleaved` orders their rounds)."""
from __future__ import annotations

import os

from .... import hardware, measure
from ....launch import launch


def pin_server_beside_worker_1(rank: int, world_size: int) -> None:
    """With fewer CPU cores than ranks, pin worker w to core (w - 1) mod cores, the server (rank 0) to worker 1's."""
    if not hasattr(os, "sched_setaffinity") or hardware.rank_device()[0] != "cpu":
        return
    cores = sorted(os.sched_getaffinity(0))
    # the server beside worker 1: the same worker shares its core every run
    if 1 < len(cores) < world_size:  # ranks that fit the cores are left to the operating system, as launch leaves them
        os.sched_setaffinity(0, {cores[max(rank - 1, 0) % len(cores)]})


class _Seated:
    """Lab 08's server or worker for a launch whose runs take different numbers of workers: at its i-th call (run i)
    it passes seats[i] as the number of workers, and a worker rank above that sits the run out (returns None)."""

    def __init__(self, fn, seats, server: bool):
        self.fn, self.seats, self.server, self.calls = fn, list(seats), server, 0

    def __call__(self, *args):
        seats, self.calls = self.seats[self.calls], self.calls + 1
        if self.server:  # serve(n_workers, cfg)
            return self.fn(seats, args[1])
        rank, _, cfg, device = args  # work(rank, n_workers, cfg, device)
        return self.fn(rank, seats, cfg, device) if rank <= seats else None


def run(run_all, configs, serve, work, n_workers=2, timeout_s: float = 180.0) -> list:
    """Every config in turn, in one launch of lab 08's run_all (lab_utils.labs.lab08.lesson, generated from its notebook,
    passed in: a module the labs import never imports the generated lessons) with this server and worker (its serve
    and work, or edits of them made with lab_utils.variants); `n_workers`: how many workers run each config (one
    number for all, or one per config). Returns each run's server result, with `config` and the workers' results
    (`workers`) added."""
    counts = list(n_workers) if isinstance(n_workers, (list, tuple)) else [n_workers] * len(configs)
    if len(counts) != len(configs):
        raise ValueError(f"n_workers gives {len(counts)} worker counts for {len(configs)} configs: give one per config")
    configs = [c.validate(n) for c, n in zip(configs, counts)]
    if any(c.label == "hogwild" for c in configs):
        raise ValueError("run launches parameter servers only: a Hogwild run needs the notebook's shared memory")
    if len(set(counts)) > 1:
        serve, work = _Seated(serve, counts, server=True), _Seated(work, counts, server=False)
    per_rank = launch(run_all, max(counts) + 1, args=(configs, work, serve), timeout=timeout_s)
    return [dict(server, config=c, workers=[w for w in workers if w is not None])
            for c, server, *workers in zip(configs, *per_rank)]


def interleaved(configs_per_round, repeats: int) -> list:
    """`repeats` rounds of the configs, every other round in reverse order (measure.alternating_rounds)."""
    return measure.alternating_rounds(configs_per_round, repeats)
