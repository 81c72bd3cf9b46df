"""The package's layout. One folder per lab (lab_utils/labs/labNN/) over a core; arrows run one way through four
layers: core (lab_utils/*.py, launch/, measure/, a lab's topic modules) <- lessons (labs/labNN/lesson.py, generated) <-
exercises (exercises/, labs/labNN/exercises.py) <- instructor (instructor/, a lab's bench.py and gpu_check.py), with no
import cycle anywhere and one door (lab_utils/learner_code.py) to a learner's notebook code; benchmarks and GPU checks
are registered as functions; the package's discovery (and a wheel built from it) carries every subpackage."""
import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lab_utils"
INSTRUCTOR_NAMES = {"gpu_check", "bench", "print_bench"}


def learner_modules() -> list[Path]:
    """lab_utils/*.py and each lab's topic modules (labs/labNN/*.py but its lesson, exercises, bench and GPU check,
    and the modules of its topic packages: labs/labNN/*/*.py), less __main__.py, the command line's entry point, which
    hands over to lab_utils.instructor.cli."""
    topics = [p for p in PACKAGE.glob("labs/lab[0-9][0-9]/*.py") if p.stem not in LAB_ROLES]
    topics += PACKAGE.glob("labs/lab[0-9][0-9]/*/*.py")
    return sorted([p for p in PACKAGE.glob("*.py") if p.name != "__main__.py"] + topics)


def instructor_code_in(path: Path) -> list[str]:
    """Each definition or import of a benchmark or GPU check, and each import of lab_utils.instructor, in one module."""
    found = []
    inside = path.resolve().is_relative_to(PACKAGE) and path.parent.resolve() != PACKAGE
    package = ".".join(path.resolve().parent.relative_to(PACKAGE.parent).parts) if inside else "lab_utils"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in INSTRUCTOR_NAMES:
            found.append(f"{where} defines {node.name}()")
        elif isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if a.name.startswith("lab_utils.instructor")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            base = package.split(".")[:len(package.split(".")) - node.level + 1]
            absolute = module if node.level == 0 else ".".join(base + ([module] if module else []))
            if (node.level and not absolute.startswith("lab_utils")) or absolute.startswith("lab_utils.instructor"):
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


# ---- arrows: core <- lessons <- exercises <- instructor, no cycles ----------------------------------------------

LAYERS = ("core module", "generated lesson", "exercises module", "instructor module")
LAB_ROLES = {"lesson": 1, "exercises": 2, "bench": 3, "gpu_check": 3}  # a lab folder's module by its name -> its layer
# Imports against the arrows allowed here: none (the last ones went in issue 40's merge); never add to it.
KNOWN_WRONG_WAY: set[tuple[str, str]] = set()


