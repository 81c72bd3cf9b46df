"""The learner's modules hold only what a lab imports: benchmarks and GPU checks live under lab_utils/instructor/ and
are registered there as functions; the package's discovery (and a wheel built from it) carries every subpackage."""
import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lab_utils"
INSTRUCTOR_NAMES = {"gpu_check", "bench", "print_bench"}


def learner_modules() -> list[Path]:
    """lab_utils/*.py: everything outside instructor/ and exercises/ (subpackages, not listed here), less __main__.py,
    the command line's entry point, which hands over to lab_utils.instructor.cli."""
    return sorted(p for p in PACKAGE.glob("*.py") if p.name != "__main__.py")


def instructor_code_in(path: Path) -> list[str]:
    """Each definition or import of a benchmark or GPU check, and each import of lab_utils.instructor, in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in INSTRUCTOR_NAMES:
            found.append(f"{where} defines {node.name}()")
        elif isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if a.name.startswith("lab_utils.instructor")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            absolute = module if node.level == 0 else "lab_utils" + ("." + module if module else "")
            if node.level > 1 or absolute.startswith("lab_utils.instructor"):
                found.append(f"{where} imports from {'.' * node.level}{module}")
            found += [f"{where} imports {a.name}" for a in node.names
                      if a.name in INSTRUCTOR_NAMES or (absolute == "lab_utils" and a.name == "instructor")]
    return found


def test_no_learner_module_defines_or_imports_a_benchmark_a_gpu_check_or_the_instructor_package():
    assert len(learner_modules()) > 15
    found = [line for path in learner_modules() for line in instructor_code_in(path)]
    assert found == [], "instructor code in a learner module (move it under lab_utils/instructor/):\n" + "\n".join(found)


def test_the_check_catches_what_it_is_meant_to(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from .instructor import bench as b\nfrom . import instructor\nfrom .measure import print_bench\n"
                   "import lab_utils.instructor.cli\n\ndef gpu_check():\n    pass\n\nclass C:\n    def bench(self):\n"
                   "        pass\n")
    found = instructor_code_in(bad)
    assert len(found) == 7, found


def test_benchmarks_and_gpu_checks_are_registered_as_functions():
    from lab_utils.instructor import cli, gpu_check
    from lab_utils.instructor.bench.registry import BENCHES

    assert all(callable(b.measure) and callable(b.show) for b in BENCHES.values())
    assert set(cli.parser()._subparsers._group_actions[0].choices["bench"]._actions[1].choices) == set(BENCHES)
    assert [c.lab for c in gpu_check.CHECKS] == [f"{n:02d}" for n in range(1, 10)]
    assert all(c.run.__name__ == "gpu_check" and c.run.__module__.startswith("lab_utils.instructor.gpu.")
               for c in gpu_check.CHECKS)
    assert not hasattr(gpu_check, "RUN_ONE")


def test_package_discovery_includes_every_subpackage():
    from setuptools import find_packages

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = set(find_packages(str(ROOT), include=find["include"]))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert {"lab_utils", "lab_utils.exercises", "lab_utils.instructor", "lab_utils.instructor.bench",
            "lab_utils.instructor.gpu", "lab_utils.lessons"} <= packages
    assert on_disk <= packages


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_non_editable_install_of_the_wheel_runs_the_cli(tmp_path):
    """The wheel, installed into a folder of its own (not the editable checkout), imports every subpackage and
    answers `python -m lab_utils info`; the dependencies come from this environment."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=180)
    if built.returncode != 0 and "No module named" in built.stderr:
        pytest.skip(f"cannot build a wheel here: {built.stderr.strip().splitlines()[-1]}")
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("cnn_parallelism_lab-*.whl"))
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import lab_utils, lab_utils.exercises, lab_utils.instructor.bench, lab_utils.instructor.gpu_check; "
            "import lab_utils.lessons.lab03, lab_utils.lessons.lab04, lab_utils.lessons.lab06, lab_utils.lessons.lab07, "
            "lab_utils.lessons.lab08, lab_utils.lessons.lab09; print(lab_utils.__file__)")
    where = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                           timeout=120)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(target)), where.stdout
    info = subprocess.run([sys.executable, "-m", "lab_utils", "info"], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert info.returncode == 0 and "rank" in info.stdout.lower(), info.stderr


# ---- lesson code: generated from the notebooks, never copied by hand ---------------------------------------------

# Names a lesson cell defines that lab_utils also defines for another purpose (not a copy of the lesson). Each entry
# says why; keep it short.
NOT_COPIES: dict[str, set[str]] = {
    # "name": {"file.py"},  # why it is not a copy of the lesson
    "work": {"exercises/lab00.py", "instructor/gpu/train.py"},  # a local closure timed by a clock, not lab 08's worker
}


def lesson_functions() -> dict[str, str]:
    """Every function and class the solutions' lesson cells define -> the notebook that defines it."""
    import nbformat

    from lab_utils.instructor import course, export

    return {name: path.name for path in course.solution_notebooks()
            for name in export.defined_functions(nbformat.read(path, 4))}


def definitions_outside_lessons() -> list[tuple[str, str, int]]:
    """(name, file relative to lab_utils/, line) of every function and class lab_utils defines outside lessons/."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "lessons":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append((node.name, str(relative), node.lineno))
    return found


def test_no_hand_copy_of_a_lesson_function_in_lab_utils():
    lessons = lesson_functions()
    assert {"ddp_worker", "forward_op", "backward_op", "ring_all_reduce", "split_conv", "TensorParallelCNN",
            "make_train_step", "serve", "work", "hogwild", "zero1_worker", "fsdp_worker", "batcher",
            "Dispatcher", "serving_job"} <= set(lessons)
    copies = [f"lab_utils/{where}:{line} defines {name}, which {lessons[name]} defines in a lesson cell"
              for name, where, line in definitions_outside_lessons()
              if name in lessons and where not in NOT_COPIES.get(name, set())]
    assert copies == [], ("a hand copy of lesson code (import it from lab_utils.lessons.labNN instead, or, for a real "
                          "name collision, add it to NOT_COPIES with the reason):\n" + "\n".join(copies))


def test_learner_modules_do_not_import_generated_lessons():
    """lab_utils/*.py (what the labs import) never imports lab_utils.lessons.labNN: the lesson's code stays visible in
    its notebook. Instructor code, tests, benchmarks and the exercise checks (lab_utils/exercises/, which run the
    lesson's ring beside a learner's step, say) may run the generated copy. (The loader in
    lab_utils/lessons/__init__.py, which reads a learner's notebook, is not a generated module.)"""
    found = []
    for path in learner_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if "lessons.lab" in a.name]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                generated = "lessons.lab" in module or (module.split(".")[-1] == "lessons" and
                                                         any(a.name.startswith("lab") for a in node.names))
                found += [f"{path.name}:{node.lineno} imports from {'.' * node.level}{module}"] if generated else []
    assert found == [], "a learner module imports a generated lesson module:\n" + "\n".join(found)
