"""Grading submitted notebooks: each in a sandbox of its own, scored in the grader's process, written to a gradebook."""
