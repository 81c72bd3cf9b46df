"""What one stage did in each op of a step, watched from outside the notebook's code: when the stage computed (not
while it waited in a recv), and how many bytes of activations autograd kept for the backward pass."""
from __future__ import annotations

import time

import torch
from torch import nn

from ....measure import synchronize
from ....memory import SavedActivations


class _ComputeClock:
    """When the stage starts computing in an op: at its forward, or in backward when its output's gradient arrives."""

    def __init__(self, stage: nn.Module):
        self.started: float | None = None
        self._handles = [stage.register_forward_pre_hook(lambda module, args: self.mark()),
                         stage.register_forward_hook(self._watch_output)]

    def mark(self, *_):
        if self.started is None:
            self.started = time.perf_counter()

    def _watch_output(self, module, args, output):
        if isinstance(output, torch.Tensor) and output.requires_grad:
            # the blocking recv before this gradient is waiting, not work: it must not count as busy time
            output.register_hook(self.mark)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class OpWatch:
    """Wraps a stage's forward and backward ops: each call is timed and its saved activations counted."""

    def __init__(self, stage: nn.Module):
        self._clock = _ComputeClock(stage)
        self.events: list[tuple[str, int, float, float]] = []  # (kind, micro-batch, compute start, end), in run order
        self._held: dict[int, int] = {}                         # micro-batch -> bytes its forward left for backward
        self._live = 0
        self.peak_activation_bytes = 0                          # the most held between ops

    def watched(self, op, kind: str):
        """`op` (a forward op if kind is "F", a backward op if "B"), recording each call as one event."""
        def run(ctx, micro):
            saved, self._clock.started = SavedActivations(ctx.stage), None
            start = time.perf_counter()
            with saved:
                op(ctx, micro)
            synchronize(ctx.device)
            self.events.append((kind, micro, self._clock.started or start, time.perf_counter()))
            if kind == "F":
                self._held[micro] = saved.bytes
                self._live += saved.bytes
                self.peak_activation_bytes = max(self.peak_activation_bytes, self._live)
            else:
                self._live -= self._held.pop(micro, 0)
        return run

    def remove(self) -> None:
        self._clock.remove()


def watched_step(stage_step, ctx, ops, forward_op, backward_op) -> dict:
    """The notebook's `stage_step(ctx, ops, forward_op, backward_op)` with its ops watched: each op's compute start and
    end, and the peak activation bytes held between ops."""
    watch = OpWatch(ctx.stage)
    try:
        stage_step(ctx, ops, watch.watched(forward_op, "F"), watch.watched(backward_op, "B"))
    finally:
        watch.remove()
    return {"events": watch.events, "peak_activation_bytes": watch.peak_activation_bytes}
