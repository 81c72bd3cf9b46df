"""Lab 03's speed comparison read one way: when a row of N workers beats the one-thread baseline by more than N, the
baseline ran slow in this run (the [!] under the table says so), so no ratio over it is read, anywhere."""
from __future__ import annotations


def slowed_baseline(rates: dict[str, float], base_name: str, world_size: int) -> str | None:
    """Why this run's one-thread baseline reads as slowed, or None: a row beat it by more than `world_size`, which
    the same work on `world_size` times the hardware cannot (plausibility's [!] rule: speedup above the devices)."""
    base = rates[base_name]
    over = {name: rate / base for name, rate in rates.items() if name != base_name and rate / base > world_size}
    if not over:
        return None
    name, ratio = max(over.items(), key=lambda kv: kv[1])
    return (f"the one-thread baseline ran slow in this run ({name} got {ratio:.2f}x it on {world_size}x the "
            "hardware, more than the same work can gain)")


def speed_summary(rates: dict[str, float], base_name: str, world_size: int, slowed: str | None) -> str:
    """The summary's speed figures: over one thread and over N threads, or, with a slowed baseline, only the ratios
    that do not use it (DDP over N threads, Horovod-style over DDP) and why the others are not read."""
    ddp, threads = rates[f"{world_size} ranks, DDP"], rates[f"1 process x {world_size} threads"]
    horovod, base = rates[f"{world_size} ranks, Horovod-style"], rates[base_name]
    if slowed:
        return (f"{world_size} DDP ranks {ddp / threads:.2f}x one process with {world_size} threads; Horovod-style "
                f"{horovod / ddp:.2f}x DDP; over one thread: not read, {slowed}")
    return (f"{world_size} DDP ranks {ddp / base:.2f}x one thread, {ddp / threads:.2f}x one process with {world_size} "
            f"threads; Horovod-style {horovod / base:.2f}x one thread")
