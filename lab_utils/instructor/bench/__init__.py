"""`python -m lab_utils bench NAME`: each benchmark is a function that measures and one that prints the result (the
JSON line last), registered by the function objects themselves in registry.py. A lab's benchmarks live in its folder
(lab_utils/labs/labNN/bench.py)."""
