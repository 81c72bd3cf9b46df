"""Lab 05's lesson text against its code (learner s12r3e): what the prose says a line does, the code does."""
import nbformat

NOTEBOOK = "solutions/05_tf_distribute.ipynb"


def cells():
    return nbformat.read(NOTEBOOK, 4).cells


def test_the_uneven_batch_prose_names_drop_remainder_as_the_fix_the_lab_uses():
    """Finding 1: the prose said passing global_batch_size fixes a short last batch; it divides by the full batch."""
    prose = next(" ".join(c.source.split()) for c in cells() if c.cell_type == "markdown" and "empty**" in c.source)
    assert "is also why `make_train_step` passes" not in prose and "1 × 2, not by 1" not in prose
    assert "Neither way gives the short batch its own mean" in prose and "drop_remainder=True" in prose
    # learner s12r4e, lab 05 finding 5: the prose argued with a 2 + 1 split beside a demo that printed 1 + 0; it
    # now works the demo's own last step (sample 8 alone on replica 0), which the committed output shows
    demo = next(c for c in cells() if c.cell_type == "code" and "Dataset.range(9).batch(4)" in c.source)
    assert "step 2: replica 0 gets [8], replica 1 gets []" in "".join(o.get("text", "") for o in demo.outputs)
    assert "2 + 1" not in prose
    # learner s13r5e, lab 05 finding 2: the weights as a 3-row table, not a sentence with two references
    assert ("| `compute_average_loss`, no `global_batch_size` | its slice size × replicas = 1 × 2 | 1/2: twice a full "
            "batch's |") in prose
    assert "| `compute_average_loss(..., global_batch_size=4)` | the global batch, 4 | 1/4: as in a full batch |" in prose
    # learner s13r7e, lab 05 finding 8: the row without global_batch_size said why it divides by slice x replicas,
    # and the own-mean row does not sit under a 'compute_average_loss given' header
    assert "assumes each holds as many samples as this one" in prose and "| (that batch's own mean)" not in prose
    assert "same weight" in prose  # what global_batch_size is for: every sample weighs 1 / global batch
    # the prose's claim: every dataset the lab trains or times on with its train step drops the remainder
    batched = [line for c in cells() if c.cell_type == "code" for line in c.source.splitlines()
               if ".batch(" in line and "global_batch" in line and "[:global_batch]" not in line]
    assert batched and all("drop_remainder=True" in line for line in batched), batched


def test_the_side_check_says_before_its_table_why_its_keras_figure_is_below_section_5s():
    """Finding 2: two Keras figures for one step; the prose before the table says which is which and why."""
    source = cells()
    side = next(i for i, c in enumerate(source) if "tf_distribute.take_turns(" in c.source)
    prose = " ".join(source[side - 1].source.split())
    assert "below section 5's one-device figure" in prose and "waking them" in prose
    record = next(c.source for c in source if "measure.record(recorded" in c.source)
    assert "brief_notes=True" in record  # the twin figures' note: one line under the row (test_reporting_lab05)
