"""Inside a grader's probe process: run each exercise's `run` on the learner's definition and send back its answer.

The grader starts this in a sandboxed process with a submission's requests on stdin, one per exercise: the
exercise's `run` (by module and name, or pickled by value for an instructor test), its set-up, the learner's
definition and the inputs drawn for this run. Never the reference, the judge or the Exercise object: those stay in the
grader. Each request is answered by a fresh child, in a folder of its own, one answer line each, in order; before the
next child starts, everything the last one left running is killed (this process is a child subreaper, and in
bubblewrap the namespace's pid 1). The heavy libraries the exercises' own set-up imports (torch) are imported here
once, before the first fork, so that each child starts with them as a notebook's kernel has them.

Two processes, so that the learner's code cannot reach the answer channel (this process's stdout): this one reads
the requests, forks a child that closes every descriptor but a private result pipe and only then imports or runs
anything, and forwards what the child sends after checking it is one answer of plain data. This process is not
dumpable, so the child cannot open /proc/PID/fd of it either (and the sandbox's seccomp filter refuses ptrace); in
bubblewrap it is the namespace's pid 1, so no other process inside holds the channel, and signals from the learner's
code do not reach it. The learner's code sees `display` and `get_ipython` as a notebook does, and, as a kernel has it,
its working folder on `sys.path` (where a replayed `%%writefile` puts a module).
"""
from __future__ import annotations

import json
import os
import sys

MAX_ANSWER_BYTES = 16 * 2**20
MAX_DEPTH = 24
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PRELOADABLE = ("torch", "numpy")  # imported once before the children fork, where an exercise's set-up imports them


def _display(*objects, **options):
    """IPython's display, as a notebook has it without an import (here it shows nothing: no one reads it)."""
    from IPython.display import display

    return display(*objects, **options)


def _get_ipython():
    """A shell without a kernel, for the few statements that bind what `get_ipython()` returns."""
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


KERNEL_NAMES = {"display": _display, "get_ipython": _get_ipython}  # what a notebook's code may use without importing


def _load_run(spec: dict):
    if "pickled" in spec:
        import base64

        import cloudpickle

        return cloudpickle.loads(base64.b64decode(spec["pickled"]))
    import importlib

    module = importlib.import_module(spec["module"])
    if not module.__name__.startswith("lab_utils."):
        raise ValueError("a built-in exercise's run lives in lab_utils")
    return getattr(module, spec["qualname"])


def stub_error(name: str) -> str:
    """What a stub's row says (the grader says it without a probe when its reader saw the stub)."""
    return f"{name} is still the exercise stub (raises NotImplementedError)"


def answer(request: dict) -> dict:
    """Run the exercise; the learner's code may raise anything, or return what is not plain data."""
    from ...exercises.core import is_stub, last_line, only_raises_not_implemented, to_plain

    name = request["name"]
    stub = {"status": "missing", "error": stub_error(name)}
    if only_raises_not_implemented(request["definition"] or "", name):  # no set-up to run, no ranks to start
        return stub
    try:
        run = _load_run(request["run"])
        namespace = {"__name__": "__learner__", "__builtins__": __builtins__, **KERNEL_NAMES}
        exec(compile(request.get("setup") or "", "<lab set-up>", "exec"), namespace)
        sys.path.insert(0, os.getcwd())  # as in a kernel: a module the notebook wrote (`%%writefile rates.py`) imports
        exec(compile(request["definition"], "<your notebook>", "exec"), namespace)
        if not callable(namespace.get(name)):
            return {"status": "missing", "error": f"{name} is not defined as a function"}
        value = to_plain(run(namespace[name], request["inputs"]))
    except Exception as exc:
        if is_stub(exc):
            return stub
        if isinstance(exc, TypeError) and "not plain data" in str(exc):
            return {"status": "invalid", "error": last_line(exc)}
        return {"status": "error", "error": last_line(exc)}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too
        return {"status": "error", "error": last_line(exc)}
    return {"status": "ok", "value": value}


def depth(value, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and dicts nest in `value` (stops counting past `limit`), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            if level > limit:
                return level
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_answer(data: bytes) -> dict:
    """One answer record from raw bytes, or a record saying why it cannot be used. Never raises."""
    lines = data.splitlines()
    if len(data) > MAX_ANSWER_BYTES:
        return {"status": "invalid", "error": "the answer is too large"}
    if len(lines) != 1:
        return {"status": "invalid" if lines else "error",
                "error": "more than one answer came back" if lines else "no answer came back (the process ended early)"}
    try:
        record = json.loads(lines[0], parse_constant=lambda name: name)  # NaN/Infinity stay strings: never numbers
    except (ValueError, RecursionError):
        return {"status": "invalid", "error": "the answer is not valid data (or nested too deeply)"}
    if not isinstance(record, dict) or record.get("status") not in ("ok", "missing", "invalid", "error") \
            or set(record) - {"status", "value", "error"}:
        return {"status": "invalid", "error": "the answer is not valid data"}
    if depth(record.get("value")) > MAX_DEPTH:
        return {"status": "invalid", "error": f"the answer nests lists or dicts more than {MAX_DEPTH} deep"}
    if record["status"] != "ok":
        return {"status": record["status"], "error": str(record.get("error", ""))[:500]}
    return {"status": "ok", "value": record.get("value")}


def _child(request: dict, result_fd: int) -> None:
    """The learner's side: nothing but the result pipe is open; one record, then exit without finalisers."""
    try:
        data = (json.dumps(answer(request)) + "\n").encode()
    except BaseException as exc:  # json of a value that is not plain after all
        data = (json.dumps({"status": "invalid", "error": type(exc).__name__}) + "\n").encode()
    while data:
        data = data[os.write(result_fd, data):]
    os._exit(0)


def preloads(requests) -> list[str]:
    """The PRELOADABLE libraries the requests' set-up code (the course's, never the learner's) imports."""
    import ast

    found: set[str] = set()
    for request in requests:
        try:
            tree = ast.parse(request.get("setup") or "")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            found.update(n.split(".")[0] for n in names)
    return [name for name in PRELOADABLE if name in found]


def _answer_in_child(request: dict, folder: str) -> bytes:
    """Fork a child that answers `request` in `folder`; its one answer, checked, as the line to send."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = os.dup2(write_end, 3, inheritable=False) if write_end != 3 else 3
        os.closerange(4, 1 << 16)
        try:
            os.mkdir(folder, 0o700)
            os.chdir(folder)
        except OSError:
            pass  # the shared folder: the answer does not depend on it
        _child(request, keep)
    os.close(write_end)
    chunks, total = [], 0
    while total <= MAX_ANSWER_BYTES:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    return (json.dumps(parse_answer(b"".join(chunks))) + "\n").encode()


def main() -> None:
    import ctypes

    from .subreaper import kill_descendants

    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # what a child leaves running is handed here, and killed
    requests = [json.loads(line) for line in sys.stdin if line.strip()]
    for name in preloads(requests):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a child that needs it says why it cannot import it
            pass
    for index, request in enumerate(requests):
        data = _answer_in_child(request, str(index))
        while data:
            data = data[os.write(1, data):]
        kill_descendants()
    os._exit(0)


if __name__ == "__main__":
    main()
