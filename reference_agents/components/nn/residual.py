"""`ResidualBlock`: two same-size convolutions with an identity skip, as in IMPALA's ResNet (Espeholt et al., 2018)."""

from __future__ import annotations

from typing import Any

from harness.backends.base import ACTIVATIONS
from harness.graph import Component, api, graph_fn
from harness.spaces import Space
from reference_agents.components.common.arguments import check_initializer, check_positive_int
from reference_agents.components.nn.conv2d import Conv2D, positive_pair, check_image_space


class ResidualBlock(Component):
    """``inputs + conv_b(act(conv_a(act(inputs))))``: a pre-activation residual block on NHWC images.

    Both convolutions have ``filters`` output channels, ``kernel_size`` windows, stride 1
    and 'same' padding, so the block keeps its input's shape and the skip adds without a
    projection: the input must have ``filters`` channels. ``activation`` is applied before
    each convolution (to the block's input, not to the skip), as in the residual blocks of
    IMPALA's deep network (Espeholt et al., 2018, Fig. 3).

    Accepts ``inputs`` as `Conv2D` does: ``float*[B,H,W,filters]`` (a time rank in either
    layout may come too). Returns a `FloatBox` of the input's dtype, ranks and core shape.
    Variables: ``conv_a/kernel`` and ``conv_b/kernel`` ``(kh, kw, filters, filters)`` and
    their ``bias`` ``(filters,)``.

    Args:
        filters: the channels of the input, of both convolutions and of the output; a positive int.
        kernel_size: both convolutions' ``(kh, kw)``, or one int for both.
        activation: one of ``harness.backends.base.ACTIVATIONS`` other than 'linear' (a linear
            block would be one convolution in disguise).
        kernel_initializer: an initializer `Component.get_variable` accepts, for both kernels.
        bias_initializer: likewise for both biases.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, filters: int, kernel_size: int | tuple[int, int] = 3, activation: str = "relu",
                 kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros",
                 scope: str = "residual_block") -> None:
        filters = check_positive_int("ResidualBlock", "filters", filters)
        kernel_size = positive_pair("ResidualBlock", "kernel_size", kernel_size)
        if activation not in ACTIVATIONS or activation == "linear":
            raise ValueError(f"ResidualBlock: activation must be one of "
                             f"{tuple(a for a in ACTIVATIONS if a != 'linear')}; got {activation!r}")
        check_initializer("ResidualBlock", "kernel_initializer", kernel_initializer)
        check_initializer("ResidualBlock", "bias_initializer", bias_initializer)
        conv_a, conv_b = (Conv2D(filters, kernel_size, 1, "same", activation=None,
                                 kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                                 scope=name) for name in ("conv_a", "conv_b"))
        super().__init__(conv_a, conv_b, scope=scope)
        self.filters = filters
        self.kernel_size = kernel_size
        self.activation = activation
        self.conv_a, self.conv_b = conv_a, conv_b

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts ``inputs`` of ``float*[B,H,W,filters]`` (optionally with a time rank)."""
        space = input_spaces["inputs"]
        check_image_space(self, space)
        if space.shape[2] != self.filters:
            raise self.space_mismatch("inputs", f"{self.filters} channels (the block's filters: the skip adds the "
                                      f"input to the convolutions' output)", space)

    @api
    def apply(self, inputs: Any) -> Any:
        """``inputs`` plus the two activated convolutions of it (see the class docstring)."""
        hidden = self.conv_a.apply(self._graph_fn_activate(inputs))
        return self._graph_fn_add(inputs, self.conv_b.apply(self._graph_fn_activate(hidden)))

    @graph_fn
    def _graph_fn_activate(self, F: Any, inputs: Any) -> Any:
        return F.activation(self.activation)(inputs)

    @graph_fn
    def _graph_fn_add(self, F: Any, inputs: Any, residual: Any) -> Any:
        return inputs + residual
