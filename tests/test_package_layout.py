"""The learner's modules hold only what a lab imports: benchmarks and GPU checks live under lab_utils/instructor/ and
are registered there as functions."""
import ast
from pathlib import Path

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
    from lab_utils.instructor.bench import BENCHES

    assert all(callable(b.measure) and callable(b.show) for b in BENCHES.values())
    assert set(cli.parser()._subparsers._group_actions[0].choices["bench"]._actions[1].choices) == set(BENCHES)
    assert [c.lab for c in gpu_check.CHECKS] == [f"{n:02d}" for n in range(1, 10)]
    assert all(c.run.__name__ == "gpu_check" and c.run.__module__.startswith("lab_utils.instructor.gpu.")
               for c in gpu_check.CHECKS)
    assert not hasattr(gpu_check, "RUN_ONE")

