"""Lab 07's checks and workers read one way throughout (learner walk: two tolerances for 'matches the baseline' with
no reason given, and a rule 'delete the model before leaving the group' that only Strategy 5's code followed)."""
import ast
import re

import nbformat

NOTEBOOK = "solutions/07_memory_sharding.ipynb"


def code_cells():
    return [c.source for c in nbformat.read(NOTEBOOK, 4).cells if c.cell_type == "code"]


def test_every_float32_equality_check_reads_the_one_tolerance_defined_at_the_top():
    """No tolerance literal is left in a comparison: each 'equal / within' check reads equal_within, defined once."""
    cells = nbformat.read(NOTEBOOK, 4).cells
    assert "**Equal within 1e-5** (`equal_within`" in cells[0].source  # the term, defined before its first use
    code = "\n".join(code_cells())
    assert len(re.findall(r"^equal_within = 1e-5\b", code, re.M)) == 1
    # a comparison against a literal 1e-N (a second tolerance) is what the learner could not explain
    assert not re.findall(r"(?:<=|>=|<|>)\s*1e-\d|(?:rtol|atol|tolerance)=1e-\d", code), code
    for words in ("gradients equal those without checkpoints", "ZeRO-1 equals DDP", "FSDP2 (float32) equals DDP",
                  "final weights = uninterrupted"):
        cell = next(c for c in code_cells() if words in c)
        assert "equal_within" in cell and "{within}" in cell, words  # compared with it, and printed from it
    namespace: dict = {}
    exec(next(line for line in code.splitlines() if line.startswith("within = ")), {"equal_within": 1e-5}, namespace)
    assert namespace["within"] == "within 1e-5"  # printed as the top defines it, not Python's '1e-05'


def test_a_literal_tolerance_in_a_check_would_fail_the_test():
    """The pattern above catches the forms the lab used before (so the test can fail)."""
    pattern = r"(?:<=|>=|<|>)\s*1e-\d|(?:rtol|atol|tolerance)=1e-\d"
    for old in ("max_diff(fsdp_runs, ddp_runs) <= 1e-4", "torch.allclose(g, h, rtol=1e-6, atol=1e-9)",
                "weights_mismatch(a, b, tolerance=1e-5)"):
        assert re.search(pattern, old), old


def workers_leaving_the_group(source: str):
    """(name, statements) of each function in `source` that calls leave_group()."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name != "leave_group":
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "leave_group"]
            if calls:
                yield node.name, node.body


def test_every_worker_deletes_its_model_and_optimizer_just_before_leaving_the_group():
    """The rule of the join/leave cell holds in every worker's visible code, not only in Strategy 5's."""
    seen = []
    for source in code_cells():
        for name, body in workers_leaving_the_group(source):
            seen.append(name)
            leave = next(i for i, s in enumerate(body) if "leave_group()" in ast.unparse(s))
            assert leave > 0 and isinstance(body[leave - 1], ast.Delete), name
            deleted = {t.id for t in body[leave - 1].targets if isinstance(t, ast.Name)}
            assert {"model", "optimizer"} <= deleted, (name, deleted)
    assert {"amp_worker", "ddp_baseline_worker", "zero1_worker", "fsdp_worker", "checkpoint_worker"} <= set(seen), seen
