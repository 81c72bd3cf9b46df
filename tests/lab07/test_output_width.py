"""Lab 07's checked results lines (ZeRO-1 and FSDP2 against DDP, the owners of whole tensors, the bfloat16
micro-batch runs, FSDP2's activations against autocast's, the resumed and async checkpoints, exercise 3's comparison
with the measured bytes) print at most 100 columns each (issue 51: short output lines); nbval compares these cells' committed outputs with a fresh run."""
import nbformat

NOTEBOOK = "solutions/07_memory_sharding.ipynb"
CELLS = ("ZeRO-1 equals DDP", "FSDP2 (float32) equals DDP", "parameters owned per rank",
         "update within 10% of float32", "which FSDP2 does not make", "final weights = uninterrupted",
         "the last async checkpoint, loaded back", "parameters and gradients as measured")


def test_the_sharding_results_lines_fit_in_100_columns():
    cells = nbformat.read(NOTEBOOK, 4).cells
    for words in CELLS:
        cell = next(c for c in cells if c.cell_type == "code" and words in c.source)
        printed = "".join(o.get("text", "") for o in cell.outputs)
        assert words in printed and "nbval-ignore-output" not in cell.metadata.get("tags", []), words
        assert all(len(line) <= 100 for line in printed.splitlines()), printed
