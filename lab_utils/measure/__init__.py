"""Measuring: `from lab_utils import measure`, then measure.X for any name below. One room per idea:

- timing: timers that warm up, synchronize and take medians; the one spread; alternating rounds
- throughput: samples/s from a duration or a timed loop's median step
- lines: printed verdicts, flags and notes wrapped at 100 columns; a busy refusal said once per cell
- verdicts: what paired repeats decide (holds, reversed, not distinguishable here, cannot be seen here: a CPU quota or
  a busy machine rules it out), recorded in verdicts.csv
- plausible: the [!] flags and notes beside a number that cannot be right
- results_csv: the results CSVs' rows, with the machine's fingerprint, written and read back
- results_table: recording a lab's rows, compared with the same quantity measured earlier in the run
- store: the results store (rows, verdicts, sweeps: append and rows) and which flags were said
- watch: which torch.distributed collectives a run called
"""
from . import lines
from .plausible import BASELINE_FACTOR, MAX_SPREAD, flagged, measured_cause, plausibility, table_row
from .results_csv import (ALLREDUCES, ANSWERED, APPLIED, FORWARD, RATES, RESULT_COLUMNS, TRAINING, VERDICT_COLUMNS,
                          VERDICTS_CSV, Machine, Result, read_results, read_verdicts, results_dir, write_result)
from .results_table import (SAME_RUN_S, last_recorded_load, measured_before, record, recorded_table,
                            reference_conditions, reference_rate, reference_row, refusal_lines, run_conditions,
                            short_lines, table_lines)
from .store import AllReduceSweep, Store, forget, store
from .throughput import StepTimer, samples_per_second, throughput_from_step_times
from .timing import (Timing, after_warmup, alternating_rounds, intra_op_threads, median_after_warmup, numbered_rounds,
                     spread, synchronize, time_interleaved, time_it)
from .verdicts import (CANNOT_SEE, CONFIDENCE, HOLDS, MAX_RESTATED, MIN_EFFECT, MIN_PAIRS, RESOLVE, REVERSED,
                       NO_DECISION, NOT_MEASURABLE, OTHER_ROUNDS, UNDECIDED, UNREAD, UNREADABLE_SHARE, Verdict, as_paired_result, as_result, condition_notes,
                       decide,
                       N_M, medians_beside, n_m_line, paired_median, paired_ratios, printed_outcome, ratio_range, ratio_scatter, refusal, refusal_of, table_ratio, unreadable, verdict, write_verdict)
from .watch import collective_calls

__all__ = ["lines", "ALLREDUCES", "ANSWERED", "APPLIED", "BASELINE_FACTOR", "CANNOT_SEE", "CONFIDENCE", "FORWARD", "HOLDS", "MAX_RESTATED",
           "MAX_SPREAD", "MIN_EFFECT", "MIN_PAIRS", "Machine", "RATES", "RESOLVE", "RESULT_COLUMNS", "REVERSED",
           "Result", "SAME_RUN_S", "StepTimer", "AllReduceSweep", "Store", "TRAINING", "Timing", "UNDECIDED", "UNREAD", "UNREADABLE_SHARE",
           "NO_DECISION", "NOT_MEASURABLE", "OTHER_ROUNDS", "VERDICTS_CSV", "VERDICT_COLUMNS", "Verdict", "after_warmup", "alternating_rounds", "as_paired_result", "as_result",
           "collective_calls", "condition_notes", "decide", "flagged", "forget", "intra_op_threads", "last_recorded_load",
           "measured_before", "measured_cause", "median_after_warmup", "medians_beside", "numbered_rounds", "paired_median", "paired_ratios", "printed_outcome",
           "N_M", "n_m_line", "plausibility", "ratio_range", "ratio_scatter", "refusal", "refusal_of", "table_ratio", "read_results", "read_verdicts", "record", "recorded_table",
           "reference_conditions", "reference_rate", "reference_row", "refusal_lines", "results_dir", "short_lines",
           "run_conditions", "samples_per_second", "spread", "store", "synchronize", "table_lines", "table_row",
           "throughput_from_step_times", "time_interleaved", "time_it", "unreadable", "verdict", "write_result",
           "write_verdict"]

from .verdicts import in_plain_words  # noqa: E402  a verdict in one plain phrase (labs 05, 06)

__all__ += ["in_plain_words"]
