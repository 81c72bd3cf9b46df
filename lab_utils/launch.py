"""Jupyter-safe process launcher: spawned ranks, free ports, timeouts, rank errors re-raised, nothing left running."""
from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import socket
import sys
import threading
import time
import traceback

from . import hardware

LOOPBACK = "127.0.0.1"
PORT_ATTEMPTS = 3
EXIT_GRACE_S = 2.0  # how long a rank that exited may take to deliver its result
ERROR_GRACE_S = 0.5  # after a first error, how long to collect the other ranks' errors
PORT_IN_USE = ("Address already in use", "EADDRINUSE", "errno: 98")


class RankError(RuntimeError):
    """A rank of a launched job failed; carries the rank and its traceback text."""

    def __init__(self, rank: int, message: str, traceback_text: str = "", hint: str = ""):
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


def _exit_when_orphaned(parent_pid: int) -> None:
    """End this rank if the process that launched it dies (a restarted kernel must not leave ranks behind)."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)
        time.sleep(1.0)


def _rank_main(payload: bytes, rank: int, world_size: int, env: dict, threads, cores, results, started,
               parent_pid: int) -> None:
    """Entry point of every spawned rank: set up, run the worker, report its value or its traceback."""
    os.setpgid(0, 0)  # own process group: the launcher can end this rank together with its children
    os.environ.update(env)
    if cores:
        os.sched_setaffinity(0, cores)  # a CPU rank owns its cores, as a GPU rank owns its GPU
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    started[rank] = 1  # shared memory, visible at once (a queued message could die with an os._exit)
    try:
        import torch

        if threads:
            torch.set_num_threads(threads)
        worker, args = pickle.loads(payload)
        value = worker(rank, world_size, *args)
        results.put(("ok", rank, pickle.dumps(to_plain(value))))
    except BaseException as exc:  # report everything, SystemExit and KeyboardInterrupt included
        results.put(("error", rank, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        with contextlib.suppress(Exception):
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
        results.close()
        results.join_thread()  # flush the result to the pipe before the process ends


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words."""
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by signal {signal.Signals(-exitcode).name}"
        return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _hint_for(traceback_text: str, worker) -> str:
    """Explain the errors learners meet most often."""
    if "Can't get attribute" in traceback_text or ("AttributeError" in traceback_text and worker.__module__ == "__main__"):
        return ("the worker was defined in the notebook (module '__main__'). Spawned ranks are fresh Python processes "
                "that import the worker by name, and a notebook's functions do not exist there. Put the worker in an "
                "importable module (the course's workers live in lab_utils) and pass that function instead.")
    if any(s in traceback_text for s in PORT_IN_USE):
        return "another program took the rendezvous port; launch() retries with a new port when it picked the port itself."
    return ""


def _stop(processes) -> None:
    """End every rank and whatever it started: SIGKILL to each rank's process group, then reap."""
    for p in processes:
        if p.pid is None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # the group outlives the rank when the rank left children
        with contextlib.suppress(ProcessLookupError):
            if p.exitcode is None:
                p.kill()
    for p in processes:
        p.join(timeout=5)
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


def _run_once(payload, worker, world_size, port, threads, cores, timeout):
    """Start the ranks, collect results or the first failure, and always stop every rank."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    started = ctx.Array("b", world_size, lock=False)
    processes = []
    try:
        for rank in range(world_size):
            env = rank_environment(rank, world_size, port, threads)
            rank_cores = cores[rank] if cores else None
            p = ctx.Process(target=_rank_main,
                            args=(payload, rank, world_size, env, threads, rank_cores, results, started, os.getpid()),
                            name=f"rank{rank}", daemon=True)
            with _patched_environ(env):
                p.start()
            processes.append(p)
        return _collect(processes, results, started, worker, world_size, timeout)
    finally:
        _stop(processes)
        results.close()
        results.join_thread()


def _collect(processes, results, started, worker, world_size, timeout):
    """Wait for every rank's value; raise on the first failure or at the deadline."""
    deadline = time.monotonic() + timeout
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
                                    "ran. With the spawn start method each rank re-imports the main module: launch "
                                    "from a notebook, or from a script file guarded by if __name__ == '__main__' "
                                    "(not from stdin); its traceback, if any, went to the console that started Python")
                raise RankError(rank, f"the process {describe_exit(p.exitcode)} without raising a Python exception "
                                "(os._exit, a crash in native code, the out-of-memory killer, or a kill by hand)")
        if now > deadline and not errors:
            pending = [r for r in range(world_size) if r not in values]
            raise TimeoutError(
                f"rank(s) {pending} did not finish within {timeout:g} s, so every rank was stopped. A rank that waits "
                "in a collective (barrier, all_reduce, init_process_group) for a peer that never comes waits forever; "
                "check that every rank makes the same collective calls, or raise the timeout if the work is just long.")
    if errors:
        rank, message, tb = min(errors, key=lambda e: 0 if "Can't get attribute" in e[2] else 1)
        raise RankError(rank, message, tb, _hint_for(tb, worker))
    return [values[r] for r in range(world_size)]


def launch(worker, world_size: int, args: tuple = (), timeout: float = 120.0, *, port: int | None = None,
           threads: int | None = None, pin_cores: bool = True) -> list:
    """Run worker(rank, world_size, *args) in `world_size` spawned processes; return their values in rank order.

    Sets MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK and WORLD_SIZE like torchrun. `threads` is the intra-op thread
    count per rank (default: from the hardware plan, 1 on a CPU-only machine); on a CPU-only plan each rank is pinned
    to its own cores when they fit (`pin_cores`). Raises RankError naming the rank (with its traceback) when a rank
    fails, TimeoutError after `timeout` seconds; every rank is stopped either way.
    """
    plan = hardware.plan(world_size)
    if not timeout or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    threads = plan.threads_per_rank if threads is None else threads
    cores = core_sets(world_size, threads or 1) if pin_cores and not plan.uses_gpus else None
    try:
        payload = pickle.dumps((worker, tuple(args)))
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise ValueError(f"cannot send the worker or its args to another process ({exc}); the worker must be a "
                         "function defined at the top level of an importable module, not a lambda or a nested "
                         "function, and args must be picklable") from None
    attempts = 1 if port else PORT_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            return _run_once(payload, worker, world_size, port or free_port(), threads, cores, timeout)
        except RankError as exc:
            if attempt == attempts or not any(s in exc.traceback_text for s in PORT_IN_USE):
                raise
