"""Instructor tooling, not imported by the labs (except lab 02's cell that shows its GPU check), a room per idea:
course/ (student copies, headless runs, committed outputs), grading/ (the grader and its sandbox/), cluster/ (the local
Slurm cluster), bench/ (benchmarks), gpu/ (GPU checks). The root holds the entry points (cli, pytest_plugin) and what
the rooms share (labs)."""
