"""Lab 05's replica_step check run from a plain script (issue 51): its workers import the script to find the function,
so a script that starts TensorFlow at its top level cannot be checked; the check says so instead of blaming the
function, and names the layout that works (the layout itself passing is not run here: one more TensorFlow process and
two workers, ~15 CPU-s of make test, for the path the notebook's own check(replica_step) already takes)."""
import subprocess
import sys
import textwrap

import pytest

ANSWER = textwrap.dedent('''
    def replica_step(model, optimizer, images, labels, global_batch):
        import keras
        import tensorflow as tf
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(labels, model(images, training=True)),
                                              global_batch_size=global_batch)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
''')

TOP_LEVEL = "from lab_utils import tf_distribute\ntf_distribute.configure_devices(2)\nimport tensorflow as tf\n" + ANSWER + \
    "\nif __name__ == '__main__':\n    from lab_utils.exercises import check\n    check(replica_step)\n"


def _run(tmp_path, text: str) -> str:
    script = tmp_path / "mine.py"
    script.write_text(text)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    return done.stdout + done.stderr


@pytest.mark.slow
def test_a_script_that_starts_tensorflow_at_its_top_level_is_told_so_and_given_the_layout_that_works(tmp_path):
    said = _run(tmp_path, TOP_LEVEL)
    assert "replica_step: the check could not run replica_step here (not a mistake in it)" in said, said
    assert "if __name__" in said and "your replica_step raised" not in said
