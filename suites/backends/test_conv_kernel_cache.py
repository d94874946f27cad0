"""PyTorch's conv2d keeps an OIHW copy of each kernel variable between calls (`torch.ops._oihw`), in the
memory format of its images (channels-last for NHWC images, the usual case; contiguous NCHW otherwise).

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


def _images(layout: str) -> torch.Tensor:
    """NHWC images whose NCHW view is channels-last ("nhwc") or contiguous NCHW ("nchw")."""
    images = torch.from_numpy(IMAGES)
    return images if layout == "nhwc" else images.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)


def _conv(kernel: torch.nn.Parameter, layout: str = "nhwc") -> np.ndarray:
    with torch.no_grad():
        return torch_ops.TorchOps.conv2d(_images(layout), kernel, (2, 1), "same").numpy()


def _expected(kernel: np.ndarray) -> np.ndarray:
    return ref.conv2d(IMAGES, kernel, (2, 1), "same")


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_the_kept_kernel_follows_every_change_of_the_variable(layout: str):
    first = _kernel()
    var = torch.nn.Parameter(torch.from_numpy(first.copy()))
    np.testing.assert_allclose(_conv(var, layout), _expected(first), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_conv(var, layout), _expected(first), rtol=1e-4, atol=1e-4)  # from the kept copy
    channels_last = layout == "nhwc"
    assert (id(var), channels_last) in torch_ops._OIHW_CACHE
    kept = torch_ops._OIHW_CACHE[(id(var), channels_last)][3]
    assert kept.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)

    second = _kernel()
    with torch.no_grad():
        var.copy_(torch.from_numpy(second))  # an assignment (set_weights, a target sync)
    np.testing.assert_allclose(_conv(var, layout), _expected(second), rtol=1e-4, atol=1e-4)

    with torch.no_grad():
        var.mul_(0.5)  # an optimizer's in-place step
    np.testing.assert_allclose(_conv(var, layout), _expected(second * 0.5), rtol=1e-4, atol=1e-4)

    third = _kernel()
    var.data = torch.from_numpy(third.copy())  # a new storage: no version bump, a new data pointer
    np.testing.assert_allclose(_conv(var, layout), _expected(third), rtol=1e-4, atol=1e-4)


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
    _conv(var, "nhwc")
    _conv(var, "nchw")
    keys = [(id(var), True), (id(var), False)]
    assert all(k in torch_ops._OIHW_CACHE for k in keys)
    del var
    assert not any(k in torch_ops._OIHW_CACHE for k in keys)
