"""The scaling report (lab 10): every result with its speedup, plausibility flags, and simple models that project to
more devices. One idea per module: compared (rows against their baselines, the table), coverage (which labs' rows
are here), fits (Amdahl's and the all-reduce's models), sweeps (all-reduce sweep files and their flags)."""
from .compared import (load, latest, Compared, compare, across_labs, baselines_named, host_name, table, summary, percent, row_label)
from .coverage import (RECORDING_LABS, labs_without_rows, DATA_PARALLEL_LABS, TWO_LABS, lab_names, lacking, two_labs, ranks_vs_threads)
from .fits import (amdahl_speedup, fit_serial_fraction, SerialFit, serial_fit, AllReduceFit, bus_bandwidth, fit_allreduce, data_parallel_speedup, gpipe_speedup, parameter_bytes)
from .sweeps import (SWEEP_MAX_AGE_S, save_allreduce, recent_allreduce, no_sweep, HALF_THE_TIME, allreduce_flags, SUPERLINEAR_MARGIN, batch_time_flags, WAITED_FACTOR, allreduce_disagreement, noise_or_bug, log2_sizes)

__all__ = ['AllReduceFit', 'Compared', 'DATA_PARALLEL_LABS', 'HALF_THE_TIME', 'RECORDING_LABS', 'SUPERLINEAR_MARGIN', 'SWEEP_MAX_AGE_S', 'SerialFit', 'TWO_LABS', 'WAITED_FACTOR', 'across_labs', 'baselines_named', 'allreduce_disagreement', 'allreduce_flags', 'amdahl_speedup', 'batch_time_flags', 'bus_bandwidth', 'compare', 'data_parallel_speedup', 'fit_allreduce', 'fit_serial_fraction', 'gpipe_speedup', 'host_name', 'lab_names', 'labs_without_rows', 'lacking', 'latest', 'load', 'log2_sizes', 'no_sweep', 'noise_or_bug', 'parameter_bytes', 'percent', 'ranks_vs_threads', 'recent_allreduce', 'row_label', 'save_allreduce', 'serial_fit', 'summary', 'table', 'two_labs']
