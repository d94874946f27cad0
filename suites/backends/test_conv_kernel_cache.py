"""PyTorch's conv2d keeps a contiguous OIHW copy of each kernel variable between calls (`torch.ops._oihw`).

The copy must follow the variable: after an assignment, an optimizer's in-place step or a new storage the
next convolution uses the new kernel, and under gradient recording the gradient still reaches the variable.
"""

from __future__ import annotations

import numpy as np
import pytest

from suites.backends import numpy_reference as ref

torch = pytest.importorskip("torch")

from harness.backends.torch import ops as torch_ops  # noqa: E402

RNG = np.random.default_rng(7)
IMAGES = RNG.normal(size=(2, 9, 9, 3)).astype(np.float32)


def _kernel() -> np.ndarray:
    return RNG.normal(size=(3, 3, 3, 5)).astype(np.float32)


def _conv(kernel: torch.nn.Parameter) -> np.ndarray:
    with torch.no_grad():
        return torch_ops.TorchOps.conv2d(torch.from_numpy(IMAGES), kernel, (2, 1), "same").numpy()


def _expected(kernel: np.ndarray) -> np.ndarray:
    return ref.conv2d(IMAGES, kernel, (2, 1), "same")


def test_the_kept_kernel_follows_every_change_of_the_variable():
    first = _kernel()
    var = torch.nn.Parameter(torch.from_numpy(first.copy()))
    np.testing.assert_allclose(_conv(var), _expected(first), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_conv(var), _expected(first), rtol=1e-4, atol=1e-4)  # from the kept copy

    second = _kernel()
    with torch.no_grad():
        var.copy_(torch.from_numpy(second))  # an assignment (set_weights, a target sync)
    np.testing.assert_allclose(_conv(var), _expected(second), rtol=1e-4, atol=1e-4)

    with torch.no_grad():
        var.mul_(0.5)  # an optimizer's in-place step
    np.testing.assert_allclose(_conv(var), _expected(second * 0.5), rtol=1e-4, atol=1e-4)

    third = _kernel()
    var.data = torch.from_numpy(third.copy())  # a new storage: no version bump, a new data pointer
    np.testing.assert_allclose(_conv(var), _expected(third), rtol=1e-4, atol=1e-4)


def test_gradients_reach_the_kernel_under_recording():
    kernel = _kernel()
    var = torch.nn.Parameter(torch.from_numpy(kernel.copy()))
    _conv(var)  # a copy is kept
    out = torch_ops.TorchOps.conv2d(torch.from_numpy(IMAGES), var, (2, 1), "same")
    out.sum().backward()
    assert var.grad is not None
    # d sum(conv) / d kernel[i, j, c, o] is the sum of the input pixels that tap meets: the same for every o
    grad = var.grad.numpy()
    np.testing.assert_allclose(grad[..., 0], grad[..., 4], rtol=1e-5)
    assert np.abs(grad).sum() > 0


def test_a_collected_variable_leaves_no_entry():
    var = torch.nn.Parameter(torch.from_numpy(_kernel()))
    _conv(var)
    key = id(var)
    assert key in torch_ops._OIHW_CACHE
    del var
    assert key not in torch_ops._OIHW_CACHE
