"""Slurm around lab 11's lesson (the batch scripts and the Slurm-to-torch translation are the lesson: lab 11's
notebook, lab_utils.labs.lab11.lesson), one idea per module:

- `cluster`: the cluster sinfo reaches, and a Slurm command run with a timeout;
- `jobs`: submitting a job and waiting for it (to end, for its results, for a state, for a node, for a file);
- `files`: a job's log tail, the files named after a run's jobs, scripts printed without this machine's paths,
  the run times batch scripts wrote;
- `sacct`: accounting: sacct's records, states and names once settled, elapsed and CPU time;
- `task`: inside a task, its threads and cores, when its process started, leaving at once (now or at exit);
- `where`: where every task waits (lab 12's table, per task), and a wait that names a hung or failed job;
- `resume`: the resume exercise's small problem;
- `yourturn`: the self-check of the batch script the learner writes (sacct's record of their job, judged).
"""
from __future__ import annotations

from .sacct import (LOW_EFFICIENCY, accounting, controller_names, efficiency_reading, sacct_names, sacct_states, seconds,
    settled, usage)
from .yourturn import check_job
from .cluster import (COMMAND_TIMEOUT_S, LOCAL_CLUSTER_DIR, SKIPPED, Cluster, Node, command, course_python, find_cluster,
    wrong_conf_message)
from .files import (JOB_FILE, job_files, log_tail, remove_job_files, script_times, terminal_lines,
    without_machine_paths)
from .jobs import (DONE_STATES, NEVER_STARTS, NeverStarts, cancel, job_info, job_processes, never_starts, node_done,
    sbatch, wait, wait_for_file, wait_for_results, wait_for_state)
from .resume import one_thread, resume_batch, resume_problem, resume_step
from .task import SLURM_VARIABLES, exit_at_interpreter_exit, exit_now, place_task, process_started_at
from .where import (ASK_S, JobHung, TaskFailed, answer_where_asked, ask_where, task_states, telling_where,
    threads_not_blocking, wait_or_explain, where_file, where_reports, where_table)

__all__ = ["ASK_S", "COMMAND_TIMEOUT_S", "DONE_STATES", "JOB_FILE", "LOCAL_CLUSTER_DIR", "SKIPPED", "SLURM_VARIABLES",
           "Cluster", "JobHung", "LOW_EFFICIENCY", "NEVER_STARTS", "NeverStarts", "never_starts", "efficiency_reading", "terminal_lines", "Node", "TaskFailed", "accounting", "answer_where_asked", "ask_where", "cancel", "check_job",
           "course_python",
           "command", "controller_names", "exit_at_interpreter_exit", "exit_now", "find_cluster", "job_files", "job_info", "job_processes", "log_tail",
           "node_done", "one_thread", "place_task", "process_started_at", "remove_job_files", "resume_batch", "resume_problem",
           "resume_step", "sacct_names", "sacct_states", "sbatch", "script_times", "seconds", "settled", "task_states",
           "telling_where", "threads_not_blocking", "usage", "wait", "wait_for_file", "wait_for_results",
           "wait_for_state", "wait_or_explain", "where_file", "where_reports", "where_table", "without_machine_paths",
           "wrong_conf_message"]
