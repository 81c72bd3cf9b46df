"""Inside a grader's probe process: run one exercise on the learner's definition and send back one answer.

The grader starts this in a fresh sandboxed process with a request on stdin (the exercise, its trusted set-up, the
learner's definition, the inputs drawn for this run) and reads exactly one answer from the pipe whose write end it
passed to this process.
Nothing here is secret: the inputs are the learner's function's own arguments, and the reference answer is never
in this process.
"""
from __future__ import annotations

import base64
import json
import os
import sys


def _exercise(request):
    if request.get("pickled"):
        import cloudpickle

        return cloudpickle.loads(base64.b64decode(request["pickled"]))
    from .. import exercises

    return exercises.get(request["name"])


def answer(request: dict) -> dict:
    """Run the exercise; the learner's code may raise anything, or return what is not plain data."""
    from ..exercises.core import is_stub, last_line, to_plain

    name = request["name"]
    try:
        exercise = _exercise(request)
        namespace = {"__name__": "__learner__", "__builtins__": __builtins__}
        exec(compile(exercise.setup or "", "<lab set-up>", "exec"), namespace)
        exec(compile(request["definition"], "<your notebook>", "exec"), namespace)
        if not callable(namespace.get(name)):
            return {"status": "missing", "error": f"{name} is not defined as a function"}
        value = to_plain(exercise.run(namespace[name], request["inputs"]))
    except Exception as exc:
        if is_stub(exc):
            return {"status": "missing", "error": f"{name} is still the exercise stub (raises NotImplementedError)"}
        if isinstance(exc, TypeError) and "not plain data" in str(exc):
            return {"status": "invalid", "error": last_line(exc)}
        return {"status": "error", "error": last_line(exc)}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too
        return {"status": "error", "error": last_line(exc)}
    return {"status": "ok", "value": value}


def main(channel: int) -> None:
    request = json.loads(sys.stdin.readline())
    record = answer(request)
    data = (json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(channel, data):]
    os._exit(0)  # no atexit hooks, no finalisers of the learner's objects


if __name__ == "__main__":
    main(int(sys.argv[1]))
