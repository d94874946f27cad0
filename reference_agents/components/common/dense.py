"""`Dense`: a fully connected layer ``activation(inputs @ kernel + bias)``."""

from __future__ import annotations

from typing import Any


from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space

from reference_agents.components.common.arguments import check_layer_options, check_positive_int


class Dense(Component):
    """A fully connected layer: ``activation(inputs @ kernel + bias)``.

    Accepts one `FloatBox` argument with a batch rank (a time rank in either
    layout may come too) and a core rank of 1, ``float*[B,n]``, ``float*[B,T,n]``
    or ``float*[T,B,n]``. Returns a `FloatBox` of the input's dtype and extra
    ranks with core shape ``(units,)``.

    Variables (in the input's dtype): ``kernel`` of shape ``(n, units)`` (the
    canonical layout on both backends) and, with ``use_bias``, ``bias`` of shape
    ``(units,)``.

    Args:
        units: the number of outputs, a positive int.
        activation: None (linear) or one of ``harness.backends.base.ACTIVATIONS``.
        use_bias: whether to add a bias.
        kernel_initializer: an initializer `Component.get_variable` accepts.
        bias_initializer: an initializer `Component.get_variable` accepts.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True,
                 kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros",
                 scope: str = "dense") -> None:
        units = check_positive_int("Dense", "units", units)
        check_layer_options("Dense", activation, use_bias, kernel_initializer, bias_initializer)
        super().__init__(scope=scope)
        self.units = units
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel: Any = None
        self.bias: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts ``inputs`` of ``float*[B,n]``, ``float*[B,T,n]`` or ``float*[T,B,n]``."""
        space = input_spaces["inputs"]
        if not (isinstance(space, FloatBox) and space.has_batch_rank and space.rank == 1):
            raise self.space_mismatch("inputs", "a FloatBox with a batch rank and core rank 1 (float32[B,n])",
                                      space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Creates ``kernel`` ``(n, units)`` and, with ``use_bias``, ``bias`` ``(units,)``."""
        space = input_spaces["inputs"]
        dtype = space.dtype.name
        self.kernel = self.get_variable("kernel", (space.shape[0], self.units), dtype, self.kernel_initializer)
        if self.use_bias:
            self.bias = self.get_variable("bias", (self.units,), dtype, self.bias_initializer)

    @api
    def apply(self, inputs: Any) -> Any:
        """The layer's output for ``inputs`` (see the class docstring for spaces)."""
        return self._graph_fn_apply(inputs)

    def _output_space(self, inputs: Space) -> Space:
        # Declared, so the build does not run the layer on sampled inputs to infer it: on TF those eager runs
        # (two per call site) were the largest part of a DQN build, about 0.15 s of `dqn_cartpole`'s.
        return FloatBox((self.units,), dtype=inputs.dtype, batch_rank=inputs.has_batch_rank,
                        time_rank=inputs.has_time_rank, time_major=inputs.time_major)

    @graph_fn(output_spaces=_output_space)
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        out = F.dense(inputs, self.kernel, self.bias if self.use_bias else None)
        if self.activation is None or self.activation == "linear":  # no identity op to look up and call
            return out
        return F.activation(self.activation)(out)
