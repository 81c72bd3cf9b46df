"""What a rank is given to start with: the variables torchrun would set, a free rendezvous port, cores of its own."""
from __future__ import annotations

import contextlib
import os
import socket
import sys

LOOPBACK = "127.0.0.1"
OWN_SESSION = "LAB_RANK_OWN_SESSION"  # in a rank's env: start it in a session (and process group) of its own


EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
PICKED_FROM = 20000  # the lowest port picked; below the OS's ephemeral range (Linux: 32768-60999)


def ephemeral_low(path: str = EPHEMERAL_RANGE) -> int:
    """The lowest port the OS hands out on its own (to bind(0) and outgoing connections), or 0 where unknown."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port(host: str = LOOPBACK, rng=None, avoid=()) -> int:
    """A TCP port that was free a moment ago, picked below the OS's ephemeral range where there is room: a launch picks
    its later jobs' ports up front, and a port the OS picked (bind(0)) can be handed out again by the OS, to another
    program's bind(0) or to an outgoing connection (gloo opens many), before the job that needs it starts. `avoid`:
    ports already handed out for the same launch (free now, but taken once their jobs start)."""
    import random

    rng = rng or random.SystemRandom()
    low = ephemeral_low()
    if low > PICKED_FROM + 1000:
        for _ in range(50):
            port = rng.randrange(PICKED_FROM, low)
            if port in avoid:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    for _ in range(50):  # no room below the range: the OS picks
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            if s.getsockname()[1] not in avoid:
                return s.getsockname()[1]
    raise OSError(f"no free TCP port on {host} outside {sorted(avoid)} after 50 tries: is something holding them all?")


def job_port(ports, job: int, rank: int, host: str = LOOPBACK, poll_s: float = 0.002) -> int:
    """Job `job`'s rendezvous port, in a rank: rank 0 picks it as the job starts and writes it to `ports` (shared by
    the ranks), the others wait for it. Picked up front, a later job's port could be taken by another launch before the
    job starts, and two jobs given one port hang: the later job's rank 1 joins the store rank 0 still holds."""
    import time

    if rank == 0 and not ports[job]:
        ports[job] = free_port(host, avoid=set(ports[:job]))
    while not ports[job]:  # rank 0 is still in the previous job; the launcher's timeout ends a wait that never ends
        time.sleep(poll_s)
    return ports[job]


def rank_environment(rank: int, world_size: int, port: int, threads: int | None, addr: str = LOOPBACK) -> dict:
    """The variables torchrun would set for this rank (plus thread and loopback settings)."""
    env = {"MASTER_ADDR": addr, "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
           "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size)}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if "OMP_WAIT_POLICY" not in os.environ:  # read when torch loads (the fork server loads it in this environment)
        env["OMP_WAIT_POLICY"] = "PASSIVE"  # idle intra-op threads sleep instead of spinning on a core others need
    if addr == LOOPBACK and sys.platform.startswith("linux"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # keep gloo on loopback even when the hostname resolves elsewhere
    return env


def launched_not_kernel() -> str:
    """How a figure timed in a launched rank was measured, beside the same figure timed in a notebook's kernel: words
    for detectors.condition, so the results table compares the two by its condition rule (both run the same allocator,
    lab_utils.allocator, but they are two processes timed at different moments: the machine's load then, and each
    process's own threads, can move a step)."""
    return "timed in a launched process of its own, not in a notebook's kernel"


def core_sets(world_size: int, threads: int) -> list[set[int]] | None:
    """Disjoint CPU cores for each rank (`threads` each), or None when they do not fit or the OS cannot pin."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if world_size * threads > len(cores):
        return None
    return [set(cores[r * threads:(r + 1) * threads]) for r in range(world_size)]


@contextlib.contextmanager
def patched_environ(env: dict):
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
