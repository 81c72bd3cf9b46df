"""Jupyter-safe process launcher: rank processes, workers sent by value, free ports, timeouts, rank errors re-raised,
nothing left running; and the process-group set-up every strategy's helper code shares."""
from __future__ import annotations

import contextlib
import io
import os
import pickle
import queue
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass

from . import conditions, hardware
from .process_tree import descendants

LOOPBACK = "127.0.0.1"
PORT_ATTEMPTS = 3
EXIT_GRACE_S = 2.0  # how long a rank that exited may take to deliver its result
ERROR_GRACE_S = 0.5  # after a first error, how long to collect the other ranks' errors
PORT_IN_USE = ("Address already in use", "EADDRINUSE", "errno: 98")
# what a gloo or c10d error names that means nothing to a learner and must not reach a notebook's output:
SOURCE_LOCATION = re.compile(r"\[[^\[\]\s]*\.(?:cc|cpp|cu|h|hpp):\d+\]\s*")  # [/build/path/pair.cc:553]
NETWORK_ADDRESS = re.compile(r"\s*(?:\[[\w.:]*\]|\b\d{1,3}(?:\.\d{1,3}){3}|\blocalhost):\d{1,5}\b")  # [127.0.0.1]:5336
TIMED_OUT = ("Timed out waiting", "timed out", "Timeout waiting")
# what a CPU machine's fork server imports once, so that each rank forked from it starts in a fraction of a second
# (torch._dynamo: the first optimizer a process builds imports it, about as long as importing torch)
FORK_SERVER_PRELOAD = ["torch", "torch._dynamo", "torch.distributed", "lab_utils.launch"]


def sanitized(text: str) -> str:
    """The text without the build paths and network addresses (host:port) that gloo and c10d errors carry."""
    return NETWORK_ADDRESS.sub("", SOURCE_LOCATION.sub("", text))


def short_error(error, limit: int = 200, sentences: int | None = None) -> str:
    """`error` as one sanitized line: first `sentences` sentences (None: all), at most `limit` chars cut at a word."""
    text = " ".join(sanitized(str(error)).split())
    if sentences:
        text = " ".join(re.split(r"(?<=[.!?]) ", text)[:sentences])
    return text if len(text) <= limit else text[:limit - 1].rsplit(" ", 1)[0] + "…"


class RankError(RuntimeError):
    """A rank of a launched job failed; carries the rank and its traceback text (the message sanitized)."""

    def __init__(self, rank: int, message: str, traceback_text: str = "", hint: str = ""):
        message = sanitized(message)
        self.rank, self.message, self.traceback_text, self.hint = rank, message, traceback_text, hint
        text = f"rank {rank} failed: {message}"
        if hint:
            text += f"\n\nwhy: {hint}"
        if traceback_text:
            text += f"\n\n--- traceback from rank {rank} ---\n{traceback_text.rstrip()}"
        super().__init__(text)


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def to_plain(value):
    """Tensors become numpy arrays, recursively through lists, tuples and dicts; other values pass unchanged."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_plain(v) for v in value)
    return value


# ---- the process group, as every helper-side worker joins and leaves it ------------------------------------------

@dataclass(frozen=True)
class RankContext:
    """Who this process is in the job and where it computes."""

    rank: int
    world_size: int
    device: str
    backend: str


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except KeyError:
        raise RuntimeError(f"${name} is not set: start this worker with lab_utils.launch or torchrun, "
                           "which set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT") from None


def init_process_group(timeout_s: float = 60.0) -> RankContext:
    """Join the process group with the backend and device the hardware plan picks; collectives time out."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    device, backend = hardware.rank_device()
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s))
    return RankContext(rank, world_size, device, backend)


