"""Around lab 02's DataParallel (its notebook's class, lab_utils.labs.lab02.lesson), one idea per module:

- `devices`: the devices the replicas run on, planned for this machine;
- `phases`: the phases the exercises write (scatter, gather, reduce_gradients), the bytes they move, a step's report;
- `threads`: the threads and timer under its step (DevicePool, PhaseTimer), and one device's step;
- `sweep`: DataParallel and threads against one device over batch sizes (the notebook and `bench dp`);
- `tables`: the notebook's own table cells and lines (refused hot-spot times, the launched speedup's
  status, the allocator trap's lines).
"""
from __future__ import annotations

from ....compare import max_abs_diff  # lab 02's notebook calls it as data_parallel.max_abs_diff
from ....tensors import tensor_bytes  # lab 02's notebook calls it as data_parallel.tensor_bytes
from .devices import DevicePlan, plan_devices
from .phases import (COORDINATOR_PHASES, PHASES, StepReport, gather, median_phase_seconds, reduce_gradients, replica_lines, scatter,
    split_sizes, transfer_bytes)
from .sweep import (ONE_DEVICE, SWEEP_WORKLOAD, Sweep, _sweep_result, device0_alone_ms, dp_name, figures_explained, per_row_line, phase_table, print_sweep, range_text, recorded,
                    refusal_line, refused, sweep, threaded_name, time_in_rounds, wins_line)
from .tables import (AGREES, CONTRADICTS, LaunchedFate, allocator_lines, fresh_pages_line, hotspot_times, trap_payoff_line, launched_batches, launched_fate,
                     oversubscribed_line, slower_line, traced_line, StepFigure, one_figure_lines)
from .threads import DevicePool, PhaseTimer, blocks_above, gradients, page_faults, settle, single_device_step

__all__ = ["AGREES", "CONTRADICTS", "LaunchedFate", "allocator_lines", "blocks_above", "fresh_pages_line", "trap_payoff_line", "launched_batches", "launched_fate", "per_row_line", "phase_table", "slower_line",
           "traced_line", "StepFigure", "one_figure_lines", "device0_alone_ms", "hotspot_times", "oversubscribed_line", "page_faults", "COORDINATOR_PHASES", "ONE_DEVICE", "PHASES", "SWEEP_WORKLOAD", "DevicePlan", "DevicePool", "PhaseTimer",
           "StepReport", "Sweep", "dp_name", "figures_explained", "gather", "gradients", "max_abs_diff", "median_phase_seconds",
           "plan_devices", "print_sweep", "recorded", "reduce_gradients", "replica_lines", "refusal_line", "refused", "scatter", "settle", "single_device_step", "split_sizes", "sweep",
           "tensor_bytes", "threaded_name", "time_in_rounds", "wins_line", "transfer_bytes", "range_text"]
