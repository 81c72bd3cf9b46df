"""The notebook is the source of its lesson code: code cells of solutions/NN_*.ipynb tagged `lesson` are exported by
`python -m lab_utils assign` into lab_utils/labs/labNN/lesson.py, which the grader, the benchmarks, the GPU checks and
the tests import (never a hand-written copy that could drift from what the learner reads).

A lesson cell holds definitions: functions, classes, imports, UPPER_CASE constants. Its other statements (a print,
a launch, a self-check) run in the notebook only and are not exported. What the definitions use from the rest of the
notebook must be an import (the notebook's import cell): the exporter copies those imports, in notebook order, and
refuses a lesson that reads a value the notebook computes by running code, so a generated module imports without
side effects.
"""
from __future__ import annotations

import ast
import builtins
from pathlib import Path
from typing import Any

from ..grading.submission_reader import _parse, _targets, _uses

TAG = "lesson"
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def module_name(notebook: Path | str) -> str:
    """lab03 for 03_ddp.ipynb."""
    return f"lab{Path(notebook).name[:2]}"


def lesson_cells(nb) -> list[tuple[int, Any]]:
    """(index, cell) of the notebook's code cells tagged `lesson`."""
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


def _is_constant(node) -> bool:
    return (isinstance(node, (ast.Assign, ast.AnnAssign)) and
            all(isinstance(t, ast.Name) and t.id.isupper() for t in (node.targets if isinstance(node, ast.Assign)
                                                                       else [node.target])))


def _exported(source: str) -> list[tuple[ast.stmt, str]]:
    """The statements of a lesson cell that are exported, each with its text (decorators and comments inside kept,
    solution markers dropped)."""
    lines = source.splitlines()
    kept = []
    for node in _parse(source):
        if isinstance(node, DEFINITIONS + (ast.Import, ast.ImportFrom)) or _is_constant(node):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            text = "\n".join(line for line in lines[first - 1:node.end_lineno] if line.strip() not in MARKERS)
            kept.append((node, text))
    return kept


def defined_functions(nb) -> list[str]:
    """Names of the functions and classes the notebook's lesson cells define (what its generated module exports)."""
    return [node.name for _, cell in lesson_cells(nb) for node, _ in _exported(cell.source)
            if isinstance(node, DEFINITIONS)]


def _import_for(node, wanted: set[str]) -> str | None:
    """The import statement narrowed to the names in `wanted` (None when it binds none of them)."""
    keep = [a for a in node.names if a.name != "*" and (a.asname or a.name).split(".")[0] in wanted]
    if not keep:
        return None
    return ast.unparse(type(node)(**{**node.__dict__, "names": keep}))


def lesson_module(nb, source_label: str) -> str | None:
    """The text of the generated module for one solution notebook, or None when it has no lesson cells.

    Raises ValueError naming the cell when a lesson uses a name the notebook binds by running code."""
    cells = lesson_cells(nb)
    if not cells:
        return None
    index: int | None
    node: ast.stmt | None
    used: dict[str, int]
    blocks, defined, used, last = [], set(), {}, max(i for i, _ in cells)
    for index, cell in cells:
        kept = _exported(cell.source)
        if not kept:
            raise ValueError(f"{source_label}, cell {index}: tagged {TAG!r} but defines nothing (a lesson cell holds "
                             "functions, classes, imports or UPPER_CASE constants)")
        for node, _ in kept:
            defined |= _targets(node)
            for name in _uses(node):
                used.setdefault(name, index)
        header = f"# ---- {source_label}, cell {index} (id {cell.get('id', '?')}) "
        blocks.append(header + "-" * max(4, 118 - len(header)) + "\n\n" + "\n\n\n".join(text for _, text in kept))
    missing = {name: cell for name, cell in used.items() if name not in defined and not hasattr(builtins, name)}
    binding: dict[str, tuple[int, ast.stmt]] = {}  # name -> (cell index, statement): its last binding up to the last lesson cell
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and index <= last:
            for node in _parse(cell.source):
                for name in _targets(node) & set(missing):
                    binding[name] = (index, node)
    imports: dict[tuple[int | None, int], tuple[ast.Import | ast.ImportFrom, set[str]]]
    imports, problems = {}, []  # (cell, line) -> (import statement, the names it must bind)
    for name in sorted(missing):
        index, node = binding.get(name, (None, None))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.setdefault((index, node.lineno), (node, set()))[1].add(name)
        elif index is None:
            problems.append(f"{name} (used in cell {missing[name]}; bound nowhere before it)")
        else:
            problems.append(f"{name} (used in cell {missing[name]}; bound by running cell {index})")
    if problems:
        raise ValueError(f"{source_label}: a lesson uses what is neither an import nor another lesson: "
                         f"{'; '.join(problems)}. Import it in the notebook's import cell, pass it as an argument, "
                         f"or tag the cell that defines it {TAG!r}")
    import_lines = [line for line in dict.fromkeys(_import_for(node, names) for _, (node, names) in sorted(imports.items()))
                    if line is not None]  # each binds a name a lesson uses
    names = [n.name for _, cell in cells for n, _ in _exported(cell.source) if isinstance(n, DEFINITIONS)]
    lab = Path(source_label).name[:2]
    head = (f'"""Lab {lab}\'s lesson code, exported from {source_label}: its code cells tagged `{TAG}`.\n\n'
            f"GENERATED by `python -m lab_utils assign`. Do not edit this file: edit the notebook's cell, then run\n"
            f"`python -m lab_utils assign` (`assign --check`, run by the tests, fails while the two differ).\n"
            f'"""\n')
    return (head + "\n".join(import_lines) + ("\n\n" if import_lines else "") + f"__all__ = {names!r}\n\n\n"
            + "\n\n\n".join(blocks) + "\n")


def export_lessons(sources: list[Path], lessons_dir: Path, *, check: bool = False, root: Path | None = None) -> list[str]:
    """Write lessons_dir/labNN/lesson.py (lessons_dir: the folder of the lab packages) for every notebook of `sources`
    with lesson cells (or, with check, list the modules that differ); a labNN/lesson.py no notebook generates is
    removed (with check: reported). Returns the problems."""
    import nbformat

    problems, wanted = [], set()
    for src in sources:
        label = str(src.relative_to(root)) if root and src.is_relative_to(root) else src.name
        try:
            text = lesson_module(nbformat.read(src, as_version=4), label)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if text is None:
            continue
        dest = lessons_dir / module_name(src) / "lesson.py"
        wanted.add(dest)
        if check:
            if not dest.exists():
                problems.append(f"{dest} is missing")
            elif dest.read_text() != text:
                problems.append(f"{dest} differs from what the lesson cells of {src} export")
        elif not dest.exists() or dest.read_text() != text:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    for stale in sorted(lessons_dir.glob("lab[0-9][0-9]/lesson.py")) if lessons_dir.exists() else []:
        if stale not in wanted:
            if check:
                problems.append(f"{stale} is generated from no notebook's lesson cells")
            else:
                stale.unlink()
    return problems
