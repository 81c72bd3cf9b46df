"""The memory allocator's thresholds, fixed once for the course's processes.

glibc's malloc serves a large block (above its mmap threshold) with fresh pages from the operating system and gives
them back on free; by default that threshold slides with the process's allocation history. A training step frees and
re-allocates its ~13 MB of activations every step, so a process whose threshold stayed low takes thousands of minor
page faults a step (the OS zeroes every fresh page) and runs 1.2-1.5x slower than one whose threshold rose: the same
step, in two processes, timed far apart. Fixed thresholds (what training stacks get from jemalloc, tcmalloc or these
settings) keep the freed blocks in the process, so every process of the course runs the step the same way.

`configure()` (run at `import lab_utils`) sets the thresholds and turns mmap off in this process with mallopt and puts
them in os.environ (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_MAX_), so a process the course starts (a rank, a TensorFlow
worker, a Slurm job, a server) has them from its first allocation. LAB_MALLOC=default opts out: glibc's default.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys

MMAP_THRESHOLD = 32 * 2**20  # bytes: blocks up to this size stay in the process after free
TRIM_THRESHOLD = 256 * 2**20  # bytes: free memory the process keeps at the top of its heap before giving it back
# no block from mmap at all: glibc caps the mmap threshold at 32 MiB, and one device's batch-512 step allocates
# activations above it (lab 02's quiet run: 124 ms a step against 2 x 41 ms at batch 256, fresh pages every step);
# with mmap off, every block comes from the heap and stays there after free
MMAP_MAX = 0
OPT_OUT = "LAB_MALLOC"  # LAB_MALLOC=default: leave glibc's allocator as it is
ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
       "MALLOC_MMAP_MAX_": str(MMAP_MAX)}
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4  # mallopt parameters, from glibc's malloc.h

SET, DEFAULT, UNSUPPORTED = "set", "default", "unsupported"
_state: dict[str, str] = {}  # "state" (SET, DEFAULT or UNSUPPORTED) and "reason", once configure() ran


def glibc_version() -> str:
    """The C library's version when it is glibc on Linux, else "" (macOS, Windows, musl)."""
    if not sys.platform.startswith("linux"):
        return ""
    name, version = platform.libc_ver()
    return version if name == "glibc" else ""


def opted_out(env=None) -> bool:
    """True when `env` (default os.environ) asks for glibc's default allocator (LAB_MALLOC=default)."""
    return (os.environ if env is None else env).get(OPT_OUT, "").strip().lower() == DEFAULT


def _mallopt() -> str:
    """Set both thresholds in this process; returns "" on success, else why not."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        done = (libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD), libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                libc.mallopt(_M_MMAP_MAX, MMAP_MAX))
    except (OSError, AttributeError) as error:
        return f"mallopt is not reachable ({error})"
    return "" if all(d == 1 for d in done) else f"mallopt refused the thresholds (returned {done})"


def configure(force: bool = False) -> str:
    """Fix the thresholds in this process and in os.environ for the processes it starts (once; `force`: again);
    returns the state: SET, DEFAULT (LAB_MALLOC=default) or UNSUPPORTED (not glibc on Linux)."""
    if _state and not force:
        return _state["state"]
    version = glibc_version()
    if not version:
        state, reason = UNSUPPORTED, f"not glibc on Linux ({sys.platform}, libc {platform.libc_ver()[0] or 'unknown'})"
    elif opted_out():
        inherited = [name for name in ENV if os.environ.pop(name, None) is not None]  # children: the default
        state, reason = DEFAULT, f"{OPT_OUT}=default" + (f", but this process started with {inherited[0]} set"
                                                         if inherited else "")
    else:
        reason = _mallopt()
        state = UNSUPPORTED if reason else SET
    if state == SET:
        os.environ.update(ENV)
    _state.update(state=state, reason=reason)
    return state


def use_default(env=None) -> dict:
    """`env` (default os.environ, changed in place) made to start processes with glibc's default allocator:
    LAB_MALLOC=default and no thresholds. This process keeps its own; returns the env."""
    env = os.environ if env is None else env
    for name in ENV:
        env.pop(name, None)
    env[OPT_OUT] = DEFAULT
    return env


def use_fixed(env=None) -> dict:
    """`env` (default os.environ, changed in place) made to start processes with the fixed thresholds again."""
    env = os.environ if env is None else env
    env.pop(OPT_OUT, None)
    if glibc_version():
        env.update(ENV)
    return env


def setting(env=None) -> str:
    """What processes started with `env` (default os.environ) run, in a few words for results rows: the fixed
    thresholds, glibc's default, or "" where neither applies (not glibc on Linux)."""
    env = os.environ if env is None else env
    if not glibc_version():
        return ""
    if opted_out(env) or env.get("MALLOC_MMAP_THRESHOLD_") != ENV["MALLOC_MMAP_THRESHOLD_"]:
        return "glibc default"
    return f"glibc mmap threshold {MMAP_THRESHOLD // 2**20} MiB"


def allocator_line() -> str:
    """One line for the setup output: the allocator this process runs and who set it."""
    state = configure()
    version = glibc_version()
    if state == SET:
        return (f"memory allocator: glibc {version}, no blocks from mmap, trim threshold "
                f"{TRIM_THRESHOLD // 2**20} MiB (set by lab_utils)")
    if state == DEFAULT:
        return f"memory allocator: glibc {version}, default sliding mmap threshold ({_state['reason']})"
    return f"memory allocator: left as it is ({_state['reason']})"


def faults_per_step(megabytes: float = 13.0, pieces: int = 6, steps: int = 30, warmup: int = 10) -> int:
    """Median minor page faults a step of this thread, a step being a training step's activations as glibc sees
    them: `pieces` blocks of `megabytes` in all, allocated, written and freed together (ru_minflt: pages the OS had
    to hand over fresh). About 0 with the fixed thresholds; with glibc's default, ~256 a MB wherever it trims."""
    import resource

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes, libc.memset.argtypes = [ctypes.c_void_p], [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    size = int(megabytes * 2**20) // pieces
    faults = []
    for _ in range(warmup + steps):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        blocks = [libc.malloc(size) for _ in range(pieces)]
        for block in blocks:
            libc.memset(block, 1, size)
        for block in blocks:
            libc.free(block)
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    return sorted(faults[warmup:])[steps // 2]
