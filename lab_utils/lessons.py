"""An earlier lab's function, as its notebook defines it: lab 11 runs lab 03's DDP worker from lab 03's notebook,
not from a copy typed again (which would drift from what the learner read and edited there)."""
from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from pathlib import Path

import nbformat

COURSE = Path(__file__).resolve().parents[1]


def _body(source: str) -> list:
    """A cell's top-level statements ([] when it is not Python, e.g. a magic)."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines)).body
    except SyntaxError:
        return []


@dataclass(frozen=True)
class Lesson:
    """A function taken from a notebook: the function, its source, and where it was found."""

    function: types.FunctionType
    source: str
    imports: str
    notebook: Path
    cell: int

    def describe(self) -> str:
        return f"{self.function.__name__} from {self.notebook.name}, cell {self.cell} (its last definition there)"


def notebook_path(name: str, beside=".") -> Path:
    """A lab's notebook: the one beside this notebook (the learner's copy), else the course's solutions/ copy."""
    for folder in (Path(beside), COURSE / "solutions"):
        if (folder / name).exists():
            return (folder / name).resolve()
    raise FileNotFoundError(f"{name} is neither in {Path(beside).resolve()} nor in {COURSE / 'solutions'}")


def from_notebook(path, name: str) -> Lesson:
    """The last top-level definition of function `name` in the notebook at `path`, run with the notebook's imports
    that it uses, in a namespace of its own (so it is sent to other processes by value, like a notebook function)."""
    nb = nbformat.read(str(path), as_version=4)
    sources = {i: "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in c.source.splitlines())
               for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    cells = [(i, _body(text)) for i, text in sources.items()]
    found = [(i, node) for i, body in cells for node in body if isinstance(node, ast.FunctionDef) and node.name == name]
    if not found:
        raise LookupError(f"{Path(path).name} defines no function {name!r} at the top level of a code cell")
    cell, node = found[-1]
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.value.id for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    imports = []
    for i, body in cells:
        if i > cell:
            break
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                keep = [a for a in stmt.names if (a.asname or a.name).split(".")[0] in used]
                if keep:
                    imports.append(ast.unparse(type(stmt)(**{**stmt.__dict__, "names": keep})))
    source, imports_text = ast.get_source_segment(sources[cell], node), "\n".join(imports)
    namespace = {"__name__": f"lesson_{Path(path).stem}"}  # no such module: cloudpickle sends the function by value
    exec(compile(imports_text + "\n\n" + source, f"<{Path(path).name}, cell {cell}>", "exec"), namespace)
    return Lesson(namespace[name], source, imports_text, Path(path).resolve(), cell)
