"""How a failed rank is reported: its error without build paths or addresses, how its process ended, and why the
errors learners meet most often happen."""
from __future__ import annotations

import contextlib
import re
import signal

PORT_IN_USE = ("Address already in use", "EADDRINUSE", "errno: 98")
# what a gloo or c10d error names that means nothing to a learner and must not reach a notebook's output:
SOURCE_LOCATION = re.compile(r"\[[^\[\]\s]*\.(?:cc|cpp|cu|h|hpp):\d+\]\s*")  # [/build/path/pair.cc:553]
NETWORK_ADDRESS = re.compile(r"\s*(?:\[[\w.:]*\]|\b\d{1,3}(?:\.\d{1,3}){3}|\blocalhost):\d{1,5}\b")  # [127.0.0.1]:5336
TIMED_OUT = ("Timed out waiting", "timed out", "Timeout waiting")


def sanitized(text: str) -> str:
    """The text without the build paths and network addresses (host:port) that gloo and c10d errors carry."""
    return NETWORK_ADDRESS.sub("", SOURCE_LOCATION.sub("", text))


def short_error(error, limit: int = 200, sentences: int | None = None) -> str:
    """`error` as one sanitized line: first `sentences` sentences (None: all), at most `limit` chars cut at a word."""
    text = " ".join(sanitized(str(error)).split())
    if sentences:
        text = " ".join(re.split(r"(?<=[.!?]) ", text)[:sentences])
    return text if len(text) <= limit else text[:limit - 1].rsplit(" ", 1)[0] + "…"


class StartedWhileImporting(RuntimeError):
    """A launch from a process that is itself still starting: a rank importing the script that launched it."""

    def __init__(self) -> None:
        super().__init__(
            "the ranks could not start: this process is itself a rank that is importing your script (each rank "
            "imports the script that launched it, to find your function), and the script's top level launched ranks "
            "again (a check(...) or launch(...) call). Put those calls under `if __name__ == \"__main__\":` at the "
            "end of the script, or run them in the notebook")


def importing_main() -> bool:
    """True in a process that multiprocessing is still starting (it imports its parent's main module meanwhile)."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


class RankError(RuntimeError):
    """A rank of a launched job failed; carries the rank and its traceback text (the message sanitized)."""

    def __init__(self, rank: int, message: str, traceback_text: str = "", hint: str = "", where: str = ""):
        message = sanitized(message)
        self.rank, self.message, self.traceback_text, self.hint = rank, message, traceback_text, hint
        self.where = where  # the table of where every rank was (lab_utils.launch.where), or ""
        text = f"rank {rank} failed: {message}"
        if hint:
            text += f"\n\nwhy: {hint}"
        if where:
            text += f"\n\nwhere each rank was (its record of collectives, kept by lab_utils):\n{where}"
        if traceback_text:
            text += f"\n\n--- traceback from rank {rank} ---\n{traceback_text.rstrip()}"
        super().__init__(text)


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words."""
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by signal {signal.Signals(-exitcode).name}"
        return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def hint_for(traceback_text: str) -> str:
    """Explain the errors learners meet most often."""
    if "Can't get attribute" in traceback_text or "No module named" in traceback_text:
        return ("a fresh process could not import something the worker needs by name. Functions defined in the "
                "notebook are sent by value and need no module; a module of your own must be importable from the "
                "notebook's folder (or installed).")
    if any(s in traceback_text for s in PORT_IN_USE):
        return "another program took the rendezvous port; launch() retries with a new port when it picked the port itself."
    if any(s in traceback_text for s in TIMED_OUT):
        return ("a collective or a send/recv waited for a peer that never made the matching call. Every rank must call "
                "every collective (broadcast, reduce, all_reduce, barrier...) in the same order, also the ranks that "
                "only receive; every send needs its recv on the peer.")
    return ""
