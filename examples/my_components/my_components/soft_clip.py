"""`SoftClip`: squashes each feature smoothly into ``(-bound, bound)`` with a learned gain."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox


class SoftClip(Component):
    """``bound * tanh(gain * inputs)`` with one trainable gain per feature (initially 1).

    Takes ``float32[B,n]`` (a batch rank, core rank 1) and returns the same space, with every
    value inside ``(-bound, bound)``; the gain lets a network learn how hard to squash.

    Args:
        bound: the largest magnitude of an output, a positive number.
        scope: the component's name.
    """

    def __init__(self, bound: float = 1.0, scope: str = "soft-clip") -> None:
        if not bound > 0:
            raise ValueError(f"SoftClip: bound must be positive; got {bound!r}")
        super().__init__(scope=scope)
        self.bound = float(bound)
        self.gain: Any = None

    def check_input_spaces(self, input_spaces):
        space = input_spaces["inputs"]
        if not (isinstance(space, FloatBox) and space.has_batch_rank and space.rank == 1):
            raise self.space_mismatch("inputs", "a FloatBox with a batch rank and core rank 1 (float32[B,n])", space)

    def create_variables(self, input_spaces):
        space = input_spaces["inputs"]
        self.gain = self.get_variable("gain", (space.shape[0],), space.dtype.name, initializer="ones")

    @api
    def apply(self, inputs):
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F, inputs):
        return self.bound * F.tanh(inputs * self.gain)
