"""Edit a function you wrote in the notebook, as you would edit the cell, and run the edited copy:
`variant(ddp_worker, {"sampler.set_epoch(epoch)": "pass"}, name="no set_epoch")` prints the diff and returns a new
function, the original unchanged. Each old text must occur exactly once, so an edit cannot silently miss its line."""
from __future__ import annotations

import ast
import difflib
import inspect
import linecache
import sys
import textwrap


def _class_source(cls) -> str | None:
    """A class's source, found through its methods' code (inspect.getsource needs a module file; a notebook has none)."""
    for member in vars(cls).values():
        code = getattr(getattr(member, "__func__", member), "__code__", None)
        if code is None:
            continue
        lines = linecache.getlines(code.co_filename)
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError:  # a cell with a magic
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__ and \
                    node.lineno <= code.co_firstlineno <= node.end_lineno:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                return "".join(lines[first - 1:node.end_lineno])
    return None


def source_of(fn) -> str:
    """The source of a function or class defined in a notebook cell or a file (dedented)."""
    text = getattr(fn, "__variant_source__", None)
    if text is None:
        try:
            text = inspect.getsource(fn)
        except (OSError, TypeError):
            text = _class_source(fn) if isinstance(fn, type) else None
        if text is None:
            raise ValueError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: define it with def or class "
                             "in a notebook cell or a file")
    return textwrap.dedent(text)


def diff(old: str, new: str, *, context: int = 0) -> str:
    """The changed lines of `old` -> `new` as a unified diff without the header lines."""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context)
    return "\n".join(line for line in lines if not line.startswith(("---", "+++", "@@")))


_ORIGINS: dict[str, tuple] = {}  # an edited copy's file name -> (the original's file, its first line, old, new source)


def original_line(filename: str, line: int) -> tuple[str, int, str] | None:
    """(file, line, edit name) in the original function of an edited copy's line, where that line was kept or
    replaced line for line; None for other files and for lines an edit added."""
    if filename not in _ORIGINS:
        return None
    original_file, first, old, new, name = _ORIGINS[filename]
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if j1 <= line - 1 < j2 and (tag == "equal" or i2 - i1 == j2 - j1):
            return original_file, first + i1 + (line - 1 - j1), name
    return None


def variant(fn, edits: dict, *, name: str, show: bool = True):
    """A copy of `fn` (function or class) with each edit's old text replaced by the new; prints the diff if `show`."""
    original = source_of(fn)
    edited = original
    for old, new in edits.items():
        count = edited.count(old)
        if count != 1:
            raise ValueError(f"{name}: the text {old!r} occurs {count} times in {fn.__name__}; quote exactly one "
                             "place (add more of its line)")
        edited = edited.replace(old, new)
    filename = f"<{fn.__name__}, edited: {name}>"
    linecache.cache[filename] = (len(edited), None, edited.splitlines(True), filename)  # tracebacks show its lines
    namespace = dict(getattr(fn, "__globals__", None) or vars(sys.modules[fn.__module__]))
    exec(compile(edited, filename, "exec"), namespace)
    code = getattr(fn, "__code__", None)
    if code is not None:  # where its lines came from, for a hang's table (lab_utils.launch.where.place)
        _ORIGINS[filename] = (code.co_filename, code.co_firstlineno, original, edited, name)
    copy = namespace[fn.__name__]
    copy.__variant_source__ = edited
    copy.__variant_name__ = name
    if show:
        print(f"{fn.__name__}, edited ({name}):\n{textwrap.indent(diff(original, edited), '  ')}")
    return copy
