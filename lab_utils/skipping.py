"""Cells that need what an unfinished cell did not make: they print 'skipped: ...' with the reason, instead of raising a
NameError (an IPython input transformer; a cell runs as written again once the names exist)."""
from __future__ import annotations

import ast


def names_used(source: str) -> set[str]:
    """The names a cell reads (None for a cell that is not Python: it is left alone)."""
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)}


def names_bound(source: str) -> set[str]:
    """The names a cell binds: assignments, loop targets, functions, classes, imports."""
    bound = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound


class Skipper:
    """Replaces a cell that reads a `missing` name absent from `namespace` by a print of `reason`; the names that cell
    would have bound are missing too (the cells after it need them)."""

    def __init__(self, missing, reason: str, namespace: dict, head: str = "the runs above did not finish"):
        self.missing, self.reason, self.namespace, self.head = set(missing), reason, namespace, head

    def source(self, source: str) -> str:
        """The source to run instead of `source` (itself when nothing it reads is missing)."""
        try:
            used, bound = names_used(source), names_bound(source)
        except SyntaxError:  # a magic, or a typo: IPython reports it as usual
            return source
        absent = sorted(n for n in (used - bound) & self.missing if n not in self.namespace)
        if not absent:
            return source
        self.missing |= bound
        said = f"skipped: {self.head} ({self.reason}); this cell needs {absent[0]}"
        if len(said) > 100:  # a notebook shows about 100 columns (measure.lines.WIDTH): the name on a line of its own
            said = said.replace("; this cell needs", ";\n  this cell needs")
        return f"print({said!r})\n"

    def __call__(self, lines: list[str]) -> list[str]:
        """IPython's input transformer interface: a cell's lines in, the lines to run out."""
        source = "".join(lines)
        replaced = self.source(source)
        return lines if replaced == source else replaced.splitlines(keepends=True)


def skip_cells_needing(missing, reason: str, head: str = "the runs above did not finish") -> Skipper | None:
    """In an IPython kernel: from now on, each cell that reads one of `missing` (while it is undefined) says 'skipped'
    with `reason` (after `head`, what did not run); returns the Skipper (None outside IPython). A later cell that
    defines the names lifts the skip."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    shell.input_transformers_post[:] = [t for t in shell.input_transformers_post if not isinstance(t, Skipper)]
    skipper = Skipper(missing, reason, shell.user_ns, head)
    shell.input_transformers_post.append(skipper)
    return skipper
