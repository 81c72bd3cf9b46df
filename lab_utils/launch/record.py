"""Each rank's record of its collectives, kept by the course: the process group's Python calls are wrapped at rank
start (op, shapes, dtype, a per-rank sequence number, the learner's file:line, in progress or completed), and a
thread of the rank answers the launcher's "where are you?" (SIGUSR1) with the record and its main thread's stack.

Why not PyTorch's Flight Recorder: torch 2.13 records gloo collectives too (`_dump_fr_trace`, measured: op, sequence
number, sizes, Python frames), but on gloo every entry stays "scheduled", completed or not, so it cannot tell which
call a rank waits in; and its dump runs inside the rank, which a rank stuck in a collective cannot do for itself. The
record below says in progress / completed, and a thread of the rank answers while the main thread waits (no ptrace).
It sees calls made through `torch.distributed`'s Python functions; DDP's gradient all-reduces run in C++ and are not in
it (the main thread's stack then shows the learner's `loss.backward()` line). LAB_COLLECTIVE_RECORD=0 turns it off.

A call that gives up on the process group's own timeout (gloo's "Timed out waiting ...") ends a hang inside the rank,
often before the launch's timeout, and its peer's call then fails with "Connection closed by peer"; the worker may
catch either. Before such an error leaves the call, the call asks the launcher for the table of where every rank is
(while the call still reads "in progress") and adds it to the error as a note (`table_note(err)` reads it back)."""
from __future__ import annotations

import collections
import contextlib
import functools
import os
import signal
import sys
import threading
import traceback

from .errors import TIMED_OUT  # gloo's and c10d's words for their own timeout

ENABLED = "LAB_COLLECTIVE_RECORD"  # "0" in a rank's env: no record
KEEP = 64  # the last calls each rank keeps
ASK = signal.SIGUSR1  # the launcher's "where are you?"
OPS = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
       "reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "send", "recv",
       "isend", "irecv", "batch_isend_irecv", "all_gather_object", "broadcast_object_list", "gather_object",
       "scatter_object_list")
POINT_TO_POINT = ("send", "recv", "isend", "irecv", "batch_isend_irecv")

_calls: collections.deque = collections.deque(maxlen=KEEP)
_count = [0]
_local = threading.local()
_originals: dict = {}
_skipped_files: dict[str, bool] = {}
_ask_table: list = []  # [ask(snapshot) -> table text or None] once a launcher answers this rank's timeouts
NOTE_HEADER = "where each rank was when this call gave up (its record of collectives, kept by lab_utils):"
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "pair closure")  # a peer's group gave up first


def _library_dirs() -> tuple[str, ...]:
    """Folders whose frames are not the learner's: torch, this launcher, the standard library."""
    import torch

    return (os.path.dirname(torch.__file__), os.path.dirname(__file__), os.path.dirname(threading.__file__))


def library_file(filename: str) -> bool:
    """True for a frame of torch, of the launcher or of Python itself (cached per file)."""
    skip = _skipped_files.get(filename)
    if skip is None:
        skip = filename.startswith(_library_dirs()) or filename in ("<dynamic-code>", "<string>")
        _skipped_files[filename] = skip
    return skip


