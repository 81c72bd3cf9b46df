"""One run of the ranks: start them, collect every rank's values or the first failure, and always stop every rank
and whatever it started."""
from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import time

from ..process_tree import descendants
from .environment import patched_environ, rank_environment
from .errors import RankError, StartedWhileImporting, describe_exit, hint_for, importing_main
from .record import ASK
from .rank import rank_main, started_at
from .start import context
from .where import rank_table

EXIT_GRACE_S = 2.0  # how long a rank that exited may take to deliver its result
ERROR_GRACE_S = 0.5  # after a first error, how long to collect the other ranks' errors
ASK_S = 3.0  # how long the ranks have to say where they are, after a timeout or an error


def stop(processes) -> None:
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


def run_once(prepare, payload, n_jobs, world_size, port, threads, cores, timeout, extra_env, method):
    """Start the ranks, collect results or the first failure, and always stop every rank."""
    if importing_main():  # multiprocessing would refuse with a long RuntimeError that names none of this
        raise StartedWhileImporting()
    ctx = context(method)
    results = ctx.Queue()
    started = ctx.Array("b", world_size, lock=False)
    ports = ctx.Array("i", [port] + [0] * (n_jobs - 1), lock=False)  # later jobs' ports: rank 0 picks each as it starts
    launcher = (os.getpid(), started_at(os.getpid()))
    processes = []
    pipes = [ctx.Pipe(duplex=False) for _ in range(world_size)]  # launcher -> rank: the table a timed-out call asked for
    try:
        for rank in range(world_size):
            env = {**os.environ, **rank_environment(rank, world_size, port, threads), **extra_env[rank]}
            env = {k: v for k, v in env.items() if v is not None}  # None in a launch's env: the variable unset
            rank_cores = cores[rank] if cores else None
            p = ctx.Process(target=rank_main,
                            args=(prepare, payload, ports, rank, world_size, env, threads, rank_cores, results,
                                  started, launcher, pipes[rank][0]),
                            name=f"rank{rank}", daemon=True)
            with patched_environ(env):
                p.start()
            processes.append(p)
        return _collect(processes, results, started, world_size, timeout, n_jobs, [w for _, w in pipes])
    finally:
        stop(processes)
        for pipe in pipes:
            for end in pipe:
                end.close()
        results.close()
        results.join_thread()


def _ask_where(processes, pending) -> None:
    """Ask each rank still running where it is (SIGUSR1: a thread of the rank answers on the results queue)."""
    for rank in pending:
        pid = processes[rank].pid
        if pid is not None and processes[rank].exitcode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, ASK)


def _states(world_size, values, errors, processes) -> dict:
    """rank -> finished / raised ... / exited / running, for the table."""
    raised = {e[0]: e[1].split(":")[0] for e in errors}
    return {r: "finished" if r in values else f"raised {raised[r]}" if r in raised
            else "exited" if processes[r].exitcode is not None else "running" for r in range(world_size)}


class _TimedOutCalls:
    """Ranks whose recorded call gave up on the process group's timeout, waiting for the table of every rank: the
    launcher asks the other ranks where they are (as after a launch's timeout) and sends each asker the table."""

    def __init__(self, processes, started, answer_to):
        self.processes, self.started, self.answer_to = processes, started, answer_to
        self.asked_at: float | None = None
        self.reports: dict = {}
        self.askers: set[int] = set()
        self.last: tuple[str, dict, float] = ("", {}, 0.0)  # the last round's table, each rank's call then, its end

    def ask(self, rank: int, report, values, errors) -> None:
        """Rank `rank` gave up with `report`; the first asker of a round makes the launcher ask the others."""
        text, calls, ended = self.last
        if (self.asked_at is None and time.monotonic() - ended < ASK_S and _call_in(report) is not None
                and calls.get(rank) == _call_in(report)):
            with contextlib.suppress(OSError, ValueError):  # the last round already saw it in this call: that table
                self.answer_to[rank].send(text)
            return
        self.reports[rank], self.askers = report, self.askers | {rank}
        if self.asked_at is None:
            self.asked_at = time.monotonic()
            _ask_where(self.processes, [r for r in self._running(values, errors) if r != rank])

    def _running(self, values, errors) -> list[int]:
        failed = {e[0] for e in errors}
        return [r for r, p in enumerate(self.processes)
                if self.started[r] and p.exitcode is None and r not in values and r not in failed]

    def answer_if_ready(self, values, errors) -> None:
        """Once every running rank answered (or ASK_S passed), send the askers the table and end the round."""
        if self.asked_at is None:
            return
        waiting = [r for r in self._running(values, errors) if r not in self.reports]
        if waiting and time.monotonic() - self.asked_at <= ASK_S:
            return
        states = _states(len(self.processes), values, errors, self.processes)
        text = rank_table(self.reports, {r: self.reports[r].get("ended") or "gave up" if r in self.askers else s
                                    for r, s in states.items()})
        for rank in self.askers:
            with contextlib.suppress(OSError, ValueError):  # the rank is gone: nobody to tell
                self.answer_to[rank].send(text)
        self.last = (text, {r: _call_in(report) for r, report in self.reports.items() if report}, time.monotonic())
        self.asked_at, self.reports, self.askers = None, {}, set()


