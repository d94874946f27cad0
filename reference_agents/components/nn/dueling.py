"""`DuelingHead`: Q-values from separate state-value and advantage streams (Wang et al., 2016)."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space
from reference_agents.components.common.arguments import check_positive_int
from reference_agents.components.common import Dense


class DuelingHead(Component):
    """The dueling Q-value head: ``Q(s,a) = V(s) + A(s,a) - mean_a' A(s,a')``.

    Two linear `Dense` sub-components read the same features: ``value`` (1 unit)
    and ``advantage`` (``num_actions`` units). Subtracting the mean advantage
    makes the split into V and A identifiable (Wang et al., 2016, eq. 9).

    Accepts ``inputs`` as `Dense` does: ``float*[B,n]`` (or with a time rank).
    ``apply`` returns Q-values ``float*[B,A]``; ``value_and_advantages`` returns
    the tuple ``(V [B], A [B,A])`` before they are combined. Variables:
    ``value/kernel`` ``(n, 1)``, ``value/bias``, ``advantage/kernel``
    ``(n, A)``, ``advantage/bias``.

    Args:
        num_actions: the number of actions A, a positive int.
        scope: the component's name.

    Raises:
        ValueError: naming ``num_actions`` and its value when it is invalid.
    """

    def __init__(self, num_actions: int, scope: str = "dueling_head") -> None:
        check_positive_int("DuelingHead", "num_actions", num_actions)
        value = Dense(1, scope="value")
        advantage = Dense(int(num_actions), scope="advantage")
        super().__init__(value, advantage, scope=scope)
        self.num_actions = int(num_actions)
        self.value, self.advantage = value, advantage

    @api
    def apply(self, inputs: Any) -> Any:
        """Q-values ``[B,A]`` for the features ``inputs``."""
        return self._graph_fn_combine(self.value.apply(inputs), self.advantage.apply(inputs))

    @api
    def value_and_advantages(self, inputs: Any) -> Any:
        """``(V(s) [B], A(s,.) [B,A])``: the two streams before they are combined."""
        return self._graph_fn_squeeze(self.value.apply(inputs)), self.advantage.apply(inputs)

    def _combined_space(self, value: Space, advantages: Space) -> Space:
        # declared (as `Dense` declares its own), so the build runs no sample inputs through the combination
        return FloatBox((self.num_actions,), dtype=advantages.dtype, batch_rank=advantages.has_batch_rank,
                        time_rank=advantages.has_time_rank, time_major=advantages.time_major)

    @graph_fn(output_spaces=_combined_space)
    def _graph_fn_combine(self, F: Any, value: Any, advantages: Any) -> Any:
        return value + advantages - F.reduce_mean(advantages, axis=-1, keepdims=True)

    @graph_fn
    def _graph_fn_squeeze(self, F: Any, value: Any) -> Any:
        return F.squeeze(value, -1)
