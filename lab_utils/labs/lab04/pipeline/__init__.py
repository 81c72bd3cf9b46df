"""Layer-split model parallelism and micro-batch pipelines (naive, GPipe, 1F1B), kept as data and run over real ranks.

The stage's worker, step and ops, and the library's schedule and step, are lab 04's notebook lesson code (exported to
lab_utils.labs.lab04.lesson); around them this package keeps one idea per module:

- `schedules`: schedules as data, checked and simulated; makespan and bubble;
- `split`: splitting the spec'd model into stages, balanced on measured layer times;
- `stage`: one configuration (PipelineRun) and what a stage knows during a step (StageContext);
- `watch`: when each op computed and the activation bytes it kept, watched around the notebook's ops;
- `ranks`: the rounds lab 04's `stage_worker` runs when measured (alternating, watched) and the launch of it;
- `results`: the ranks' results as timelines (Measured), and the unsplit model's reference.
"""
from __future__ import annotations

from .ranks import ONE_STEP, OneStep, Rounds, run_pipelines
from .results import (KINDS, Measured, busy_seconds, handover_seconds, ideal_bubble, ideal_makespan, mean_op_seconds,
    measured_by_label, median_op_seconds, ops_makespans, own_ops_makespan, reference, step_ops_makespan)
from .schedules import (SCHEDULES, Op, Schedule, bubble_fraction, check_schedule, gpipe, make_schedule, makespan,
    max_in_flight, naive, one_f_one_b, simulate)
from .split import (balanced_split, build_stage, check_split, layer_timings, layer_times, modules_per_layer,
    overlap_cap, split_movers, stage_input_shape, stage_layers, stage_shares)
from .stage import PipelineRun, StageContext, micro_batch_size
from .watch import OpWatch, watched_step

__all__ = ["busy_seconds", "handover_seconds", "ops_makespans", "step_ops_makespan", "KINDS", "ONE_STEP", "SCHEDULES", "Measured", "OneStep", "Op", "OpWatch", "PipelineRun", "Rounds", "Schedule",
           "StageContext",
           "balanced_split", "bubble_fraction", "build_stage", "check_schedule", "check_split", "gpipe", "ideal_bubble", "ideal_makespan", "own_ops_makespan",
           "layer_timings", "layer_times", "make_schedule", "makespan", "max_in_flight", "mean_op_seconds", "median_op_seconds",
           "measured_by_label", "micro_batch_size", "modules_per_layer", "naive", "one_f_one_b", "overlap_cap",
           "reference", "run_pipelines", "simulate", "split_movers", "stage_input_shape", "stage_layers", "stage_shares",
           "watched_step"]
