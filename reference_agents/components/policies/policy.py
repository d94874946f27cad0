"""`Policy`: a network and one action adapter per action (leaf), from features to actions."""

from __future__ import annotations

import re
from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import ContainerSpace, FloatBox, IntBox, Space, Tuple, parse
from reference_agents.components.common import ContainerMerger, ContainerSplitter
from reference_agents.components.policies.categorical import CategoricalAdapter
from reference_agents.components.policies.gaussian import GaussianAdapter

_SCOPE_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")


def adapter_for(space: Space, scope: str) -> Component:
    """The action adapter for one leaf action space.

    An `IntBox` of scalar actions ``0..n-1`` gets a `CategoricalAdapter` over n
    actions; a `FloatBox` of shape ``(D,)`` a `GaussianAdapter` over D
    dimensions with the box's bounds.

    Raises:
        ValueError: for any other leaf space.
    """
    if isinstance(space, IntBox):
        n = space.num_categories
        if space.shape != () or n is None:
            raise ValueError(f"Policy: action_space: an IntBox action must be a scalar 0..n-1 (int64[](0,n-1)); "
                             f"got {space!r}")
        return CategoricalAdapter(n, scope=scope)
    if isinstance(space, FloatBox):
        if space.rank != 1:
            raise ValueError(f"Policy: action_space: a FloatBox action must have shape (D,) (float32[D]); got {space!r}")
        low = [float(v) for v in space.low]
        high = [float(v) for v in space.high]
        return GaussianAdapter(space.shape[0], low=low, high=high, scope=scope)
    raise ValueError(f"Policy: action_space leaves must be IntBox or FloatBox; got {space!r}")


class Policy(Component):
    """A network followed by an action adapter per action: states to action distributions and actions.

    ``network`` is any component with an API method ``apply(inputs)`` that maps
    the states to features ``float*[B,n]``. The action space picks the adapters:
    an `IntBox` ``0..n-1`` a `CategoricalAdapter` (sub-component ``adapter``), a
    `FloatBox` ``(D,)`` a `GaussianAdapter`, and a flat `Dict` or `Tuple` of
    such leaves one adapter per leaf (``adapter_<key>``); container actions are
    taken apart by a `ContainerSplitter` (``splitter``) and put together by a
    `ContainerMerger` (``merger`` for actions, ``parameter_merger`` for
    distribution parameters) with the action space's keys. Nested
    containers are not supported.

    API (``states`` as the network takes them):

    - ``action_logits(states)``: each adapter's parameters: logits ``[B,n]``
      for discrete actions (for Q-learning, the Q-values), ``(mean, log_std)``
      for continuous ones; nested like the action space.
    - ``greedy_actions(states)``, ``sample_actions(states)``: actions nested like
      the action space (int64 for discrete, the features' float dtype for
      continuous leaves).
    - ``log_probs(states, actions)``: the joint log-likelihood ``[B]`` of
      ``actions`` (summed over the leaves, which are independent).
    - ``entropy(states)``: the joint entropy ``[B]`` (summed over the leaves).

    Args:
        network: a component with an API method ``apply(inputs)``.
        action_space: a `Space` or space text (``"int64[](0,3)"``,
            ``"{move: int64[](0,2), aim: float32[2](-1,1)}"``); extra ranks are ignored.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, network: Component, action_space: Space | str | dict | list, scope: str = "policy") -> None:
        if not isinstance(network, Component) or "apply" not in network.api_specs():
            raise ValueError(f"Policy: network must be a Component with an API method 'apply'; got {network!r}")
        try:
            space = action_space if isinstance(action_space, Space) else parse(action_space)
        except ValueError as exc:
            raise ValueError(f"Policy: action_space {action_space!r} is not a space: {exc}") from None
        self.action_space = space
        self.network = network
        subs: list[Component] = [network]
        self.splitter: ContainerSplitter | None = None
        self.merger: ContainerMerger | None = None
        self.parameter_merger: ContainerMerger | None = None
        if isinstance(space, ContainerSpace):
            keys = list(range(len(space))) if isinstance(space, Tuple) else list(space.keys())
            if not keys:
                raise ValueError(f"Policy: action_space must hold at least one action; got {action_space!r}")
            self.adapters = []
            for i, key in enumerate(keys):
                leaf = space[key]
                if isinstance(leaf, ContainerSpace):
                    raise ValueError(f"Policy: nested container action spaces are not supported; got {action_space!r}")
                name = f"adapter_{key}" if _SCOPE_PART.match(str(key)) else f"adapter_{i}"
                self.adapters.append(adapter_for(leaf, name))
            self.splitter = ContainerSplitter(keys=keys, scope="splitter")
            # one merger per kind of value: an argument takes one space per component
            self.merger = self._merger(space, keys, "merger")
            self.parameter_merger = self._merger(space, keys, "parameter_merger")
            subs += self.adapters + [self.splitter, self.merger, self.parameter_merger]
        else:
            self.adapters = [adapter_for(space, "adapter")]
            subs += self.adapters
        super().__init__(*subs, scope=scope)

    @staticmethod
    def _merger(space: Space, keys: list[Any], scope: str) -> ContainerMerger:
        if isinstance(space, Tuple):
            return ContainerMerger(tuple_size=len(keys), scope=scope)
        return ContainerMerger(keys=keys, scope=scope)

    # ---- routing helpers (run during assembly on records) ------------------------------------------
    def _nest(self, values: list[Any], merger: ContainerMerger | None) -> Any:
        return merger.merge(tuple(values)) if merger is not None else values[0]

    def _parameters(self, states: Any) -> list[Any]:
        features = self.network.apply(states)
        return [adapter.parameters(features) for adapter in self.adapters]

    def _joint(self, values: list[Any]) -> Any:
        return self._graph_fn_sum(tuple(values)) if len(values) > 1 else values[0]

    # ---- API -------------------------------------------------------------------------------------------
    @api
    def action_logits(self, states: Any) -> Any:
        """Each adapter's distribution parameters (logits or ``(mean, log_std)``), nested like the actions."""
        return self._nest(self._parameters(states), self.parameter_merger)

    @api
    def greedy_actions(self, states: Any) -> Any:
        """The most likely actions (argmax for discrete, the clipped mean for continuous leaves)."""
        actions = [a.greedy_action(p) for a, p in zip(self.adapters, self._parameters(states))]
        return self._nest(actions, self.merger)

    @api
    def sample_actions(self, states: Any) -> Any:
        """Actions drawn from the policy's distributions."""
        actions = [a.sample_action(p) for a, p in zip(self.adapters, self._parameters(states))]
        return self._nest(actions, self.merger)

    @api
    def log_probs(self, states: Any, actions: Any) -> Any:
        """The joint log-likelihood ``[B]`` of ``actions`` (nested like the action space)."""
        params = self._parameters(states)
        parts = self.splitter.split(actions) if self.splitter is not None else (actions,)
        return self._joint([a.log_prob(p, x) for a, p, x in zip(self.adapters, params, parts)])

    @api
    def entropy(self, states: Any) -> Any:
        """The joint entropy ``[B]`` of the policy's distributions."""
        return self._joint([a.entropy(p) for a, p in zip(self.adapters, self._parameters(states))])

    @graph_fn
    def _graph_fn_sum(self, F: Any, values: tuple) -> Any:
        total = values[0]
        for value in values[1:]:
            total = total + value
        return total
