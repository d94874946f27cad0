"""`CategoricalAdapter`: maps network features to logits over discrete actions, and acts on them."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, IntBox, Space
from reference_agents.components.common.arguments import check_positive_int
from reference_agents.components.common import Dense

#: Smallest uniform draw used by Gumbel-max sampling (keeps ``log(-log(u))`` finite).
UNIFORM_FLOOR = 1e-20


def ranks_of(space: Space) -> dict[str, bool]:
    """The extra-rank keyword arguments (batch/time rank, layout) of a box space."""
    return dict(batch_rank=space.has_batch_rank, time_rank=space.has_time_rank, time_major=space.time_major)


def full_shape(F: Any, x: Any) -> list[Any]:
    """The (possibly dynamic) shape of tensor ``x`` as a list of sizes."""
    return [F.dim(x, i) for i in range(len(x.shape))]


class CategoricalAdapter(Component):
    """A categorical action distribution over ``num_actions`` discrete actions.

    ``logits(features)`` (alias ``parameters``) maps features ``float*[B,n]`` (a
    time rank may come too) through a linear `Dense` layer (sub-component
    ``logits``, variables ``logits/kernel`` ``(n, A)`` and ``logits/bias``) to
    unnormalised log-probabilities ``[B,A]``; for a Q-learning policy they are
    the Q-values. The other methods take such logits (argument ``parameters``):

    - ``greedy_action``: ``argmax`` over actions, ``int64[B](0,A-1)``.
    - ``sample_action``: a draw from ``softmax(logits)`` by the Gumbel-max trick,
      ``argmax(logits - log(-log(u)))`` with ``u ~ U[UNIFORM_FLOOR, 1)``,
      ``int64[B](0,A-1)``.
    - ``log_prob(parameters, actions)``: ``log_softmax(logits)[actions]``, ``[B]``.
    - ``entropy``: ``-sum(softmax * log_softmax)``, ``[B]``, clipped into
      ``[0, log A]`` (float rounding may step outside by ~1e-7).

    Args:
        num_actions: the number of actions A, a positive int.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, num_actions: int, scope: str = "categorical") -> None:
        num_actions = check_positive_int("CategoricalAdapter", "num_actions", num_actions)
        self.layer = Dense(num_actions, scope="logits")
        super().__init__(self.layer, scope=scope)
        self.num_actions = num_actions

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires ``parameters`` ``float*[B,A]`` and ``actions`` an integer box of its extra ranks."""
        params = input_spaces.get("parameters")
        if params is not None and not (isinstance(params, FloatBox) and params.has_batch_rank
                                       and params.shape == (self.num_actions,)):
            raise self.space_mismatch("parameters", f"logits float32[B,{self.num_actions}]", params)
        actions = input_spaces.get("actions")
        if actions is not None:
            if not (isinstance(actions, IntBox) and actions.shape == () and actions.has_batch_rank):
                raise self.space_mismatch("actions", "an IntBox of scalar actions with a batch rank (int64[B])",
                                          actions)
            if params is not None and actions.extra_ranks != params.extra_ranks:
                raise self.space_mismatch("actions", f"actions with the logits' extra ranks {params.extra_ranks}",
                                          actions)

    def _action_space(self, parameters: Space) -> Space:
        return IntBox(self.num_actions, **ranks_of(parameters))

    def _log_prob_space(self, parameters: Space, actions: Space) -> Space:
        return FloatBox((), -np.inf, 0.0, dtype=parameters.dtype, **ranks_of(parameters))

    def _max_entropy(self) -> float:
        return float(np.float32(np.log(self.num_actions)))

    def _entropy_space(self, parameters: Space) -> Space:
        return FloatBox((), 0.0, self._max_entropy(), dtype=parameters.dtype, **ranks_of(parameters))

    @api
    def parameters(self, features: Any) -> Any:
        """The logits ``[B,A]`` for features ``[B,n]``."""
        return self.layer.apply(features)

    @api
    def logits(self, features: Any) -> Any:
        """The logits ``[B,A]`` for features ``[B,n]`` (the same as `parameters`)."""
        return self.layer.apply(features)

    @api
    def greedy_action(self, parameters: Any) -> Any:
        """The most likely action per row (the lowest index among ties), ``int64[B](0,A-1)``."""
        return self._graph_fn_greedy(parameters)

    @api
    def sample_action(self, parameters: Any) -> Any:
        """One action per row drawn from ``softmax(parameters)``, ``int64[B](0,A-1)``."""
        return self._graph_fn_sample(parameters)

    @api
    def log_prob(self, parameters: Any, actions: Any) -> Any:
        """``log softmax(parameters)[actions]`` per row."""
        return self._graph_fn_log_prob(parameters, actions)

    @api
    def entropy(self, parameters: Any) -> Any:
        """The entropy of ``softmax(parameters)`` per row, in nats."""
        return self._graph_fn_entropy(parameters)

    @graph_fn(output_spaces=_action_space)
    def _graph_fn_greedy(self, F: Any, parameters: Any) -> Any:
        return F.cast(F.argmax(parameters, -1), "int64")

    @graph_fn(output_spaces=_action_space)
    def _graph_fn_sample(self, F: Any, parameters: Any) -> Any:
        u = F.random_uniform(full_shape(F, parameters), dtype=self.input_spaces["parameters"].dtype.name)
        u = F.maximum(u, UNIFORM_FLOOR)
        gumbel = -F.log(-F.log(u))
        return F.cast(F.argmax(parameters + gumbel, -1), "int64")

    @graph_fn(output_spaces=_log_prob_space)
    def _graph_fn_log_prob(self, F: Any, parameters: Any, actions: Any) -> Any:
        log_p = F.log_softmax(parameters, -1)
        picked = F.take_along_axis(log_p, F.expand_dims(F.cast(actions, "int64"), -1), -1)
        return F.squeeze(picked, -1)

    @graph_fn(output_spaces=_entropy_space)
    def _graph_fn_entropy(self, F: Any, parameters: Any) -> Any:
        log_p = F.log_softmax(parameters, -1)
        # clipped into [0, log A]: rounding may step outside by ~1e-7
        return F.clip(-F.reduce_sum(F.exp(log_p) * log_p, -1), 0.0, self._max_entropy())
