"""Jupyter-safe process launcher: rank processes, workers sent by value, free ports, timeouts, rank errors re-raised,
nothing left running; and the process-group set-up every strategy's helper code shares. One room per idea:
jobs (launch, launch_jobs), run (one run of the ranks), rank (what a rank runs), start (fork server or spawn),
environment (a rank's variables, ports, cores), sending (workers by value), errors, group, stderr, together (wrappers
for workers that keep in step: run_together, in_turns)."""
from __future__ import annotations

from .environment import LOOPBACK, OWN_SESSION, core_sets, free_port, launched_not_kernel, rank_environment
from .errors import RankError, describe_exit, sanitized, short_error
from .group import RankContext, destroy_process_group, hold_process_groups, init_process_group, process_group
from .jobs import launch, launch_jobs
from .record import table_note
from .start import fork_server_pid, own_helpers, start_method
from .stderr import CapturedStderr, captured_stderr

__all__ = ["LOOPBACK", "OWN_SESSION", "CapturedStderr", "RankContext", "RankError", "captured_stderr", "core_sets",
           "describe_exit", "destroy_process_group", "fork_server_pid", "free_port", "hold_process_groups",
           "init_process_group", "launch", "launch_jobs", "launched_not_kernel", "own_helpers", "process_group", "rank_environment",
           "sanitized", "short_error", "start_method", "table_note"]
