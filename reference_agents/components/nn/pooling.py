"""`MaxPool2D`: the maximum over windows of NHWC images, with TensorFlow's 'valid'/'same' padding on both backends."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space
from reference_agents.components.nn.conv2d import (PADDINGS, positive_pair, check_image_space, conv_output_size, fold_images,
                                                   unfold_images)


class MaxPool2D(Component):
    """A 2-D max pooling: each output pixel is the largest input of its ``pool_size`` window, per channel.

    Accepts one `FloatBox` argument ``inputs`` of core rank 3, ``[H,W,C]``, with a batch
    rank (a time rank in either layout may come too). Returns a `FloatBox` of the input's
    dtype, extra ranks and bounds (a maximum of values in ``[low, high]`` stays there) with
    core shape ``(H', W', C)``: 'valid' gives ``(H - ph) // sh + 1`` rows, 'same'
    ``ceil(H / sh)`` (likewise for columns), padded like TensorFlow's SAME (the odd
    element bottom/right), where a padded position never wins. No variables.

    Args:
        pool_size: the window's ``(ph, pw)``, or one int for both.
        strides: the window's step ``(sh, sw)``, or one int for both; None (the default)
            steps by the window, so windows do not overlap.
        padding: 'valid' (no padding) or 'same' (TensorFlow's SAME).
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, pool_size: int | tuple[int, int] = 2, strides: int | tuple[int, int] | None = None,
                 padding: str = "valid", scope: str = "max_pool2d") -> None:
        pool_size = positive_pair("MaxPool2D", "pool_size", pool_size)
        strides = pool_size if strides is None else positive_pair("MaxPool2D", "strides", strides)
        if padding not in PADDINGS:
            raise ValueError(f"MaxPool2D: padding must be one of {PADDINGS}; got {padding!r}")
        super().__init__(scope=scope)
        self.pool_size = pool_size
        self.strides = strides
        self.padding = padding

    def _core_shape(self, space: FloatBox) -> tuple[int, int, int]:
        rows, cols = (conv_output_size(size, p, s, self.padding)[0]
                      for size, p, s in zip(space.shape[:2], self.pool_size, self.strides))
        return rows, cols, space.shape[2]

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts ``inputs`` of ``float*[B,H,W,C]`` (optionally with a time rank) that the window fits."""
        space = input_spaces["inputs"]
        check_image_space(self, space)
        if min(self._core_shape(space)[:2]) < 1:
            raise self.space_mismatch("inputs", f"images at least as large as the window {self.pool_size} "
                                      f"under 'valid' padding", space)

    def _pooled_space(self, inputs: FloatBox) -> FloatBox:
        # A channel's maximum lies within that channel's bounds: its lowest low and highest high.
        shape = self._core_shape(inputs)
        low = np.broadcast_to(inputs.low.min(axis=(0, 1)), shape).copy()
        high = np.broadcast_to(inputs.high.max(axis=(0, 1)), shape).copy()
        return inputs._copy(shape=shape, low=low, high=high)

    @api
    def apply(self, inputs: Any) -> Any:
        """The pooled ``inputs`` (see the class docstring for spaces)."""
        return self._graph_fn_apply(inputs)

    @graph_fn(output_spaces=_pooled_space)
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        space = self.input_spaces["inputs"]
        images, lead = fold_images(F, inputs, not space.has_time_rank)
        out = F.max_pool2d(images, self.pool_size, self.strides, self.padding)
        return unfold_images(F, out, lead, self._core_shape(space))
