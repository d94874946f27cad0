"""`GaussianAdapter`: maps network features to a diagonal Gaussian over continuous actions, and acts on it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space, Tuple
from reference_agents.components.common import Dense
from reference_agents.components.common.arguments import check_positive_int
from reference_agents.components.policies.categorical import full_shape, ranks_of

#: ``0.5 * log(2 pi)``, the normal density's constant per dimension.
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _bound(owner: str, argument: str, value: Any, dim: int, default: float) -> np.ndarray:
    """A bound given as None, a number or ``dim`` numbers, as a float64 array of shape ``(dim,)``."""
    if value is None:
        return np.full(dim, default)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: {argument} must be None, a number or {dim} numbers; got {value!r}") from None
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != dim) or np.isnan(arr).any():
        raise ValueError(f"{owner}: {argument} must be None, a number or {dim} numbers; got {value!r}")
    return np.broadcast_to(arr, (dim,)).copy()


class GaussianAdapter(Component):
    """A diagonal Gaussian action distribution over ``action_dim`` continuous actions.

    ``parameters(features)`` maps features ``float*[B,n]`` (a time rank may come
    too) through two linear `Dense` layers (sub-components ``mean`` and
    ``log_std``, each with ``kernel`` ``(n, D)`` and ``bias`` ``(D,)``) to the
    tuple ``(mean, log_std)``, both ``[B,D]``; ``log_std`` is clipped into
    ``[log_std_min, log_std_max]`` (default ``[-5, 2]``, standard deviations
    ``0.0067 .. 7.39``). The other methods take such a tuple (argument ``parameters``):

    - ``greedy_action``: ``mean``, clipped into ``[low, high]`` where bounded.
    - ``sample_action``: ``mean + exp(log_std) * n`` with ``n ~ N(0, 1)``, clipped
      into ``[low, high]`` where bounded (clipping, not squashing: the density
      of `log_prob` is that of the unclipped Gaussian).
    - ``log_prob(parameters, actions)``: ``sum_d -0.5 ((a - mean) / std)^2 - log_std
      - 0.5 log(2 pi)``, ``[B]``.
    - ``entropy``: ``sum_d log_std + 0.5 + 0.5 log(2 pi)``, ``[B]``.

    Args:
        action_dim: the number of action dimensions D, a positive int.
        low: None (unbounded), a number, or D numbers: the actions' lower bounds.
        high: the same for the upper bounds.
        log_std_min: the smallest log standard deviation.
        log_std_max: the largest log standard deviation (above ``log_std_min``).
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, action_dim: int, low: Any = None, high: Any = None, log_std_min: float = -5.0,
                 log_std_max: float = 2.0, scope: str = "gaussian") -> None:
        owner = "GaussianAdapter"
        action_dim = check_positive_int(owner, "action_dim", action_dim)
        lo = _bound(owner, "low", low, action_dim, -np.inf)
        hi = _bound(owner, "high", high, action_dim, np.inf)
        if np.any(lo > hi):
            raise ValueError(f"{owner}: low must not exceed high; got low={low!r}, high={high!r}")
        for name, value in (("log_std_min", log_std_min), ("log_std_max", log_std_max)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{owner}: {name} must be a finite number; got {value!r}")
        if log_std_min >= log_std_max:
            raise ValueError(f"{owner}: log_std_min must be below log_std_max; got {log_std_min!r} >= "
                             f"{log_std_max!r}")
        self.mean_layer = Dense(action_dim, scope="mean")
        self.log_std_layer = Dense(action_dim, scope="log_std")
        super().__init__(self.mean_layer, self.log_std_layer, scope=scope)
        self.action_dim = action_dim
        self.low, self.high = lo, hi
        self.bounded = bool(np.isfinite(lo).any() or np.isfinite(hi).any())
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires ``parameters`` a Tuple of two ``float*[B,D]`` and ``actions`` ``float*[B,D]``.

        The methods taking ``parameters`` do not wait for its space (the adapter's
        own `parameters` produces it, after the build of this component), so it
        is checked here only where it is known in time (fed from outside).
        """
        params = input_spaces.get("parameters")
        leaf = f"float32[B,{self.action_dim}]"
        if params is not None:
            ok = isinstance(params, Tuple) and len(params) == 2 and all(
                isinstance(p, FloatBox) and p.has_batch_rank and p.shape == (self.action_dim,) for p in params)
            if not ok:
                raise self.space_mismatch("parameters", f"a Tuple (mean, log_std) of two {leaf}", params)
            if params[0].dtype != params[1].dtype or params[0].extra_ranks != params[1].extra_ranks:
                raise self.space_mismatch("parameters", "mean and log_std of one dtype and one layout of extra "
                                          "ranks", params)
        actions = input_spaces.get("actions")
        if actions is not None:
            if not (isinstance(actions, FloatBox) and actions.has_batch_rank and actions.shape == (self.action_dim,)):
                raise self.space_mismatch("actions", leaf, actions)
            if params is not None and actions.extra_ranks != params[0].extra_ranks:
                raise self.space_mismatch("actions", f"actions with the mean's extra ranks {params[0].extra_ranks}",
                                          actions)

    # ---- output spaces ------------------------------------------------------------------------------
    def _log_std_space(self, raw: Space) -> Space:
        return FloatBox(self.action_dim, self.log_std_min, self.log_std_max, dtype=raw.dtype, **ranks_of(raw))

    def _action_space(self, parameters: Space) -> Space:
        mean = parameters[0]
        return FloatBox(self.action_dim, self.low, self.high, dtype=mean.dtype, **ranks_of(mean))

    def _per_row_space(self, parameters: Space, *rest: Space) -> Space:
        return FloatBox((), dtype=parameters[0].dtype, **ranks_of(parameters[0]))

    # ---- API ------------------------------------------------------------------------------------------
    @api
    def parameters(self, features: Any) -> Any:
        """``(mean, log_std)``, each ``[B,D]``, for features ``[B,n]``."""
        return self.mean_layer.apply(features), self._graph_fn_clip_log_std(self.log_std_layer.apply(features))

    @api(must_be_complete=False)
    def greedy_action(self, parameters: Any) -> Any:
        """The mean, clipped into the bounds where bounded."""
        return self._graph_fn_greedy(parameters)

    @api(must_be_complete=False)
    def sample_action(self, parameters: Any) -> Any:
        """One draw of the Gaussian per row, clipped into the bounds where bounded."""
        return self._graph_fn_sample(parameters)

    @api(must_be_complete=False)
    def log_prob(self, parameters: Any, actions: Any) -> Any:
        """The log density of ``actions`` under the (unclipped) Gaussian, summed over dimensions."""
        return self._graph_fn_log_prob(parameters, actions)

    @api(must_be_complete=False)
    def entropy(self, parameters: Any) -> Any:
        """The Gaussian's differential entropy per row, in nats."""
        return self._graph_fn_entropy(parameters)

    # ---- graph functions ------------------------------------------------------------------------------
    def _dtype(self) -> str:
        """The float dtype of the parameters: fed ones' where known at the build, else the features'."""
        params = self.input_spaces.get("parameters")
        return (params[0] if params is not None else self.input_spaces["features"]).dtype.name

    def _clip_to_bounds(self, F: Any, x: Any) -> Any:
        if not self.bounded:
            return x
        dtype = self._dtype()
        return F.clip(x, F.constant(self.low, dtype), F.constant(self.high, dtype))

    @graph_fn(output_spaces=_log_std_space)
    def _graph_fn_clip_log_std(self, F: Any, raw: Any) -> Any:
        return F.clip(raw, self.log_std_min, self.log_std_max)

    @graph_fn(output_spaces=_action_space)
    def _graph_fn_greedy(self, F: Any, parameters: Any) -> Any:
        return self._clip_to_bounds(F, parameters[0])

    @graph_fn(output_spaces=_action_space)
    def _graph_fn_sample(self, F: Any, parameters: Any) -> Any:
        mean, log_std = parameters
        noise = F.random_normal(full_shape(F, mean), dtype=self._dtype())
        return self._clip_to_bounds(F, mean + F.exp(log_std) * noise)

    @graph_fn(output_spaces=_per_row_space)
    def _graph_fn_log_prob(self, F: Any, parameters: Any, actions: Any) -> Any:
        mean, log_std = parameters
        z = (actions - mean) / F.exp(log_std)
        return F.reduce_sum(-0.5 * F.square(z) - log_std - HALF_LOG_2PI, -1)

    @graph_fn(output_spaces=_per_row_space)
    def _graph_fn_entropy(self, F: Any, parameters: Any) -> Any:
        return F.reduce_sum(parameters[1] + (0.5 + HALF_LOG_2PI), -1)
