"""Lab 08's helpers around the notebook's parameter server and Hogwild processes (the server, the workers and run_all
are its notebook's: lab_utils.labs.lab08.lesson), one idea per module:

- `config`: one run as data (PSConfig), checked before any rank starts;
- `shards`: what every rank builds for itself: the split, each worker's shard and batches, the course CNN;
- `straggler`: a worker stretched by a factor;
- `record`: what a server measures while it runs (RunRecord), and a synchronous run's rounds;
- `ranks`: the server's core beside worker 1, and `run`, one launch of the notebook's run_all for every config;
- `baseline`: the single-process baseline a synchronous run must equal;
- `staleness`: each worker's staleness and its rank correlation with accuracy;
- `hogwild`: shared memory handed to launched ranks, the watching rank's record, a Hogwild run's result;
- `accuracy`: test accuracy of flat weights, accuracy curves, diverged runs;
- `plots`: accuracy, staleness and throughput figures;
- `readout`: short lines about lab 08's verdicts (the summary's, a median above theory's bound);
- `rules`: the server's update and damped rate, which the exercises ask for (hidden from the notebook's code);
- `throughput`: the stragglers section's report (its answer first, the table, the verdicts, the details);
- `tf_cluster`: TensorFlow's ParameterServerStrategy servers in one process.
"""
from __future__ import annotations

from .accuracy import (LATE, accuracy_curve, accuracy_of, diverged, divergence_flags, first_reaching,
                       late_accuracy)
from .baseline import single_process_weights
from .config import MODEL, MODES, PSConfig
from .hogwild import ShareWithRanks, hogwild_result, shared, watch
from .plots import plot_accuracy, plot_staleness, plot_throughput
from .ranks import interleaved, pin_server_beside_worker_1, run
from .readout import (above_bound_line, bound_line, cause_line, worker_1_runs_line, damped_rate_line, damped_staleness_line, damping_takeaway, gap_pointer, core_share_line, explained, iteration_line, overlap_line,
                      straggler_count_line, staleness_count_line, staleness_report, fell_back_line, nearest, order_line,
                      others_share_line, prediction_headline, restated_within_line, summary_line, tf_accuracy_line, verdict_text)
from .record import RunRecord, round_seconds
from .rules import average_and_apply, damped_lr
from .shards import build_model, dataset_split, global_batch, initial_weights, input_shape, worker_batch
from .staleness import CHANCE, chance_of, rank_correlation, staleness_by_worker
from .straggler import Straggler, straggle
from .tf_cluster import tf_in_process_cluster
from . import throughput

__all__ = ["LATE", "worker_1_runs_line", "average_and_apply", "damped_lr", "above_bound_line", "damped_rate_line", "damped_staleness_line", "damping_takeaway", "bound_line", "overlap_line", "core_share_line", "iteration_line", "explained", "straggler_count_line", "staleness_count_line", "staleness_report", "fell_back_line", "others_share_line", "nearest", "cause_line", "gap_pointer", "order_line", "prediction_headline", "restated_within_line", "round_seconds", "summary_line", "tf_accuracy_line", "verdict_text", "MODEL", "MODES", "PSConfig", "RunRecord", "ShareWithRanks", "Straggler", "accuracy_curve", "accuracy_of",
           "build_model", "dataset_split", "diverged", "divergence_flags", "first_reaching", "late_accuracy", "global_batch",
           "hogwild_result", "initial_weights", "input_shape", "interleaved", "pin_server_beside_worker_1",
           "plot_accuracy", "plot_staleness", "plot_throughput", "rank_correlation", "CHANCE", "chance_of", "run", "shared",
           "single_process_weights", "staleness_by_worker", "straggle", "tf_in_process_cluster", "throughput", "watch",
           "worker_batch"]
