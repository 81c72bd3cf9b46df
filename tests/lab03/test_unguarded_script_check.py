"""Lab 03's rank-based checks run from a plain script with no `if __name__ == "__main__":` guard (issue 51): each rank
imports the script to find the function, so its top-level check() runs again inside each starting rank. That rank's
check says what went wrong and how to fix it, instead of multiprocessing's last line ("section in https://...")
blamed on the learner's function; the script's own check still runs."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lab_utils.launch.errors import StartedWhileImporting, importing_main

UNGUARDED = textwrap.dedent('''
    import torch.distributed as dist
    from lab_utils.exercises import check


    def average_gradients(model, world_size):
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world_size


    check(average_gradients)
''')


def test_this_process_is_not_one_that_is_still_starting():
    assert not importing_main()
    assert "if __name__" in str(StartedWhileImporting())


@pytest.mark.slow
def test_an_unguarded_script_is_told_to_add_the_guard_and_its_own_check_still_passes(tmp_path):
    (tmp_path / "mine.py").write_text(UNGUARDED)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "mine.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    said = done.stdout + done.stderr
    assert "section in https" not in said and "your average_gradients raised" not in said, said
    assert "could not run average_gradients here (not a mistake in it)" in said and "if __name__" in said, said
    assert "PASS  average_gradients" in said, said
