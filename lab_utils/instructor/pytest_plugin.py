"""pytest plugin (pyproject's addopts): nbval runs the labs at test size, and the slowest test files start first."""
from pathlib import Path

import pytest

# the files that take longest on 2 cores (measured with --durations, wall and CPU), started first so that no long one
# is left for the end while the other workers idle; every other file follows in collection order
SLOWEST_FIRST = (
    "tests/test_grade.py", "tests/test_grade_round4.py", "solutions/03_ddp.ipynb", "tests/test_judges.py", "tests/lab05/test_tf.py",
    "tests/lab08/test_exercises_lab08.py", "solutions/08_sync_async.ipynb", "tests/test_cli.py",
    "tests/lab05/test_exercises_lab05.py", "tests/lab06/test_exercises_lab06.py", "tests/lab08/test_parameter_server.py",
    "solutions/05_tf_distribute.ipynb", "tests/lab04/test_exercises_lab04.py", "tests/test_launch.py",
    "solutions/07_memory_sharding.ipynb", "solutions/06_collectives_tensor_parallel.ipynb",
    "solutions/13_spatial_parallelism.ipynb", "tests/lab13/test_exercises_lab13.py", "solutions/12_debugging_hangs.ipynb",
    "tests/test_where.py", "tests/lab07/test_checkpoints.py",
    "solutions/09_inference_throughput.ipynb", "solutions/11_from_notebook_to_cluster.ipynb",
    "tests/test_grade_labs.py", "tests/lab07/test_exercises_lab07.py", "tests/test_exercises.py", "tests/lab11/test_slurm.py",
    "tests/test_grade_slurm.py", "tests/lab09/test_serving.py",
)


def pytest_addoption(parser):
    parser.addoption("--lab-size", choices=("test", "full"), default="test",
                     help="nbval: run each lab with its declared test size (labs.DECLARED) appended to its parameters cell (test: "
                          "fewer repeats and steps, the same checked outputs) or with the notebook's defaults (full)")


def _rank(item) -> int:
    """Where the item's file stands in SLOWEST_FIRST (the rest after it, in collection order)."""
    path = Path(str(item.fspath))
    name = f"{path.parent.name}/{path.name}"
    return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Slowest files first (a stable sort: each file's items keep their order), then the test-size parameters."""
    items.sort(key=_rank)
    if config.getoption("--lab-size") == "full":
        return
    from .course.headless import parameter_lines
    from .labs import declared

    for item in items:
        cell = getattr(item, "cell", None)  # an nbval notebook cell
        if cell is None or "parameters" not in cell.metadata.get("tags", []):
            continue
        overrides = declared(Path(str(item.fspath)).name[:2]).test_size
        if overrides:
            cell.source = cell.source.rstrip("\n") + "\n" + parameter_lines(overrides, "test size")