def _call_in(report):
    """The sequence number of the call a rank's report shows it in (in progress), or None."""
    calls = [c["seq"] for c in (report or {}).get("calls", []) if c["state"] == "in progress"]
    return calls[-1] if calls else None


def _collect(processes, results, started, world_size, timeout, n_jobs, answer_to):
    """Wait for every rank's values; raise on the first failure or at the deadline, with where every rank was."""
    deadline = time.monotonic() + timeout
    values: dict
    exited_at: dict
    errors: list
    values, errors, exited_at, reports = {}, [], {}, {}
    first_error_at = asked_at = None
    timed_out = _TimedOutCalls(processes, started, answer_to)
    while len(values) < world_size:
        timed_out.answer_if_ready(values, errors)
        with contextlib.suppress(queue.Empty):
            message = results.get(timeout=0.05)
            if message[0] == "ok":
                values[message[1]] = pickle.loads(message[2])
            elif message[0] == "timed out":
                timed_out.ask(message[1], message[2], values, errors)
            elif message[0] == "where":
                if timed_out.asked_at is not None:  # an answer to a timed-out call's question
                    timed_out.reports[message[1]] = message[2]
                if asked_at is not None or timed_out.asked_at is None:  # an answer to the launch's own question
                    reports[message[1]] = message[2]
            else:
                errors.append(message[1:])
                reports[message[1]] = message[5] if len(message) > 5 else None
                first_error_at = first_error_at or time.monotonic()
        now = time.monotonic()
        pending = [r for r in range(world_size)
                   if r not in values and r not in reports and started[r] and processes[r].exitcode is None]
        if (first_error_at and now - first_error_at > ERROR_GRACE_S) or (now > deadline and not errors):
            if asked_at is None:
                asked_at = now
                _ask_where(processes, pending)
            if not pending or now - asked_at > ASK_S:
                break
            continue
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
    where = rank_table(reports, _states(world_size, values, errors, processes)) if asked_at is not None else ""
    if errors:
        # the rank whose own code failed first explains more than a peer that lost its connection to it
        rank, message, tb, job = min(errors, key=lambda e: (0 if "Can't get attribute" in e[2] else 1,
                                                            1 if "Connection closed by peer" in e[1] else 0))[:4]
        where_job = f" (job {job} of {n_jobs})" if n_jobs > 1 else ""
        raise RankError(rank, message + where_job, tb, hint_for(tb), where)
    if len(values) < world_size:
        pending = [r for r in range(world_size) if r not in values]
        raise TimeoutError(  # lines under 100 columns, 'TimeoutError: ' included (learners: one of 289 characters)
            f"rank(s) {pending} did not finish within {timeout:g} s, so every rank was stopped.\n"
            "A rank that waits in a collective (barrier, all_reduce, init_process_group) for a peer that never\n"
            "comes waits forever; check that every rank makes the same collective calls, or raise the timeout\n"
            "if the work is just long."
            f"\n\nwhere each rank was (its record of collectives, kept by lab_utils):\n{where}")
    return [values[r] for r in range(world_size)]
