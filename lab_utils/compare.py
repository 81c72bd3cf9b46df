"""How far apart two sets of numbers are: the largest absolute difference, and inf for what cannot be compared."""
from __future__ import annotations

import math
import sys

import numpy as np


def is_number(value) -> bool:
    """A finite int or float (not a bool, not a string such as "nan")."""
    return type(value) in (int, float) and math.isfinite(value)


def _is_tensor(value) -> bool:
    torch = sys.modules.get("torch")  # without torch imported, nothing is a tensor (and torch is not imported here)
    return torch is not None and isinstance(value, torch.Tensor)


def _numbers(value) -> bool:
    if _is_tensor(value):
        return not value.is_complex()
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    if isinstance(value, (list, tuple)):
        return all(_numbers(v) for v in value)
    return is_number(value) or type(value) is bool or isinstance(value, (np.integer, np.floating)) and math.isfinite(value)


def _arrays(value) -> bool:
    """A list or tuple holding tensors or arrays (of possibly different shapes)."""
    return isinstance(value, (list, tuple)) and any(_is_tensor(v) or isinstance(v, np.ndarray) for v in value)


def _array(value) -> np.ndarray:
    """A tensor's numbers in its own dtype (detached, on the CPU); anything else as float64."""
    return value.detach().cpu().numpy() if _is_tensor(value) else np.asarray(value, dtype=float)


def max_abs_diff(got, expected) -> float:
    """Largest absolute difference between two numbers, tensors, arrays or nested lists of the same shape; inf when the
    shapes differ or anything is not a finite number (so NaN never passes a tolerance). Two lists of tensors or arrays
    (a model's gradients, layer by layer) are compared pairwise, each pair in its own shape."""
    if _arrays(got) and _arrays(expected):
        if len(got) != len(expected):
            return math.inf
        return max((max_abs_diff(g, e) for g, e in zip(got, expected)), default=0.0)
    if not (_numbers(got) and _numbers(expected)):
        return math.inf
    try:
        a, b = _array(got), _array(expected)
    except (TypeError, ValueError):
        return math.inf
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return math.inf
    dtype = np.result_type(a.dtype, b.dtype, np.float32)  # two float32 tensors differ in float32, as torch computes
    return float(np.abs(a.astype(dtype) - b.astype(dtype)).max()) if a.size else 0.0
