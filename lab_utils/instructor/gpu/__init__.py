"""GPU checks, one module per lab: each `gpu_check()` runs the lab's core on a GPU against its CPU result and returns
{check: "passed" | "failed: <reason>" | "skipped: <why>"}. Registered in lab_utils.instructor.gpu.registry; none is
imported by a lab (lab 02 shows its check by importing it from here). Kept free of imports, so that a check can run
itself in a fresh process (`python -m lab_utils.labs.lab05.gpu_check`) without loading the others."""
