"""pytest plugin (pyproject's addopts): nbval runs the labs at test size, and the slowest test files start first."""
import os
import sys
from pathlib import Path

import pytest

# the files that take longest on 2 cores (make test's --durations, worker-seconds per file, quiet), started first so that
# no long one is left for the end while the other workers idle; every other file follows in collection order.
# tests/lab05/test_exercises_lab05.py is left to the end on purpose: it reads the TensorFlow run that test_tf.py's worker
# makes (tests/lab05/conftest.py); started beside it, its worker would wait for that run instead of testing
SLOWEST_FIRST = (
    "tests/test_grade.py", "solutions/11_from_notebook_to_cluster.ipynb", "tests/test_grade_labs.py",
    "tests/test_cli.py", "tests/lab05/test_tf.py", "solutions/05_tf_distribute.ipynb",
    "solutions/09_inference_throughput.ipynb", "tests/test_grade_round4.py", "solutions/03_ddp.ipynb",
    "solutions/07_memory_sharding.ipynb", "tests/test_grade_slurm.py", "solutions/08_sync_async.ipynb",
    "tests/lab12/test_exercises_lab12.py", "tests/test_judges.py", "tests/test_launch.py",
    "solutions/12_debugging_hangs.ipynb", "tests/lab09/test_serving.py", "tests/lab11/test_lab11_tasks.py",
    "tests/lab13/test_exercises_lab13.py", "solutions/06_collectives_tensor_parallel.ipynb",
    "tests/lab04/test_exercises_lab04.py", "tests/test_new_lab.py", "tests/test_package_layout.py",
    "tests/lab06/test_exercises_lab06.py", "tests/test_where.py", "tests/lab07/test_exercises_lab07.py",
    "tests/lab11/test_slurm.py", "solutions/04_model_parallel_pipeline.ipynb", "tests/test_course.py",
    "tests/lab08/test_parameter_server.py", "tests/test_collectives.py", "tests/test_memory.py",
)


# OpenMP threads that wait spin first (libgomp's default): with 4 test workers on 2 cores a waiting thread burns the
# core its partner needs. Passive waiting changes no result, only idle time; set here, before any test imports torch,
# for every pytest run (make test, CI's unprivileged grading run), and inherited by every kernel, rank and subprocess
# the tests start (torch-heavy test files: ~37 -> ~26 CPU-s; a torchrun pair of lab 03: 20 -> 11)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# nbval reads notebooks with nbformat, whose jsonschema builds an IRI grammar at import when rfc3987_syntax is
# installed (about 1.1 CPU-s in every test worker) for a string format no notebook schema uses
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "not importable"


def pytest_addoption(parser):
    parser.addoption("--lab-size", choices=("test", "full"), default="test",
                     help="nbval: run each lab with its declared test size (labs.DECLARED) appended to its parameters cell (test: "
                          "fewer repeats and steps, the same checked outputs) or with the notebook's defaults (full)")


def _rank(item, root: Path) -> int:
    """Where the item's file (its path from the repository root) stands in SLOWEST_FIRST (the rest after it)."""
    path = Path(str(item.fspath))
    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Slowest files first (a stable sort: each file's items keep their order), then the test-size parameters."""
    items.sort(key=lambda item: _rank(item, Path(str(config.rootpath))))
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