def module_names(package: Path) -> dict[str, Path]:
    """Every module of the package (a package by its __init__.py), dotted name -> file."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported_modules(module: str, path: Path, modules) -> dict[str, int]:
    """The package's modules that `module` imports, anywhere in it (inside functions too) -> the first line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top = module.split(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = (base + ("." + node.module if node.module else "")) if node.level else (node.module or "")
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for target in targets:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]  # lab_utils.spec.build_torch -> lab_utils.spec
            if target in modules and target != module and target.split(".")[0] == top:
                found.setdefault(target, node.lineno)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line}, over every folder of the package."""
    modules = module_names(package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def layer(module: str) -> int:
    """0 core (a lab's topic modules too), 1 a generated lesson (labs/labNN/lesson.py), 2 exercises (exercises/ and
    labs/labNN/exercises.py), 3 instructor (instructor/, a lab's bench.py and gpu_check.py, and __main__.py:
    `python -m lab_utils` is the instructor's CLI)."""
    parts = module.split(".")[1:]
    if parts[:1] == ["labs"] and len(parts) >= 3:
        return LAB_ROLES.get(parts[2], 0)
    return {"exercises": 2, "instructor": 3, "__main__": 3}.get(parts[0] if parts else "", 0)


def wrong_way(graph) -> list[tuple[str, str, int]]:
    """(importing module, imported module, line) of each import from a lower layer into a higher one."""
    return [(module, target, line) for module, targets in graph.items() for target, line in targets.items()
            if layer(target) > layer(module)]


def cycles(graph) -> list[list[str]]:
    """The import cycles: each strongly connected set of two or more modules (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while not members or members[-1] != node:
                members.append(stack.pop())
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _file(module: str, package: Path = PACKAGE) -> str:
    return str(module_names(package)[module].relative_to(package))


def test_imports_run_one_way_core_then_lessons_then_exercises_then_instructor():
    graph = import_graph()
    assert len(graph) > 80 and {layer(m) for m in graph} == {0, 1, 2, 3}
    found = {(_file(m), t): f"lab_utils/{_file(m)}:{line} ({LAYERS[layer(m)]}) imports {t} ({LAYERS[layer(t)]})"
             for m, t, line in wrong_way(graph)}
    assert sorted(found.keys() - KNOWN_WRONG_WAY) == [], (
        "an import against the arrows (core <- lessons <- exercises <- instructor): move what it needs down a layer:\n"
        + "\n".join(found[k] for k in sorted(found.keys() - KNOWN_WRONG_WAY)))
    assert sorted(KNOWN_WRONG_WAY - found.keys()) == [], "fixed: remove these from KNOWN_WRONG_WAY"


def test_no_import_cycle_anywhere_in_the_package():
    graph = import_graph()
    for file, target in KNOWN_WRONG_WAY:  # they go with their branch's merge; a cycle through them is theirs
        graph[next(m for m in graph if _file(m) == file)].pop(target, None)
    found = cycles(graph)
    said = [" <-> ".join(c) + ": " + ", ".join(f"{m} imports {t} (line {graph[m][t]})" for m in c for t in graph[m]
                                                if t in c) for c in found]
    assert found == [], "import cycles (move what both need into a third module):\n" + "\n".join(said)


def test_the_arrow_and_cycle_checks_catch_what_they_are_meant_to(tmp_path):
    package = tmp_path / "pkg"
    for folder in ("", "exercises", "instructor", "instructor/gpu", "labs", "labs/lab01", "labs/lab02"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    files = {
        "a.py": "from . import b\n\n\ndef f():\n    from .labs.lab02 import exercises  # inside a function: counted\n",
        "b.py": "import pkg.a.f\n",  # a <-> b
        "labs/lab01/lesson.py": "from ...instructor.gpu import check\n",
        "labs/lab01/exercises.py": "from ... import a\nfrom ...instructor import grade\nfrom . import lesson\n",
        "labs/lab02/exercises.py": "import numpy\n",
        "labs/lab02/topic.py": "from . import lesson\n",  # a lab's topic module is core: below its lesson
        "labs/lab02/lesson.py": "from pkg.labs.lab01 import topic\n",  # a lesson may use another lab's topic
        "labs/lab01/topic.py": "",
        "labs/lab02/bench.py": "from .lesson import f\nfrom .exercises import g\n",
        "instructor/grade.py": "from ..labs.lab01.exercises import x\n",  # labs.lab01.exercises <-> instructor.grade
        "instructor/gpu/check.py": "import os\n\n\ndef run():\n    from ...labs.lab02 import lesson\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(package)
    assert sorted((_file(m, package), t, line) for m, t, line in wrong_way(graph)) == [
        ("a.py", "pkg.labs.lab02.exercises", 5), ("labs/lab01/exercises.py", "pkg.instructor.grade", 2),
        ("labs/lab01/lesson.py", "pkg.instructor.gpu.check", 1), ("labs/lab02/topic.py", "pkg.labs.lab02.lesson", 1)]
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.instructor.grade", "pkg.labs.lab01.exercises"]]
    assert graph["pkg.instructor.gpu.check"] == {"pkg.labs.lab02.lesson": 5}
    assert [layer(m) for m in ("pkg.labs.lab02.topic", "pkg.labs.lab02.lesson", "pkg.labs.lab02.exercises",
                               "pkg.labs.lab02.bench", "pkg.exercises", "pkg.instructor.grade")] == [0, 1, 2, 3, 2, 3]


# ---- one folder per lab: a lab imports another only where it builds on it (README, "How the code is laid out") ----

CROSS_LAB = {
    ("lab06", "lab04"): "lab 06 measures lab 04's pipeline traffic",
    ("lab10", "lab03"): "lab 10 runs lab 03's DDP worker as its answer key",
    ("lab11", "lab03"): "lab 11 runs lab 03's DDP worker under Slurm",
    ("lab01", "lab03"): "lab 01's benchmark classmates times lab 03's DDP worker",
    ("lab12", "lab03"): "lab 12's benchmark record counts the recorded calls of lab 03's DDP worker's step",
    ("lab11", "lab07"): "lab 11 resumes lab 07's sharded (DCP) checkpoint worker on another node count",
}
LAB = re.compile(r"lab_utils\.labs\.(lab\d\d)\b")


def cross_lab_imports(graph) -> set[tuple[str, str]]:
    """(lab, lab it imports) for every module of a lab folder and every solution notebook importing another lab's."""
    import nbformat

    found = set()
    for module, targets in graph.items():
        mine = LAB.match(module)
        if mine:
            found |= {(mine.group(1), t.group(1)) for t in map(LAB.match, targets) if t and t.group(1) != mine.group(1)}
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        code = "\n".join(c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code")
        found |= {(f"lab{path.name[:2]}", other) for other in LAB.findall(code) if other != f"lab{path.name[:2]}"}
    return found


def test_a_lab_imports_another_lab_only_where_it_builds_on_it():
    found = cross_lab_imports(import_graph())
    assert sorted(found - set(CROSS_LAB)) == [], "a new arrow between two labs: move what both use into the core, or " \
        "add the pair to CROSS_LAB and to the README's list with the reason"
    assert sorted(set(CROSS_LAB) - found) == [], "gone: take these off CROSS_LAB and the README's list"


# ---- instructor/: a room per idea, the root holds what they share -----------------------------------------------

INSTRUCTOR = "lab_utils.instructor"
ENTRY_POINTS = {f"{INSTRUCTOR}.cli", f"{INSTRUCTOR}.pytest_plugin"}  # `python -m lab_utils`, pyproject's addopts


def instructor_room(module: str) -> str:
    """The subpackage of instructor/ a module lives in (bench, course, grading, ...), or "" at instructor/'s root."""
    if not module.startswith(INSTRUCTOR + "."):
        return ""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 or (PACKAGE / "instructor" / parts[2]).is_dir() else ""


def test_instructor_root_holds_only_entry_points_and_what_its_rooms_share():
    graph = import_graph()
    root = sorted(m for m in graph if m.startswith(INSTRUCTOR + ".") and not instructor_room(m))
    assert set(ENTRY_POINTS) <= set(root)
    users = {m: {instructor_room(i) for i, targets in graph.items() if m in targets and instructor_room(i)}
             for m in root if m not in ENTRY_POINTS}
    unshared = [f"{m} is used by {sorted(rooms) or 'no room'}" for m, rooms in users.items() if len(rooms) < 2]
    assert unshared == [], "a module at instructor/'s root that no two rooms share (move it into its room):\n" + \
        "\n".join(unshared)
    upward = [f"{m} imports {t}" for m in root if m not in ENTRY_POINTS for t in graph[m] if instructor_room(t)]
    upward += [f"{m} imports {t}" for m, targets in graph.items() for t in targets
               if t in ENTRY_POINTS and m != "lab_utils.__main__"]
    assert upward == [], "instructor/'s shared modules import no room, and only __main__ imports an entry point:\n" + \
        "\n".join(upward)
    assert {"bench", "cluster", "course", "gpu", "grading"} <= {instructor_room(m) for m in graph}


def test_benchmarks_and_gpu_checks_are_registered_as_functions():
    from lab_utils.instructor import cli
    from lab_utils.instructor.bench.registry import BENCHES
    from lab_utils.instructor.gpu import registry as gpu_registry

    assert all(callable(b.measure) and callable(b.show) for b in BENCHES.values())
    assert set(cli.parser()._subparsers._group_actions[0].choices["bench"]._actions[1].choices) == set(BENCHES)
    assert [c.lab for c in gpu_registry.CHECKS] == [f"{n:02d}" for n in range(1, 10)]
    assert all(c.run.__name__ == "gpu_check" and c.run.__module__ == f"lab_utils.labs.lab{c.lab}.gpu_check"
               for c in gpu_registry.CHECKS)
    assert all(b.measure.__module__ == f"lab_utils.labs.lab{b.lab}.bench" for b in BENCHES.values())
    assert not hasattr(gpu_registry, "RUN_ONE")


def test_package_discovery_includes_every_subpackage():
    from setuptools import find_packages

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = set(find_packages(str(ROOT), include=find["include"]))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert {"lab_utils", "lab_utils.exercises", "lab_utils.instructor", "lab_utils.instructor.bench",
            "lab_utils.instructor.gpu", "lab_utils.instructor.grading", "lab_utils.instructor.grading.sandbox",
            "lab_utils.instructor.course", "lab_utils.instructor.cluster", "lab_utils.labs", "lab_utils.labs.lab04",
            "lab_utils.labs.lab04.pipeline", "lab_utils.labs.lab13"} <= packages
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
    code = ("import lab_utils, lab_utils.exercises, lab_utils.instructor.bench, lab_utils.instructor.gpu.registry; "
            "import lab_utils.labs.lab03.lesson, lab_utils.labs.lab04.lesson, lab_utils.labs.lab06.lesson, "
            "lab_utils.labs.lab07.lesson, lab_utils.labs.lab08.lesson, lab_utils.labs.lab09.lesson; "
            "print(lab_utils.__file__)")
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
    "work": {"labs/lab00/exercises.py", "labs/lab01/gpu_check.py"},  # a local closure timed by a clock, not lab 08's worker
    # lab 08's exercises 1 and 3, hidden from the notebook's serve and replay so that no cell shows the answer
    # (learner s10f); tests/lab08 checks both against the exercises' own checks
    "average_and_apply": {"labs/lab08/parameter_server/rules.py"},
    "damped_lr": {"labs/lab08/parameter_server/rules.py"},
}


def lesson_functions() -> dict[str, str]:
    """Every function and class the solutions' lesson cells define -> the notebook that defines it."""
    import nbformat

    from lab_utils.instructor import labs
    from lab_utils.instructor.course import export

    return {name: path.name for path in labs.solution_notebooks()
            for name in export.defined_functions(nbformat.read(path, 4))}


def definitions_outside_lessons() -> list[tuple[str, str, int]]:
    """(name, file relative to lab_utils/, line) of every function and class lab_utils defines outside the generated
    lessons (labs/labNN/lesson.py)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "labs" and relative.name == "lesson.py":
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
    assert copies == [], ("a hand copy of lesson code (import it from lab_utils.labs.labNN.lesson instead, or, for a real "
                          "name collision, add it to NOT_COPIES with the reason):\n" + "\n".join(copies))


GENERATED = re.compile(r"^GENERATED by `python -m lab_utils assign`", re.MULTILINE)  # a generated module's docstring


def test_one_door_to_lesson_code_generated_files_apart_and_the_generator_imports_no_lesson():
    """Generated lesson code is exactly labs/labNN/lesson.py (no hand-written file there, no generated one elsewhere);
    a learner's own notebook is read at run time only through lab_utils/learner_code.py (outside instructor/, whose
    grader and course tools read notebooks as files, no other module imports nbformat or defines from_notebook); and
    the generator (`assign`: instructor/course/assign.py, export.py) imports no lesson, even through other modules."""
    generated = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if GENERATED.search(p.read_text()))
    lessons = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("lesson.py"))
    assert "labs/lab03/lesson.py" in lessons and generated == lessons, (generated, lessons)
    assert not (PACKAGE / "lessons").exists(), "lab_utils/lessons/ is gone: a lab's lesson is labs/labNN/lesson.py"
    graph = import_graph()
    readers = sorted(m for m, path in module_names(PACKAGE).items() if layer(m) < 3 and
                     ("nbformat" in imported_names(path) or "def from_notebook" in path.read_text()))
    assert readers == ["lab_utils.learner_code"], readers
    reached, todo = set(), ["lab_utils.instructor.course.assign", "lab_utils.instructor.course.export"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph[module]
    assert [m for m in reached if layer(m) == 1] == [], "assign imports a generated lesson"


def test_the_exercises_registry_imports_no_lesson_and_no_torch():
    """`from lab_utils.exercises import check`, every notebook's first import, stays light: an exercise imports its
    lab's generated lesson (each imports torch) inside the function that runs it, not at its module's top."""
    code = ("import sys, lab_utils.exercises\n"
            "print(sorted(m for m in sys.modules if m.endswith('.lesson') or m in ('torch', 'tensorflow')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]


def imported_names(path: Path) -> set[str]:
    """The top-level names of the modules a file imports, anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_student_notebook_imports_instructor_code():
    """Instructor code (grading, benchmarks, GPU checks) stays out of what a learner runs (issue 51)."""
    import nbformat

    from lab_utils.instructor import labs

    for path in sorted((labs.ROOT / "notebooks").glob("*.ipynb")):
        code = "\n".join(c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code")
        assert "lab_utils.instructor" not in code and "from lab_utils import instructor" not in code, path.name


def test_test_modules_have_unique_basenames():
    """pytest imports each test file by its basename (the folders have no __init__.py): two files of one name make
    collection fail with 'import file mismatch', as tests/lab03 and tests/lab05 once did."""
    import collections

    names = collections.Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []
