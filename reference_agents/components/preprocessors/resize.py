"""`ImageResize`: bilinear or nearest-neighbour resizing with half-pixel centres, the same on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import graph_fn
from harness.spaces import Space
from reference_agents.components.preprocessors.base import Preprocessor, check_size, is_batched_image

METHODS = ("bilinear", "nearest")


def source_positions(size_in: int, size_out: int) -> np.ndarray:
    """Where each output pixel's centre lies in input pixel coordinates (half-pixel centres).

    Output pixel ``i`` covers ``[i, i+1) * size_in / size_out``; its centre maps to
    ``(i + 0.5) * size_in / size_out - 0.5`` in input coordinates, where input pixel
    ``j``'s centre sits at ``j``.
    """
    return (np.arange(size_out, dtype=np.float64) + 0.5) * (size_in / size_out) - 0.5


def bilinear_matrix(size_in: int, size_out: int) -> np.ndarray:
    """``W [size_out, size_in]`` such that ``W @ column`` linearly interpolates a column at half-pixel centres.

    Positions before the first centre clamp to it (``src < 0`` reads pixel 0),
    positions after the last one read the last pixel, as TensorFlow's
    ``tf.image.resize(antialias=False)`` and PyTorch's
    ``interpolate(align_corners=False)`` do.
    """
    src = np.clip(source_positions(size_in, size_out), 0.0, size_in - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, size_in - 1)
    frac = src - lo
    matrix = np.zeros((size_out, size_in), np.float64)
    rows = np.arange(size_out)
    np.add.at(matrix, (rows, lo), 1.0 - frac)
    np.add.at(matrix, (rows, hi), frac)
    return matrix


def nearest_indices(size_in: int, size_out: int) -> np.ndarray:
    """The input pixel whose area holds each output pixel's centre: ``floor((i + 0.5) * size_in / size_out)``."""
    idx = np.floor((np.arange(size_out, dtype=np.float64) + 0.5) * (size_in / size_out)).astype(np.int64)
    return np.minimum(idx, size_in - 1)


class ImageResize(Preprocessor):
    """Resizes images ``[B,H,W,C]`` to ``[B,height,width,C]``.

    ``bilinear`` interpolates at half-pixel centres without antialiasing (the
    sampling of ``tf.image.resize(method="bilinear", antialias=False)`` and
    ``torch.nn.functional.interpolate(mode="bilinear", align_corners=False)``).
    The two frameworks' kernels round differently (up to ~2e-4 apart on 0..255
    frames), so the resize is computed here as ``Wh @ x @ Ww^T`` per image and
    channel with interpolation matrices ``Wh [height,H]``, ``Ww [width,W]``
    built in NumPy: identical on both backends. It returns float32 for any
    input dtype.

    ``nearest`` picks input pixel ``floor((i + 0.5) * H / height)`` for output
    row ``i`` (likewise for columns), i.e. the pixel whose area holds the output
    pixel's centre (PyTorch's ``nearest-exact``; PyTorch's legacy ``nearest``
    and TensorFlow's ``nearest`` round differently). It is a gather, so it keeps
    the input's dtype.

    Accepts a float or integer box with a batch rank and no time rank, core
    rank 3.

    Args:
        width: the output width, an int >= 1.
        height: the output height, an int >= 1.
        method: ``"bilinear"`` or ``"nearest"``.
        scope: the component's name.

    Raises:
        ValueError: naming the argument when a size is not a positive int or
            ``method`` is unknown.
    """

    def __init__(self, width: int = 84, height: int = 84, method: str = "bilinear", scope: str = "resize") -> None:
        width = check_size("ImageResize", "width", width)
        height = check_size("ImageResize", "height", height)
        if method not in METHODS:
            raise ValueError(f"ImageResize: method must be one of {METHODS}; got {method!r}")
        super().__init__(scope=scope)
        self.width, self.height, self.method = width, height, method
        self._rows: np.ndarray | None = None
        self._cols: np.ndarray | None = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts numeric images ``[B,H,W,C]`` (no time rank)."""
        space = input_spaces["inputs"]
        if not is_batched_image(space, time_rank_ok=False):
            raise self.space_mismatch("inputs", "a float or int box of images [B,H,W,C] without a time rank", space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """No variables: computes the interpolation matrices (or indices) for the input's size."""
        h_in, w_in, _ = input_spaces["inputs"].shape
        if self.method == "bilinear":
            self._rows = bilinear_matrix(h_in, self.height).astype(np.float32)
            self._cols = bilinear_matrix(w_in, self.width).T.astype(np.float32).copy()
        else:
            self._rows = nearest_indices(h_in, self.height)
            self._cols = nearest_indices(w_in, self.width)

    @graph_fn
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        if self.method == "nearest":
            return F.gather(F.gather(inputs, F.constant(self._rows), axis=1), F.constant(self._cols), axis=2)
        h_in, w_in, channels = self.input_spaces["inputs"].shape
        x = F.transpose(F.cast(inputs, "float32"), (0, 3, 1, 2))                    # [B,C,H,W]
        x = F.matmul(F.reshape(x, (-1, w_in)), F.constant(self._cols))              # [B*C*H,width]
        x = F.transpose(F.reshape(x, (-1, channels, h_in, self.width)), (0, 1, 3, 2))  # [B,C,width,H]
        x = F.matmul(F.reshape(x, (-1, h_in)), F.constant(self._rows.T.copy()))     # [B*C*width,height]
        x = F.reshape(x, (-1, channels, self.width, self.height))
        return F.transpose(x, (0, 3, 2, 1))                                         # [B,height,width,C]
