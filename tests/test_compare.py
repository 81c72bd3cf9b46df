"""compare.max_abs_diff: the one largest-absolute-difference of the course (numbers, arrays, tensors, gradient lists)."""
import math

import numpy as np
import torch

from lab_utils.compare import max_abs_diff


def test_numbers_arrays_and_nested_lists():
    assert max_abs_diff([1.0, 2.0], [1.0, 2.5]) == 0.5 and max_abs_diff(3, 3) == 0.0
    assert max_abs_diff(np.ones((2, 2)), np.ones((2, 2)) * 1.25) == 0.25
    assert max_abs_diff([1.0, float("nan")], [1.0, 1.0]) == math.inf  # NaN never passes a tolerance
    assert max_abs_diff(np.ones(3), np.ones(4)) == math.inf and max_abs_diff("1", 1) == math.inf


def test_a_models_gradients_are_compared_layer_by_layer_in_their_own_shapes():
    a = [torch.ones(3, 2), torch.zeros(4)]
    b = [torch.ones(3, 2), torch.full((4,), 0.5)]
    assert max_abs_diff(a, b) == 0.5 and max_abs_diff(a, a) == 0.0
    assert max_abs_diff(a, b[:1]) == math.inf  # a layer missing
    assert max_abs_diff(a, [torch.ones(2, 3), torch.zeros(4)]) == math.inf  # a layer of another shape
    assert max_abs_diff([np.ones(2), np.ones(3)], [np.ones(2), np.ones(3) * 2]) == 1.0
