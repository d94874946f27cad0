"""`LSTM`: a long short-term memory layer over batch-major sequences, with its cell equations written out."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, FloatBox, Space, Tuple
from reference_agents.components.common.arguments import check_initializer, check_positive_int


class LSTM(Component):
    """An LSTM layer (Hochreiter & Schmidhuber, 1997, with a forget gate) run over a sequence.

    At each step ``t``, with ``z = concat([x_t, h]) @ kernel + bias`` split into
    four blocks of ``units`` in the order (i, f, g, o)::

        i = sigmoid(z_i); f = sigmoid(z_f); g = tanh(z_g); o = sigmoid(z_o)
        c' = f * c + i * g
        h' = o * tanh(c')

    API: ``apply(inputs, initial_state)`` with ``inputs`` a `FloatBox`
    ``float*[B,T,n]`` (batch-major) and ``initial_state`` a `Tuple` ``(h, c)`` of
    ``float*[B,units]`` in the same dtype. Returns ``(outputs, (h, c))``:
    ``outputs`` ``[B,T,units]`` holds ``h`` after every step, ``(h, c)`` the state
    after the last (the initial state when ``T`` is 0).

    ``apply_with_resets(inputs, initial_state, resets)`` does the same with a
    `BoolBox` ``bool[B,T]`` of episode starts: where ``resets[b, t]`` is true the
    state of row ``b`` is set to zeros before step ``t`` (a sequence that spans
    episode ends, as an IMPALA rollout does, restarts its memory at each one).

    Variables (in the input's dtype): ``kernel`` ``(n + units, 4 * units)``
    (rows: the inputs, then ``h``; columns: the gates i, f, g, o) and ``bias``
    ``(4 * units,)``. The layouts are this library's own, not those of
    ``torch.nn.LSTM`` or Keras.

    Args:
        units: the size of ``h`` and ``c``, a positive int.
        kernel_initializer: an initializer `Component.get_variable` accepts.
        bias_initializer: an initializer `Component.get_variable` accepts.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, units: int, kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros",
                 scope: str = "lstm") -> None:
        check_positive_int("LSTM", "units", units)
        check_initializer("LSTM", "kernel_initializer", kernel_initializer)
        check_initializer("LSTM", "bias_initializer", bias_initializer)
        super().__init__(scope=scope)
        self.units = int(units)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel: Any = None
        self.bias: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts ``inputs`` ``float*[B,T,n]`` and ``initial_state`` ``(float*[B,units], float*[B,units])``."""
        inputs = input_spaces["inputs"]
        if not (isinstance(inputs, FloatBox) and inputs.extra_ranks == ("B", "T") and inputs.rank == 1):
            raise self.space_mismatch("inputs", "a batch-major FloatBox sequence of vectors (float32[B,T,n])", inputs)
        state = input_spaces["initial_state"]
        if not (isinstance(state, Tuple) and len(state) == 2
                and all(isinstance(s, FloatBox) and s.shape == (self.units,) and s.dtype == inputs.dtype
                        and s.extra_ranks == ("B",) for s in state)):
            raise self.space_mismatch("initial_state", f"a Tuple (h, c) of {inputs.dtype.name}[B,{self.units}] "
                                      f"(the inputs' dtype)", state)

        resets = input_spaces.get("resets")
        if resets is not None and not (isinstance(resets, BoolBox) and resets.shape == ()
                                       and resets.extra_ranks == ("B", "T")):
            raise self.space_mismatch("resets", "a batch-major BoolBox of the inputs' ranks (bool[B,T])", resets)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Creates ``kernel`` ``(n + units, 4 * units)`` and ``bias`` ``(4 * units,)``."""
        space = input_spaces["inputs"]
        dtype = space.dtype.name
        self.kernel = self.get_variable("kernel", (space.shape[0] + self.units, 4 * self.units), dtype,
                                        self.kernel_initializer)
        self.bias = self.get_variable("bias", (4 * self.units,), dtype, self.bias_initializer)

    @api
    def apply(self, inputs: Any, initial_state: Any) -> Any:
        """``(outputs [B,T,units], (h, c))`` for the sequence ``inputs`` from ``initial_state``."""
        outputs, h, c = self._graph_fn_apply(inputs, initial_state)
        return outputs, (h, c)

    @api
    def apply_with_resets(self, inputs: Any, initial_state: Any, resets: Any) -> Any:
        """``(outputs [B,T,units], (h, c))`` with the state zeroed before each step where ``resets`` is true."""
        outputs, h, c = self._graph_fn_apply_with_resets(inputs, initial_state, resets)
        return outputs, (h, c)

    def _cell(self, F: Any, x: Any, h: Any, c: Any) -> tuple[Any, Any]:
        """One step of the recurrence: the new ``(h, c)``."""
        u = self.units
        z = F.matmul(F.concat([x, h], -1), self.kernel) + self.bias
        i, f, g, o = F.sigmoid(z[:, :u]), F.sigmoid(z[:, u:2 * u]), F.tanh(z[:, 2 * u:3 * u]), F.sigmoid(z[:, 3 * u:])
        c = f * c + i * g
        return o * F.tanh(c), c

    @graph_fn(returns=3)
    def _graph_fn_apply(self, F: Any, inputs: Any, initial_state: Any) -> Any:
        (h, c), (hs, _) = F.scan(lambda state, x: self._cell(F, x, *state), F.transpose(inputs, [1, 0, 2]),
                                 tuple(initial_state))
        return F.transpose(hs, [1, 0, 2]), h, c

    @graph_fn(returns=3)
    def _graph_fn_apply_with_resets(self, F: Any, inputs: Any, initial_state: Any, resets: Any) -> Any:
        keep = F.expand_dims(1.0 - F.cast(F.transpose(resets, [1, 0]), inputs.dtype), -1)  # [T,B,1]

        def step(state: Any, elems: Any) -> Any:
            x, k = elems
            return self._cell(F, x, state[0] * k, state[1] * k)

        (h, c), (hs, _) = F.scan(step, (F.transpose(inputs, [1, 0, 2]), keep), tuple(initial_state))
        return F.transpose(hs, [1, 0, 2]), h, c