def learners_frame(frame) -> tuple[str, int, str] | None:
    """(file, line, function) of the innermost frame at or above `frame` that is the learner's, or None."""
    while frame is not None:
        if not library_file(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


def _tensors(value):
    """The tensors in an argument (a tensor, or a list of them)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _describe(args, kwargs) -> tuple[list, str]:
    """Shapes of the tensors passed, and the first one's dtype."""
    tensors = [t for v in (*args, *kwargs.values()) for t in _tensors(v)]
    return [list(t.shape) for t in tensors], (str(tensors[0].dtype).replace("torch.", "") if tensors else "")


def _wrap(name: str, function):
    """`function`, recording each call that is not made from inside another recorded call."""
    @functools.wraps(function)
    def recorded(*args, **kwargs):
        if getattr(_local, "depth", 0):  # e.g. all_gather_object calls all_gather: recorded once, as itself
            return function(*args, **kwargs)
        shapes, dtype = _describe(args, kwargs)
        _count[0] += 1
        call = {"seq": _count[0], "op": name, "shapes": shapes, "dtype": dtype,
                "where": learners_frame(sys._getframe(1)), "state": "in progress"}
        if threading.current_thread() is not threading.main_thread():  # e.g. an async checkpoint's save thread
            call["thread"] = threading.current_thread().name
        _calls.append(call)
        _local.depth = 1
        try:
            result = function(*args, **kwargs)
        except BaseException as exc:
            if _ask_table and ended_a_wait(exc):
                _add_table(exc)  # while the call still reads "in progress": where this rank waited
            call["state"] = f"failed ({type(exc).__name__})"
            raise
        finally:
            _local.depth = 0
        call["state"] = "started (async)" if hasattr(result, "wait") or isinstance(result, list) else "completed"
        return result

    recorded.__wrapped_by_lab_record__ = True  # type: ignore[attr-defined]  # a function takes attributes
    return recorded


def ended_a_wait(exc: BaseException) -> str:
    """"timed out" or "lost its peer" when `exc` ended a wait for a peer (the group's timeout, or a peer's), else ""."""
    text = str(exc)
    return "timed out" if any(w in text for w in TIMED_OUT) else "lost its peer" if any(
        w in text for w in PEER_GONE) else ""


def _add_table(exc: BaseException) -> None:
    """Ask the launcher for the table of where every rank is now, and add it to `exc` as a note."""
    try:
        text = _ask_table[0]({**snapshot(), "ended": ended_a_wait(exc)})
    except Exception:  # noqa: BLE001  # the launcher is gone or its queue closed: the error goes on without a table
        return
    if text:
        exc.add_note(f"{NOTE_HEADER}\n{text}")


def table_note(exc: BaseException) -> str:
    """The table a timed-out call's error carries (its note), or "" when it has none."""
    return next((note for note in getattr(exc, "__notes__", []) if note.startswith(NOTE_HEADER)), "")


def without_table_note(exc: BaseException) -> None:
    """Take the table's note off `exc` (the launcher prints its own table beside the rank's traceback)."""
    notes = getattr(exc, "__notes__", None)
    if notes:
        notes[:] = [note for note in notes if not note.startswith(NOTE_HEADER)]


def ask_on_timeout(ask) -> None:
    """From now on a recorded call that times out asks `ask(snapshot)` for the table of every rank (None: stop)."""
    _ask_table[:] = [ask] if ask is not None else []


def start_recording() -> bool:
    """Wrap the process group's collectives in this process (once); False when LAB_COLLECTIVE_RECORD=0."""
    if os.environ.get(ENABLED, "1") == "0":
        return False
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    for name in OPS:
        original = getattr(distributed_c10d, name, None)
        if original is None or getattr(original, "__wrapped_by_lab_record__", False):
            continue
        _originals[name] = original
        wrapped = _wrap(name, original)
        setattr(distributed_c10d, name, wrapped)
        if getattr(dist, name, None) is original:
            setattr(dist, name, wrapped)
    return True


def stop_recording() -> None:
    """Put the original functions back (the benchmark's "without" side)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    for name, original in _originals.items():
        if getattr(dist, name, None) is getattr(distributed_c10d, name, None):
            setattr(dist, name, original)
        setattr(distributed_c10d, name, original)
    _originals.clear()


def clear() -> None:
    """Forget the calls recorded so far (a new job starts a new sequence)."""
    _calls.clear()
    _count[0] = 0


def snapshot(stack_of=None) -> dict:
    """The record and the main thread's stack now: what the launcher prints as this rank's row."""
    main = stack_of if stack_of is not None else sys._current_frames().get(threading.main_thread().ident or 0)
    stack = [(f.filename, f.lineno, f.name) for f in traceback.extract_stack(main)][-12:] if main is not None else []
    return {"calls": [dict(c) for c in _calls], "count": _count[0], "stack": stack,
            "line": learners_frame(main) if main is not None else None}


def answer_when_asked(reply) -> None:
    """Start the thread that answers SIGUSR1 with reply(snapshot()); call before this process starts other threads."""
    if not hasattr(signal, "pthread_sigmask"):
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {ASK})  # every thread started from now on leaves the signal to sigwait

    def answer():
        while True:
            signal.sigwait({ASK})
            try:
                reply(snapshot())
            except (ValueError, AssertionError, OSError):  # the rank already closed its results queue
                return

    threading.Thread(target=answer, name="where-am-i", daemon=True).start()


STEP_MARKS = "LAB_STEP_MARKS"  # a folder in a rank's env: each job writes its optimizer steps' marks there


@contextlib.contextmanager
def step_marks(folder: str | None, rank: int, job: int):
    """While a job runs: after every optimizer step, the calls recorded so far and the time; at its end (when `folder`
    is set) `folder`/JOB-RANK.json holds each step's calls and seconds and the ops of its last step."""
    if not folder:
        yield
        return
    import json
    import time

    from torch.optim.optimizer import register_optimizer_step_post_hook

    marks: list = []
    hook = register_optimizer_step_post_hook(lambda *args: marks.append((_count[0], time.perf_counter())))
    try:
        yield
    finally:
        hook.remove()
        last = (marks[-2][0], marks[-1][0]) if len(marks) >= 2 else (0, 0)
        steps = {"recording": bool(_originals), "calls": [b[0] - a[0] for a, b in zip(marks, marks[1:])],
                 "step_s": [b[1] - a[1] for a, b in zip(marks, marks[1:])],
                 "ops": [c["op"] for c in _calls if last[0] < c["seq"] <= last[1]]}
        with open(os.path.join(folder, f"{job}-{rank}.json"), "w") as handle:
            json.dump(steps, handle)
