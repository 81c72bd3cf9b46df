"""Instructor tooling, not imported by the labs (except lab 02's cell that shows its GPU check): run the course headless,
grade submissions, benchmarks (bench/), GPU checks (gpu/)."""
