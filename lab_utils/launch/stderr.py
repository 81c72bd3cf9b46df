"""What a child process printed: capture this process's and its children's stderr (a rank's traceback, say)."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

STDERR_FILE = "LAB_UTILS_STDERR_FILE"  # where a rank sends its fd 2 inside a captured_stderr() block


def send_stderr_to_capture(env: dict) -> None:
    """In a rank: write fd 2 where the launcher's captured_stderr() block collects it, if one is open."""
    if env.get(STDERR_FILE):
        appending = os.open(env[STDERR_FILE], os.O_WRONLY | os.O_APPEND)
        os.dup2(appending, 2)
        os.close(appending)


class CapturedStderr:
    """Text written to file descriptor 2 inside a `captured_stderr()` block (child processes included)."""

    text: str = ""


@contextlib.contextmanager
def captured_stderr():
    """Capture what this process and its children write to stderr (fd 2 and sys.stderr), e.g. a child's traceback."""
    import logging

    captured = CapturedStderr()
    sys.stderr.flush()
    saved, python_level = os.dup(2), io.StringIO()
    handlers = [h for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
                for h in getattr(logger, "handlers", []) if isinstance(h, logging.StreamHandler)
                and h.stream in (sys.stderr, sys.__stderr__)]
    streams = [h.setStream(python_level) for h in handlers]  # logging that was set up to write to stderr
    with tempfile.NamedTemporaryFile() as sink, contextlib.redirect_stderr(python_level):
        appending = os.open(sink.name, os.O_WRONLY | os.O_APPEND)  # this process and the ranks write to its end
        os.dup2(appending, 2)
        os.close(appending)
        before = os.environ.get(STDERR_FILE)
        os.environ[STDERR_FILE] = sink.name  # a rank forked from a fork server started earlier inherits its fd 2
        try:
            yield captured
        finally:
            sys.stderr.flush()
            if before is None:
                del os.environ[STDERR_FILE]
            else:
                os.environ[STDERR_FILE] = before
            os.dup2(saved, 2)
            os.close(saved)
            for handler, stream in zip(handlers, streams):
                handler.setStream(stream)
            sink.seek(0)
            captured.text = python_level.getvalue() + sink.read().decode(errors="replace")
