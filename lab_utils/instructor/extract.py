"""What a probe runs of a submission: the learner's definition of one exercise, and nothing else of the notebook.

From the last code cell that defines the name: its imports, function and class definitions and constant assignments;
plus the definitions of helper functions from earlier cells that it calls. Expressions and statements with effects
(a call at top level, a loop, a `with`) are left out: they are the rest of the notebook.
"""
from __future__ import annotations

import ast

KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _is_constant_assignment(node) -> bool:
    """`NAME = <literal>` (numbers, strings, tuples and lists of them)."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if not all(isinstance(t, ast.Name) for t in targets):
        return False
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _defined_names(node) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _parse(source: str):
    """The cell's top-level statements, or [] when it is not valid Python (IPython magics are blanked first)."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines)).body
    except SyntaxError:
        return []


def definition(cells: list[str], name: str) -> str | None:
    """Source that defines `name` as the learner wrote it (see the module docstring), or None when no cell does."""
    parsed = [_parse(c) for c in cells]
    where = [i for i, body in enumerate(parsed) if any(name in _defined_names(n) and not isinstance(n, (ast.Import, ast.ImportFrom))
                                                        for n in body)]
    if not where:
        return None
    home = where[-1]
    kept = [n for n in parsed[home] if isinstance(n, KEPT) or _is_constant_assignment(n)]
    have = set().union(*(_defined_names(n) for n in kept)) if kept else set()
    helpers = {}
    for body in parsed[:home]:  # the last earlier definition of each function wins, as in the notebook
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                helpers[n.name] = n
    wanted = _used_names(kept)
    extra = []
    while wanted - have:
        found = [helpers[w] for w in sorted(wanted - have) if w in helpers]
        have |= wanted
        extra += found
        wanted = _used_names(found) | wanted
    return "\n\n".join(ast.unparse(n) for n in extra + kept)


def _used_names(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
