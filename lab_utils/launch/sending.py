"""Sending the worker by value: notebook functions are pickled with cloudpickle, and what cannot travel to another
process (open files, locks, sockets, CUDA tensors) is named before anything starts."""
from __future__ import annotations

import io
import socket
import sys
import textwrap

RAISED_WIDTH = 88  # an error's message wraps here: shown as 'ValueError: ...', its first line stays under 100 columns


def raised_text(*paragraphs: str) -> str:
    """An error message: each paragraph on lines of its own, wrapped at RAISED_WIDTH, later lines indented."""
    return "\n".join(textwrap.fill(p, RAISED_WIDTH, subsequent_indent="    ", break_long_words=False,
                                    break_on_hyphens=False) for p in paragraphs)


UNSENDABLE_ADVICE = ("create it inside the worker instead, or pass what it stands for as a plain value "
                     "(a path instead of an open file, tensor.cpu() instead of a CUDA tensor)")


def _unsendable_reason(obj) -> str | None:
    """Why `obj` must not travel to another process, or None."""
    if isinstance(obj, io.IOBase) or type(obj).__name__ in ("TextIOWrapper", "BufferedReader", "BufferedWriter"):
        return "an open file: a file handle belongs to this process"
    if type(obj).__module__ == "_thread" or type(obj).__name__ in ("lock", "RLock", "Condition", "Event", "Semaphore"):
        return f"a {type(obj).__name__}: a lock synchronises threads of this process only"
    if type(obj).__module__ == "socket" or isinstance(obj, socket.socket):
        return "a socket: a connection belongs to this process"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor) and obj.is_cuda:
        return "a CUDA tensor: each rank owns its own device, and the kernel's GPU memory is not the rank's"
    return None


def _find_unsendable(value, path: str, depth: int = 0, seen=None):
    """(path, reason) of the first object inside `value` that cannot be sent, or None."""
    import inspect

    seen = seen if seen is not None else set()
    if depth > 6 or id(value) in seen:
        return None
    seen.add(id(value))
    reason = _unsendable_reason(value)
    if reason:
        return path, reason
    if isinstance(value, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    elif inspect.isfunction(value):
        try:
            captured = inspect.getclosurevars(value)
        except (TypeError, ValueError):
            return None
        items = [(name, v) for name, v in {**captured.globals, **captured.nonlocals}.items()
                 if not inspect.ismodule(v)]
    else:
        return None
    for where, item in items:
        found = _find_unsendable(item, where, depth + 1, seen)
        if found:
            return found
    return None


def _code_keeping_filename(code):
    """cloudpickle's reduction of a code object, with its file name kept (cloudpickle writes "<dynamic-code>"), so
    that a hang's table can name the notebook cell a worker's line is in."""
    import cloudpickle

    constructor, args = cloudpickle.cloudpickle._code_reduce(code)
    return constructor, tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)


def _dumps(value) -> bytes:
    """cloudpickle.dumps, keeping code objects' file names."""
    import io
    import types
    from collections import ChainMap

    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        dispatch_table = ChainMap({types.CodeType: _code_keeping_filename}, cloudpickle.Pickler.dispatch_table)

    buffer = io.BytesIO()
    Pickler(buffer).dump(value)
    return buffer.getvalue()


def serialise(jobs) -> bytes:
    """The jobs, pickled by value (cloudpickle), so functions defined in a notebook reach the ranks."""
    for i, (worker, args) in enumerate(jobs):
        for what, value in ((getattr(worker, "__name__", "the worker"), worker), ("args", tuple(args))):
            found = _find_unsendable(value, what)
            if found:
                where, reason = found
                raise ValueError(raised_text(f"cannot send {what} to the ranks: it uses {where}, {reason}.",
                                             f"Fix: {UNSENDABLE_ADVICE}."))
    try:
        return _dumps(list(jobs))
    except Exception as exc:  # cloudpickle raises several types for objects it cannot copy
        raise ValueError(raised_text(f"cannot send the worker or its args to another process ({type(exc).__name__}: "
                                     f"{exc}).", f"Fix: {UNSENDABLE_ADVICE}.")) from None
