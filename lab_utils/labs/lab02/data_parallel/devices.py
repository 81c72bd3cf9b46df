"""The devices DataParallel's replicas run on, planned for this machine (DevicePlan, plan_devices)."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

import torch

from .... import hardware


@dataclass(frozen=True)
class DevicePlan:
    """Which devices the replicas run on, which implementation runs the phases, and why."""

    devices: tuple[torch.device, ...]
    backend: str  # "torch" (torch.nn.parallel on distinct GPUs) or "threads" (lab 02's DataParallel, one thread per device)
    threads_per_device: int | None
    reason: str

    def describe(self) -> str:
        names = ", ".join(f"device {i} -> {d}" for i, d in enumerate(self.devices))
        runs = ("torch.nn.parallel's scatter/replicate/parallel_apply/gather" if self.backend == "torch"
                else "lab 02's DataParallel class, one thread per device")
        why = textwrap.fill(f"why: {self.reason}", width=100, initial_indent="  ", subsequent_indent="    ",
                            break_on_hyphens=False, break_long_words=False)  # learner s12r4b: 115 columns
        return f"{len(self.devices)} device(s), phases run by {runs}\n  {names}\n{why}"


def plan_devices(n_devices: int | None = None, hw: hardware.HardwareReport | None = None,
                 backend: str = "auto") -> DevicePlan:
    """Pick devices for `n_devices` replicas: distinct GPUs, else one shared GPU, else CPU cores."""
    hw = hw or hardware.detect()
    gpus = len(hw.gpus)
    if n_devices is None:
        n_devices = gpus if gpus >= 2 else 2
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer (number of replicas), got {n_devices!r}")
    if backend not in ("auto", "torch", "threads"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'threads', got {backend!r}")
    if gpus >= n_devices:
        devices = tuple(torch.device("cuda", i) for i in range(n_devices))
        chosen = "torch" if backend == "auto" and n_devices >= 2 else ("threads" if backend == "auto" else backend)
        return DevicePlan(devices, chosen, None, f"{gpus} GPU(s): one replica per GPU, the phases are "
                          + ("torch.nn.parallel's, as in nn.DataParallel." if chosen == "torch"
                             else "DataParallel's own threads."))
    if backend == "torch":
        raise ValueError(f"backend 'torch' needs {n_devices} GPUs (torch.nn.parallel has no CPU implementation); "
                         f"this machine has {gpus}. Use backend='threads' or 'auto'.")
    if gpus:
        return DevicePlan((torch.device("cuda", 0),) * n_devices, "threads", None,
                          f"{n_devices} replicas but {gpus} GPU: the replicas share cuda:0, each thread on its own "
                          "CUDA stream, so kernels can overlap but no work is added; read phase times, not speedup.")
    cores, limit = hardware.rank_limit(hw)
    if n_devices > limit:
        raise ValueError(f"n_devices={n_devices} is impossible here: each device is a thread on a CPU core and this "
                         f"machine has {cores}; use at most {limit} (ideally <= {hw.cpu_count}).")
    reason = (f"no GPU: each device is a thread of this process on one core (torch's own threads inside one "
              f"operator, its intra-op threads, limited to one), so {n_devices} device(s) "
              f"use {n_devices} of {hw.cpu_count} core(s).")
    if n_devices > hw.cpu_count:
        reason += f" Warning: {n_devices} devices on {hw.cpu_count} core(s) are oversubscribed; do not read speed from it."
    return DevicePlan((torch.device("cpu"),) * n_devices, "threads", 1, reason)
