"""Lab 00 (solutions/00_setup_and_devices.ipynb), all in this folder: exercises.py.

What no file says is declared here, read by lab_utils.instructor.labs: the parameters its test-size run shrinks,
its benchmarks ("module.function", imported only when run) and its GPU check."""

TEST_SIZE = {"timing_repeats": 3}
