"""GPU checks: each lab's `gpu_check()` (lab_utils/labs/labNN/gpu_check.py) runs the lab's core on a GPU against its
CPU result and returns {check: "passed" | "failed: <reason>" | "skipped: <why>"}. registry.py runs them, each in a
fresh process of its own. Kept free of imports, so that a check does not load the others."""
