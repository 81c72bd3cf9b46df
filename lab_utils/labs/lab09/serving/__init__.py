"""Around lab 09's dynamic batcher (the batcher and the worker pool are its notebook's: lab_utils.labs.lab09.lesson),
one idea per module:

- `model`: the wide-head CNN every server runs, and the images its requests carry;
- `load`: requests, the Poisson load generator and bursts, one run of a batcher under a load, interleaved runs;
- `figures`: what a run measured: latency percentiles, a run's summary, where its time went, medians of repeats;
- `batching`: the reference of the exercise's flush rule (`collect`);
- `compiling`: torch.compile's cache, counters and whether it can run here;
- `plots`: the batch-size sweep, latency against throughput;
- `candidates`: strategy 3's report on the optimisation candidates timed side by side;
- `grid`: section Measure's report on the grid of servers x loads;
- `sweep`: the batch sweep's reading of sizes whose medians invert theory's order.
"""
from __future__ import annotations

from .batching import collect
from .compiling import compile_counts, compile_unavailable, fresh_compile_cache
from .figures import (BUSY_SHARE, LATE_GENERATOR_MS, SATURATED_SHARE, TERMS, LoadRun, LoadStats, LoadSummary,
    MEASURED_NAMES, RESTART_HEAD, RESTART_REASON, allowance_outcome, agreement_words, allowed_cost, behind_at_low, capacity_agreement, inversions, medians_apart_line, kept_up, kept_up_outcome, kept_up_rounds, latency_percentiles, load_basis, pass_flags, serving_row_label, summary_lines, sweep_flags, time_split, unflagged_less_time)
from .load import Request, burst, interleaved_loads, poisson_arrivals, run_load
from .model import DEFAULT_SHAPE, layer_line, layer_name, layer_times_by_batch, request_images, wide_head_cnn, wide_head_model
from .plots import plot_batch_sweep, plot_latency_throughput
from .candidates import CandidatesRead, conv_share_line, read_candidates
from .grid import against_model, batch1_high_lines, grid_table, low_load_line, p99_depth_line
from .sweep import capacity_report, flat_line, forward_1_note, forward_twice_line, gain_line, gap_reading, inversion_flags, inversion_gap, inversion_lines, repeatable_pairs, sweep_table

__all__ = ["agreement_words", "batch1_high_lines", "capacity_report", "forward_1_note", "gain_line", "p99_depth_line", "against_model", "grid_table", "low_load_line", "CandidatesRead", "conv_share_line", "read_candidates", "allowance_outcome", "flat_line", "forward_twice_line", "sweep_table", "gap_reading", "inversion_flags", "inversion_gap", "inversion_lines", "repeatable_pairs", "allowed_cost", "medians_apart_line", "MEASURED_NAMES", "RESTART_HEAD", "RESTART_REASON", "capacity_agreement", "inversions", "unflagged_less_time", "BUSY_SHARE", "DEFAULT_SHAPE", "LATE_GENERATOR_MS", "SATURATED_SHARE", "TERMS", "LoadRun", "LoadStats", "LoadSummary", "behind_at_low", "kept_up_outcome", "kept_up_rounds",
           "Request", "burst", "collect", "compile_counts", "compile_unavailable", "fresh_compile_cache",
           "layer_line", "layer_name", "interleaved_loads", "kept_up", "layer_times_by_batch", "latency_percentiles", "load_basis", "pass_flags", "plot_batch_sweep", "plot_latency_throughput", "poisson_arrivals",
           "request_images", "run_load", "serving_row_label", "summary_lines", "sweep_flags", "time_split", "wide_head_cnn", "wide_head_model"]
