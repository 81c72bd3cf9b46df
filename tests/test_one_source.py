"""The notebook's worker is the program: every rank worker a tool starts is a lesson function (a `lesson`-tagged cell,
generated into lab_utils/lessons/), and helpers open no process group.

Both checks read the source (AST), so they cost nothing at test time. A second implementation not yet replaced is
listed in PENDING with the lesson function that should replace it; an entry that no longer matches anything fails,
so the list only shrinks."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lab_utils"
LESSONS = PACKAGE / "lessons"
LAUNCHERS = {"launch": "worker", "launch_workers": "worker", "launch_jobs": "jobs", "launch_worker_jobs": "jobs"}
GROUP_CALLS = {"init_process_group", "process_group"}
# where a process group may be opened: the lessons, the launcher, and the exercise harnesses (they run the learner's
# answer in real ranks)
MAY_OPEN_GROUPS = ("lab_utils/lessons/", "lab_utils/launch/", "lab_utils/exercises/")

# second implementations still to replace (issue 47, item 1): "path:function" -> what replaces it
PENDING: dict[str, str] = {}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module an ImportFrom in `path` names."""
    if node.level == 0:
        return node.module or ""
    package = _module_name(path).split(".")[:-1]  # a module's package; __init__'s is its folder, the same here
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def lesson_names() -> dict[str, set[str]]:
    """'lab_utils.lessons.labNN' -> the names its generated module exports (its __all__)."""
    names = {}
    for path in sorted(LESSONS.glob("lab[0-9][0-9].py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                names[_module_name(path)] = set(ast.literal_eval(node.value))
    return names


class Resolver:
    """What a worker expression in a module of lab_utils names: 'lab_utils.lessons.labNN.name', 'notebook' (the
    learner's notebook, read by lessons.from_notebook), or the unresolved text."""

    def __init__(self, modules: dict[Path, ast.Module]):
        self.modules = modules
        self.functions = {node.name: (path, node) for path, tree in modules.items() for node in ast.walk(tree)
                          if isinstance(node, ast.FunctionDef)}

    def imports(self, path: Path) -> dict[str, str]:
        """name -> the lesson module or function it is imported as, anywhere in the module (function-local too)."""
        found = {}
        for node in ast.walk(self.modules[path]):
            if isinstance(node, ast.ImportFrom):
                module = _absolute(node, path)
                for alias in node.names:
                    full = f"{module}.{alias.name}"
                    if full.startswith("lab_utils.lessons.lab"):
                        found[alias.asname or alias.name] = full
        return found

    def assigned(self, path: Path, name: str) -> list[ast.expr]:
        return [node.value for node in ast.walk(self.modules[path]) if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name) and t.id == name]

    def workers(self, path: Path, node: ast.expr, kind: str, depth: int = 0) -> list[str]:
        """Every worker `node` names: a worker (kind 'worker') or a list of (worker, args) jobs (kind 'jobs')."""
        if depth > 6:
            return [f"{ast.unparse(node)} (too deep to follow)"]
        if kind == "jobs":
            if isinstance(node, (ast.List, ast.Tuple)):
                return [w for e in node.elts for w in self.workers(path, e, "job", depth + 1)]
            if isinstance(node, ast.ListComp):
                return self.workers(path, node.elt, "job", depth + 1)
            if isinstance(node, ast.BinOp):
                return self.workers(path, node.left, kind, depth + 1) + self.workers(path, node.right, kind, depth + 1)
        if kind == "job" and isinstance(node, ast.Tuple):
            return self.workers(path, node.elts[0], "worker", depth + 1)
        if isinstance(node, ast.Name):
            if kind == "worker" and node.id in self.imports(path):
                return [self.imports(path)[node.id]]
            values = self.assigned(path, node.id)
            if values:
                return [w for v in values for w in self.workers(path, v, kind, depth + 1)]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = self.imports(path).get(node.value.id)
            if kind == "worker" and module:
                return [f"{module}.{node.attr}"]
            if node.attr == "function" or "from_notebook" in ast.unparse(node):
                return ["notebook"]
        if isinstance(node, ast.Subscript):  # workers[name]: every value of the dict
            return [w for v in self.workers_of_dict(path, node.value) for w in self.workers(path, v, kind, depth + 1)]
        if isinstance(node, ast.Call):
            if "from_notebook" in ast.unparse(node.func):
                return ["notebook"]
            called = node.func.id if isinstance(node.func, ast.Name) else None
            if called in self.functions:  # a helper that builds the jobs: what it returns
                where, fn = self.functions[called]
                returns = [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None]
                return [w for r in returns for w in self.workers(where, r, kind, depth + 1)]
        return [f"{ast.unparse(node)} (not a lesson)"]

    def workers_of_dict(self, path: Path, node: ast.expr) -> list[ast.expr]:
        values = self.assigned(path, node.id) if isinstance(node, ast.Name) else [node]
        return [v for d in values if isinstance(d, ast.Dict) for v in d.values]


def _parsed(folder: Path) -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(folder.rglob("*.py"))}


def launched_workers(modules: dict[Path, ast.Module]) -> list[tuple[str, str]]:
    """(where, what) for every worker that a call to a launcher in `modules` passes."""
    resolver, found = Resolver(modules), []
    for path, tree in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in LAUNCHERS:
                found += [(f"{_rel(path)}:{node.lineno}", w)
                          for w in resolver.workers(path, node.args[0], LAUNCHERS[name])]
    return found


