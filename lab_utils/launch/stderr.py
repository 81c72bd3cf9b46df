"""What a child process printed: capture this process's and its children's stderr (a rank's traceback, say)."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

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
    with tempfile.TemporaryFile() as sink, contextlib.redirect_stderr(python_level):
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            for handler, stream in zip(handlers, streams):
                handler.setStream(stream)
            sink.seek(0)
            captured.text = python_level.getvalue() + sink.read().decode(errors="replace")
