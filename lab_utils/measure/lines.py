"""Printed lines a learner can read: verdicts, flags and notes wrap at WIDTH with a hanging indent, and a busy
machine's refusal is said once per notebook cell (later ones point back to it)."""
from __future__ import annotations

import re
import textwrap

WIDTH = 100  # a printed verdict, flag or note wraps here: a notebook shows about 100 columns without scrolling
LONGEST = 120  # no line the renderer prints is longer (tests/test_outputs.py checks the committed outputs): a word
#                longer than WIDTH (a path) stays whole
HANG = "    "  # the indent of a wrapped line's continuation, and of a verdict's lines under its first
LOAD_ABOVE = "the load above"  # a later refusal in the same cell, where the load and what to do were said above


KEPT = ("cannot be seen here", "not distinguishable here", "not measurable here", "paired repeats",
        "flagged above", "marked * too", "(marked *)")  # words a reader (and a test) finds whole: never broken
#       across two lines (a line that ends in ' *' is a table's marked row)
_GLUE = "\u00a0"  # a no-break space while wrapping
NO_BREAK = _GLUE  # the same, for the other wrappers (measure.short_lines)
# '57 %': a figure and its unit, never broken across two lines ('x' followed by a letter or a digit is another word)
_UNIT = re.compile(r"(?<=\d) (?=(?:%|x|ms|us|ns|s|B|kB|KB|MB|GB|KiB|MiB|GiB|GB/s|MB/s)(?![\w/]))")


# '... spread 5%)' at a line's end: the closing figure stays with the word before it, never alone on a wrapped line
_LAST_FIGURE = re.compile(r" (?=[-+~]?\d[\d.,]*(?:%|x)?[)\].,;:]*$)")


def unbroken_units(line: str) -> str:
    """`line` with the space between each figure and its unit made a no-break space, and the space before a figure
    that ends the line ('spread 5%)') too (wrap() and short_lines() turn them back into plain spaces after
    wrapping)."""
    return _LAST_FIGURE.sub(_GLUE, _UNIT.sub(_GLUE, line))


def wrap(text: str, width: int = WIDTH, hang: str = HANG) -> str:
    """Each line of `text` wrapped at `width`, its continuation lines indented by its own indent plus `hang`; the
    phrases of KEPT stay on one line."""
    out = []
    for line in str(text).split("\n"):
        if len(line) <= width:
            out.append(line.replace(_GLUE, " "))
            continue
        indent = line[:len(line) - len(line.lstrip())]
        for phrase in KEPT:
            line = line.replace(phrase, phrase.replace(" ", _GLUE))
        line = unbroken_units(line)
        out.append(textwrap.fill(line, width=width, subsequent_indent=indent + hang, break_on_hyphens=False,
                                 break_long_words=False).replace(_GLUE, " "))
    return "\n".join(out)


def glued(before: str, after: str) -> str:
    """`before` and `after` joined by a space that wrap() never breaks (a verdict's outcome stays beside its claim)."""
    return f"{before}{_GLUE}{after}"


def stacked(head: str, parts=(), width: int = WIDTH) -> str:
    """`head` (the claim and its outcome), then each non-empty part on lines of its own, indented: every line wrapped
    at `width` with a hanging indent, so the structure reads at a glance."""
    return "\n".join([wrap(head, width)] + [wrap(HANG + p, width) for p in parts if p])


def _cell() -> int | None:
    """The notebook cell now running (IPython's execution count), or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a course dependency
        return None
    shell = get_ipython()
    return None if shell is None else getattr(shell, "execution_count", None)


_said: dict = {"cell": None, "keys": set()}  # what this cell has printed in full (reset when another cell runs)


def said_before(key: str) -> bool:
    """True where `key` (e.g. 'load') was printed in full earlier in the same notebook cell; marks it said. Outside
    IPython (a script, a test, a rank) nothing counts as said: each refusal prints in full."""
    cell = _cell()
    if cell is None:
        return False
    if _said["cell"] != cell:
        _said["cell"], _said["keys"] = cell, set()
    if key in _said["keys"]:
        return True
    _said["keys"].add(key)
    return False


def mark_said(key: str) -> None:
    """Record that `key` was printed in full in this cell (a line printed elsewhere, e.g. a table's refusal)."""
    said_before(key)


def busy_refusal(text: str) -> bool:
    """Whether `text` refuses a figure because other programs used the cores (the load a later line can point to)."""
    return "other programs used" in str(text)
