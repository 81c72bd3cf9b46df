"""How ranks start: forked from a fork server that imported torch once, or spawned fresh; and this process's own
multiprocessing helpers, which are not ranks."""
from __future__ import annotations

from .rank import alive

# what a CPU machine's fork server imports once, so that each rank forked from it starts in a fraction of a second
# (torch._dynamo: the first optimizer a process builds imports it, about as long as importing torch)
FORK_SERVER_PRELOAD = ["torch", "torch._dynamo", "torch.distributed", "lab_utils.launch"]


def start_method(uses_gpus: bool) -> str:
    """How ranks start: forked from a fork server that has imported torch once (CPU machines), or as fresh
    interpreters (GPU machines: nothing may fork a process that could have touched CUDA)."""
    return "spawn" if uses_gpus else "forkserver"


def context(method: str):
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
    return pid if pid and alive(pid, None) else None


def own_helpers() -> set[int]:
    """Pids of this process's multiprocessing helpers, the fork server and the resource tracker: neither is a rank,
    neither holds a port or a device, and both end with this process."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {pid for pid in (fork_server_pid(), tracker) if pid}
