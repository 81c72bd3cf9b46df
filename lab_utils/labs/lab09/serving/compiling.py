"""torch.compile around lab 09: a cold on-disk cache, what it compiled or loaded, and whether it can run here."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def fresh_compile_cache():
    """torch.compile's on-disk cache in a new, empty folder for the block (a cold start); yields the folder."""
    folder = tempfile.mkdtemp(prefix="lab09-inductor-")
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
        shutil.rmtree(folder, ignore_errors=True)


def compile_counts() -> dict[str, int]:
    """torch.compile's work in this process so far: graphs traced, code generated anew, code loaded from the cache."""
    from torch._dynamo.utils import counters  # no public counter exists; this is what torch's own tests read

    return {"graphs": int(counters["stats"]["unique_graphs"]),  # recompilations included
            "generated": int(counters["inductor"]["fxgraph_cache_miss"]),
            "from_cache": int(counters["inductor"]["fxgraph_cache_hit"])}


def compile_unavailable() -> str | None:
    """Why torch.compile cannot run here (its CPU code generator needs a C++ compiler), or None."""
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        return ("torch.compile's CPU backend (inductor) generates C++ and needs a C++ compiler (g++ or clang++); "
                "none is installed")
    return None
