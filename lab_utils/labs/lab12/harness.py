"""Lab 12's harness for the uneven-data exercise: runs a learner's train_all in real ranks and refuses a second DDP
wrapper or a misused Join by name. A hang table names its lines as harness.py:NN; nothing here is exercise material."""
from __future__ import annotations

import contextlib
from unittest import mock

from .debugging import uneven_problem


def uneven_worker(rank, world_size, train_all, case):
    """train_all(ddp_model, my_batches, optimizer) on this rank's batches; the weights it ends with."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ... import tensors
    from ...launch import process_group

    with process_group(timeout_s=60):
        model, per_rank = uneven_problem(case, world_size)
        ddp = DDP(model)
        steps: list = []  # one entry per forward of the DDP model, so Join can tell it came late
        ddp.register_forward_pre_hook(lambda module, args: steps.append(1))
        with mock.patch.object(DDP, "__init__", _wrapping_once(DDP.__init__, rank)), _join_checked(steps):
            train_all(ddp, per_rank[rank], torch.optim.SGD(ddp.parameters(), lr=case["lr"]))
        return tensors.flat_weights(model).tolist()


def _wrapping_once(init, rank: int):
    """DDP's __init__ that refuses any second wrapper inside train_all, DDP(model) or DDP(model.module) (wrapped twice,
    gloo aborts with a size mismatch that names nothing, or a second reducer runs beside the caller's). The message
    names the rank in its first words (learner s13r5f: a trailing '(in rank 1)' read like a leftover)."""
    def checked(self, module, *args, **kwargs):
        from torch.nn.parallel import DistributedDataParallel as DDP

        inner = "DDP(model)" if isinstance(module, DDP) else "DDP(model.module)"
        raise TypeError(f"train_all (rank {rank} here) wrapped the model in DDP again ({inner}): the `model` it gets is already a "
                        "DistributedDataParallel. A second wrapper over the same parameters is a second reducer with "
                        "gradient buckets of its own, and it drops what the caller set on the first (a communication "
                        "hook, find_unused_parameters); train `model` as it is")
    return checked


def late_join(steps: int) -> str:
    """What a Join entered after `steps` steps of the loop meets, named (learner s13r6f: gloo's raw abort instead)."""
    return (f"Join was entered after {steps} step(s) had run outside it: one `with Join(...)` must wrap the whole loop, "
            "from the first batch (inside Join every step starts with Join's own all-reduce, which would meet the "
            "other rank's gradient all-reduce: two different collectives, which gloo aborts on)")


@contextlib.contextmanager
def _join_checked(steps: list):
    """Join as train_all may use it: over the DDP model (a joinable) and entered once, before the first step (`steps`:
    the forwards run so far); each mistake raises at once, named (else Join([model.module]) raises a bare
    AttributeError, a Join per batch hangs once a rank runs out of batches, outside any Join, while the others wait in
    an all-reduce, and a Join entered late aborts in gloo: 'op.preamble.length <= op.nbytes', learner s13r6f)."""
    import torch
    from torch.distributed.algorithms.join import Join, Joinable

    init, entered = Join.__init__, []

    def checked_init(self, joinables, *args, **kwargs):
        for joinable in joinables:
            if not isinstance(joinable, Joinable):
                inner = isinstance(joinable, torch.nn.Module)  # learner s12r4f: 'not model.module' beside an optimizer
                raise TypeError(f"Join got a {type(joinable).__name__}, which cannot join: only a Joinable can (the "
                                "DDP model you were given has the join hooks" + (", not model.module)" if inner else
                                "; an optimizer needs none, it steps on the gradients DDP averaged): "
                                "Join([model], ...)"))
        init(self, joinables, *args, **kwargs)

    def once(self):
        entered.append(self)
        if len(entered) > 1:
            raise RuntimeError("Join was entered a second time: one `with Join(...)` must wrap the whole loop, not each "
                               "step (a rank out of batches is then outside any Join, and the others' all-reduces wait "
                               "for it)")
        if steps:
            raise RuntimeError(late_join(len(steps)))

    with mock.patch.object(Join, "__init__", checked_init), mock.patch.object(Join, "__enter__", once):
        yield