def destroy_process_group(*, wait_for_peers: bool = False) -> None:
    """Leave the process group (safe twice); wait_for_peers (use only after a success) first waits for every rank."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # without the barrier gloo may abort a slower peer still using the group (SIGABRT: connection closed by peer);
        # after a failure, skip it: the peers may be gone, and it would only wait for its timeout
        if wait_for_peers:
            dist.barrier()
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(timeout_s: float = 60.0):
    """`with process_group() as ctx:` joins the group, and leaves it however the block ends."""
    ctx = init_process_group(timeout_s)
    try:
        yield ctx
    except BaseException:
        destroy_process_group()
        raise
    destroy_process_group(wait_for_peers=True)


_HELD_GROUPS: list = []


def hold_process_groups() -> None:
    """Keep each destroyed default process group alive until the process ends (works around pytorch/pytorch#75097)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    original = distributed_c10d.destroy_process_group
    if getattr(original, "__wrapped_by_lab__", False):
        return

    def destroy_process_group(group=None):
        if group is None and dist.is_initialized():
            # DDP's reducer may drop the group's last reference later; its destructor then joins gloo's threads while
            # holding the GIL and the rank hangs at random (pytorch/pytorch#75097); the launcher kills the rank later
            _HELD_GROUPS.append(distributed_c10d._get_default_group())
        return original(group)

    destroy_process_group.__wrapped_by_lab__ = True  # type: ignore[attr-defined]  # a function takes attributes
    destroy_process_group.__doc__ = original.__doc__
    dist.destroy_process_group = distributed_c10d.destroy_process_group = destroy_process_group


# ---- what each rank runs -----------------------------------------------------------------------------------------

OWN_SESSION = "LAB_RANK_OWN_SESSION"  # in a rank's env: start it in a session (and process group) of its own


def rank_environment(rank: int, world_size: int, port: int, threads: int | None, addr: str = LOOPBACK) -> dict:
    """The variables torchrun would set for this rank (plus thread and loopback settings)."""
    env = {"MASTER_ADDR": addr, "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
           "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size)}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if addr == LOOPBACK and sys.platform.startswith("linux"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # keep gloo on loopback even when the hostname resolves elsewhere
    return env


def core_sets(world_size: int, threads: int) -> list[set[int]] | None:
    """Disjoint CPU cores for each rank (`threads` each), or None when they do not fit or the OS cannot pin."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if world_size * threads > len(cores):
        return None
    return [set(cores[r * threads:(r + 1) * threads]) for r in range(world_size)]


def start_method(uses_gpus: bool) -> str:
    """How ranks start: forked from a fork server that has imported torch once (CPU machines), or as fresh
    interpreters (GPU machines: nothing may fork a process that could have touched CUDA)."""
    return "spawn" if uses_gpus else "forkserver"


def _started_at(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), so that a reused pid is not taken for it."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started_at: str | None) -> bool:
    """True while process `pid` (started at `started_at`, where /proc tells) exists."""
    if started_at is not None:
        return _started_at(pid) == started_at
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _exit_when_orphaned(launcher_pid: int, started_at: str | None) -> None:
    """End this rank if the process that launched it dies (a restarted kernel must not leave ranks behind); the
    launcher is not the rank's parent when the rank was forked by the fork server."""
    while True:
        if not _alive(launcher_pid, started_at):
            os._exit(1)
        time.sleep(1.0)


def _rank_main(prepare, payload: bytes, ports, rank: int, world_size: int, env: dict, threads, cores, results,
               started, launcher: tuple) -> None:
    """Entry point of every rank: set up, run each job in turn, report the values or the traceback."""
    if env.get(OWN_SESSION):  # a session of its own, as slurmstepd starts a Slurm task (lab 11 measures the difference)
        os.setsid()
    else:
        os.setpgid(0, 0)  # own process group: the launcher can end this rank together with its children
    os.environ.clear()  # the launcher's environment as it is now (a forked rank inherits the fork server's)
    os.environ.update(env)
    if cores:
        os.sched_setaffinity(0, cores)  # a CPU rank owns its cores, as a GPU rank owns its GPU
    threading.Thread(target=_exit_when_orphaned, args=launcher, daemon=True).start()
    started[rank] = 1  # shared memory, visible at once (a queued message could die with an os._exit)
    job = 0
    try:
        import torch

        if threads:
            torch.set_num_threads(threads)
        hold_process_groups()
        if prepare is not None:
            prepare()  # e.g. quiet TensorFlow's start-up, before unpickling a worker imports it
        jobs = pickle.loads(payload)
        values = []
        for job, (worker, args) in enumerate(jobs):
            os.environ["MASTER_PORT"] = str(ports[job])  # a fresh rendezvous for each job's process group
            values.append(to_plain(worker(rank, world_size, *args)))
            destroy_process_group(wait_for_peers=True)  # a worker that did not leave its group must not block the next
            # the held groups stay until the launcher ends this rank: destroying one here joins gloo's threads while
            # holding the GIL, the very hang hold_process_groups avoids (a rank stuck here never joins the next job)
        results.put(("ok", rank, pickle.dumps(values)))
    except BaseException as exc:  # report everything, SystemExit and KeyboardInterrupt included
        results.put(("error", rank, f"{type(exc).__name__}: {exc}", traceback.format_exc(), job))
    finally:
        results.close()
        results.join_thread()  # flush the result to the pipe
    while True:  # stay, so that whatever this rank started is still its descendant when the launcher ends them all
        time.sleep(60)


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words."""
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by signal {signal.Signals(-exitcode).name}"
        return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _hint_for(traceback_text: str) -> str:
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


def _stop(processes) -> None:
    """End every rank and whatever it started (daemonised descendants too), then reap."""
    for p in processes:
        if p.pid is None:
            continue
        for pid in [p.pid] + descendants(p.pid):  # SIGKILL stops each where it is: none can start another
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        for pid in descendants(p.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # the rank's own group
        with contextlib.suppress(ProcessLookupError):
            if p.exitcode is None:
                p.kill()
    for p in processes:
        p.join(timeout=5)
        if p.exitcode is None:  # not reaped yet (a loaded machine): kill once more and wait again
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGKILL)
            p.join(timeout=10)
        if p.exitcode is not None:  # close() refuses a running process, and must not bury the launch's own error
            p.close()


@contextlib.contextmanager
def _patched_environ(env: dict):
    """Set variables while a child starts (spawned children copy the parent's environment), then restore."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _context(method: str):
    """The multiprocessing context ranks start from; the fork server preloads torch when it first starts."""
    import torch.multiprocessing as mp

    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(FORK_SERVER_PRELOAD)
    return ctx


def fork_server_pid() -> int | None:
    """The pid of this process's fork server (ranks of CPU launches are forked from it), or None before one started.
    It holds no rank state, port or device, and ends with this process, like multiprocessing's resource tracker."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    return pid if pid and _alive(pid, None) else None


def own_helpers() -> set[int]:
    """Pids of this process's multiprocessing helpers, the fork server and the resource tracker: neither is a rank,
    neither holds a port or a device, and both end with this process."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {pid for pid in (fork_server_pid(), tracker) if pid}


def _run_once(prepare, payload, n_jobs, world_size, port, threads, cores, timeout, extra_env, method):
    """Start the ranks, collect results or the first failure, and always stop every rank."""
    ctx = _context(method)
    results = ctx.Queue()
    started = ctx.Array("b", world_size, lock=False)
    ports = [port] + [free_port() for _ in range(n_jobs - 1)]
    launcher = (os.getpid(), _started_at(os.getpid()))
    processes = []
    try:
        for rank in range(world_size):
            env = {**os.environ, **rank_environment(rank, world_size, port, threads), **extra_env[rank]}
            rank_cores = cores[rank] if cores else None
            p = ctx.Process(target=_rank_main,
                            args=(prepare, payload, ports, rank, world_size, env, threads, rank_cores, results,
                                  started, launcher),
                            name=f"rank{rank}", daemon=True)
            with _patched_environ(env):
                p.start()
            processes.append(p)
        return _collect(processes, results, started, world_size, timeout, n_jobs)
    finally:
        _stop(processes)
        results.close()
        results.join_thread()


def _collect(processes, results, started, world_size, timeout, n_jobs):
    """Wait for every rank's values; raise on the first failure or at the deadline."""
    deadline = time.monotonic() + timeout
    values: dict
    exited_at: dict
    values, errors, exited_at = {}, [], {}
    first_error_at = None
    while len(values) < world_size:
        with contextlib.suppress(queue.Empty):
            message = results.get(timeout=0.05)
            if message[0] == "ok":
                values[message[1]] = pickle.loads(message[2])
            else:
                errors.append(message[1:])
                first_error_at = first_error_at or time.monotonic()
        now = time.monotonic()
        if first_error_at and now - first_error_at > ERROR_GRACE_S:
            break
        for rank, p in enumerate(processes):
            if rank in values or p.exitcode is None or any(e[0] == rank for e in errors):
                continue
            exited_at.setdefault(rank, now)
            if now - exited_at[rank] > EXIT_GRACE_S:
                if not started[rank]:
                    raise RankError(rank, f"the process {describe_exit(p.exitcode)} while starting, before the worker "
                                    "ran. Each rank re-imports the main module: launch from a notebook, or from a "
                                    "script file guarded by if __name__ == '__main__' (not from stdin); its "
                                    "traceback, if any, went to the console that started Python")
                raise RankError(rank, f"the process {describe_exit(p.exitcode)} without raising a Python exception "
                                "(os._exit, a crash in native code, the out-of-memory killer, or a kill by hand)")
        if now > deadline and not errors:
            pending = [r for r in range(world_size) if r not in values]
            raise TimeoutError(
                f"rank(s) {pending} did not finish within {timeout:g} s, so every rank was stopped. A rank that waits "
                "in a collective (barrier, all_reduce, init_process_group) for a peer that never comes waits forever; "
                "check that every rank makes the same collective calls, or raise the timeout if the work is just long.")
    if errors:
        # the rank whose own code failed first explains more than a peer that lost its connection to it
        rank, message, tb, job = min(errors, key=lambda e: (0 if "Can't get attribute" in e[2] else 1,
                                                            1 if "Connection closed by peer" in e[1] else 0))
        where = f" (job {job} of {n_jobs})" if n_jobs > 1 else ""
        raise RankError(rank, message + where, tb, _hint_for(tb))
    return [values[r] for r in range(world_size)]


# ---- sending the worker by value ---------------------------------------------------------------------------------

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


def _serialise(jobs) -> bytes:
    """The jobs, pickled by value (cloudpickle), so functions defined in a notebook reach the ranks."""
    import cloudpickle

    for i, (worker, args) in enumerate(jobs):
        for what, value in ((getattr(worker, "__name__", "the worker"), worker), ("args", tuple(args))):
            found = _find_unsendable(value, what)
            if found:
                where, reason = found
                raise ValueError(f"cannot send {what} to the ranks: it uses {where}, {reason}. "
                                 f"Fix: {UNSENDABLE_ADVICE}.")
    try:
        return cloudpickle.dumps(list(jobs))
    except Exception as exc:  # cloudpickle raises several types for objects it cannot copy
        raise ValueError(f"cannot send the worker or its args to another process ({type(exc).__name__}: {exc}). "
                         f"Fix: {UNSENDABLE_ADVICE}.") from None


def launch_jobs(jobs, world_size: int, timeout: float = 120.0, *, port: int | None = None, threads: int | None = None,
                pin_cores: bool = False, env=None, prepare=None) -> list[list]:
    """Run jobs [(worker, args), ...] in turn in the same ranks (`timeout` for all); per job, values in rank order."""
    jobs = [(worker, tuple(args)) for worker, args in jobs]
    if not jobs:
        raise ValueError("no jobs to run: pass a list of (worker, args) pairs")
    plan = hardware.plan(world_size)
    if not timeout or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if prepare is not None and getattr(prepare, "__module__", "__main__") == "__main__":
        raise ValueError("prepare must be a function of an importable module (it runs before anything is unpickled)")
    threads = plan.threads_per_rank if threads is None else threads
    # pin_cores: each rank's threads on cores of its own. Off by default: gloo's message thread then shares the rank's
    # one core, and a point-to-point message measured 16x slower here (2.7 ms against 0.16 ms on 2 cores)
    cores = core_sets(world_size, threads or 1) if pin_cores and not plan.uses_gpus else None
    extra_env = [dict(env(rank) if callable(env) else (env or {})) for rank in range(world_size)]
    payload = _serialise(jobs)
    attempts = 1 if port else PORT_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            with conditions.measuring():  # ranks often time themselves: what else ran meanwhile is reported with them
                per_rank = _run_once(prepare, payload, len(jobs), world_size, port or free_port(), threads, cores,
                                     timeout, extra_env, start_method(plan.uses_gpus))
            return [[values[j] for values in per_rank] for j in range(len(jobs))]
        except RankError as exc:
            if attempt == attempts or not any(s in exc.traceback_text for s in PORT_IN_USE):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def launch(worker, world_size: int, args: tuple = (), timeout: float = 120.0, *, port: int | None = None,
           threads: int | None = None, pin_cores: bool = False, env=None, prepare=None) -> list:
    """Run worker(rank, world_size, *args) in `world_size` new rank processes; returns their values in rank order."""
    # raises RankError (the rank, its traceback) or TimeoutError after `timeout` s; every rank is stopped either way
    return launch_jobs([(worker, args)], world_size, timeout, port=port, threads=threads, pin_cores=pin_cores,
                       env=env, prepare=prepare)[0]


# ---- what a child process printed ---------------------------------------------------------------------------------

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