def test_every_worker_the_instructor_launches_is_a_generated_lesson():
    modules = {**_parsed(PACKAGE / "instructor"), **_parsed(LESSONS)}
    instructor = {p: t for p, t in modules.items() if "instructor" in p.parts}
    exported = lesson_names()
    workers = launched_workers(instructor)
    assert len(workers) >= 10, workers  # the scan sees the benchmarks' and GPU checks' launches
    wrong = []
    for where, what in workers:
        if what == "notebook":
            continue  # the learner's own notebook, through lessons.from_notebook
        module, _, name = what.rpartition(".")
        if name not in exported.get(module, set()):
            wrong.append(f"{where}: {what}")
    pending = [w for w in wrong if any(key.split(":")[1] in w for key in PENDING)]
    assert [w for w in wrong if w not in pending] == [], (
        "a worker the instructor launches is not a generated lesson: tag the notebook cell that defines it `lesson` "
        "and launch lab_utils.lessons.labNN's:\n" + "\n".join(wrong))


def _rank_workers_and_groups(path: Path, tree: ast.Module) -> list[str]:
    """'path:function' for each function that is a rank worker (first parameters rank, world_size) or opens a process
    group (calls init_process_group or process_group)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        params = [a.arg for a in node.args.args[:2]]
        calls = {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "")
                 for c in ast.walk(node) if isinstance(c, ast.Call)}
        if calls & GROUP_CALLS or params == ["rank", "world_size"] and node.name not in HOOKS:
            found.append(f"{_rel(path)}:{node.name}")
    return found


# functions with a rank worker's first parameters that are no worker: a launcher's per-rank environment, a hook run
# before the worker
HOOKS = {"rank_environment", "pin_server_beside_worker_1"}


def helpers_with_workers_or_groups() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _rel(path).startswith(MAY_OPEN_GROUPS):
            found += _rank_workers_and_groups(path, ast.parse(path.read_text(), str(path)))
    return found


def test_no_helper_defines_a_rank_worker_or_opens_a_process_group():
    found = helpers_with_workers_or_groups()
    assert [f for f in found if f not in PENDING] == [], (
        "outside lab_utils/lessons/, launch/ and the exercise harnesses, a rank worker or a process group: the worker "
        "belongs in a notebook cell tagged `lesson` (launched from lab_utils.lessons.labNN):\n" + "\n".join(found))


def test_pending_second_implementations_still_exist():
    """An entry of PENDING that was replaced must leave the list."""
    found = set(helpers_with_workers_or_groups())
    assert [key for key in PENDING if key not in found] == []


def test_the_scans_catch_what_they_are_meant_to(tmp_path):
    bench = tmp_path / "lab_utils" / "instructor" / "bench"
    bench.mkdir(parents=True)
    path = bench / "bad.py"
    path.write_text(
        "from ...launch import launch, launch_jobs\n"
        "from ...lessons import lab07\n"
        "def my_worker(rank, world_size, cfg):\n"
        "    from ...launch import process_group\n"
        "    with process_group(60):\n"
        "        return cfg\n"
        "def jobs_of(names):\n"
        "    workers = {'a': lab07.amp_worker, 'b': my_worker}\n"
        "    return [(workers[n], ()) for n in names]\n"
        "def bench():\n"
        "    launch(my_worker, 2)\n"
        "    launch(lab07.amp_worker, 2)\n"
        "    launch_jobs(jobs_of(['a', 'b']), 2)\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        tree = ast.parse(path.read_text())
        found = launched_workers({path: tree})
        assert _rank_workers_and_groups(path, tree) == ["lab_utils/instructor/bench/bad.py:my_worker"]
    finally:
        ROOT = saved
    assert [w for _, w in found] == ["my_worker (not a lesson)", "lab_utils.lessons.lab07.amp_worker",
                                     "lab_utils.lessons.lab07.amp_worker", "my_worker (not a lesson)"]


# the lesson functions that replaced the second implementations (issue 47)
@pytest.mark.parametrize("worker", [
    "lab_utils.lessons.lab04.stage_worker", "lab_utils.lessons.lab05.mwms_worker", "lab_utils.lessons.lab06.classifier_worker",
    "lab_utils.lessons.lab07.amp_worker", "lab_utils.lessons.lab07.accumulate",
    "lab_utils.lessons.lab07.forward_with_checkpoints", "lab_utils.lessons.lab11.side_by_side",
    "lab_utils.lessons.lab11.read_scheduler"])
def test_the_replacing_functions_are_lessons(worker):
    module, _, name = worker.rpartition(".")
    assert name in lesson_names()[module]


# ---- one home per idea: a public name is defined once in lab_utils ---------------------------------------------------

# names every module of a kind defines, by design: a benchmark's bench and print_bench, a GPU check's gpu_check, a
# script's main, a service's up, down and refusal (the local Slurm cluster, the classroom hub)
PROTOCOL = {"bench", "print_bench", "gpu_check", "main", "up", "down", "refusal"}
# public names still defined in two modules (issue 47, item 2), each to get one home; the list may only shrink
TWICE = {"build_model", "detect", "find", "flat_weights", "load_split", "register", "scatter", "table"}


def public_definitions() -> dict[str, list[str]]:
    """Public module-level function and class name -> the modules of lab_utils that define it. The generated lessons
    are left out: they are the notebooks' code, each lab's module a namespace of its own (lab05.keras_flat_weights
    reads a Keras model), and the core never imports a lesson by name."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if LESSONS in path.parents:
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(_rel(path))
    return found


def test_no_public_name_is_defined_twice_in_lab_utils():
    twice = {name: where for name, where in public_definitions().items() if len(where) > 1 and name not in PROTOCOL}
    new = {name: where for name, where in twice.items() if name not in TWICE}
    assert new == {}, ("a public name defined in two modules of lab_utils: give the idea one home (import it from "
                       "there) or a name that says how the two differ")
    assert sorted(TWICE - set(twice)) == [], "these names have one home now: take them off TWICE"
