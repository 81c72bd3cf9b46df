"""Instructor tooling, not imported by the labs: run the course headless, grade submissions, benchmarks."""
