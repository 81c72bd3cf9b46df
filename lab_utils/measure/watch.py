"""Watching a run's torch.distributed calls: which collective was called, with which arguments."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def collective_calls(names, record):
    """In the block, each torch.distributed function in `names` calls record(name, bound args) before its work."""
    import functools
    import inspect

    import torch.distributed as dist

    originals = {name: getattr(dist, name) for name in names}

    def watched(name, fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            record(name, signature.bind(*args, **kwargs).arguments)
            return fn(*args, **kwargs)

        return call

    for name, fn in originals.items():
        setattr(dist, name, watched(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)
