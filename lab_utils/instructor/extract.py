"""What a probe runs of a submission: the learner's definition of one exercise, with the names the notebook gave it.

The last code cell that defines the name holds the definition. The probe runs that function, and every top-level
statement of that cell and the cells before it that binds a name the definition uses, directly or through what it
uses: imports (`np` from the notebook's import cell), helper functions and classes, and module-level values
(`LOSS = torch.nn.CrossEntropyLoss()`), each the last binding before the self-check, in notebook order. Statements
that bind nothing it uses (a training run, a print, a loop) are the rest of the notebook and are left out, so the
learner's function sees the same names in the probe as in the notebook's self-check.
"""
from __future__ import annotations

import ast
import symtable
import threading

BINDING = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
           ast.AnnAssign, ast.AugAssign)
BLOCKS = (ast.If, ast.Try)  # `try: import x / except ImportError: x = None` binds too


def _targets(node) -> set[str]:
    """Names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, BLOCKS):
        return set().union(*(_targets(n) for n in ast.walk(node) if n is not node and isinstance(n, BINDING)))
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, BINDING) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _globals_of(table: symtable.SymbolTable) -> set[str]:
    names = {s.get_name() for s in table.get_symbols() if s.is_global()}
    for child in table.get_children():
        names |= _globals_of(child)
    return names


def _uses(node) -> set[str]:
    """Global names a statement reads when it runs (a function: when it is called; locals are not counted)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return set()
    source = ast.unparse(node)
    try:
        table = symtable.symtable(source, "<cell>", "exec")
    except SyntaxError:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    for child in table.get_children():
        names |= _globals_of(child)
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        names.add(node.target.id)
    return names


def _parse(source: str):
    """The cell's top-level statements, or [] when it is not valid Python (IPython magics are blanked first)."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines)).body
    except SyntaxError:
        return []


_PARSING = threading.Lock()  # CPython 3.11's parser is not thread-safe ("AST constructor recursion depth mismatch")


def definition(cells: list[str], name: str) -> str | None:
    """Source that defines `name` as the learner wrote it, with what it uses (module docstring), or None."""
    with _PARSING:
        return _definition(cells, name)


def _definition(cells: list[str], name: str) -> str | None:
    statements = [(i, node) for i, body in enumerate(_parse(c) for c in cells) for node in body]
    defining = [k for k, (_, node) in enumerate(statements)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign))
                and name in _targets(node)]
    if not defining:
        return None
    home = defining[-1]
    last_cell = statements[home][0]
    candidates = [(k, node) for k, (cell, node) in enumerate(statements) if cell <= last_cell and k != home
                  and isinstance(node, BINDING + BLOCKS)]
    chosen, wanted, seen = {home}, set(_uses(statements[home][1])), set()
    while wanted - seen:
        fresh = sorted(wanted - seen)
        seen |= wanted
        for want in fresh:
            binders = [k for k, node in candidates if want in _targets(node)]
            plain = [k for k in binders if not isinstance(statements[k][1], ast.AugAssign)]
            start = plain[-1] if plain else -1  # the last plain binding, and every `+=` after it
            for k in [b for b in binders if b >= start]:
                if k not in chosen:
                    chosen.add(k)
                    wanted = wanted | _uses(statements[k][1])
    return "\n\n".join(ast.unparse(statements[k][1]) for k in sorted(chosen))
