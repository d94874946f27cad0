"""`Conv2D`: a 2-D convolution layer on NHWC images, with TensorFlow's 'valid'/'same' padding on both backends."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.backends.ops import same_padding
from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space
from reference_agents.components.common.arguments import check_layer_options, check_positive_int

PADDINGS = ("valid", "same")


def positive_pair(owner: str, argument: str, value: Any) -> tuple[int, int]:
    """``value`` as a pair of positive ints (an int stands for both); ValueError naming ``argument`` otherwise."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0 for v in items):
        raise ValueError(f"{owner}: {argument} must be a positive int or a pair of positive ints; got {value!r}")
    return int(items[0]), int(items[1])


def conv_output_size(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int, int]:
    """The output size of one spatial axis and the padding before and after it.

    'valid' uses no padding: ``(size - kernel) // stride + 1`` outputs. 'same'
    gives ``ceil(size / stride)`` outputs and pads ``max((out - 1) * stride +
    kernel - size, 0)`` in all, the odd element after (bottom/right), as
    TensorFlow's SAME does.

    Args:
        size: the input's extent along the axis.
        kernel: the kernel's extent along the axis.
        stride: the step between windows.
        padding: 'valid' or 'same'.

    Returns:
        ``(out, pad_before, pad_after)``; ``out`` is < 1 when a 'valid' kernel does not fit.
    """
    if padding == "valid":
        return (size - kernel) // stride + 1, 0, 0
    return same_padding(size, kernel, stride)


def check_image_space(component: Component, space: Space) -> None:
    """Raises the component's space mismatch for ``inputs`` unless ``space`` is ``float*[B,H,W,C]`` (a time rank
    may come too): the input the image layers (`Conv2D`, `MaxPool2D`, `ResidualBlock`) take."""
    if not (isinstance(space, FloatBox) and space.has_batch_rank and space.rank == 3):
        raise component.space_mismatch("inputs", "a FloatBox with a batch rank and core rank 3 (float32[B,H,W,C])",
                                       space)
    if space.shape[2] < 1:  # the ops of both backends fail on it (a late BuildError or ExecutionError)
        raise component.space_mismatch("inputs", "images with at least one channel", space)


def fold_images(F: Any, inputs: Any, batch_only: bool) -> tuple[Any, list[Any] | None]:
    """``inputs`` as ``[N,H,W,C]`` and its leading (batch, time) dims for `unfold_images` (None: batch only,
    nothing to fold; the rank is known at build, so acting on ``[B,H,W,C]`` frames pays no reshapes)."""
    if batch_only:
        return inputs, None
    lead = [F.dim(inputs, i) for i in range(len(inputs.shape) - 3)]
    return F.reshape(inputs, [-1] + [int(d) for d in inputs.shape[-3:]]), lead


def unfold_images(F: Any, out: Any, lead: list[Any] | None, core_shape: tuple[int, int, int]) -> Any:
    """``out`` ``[N,H',W',C']`` back to the leading dims `fold_images` took off (as it is when there were none)."""
    return out if lead is None else F.reshape(out, lead + list(core_shape))


class Conv2D(Component):
    """A 2-D convolution: ``activation(conv(inputs, kernel) + bias)`` on NHWC images.

    Accepts one `FloatBox` argument ``inputs`` of core rank 3, ``[H,W,C]``, with a
    batch rank (a time rank in either layout may come too): ``float*[B,H,W,C]``,
    ``float*[B,T,H,W,C]`` or ``float*[T,B,H,W,C]``. Returns a `FloatBox` of the
    input's dtype and extra ranks with core shape ``(H', W', filters)``, where
    'valid' gives ``(H - kh) // sh + 1`` rows and 'same' ``ceil(H / sh)`` (likewise
    for columns). 'same' pads like TensorFlow's SAME on both backends: the odd
    padding element goes to the bottom/right.

    Variables (in the input's dtype): ``kernel`` of shape ``(kh, kw, C, filters)``
    (the canonical HWIO layout on both backends; ``F.conv2d`` takes it as it is) and,
    with ``use_bias``, ``bias`` of shape ``(filters,)``.

    Args:
        filters: the number of output channels, a positive int.
        kernel_size: the window's ``(kh, kw)``, or one int for both.
        strides: the window's step ``(sh, sw)``, or one int for both.
        padding: 'valid' (no padding) or 'same' (TensorFlow's SAME).
        activation: None (linear) or one of ``harness.backends.base.ACTIVATIONS``.
        use_bias: whether to add a bias.
        kernel_initializer: an initializer `Component.get_variable` accepts.
        bias_initializer: an initializer `Component.get_variable` accepts.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, filters: int, kernel_size: int | tuple[int, int], strides: int | tuple[int, int] = 1,
                 padding: str = "valid", activation: str | None = None, use_bias: bool = True,
                 kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros",
                 scope: str = "conv2d") -> None:
        filters = check_positive_int("Conv2D", "filters", filters)
        kernel_size = positive_pair("Conv2D", "kernel_size", kernel_size)
        strides = positive_pair("Conv2D", "strides", strides)
        if padding not in PADDINGS:
            raise ValueError(f"Conv2D: padding must be one of {PADDINGS}; got {padding!r}")
        check_layer_options("Conv2D", activation, use_bias, kernel_initializer, bias_initializer)
        super().__init__(scope=scope)
        self.filters = int(filters)
        self.kernel_size = kernel_size
        self.strides = strides
        self.padding = padding
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel: Any = None
        self.bias: Any = None
        # The output's core shape, once the input is known.
        self.output_shape: tuple[int, int, int] = (0, 0, 0)
        self.batch_only = True  # inputs carry a batch rank only (no time rank): no fold/unfold reshapes

    def _geometry(self, space: FloatBox) -> tuple[tuple[int, int, int], tuple[tuple[int, int], tuple[int, int]]]:
        (h_out, top, bottom), (w_out, left, right) = (
            conv_output_size(size, k, s, self.padding)
            for size, k, s in zip(space.shape[:2], self.kernel_size, self.strides))
        return (h_out, w_out, self.filters), ((top, bottom), (left, right))

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts ``inputs`` of ``float*[B,H,W,C]`` (optionally with a time rank) that the kernel fits."""
        space = input_spaces["inputs"]
        check_image_space(self, space)
        shape, _ = self._geometry(space)
        if min(shape[:2]) < 1:
            raise self.space_mismatch("inputs", f"images at least as large as the kernel {self.kernel_size} "
                                      f"under 'valid' padding", space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Creates ``kernel`` ``(kh, kw, C, filters)`` and, with ``use_bias``, ``bias`` ``(filters,)``."""
        space = input_spaces["inputs"]
        self.output_shape, _ = self._geometry(space)
        self.batch_only = not space.has_time_rank
        dtype = space.dtype.name
        kh, kw = self.kernel_size
        self.kernel = self.get_variable("kernel", (kh, kw, space.shape[2], self.filters), dtype,
                                        self.kernel_initializer)
        if self.use_bias:
            self.bias = self.get_variable("bias", (self.filters,), dtype, self.bias_initializer)

    @api
    def apply(self, inputs: Any) -> Any:
        """The layer's output for ``inputs`` (see the class docstring for spaces)."""
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        images, lead = fold_images(F, inputs, self.batch_only)
        out = F.conv2d(images, self.kernel, self.strides, self.padding, self.bias if self.use_bias else None)
        return unfold_images(F, F.activation(self.activation)(out), lead, self.output_shape)
