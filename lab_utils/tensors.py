"""A model's tensors as plain numbers: the bytes they hold, its weights or gradients as one flat vector."""
from __future__ import annotations

import torch
from torch import nn


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a tensor: the local shard of a DTensor (FSDP2), the tensor itself otherwise."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def tensor_bytes(tensors) -> int:
    """Bytes of the elements of a tensor, or of every tensor in an iterable (of a DTensor: this rank's shard)."""
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def flat_weights(model: nn.Module) -> torch.Tensor:
    """Every parameter of the model in one flat CPU vector (a copy, detached)."""
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()])


def flat_grads(model: nn.Module) -> torch.Tensor:
    """Every parameter's gradient in one flat CPU vector (a copy, detached), in the order of flat_weights."""
    # every parameter has a gradient after backward(); a missing one fails here as a plain AttributeError
    return torch.cat([p.grad.detach().flatten().cpu() for p in model.parameters()])  # type: ignore[union-attr]
