"""NumPy oracles (and stateful NumPy models) for the common components, written from their definitions.

An oracle is ``fn(inputs, weights, config) -> outputs``: ``inputs`` maps API
argument names to NumPy values, ``weights`` maps variable paths relative to the
component under test (``"kernel"``, ``"source/bias"``) to arrays, ``config`` is
the spec's constructor config. Outputs nest like the component's: a tuple for
several outputs, a dict for a Dict space. Float maths runs in float64 and is
cast back to the input's dtype; the spec's tolerance covers the component's
own rounding.

A stateful model is a class ``Model(config, weights)`` whose methods are named
like the component's API methods and take the same arguments by name; its
``weights()`` (relative path -> array), where given, is compared with the
component's variables after every step.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: Activation functions by the names `Dense` accepts, from their textbook definitions.
ACTIVATIONS: dict[str | None, Callable[[np.ndarray], np.ndarray]] = {
    None: lambda x: x,
    "linear": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "elu": lambda x: np.where(x > 0.0, x, np.expm1(np.minimum(x, 0.0))),
    "softplus": lambda x: np.logaddexp(0.0, x),
}


def _map_leaves(fn: Callable[[np.ndarray], np.ndarray], value: Any) -> Any:
    """``fn`` applied to every array of a nested dict/tuple value, keeping the nesting."""
    if isinstance(value, dict):
        return {k: _map_leaves(fn, v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return tuple(_map_leaves(fn, v) for v in value)
    return fn(np.asarray(value))


def _first_leaf(value: Any) -> np.ndarray:
    while isinstance(value, (dict, tuple, list)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    return np.asarray(value)


def dense(x: np.ndarray, weights: dict[str, np.ndarray], config: dict[str, Any], prefix: str = "") -> np.ndarray:
    """``activation(x @ kernel + bias)`` over the last axis of ``x``, in float64, cast to ``x``'s dtype.

    Args:
        x: inputs ``[..., n]``.
        weights: relative weights holding ``{prefix}kernel`` ``(n, units)`` and,
            unless ``config["use_bias"]`` is false, ``{prefix}bias`` ``(units,)``.
        config: a `Dense` config (``activation``, ``use_bias``).
        prefix: the layer's path inside the component under test, with a trailing ``/``.
    """
    x = np.asarray(x)
    out = x.astype(np.float64) @ np.asarray(weights[f"{prefix}kernel"], np.float64)
    if config.get("use_bias", True):
        out = out + np.asarray(weights[f"{prefix}bias"], np.float64)
    return ACTIVATIONS[config.get("activation")](out).astype(x.dtype)


def dense_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Dense.apply`."""
    return dense(inputs["inputs"], weights, config)


def container_split(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> tuple:
    """Oracle of `ContainerSplitter.split`: the values at ``config["keys"]``, as a tuple in key order."""
    container = inputs["inputs"]
    return tuple(container[key] for key in config["keys"])


def container_merge(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `ContainerMerger.merge`: ``{key: value}`` for ``config["keys"]``, else the tuple itself."""
    values = tuple(inputs["values"])
    if config.get("tuple_size") is not None:
        return values
    return dict(zip(config["keys"], values))


def fold_time_rank(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `FoldTimeRank.fold`: every leaf's two leading axes merged into one, in row-major order."""
    return _map_leaves(lambda x: x.reshape((-1,) + x.shape[2:]), inputs["inputs"])


def unfold_time_rank(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `UnfoldTimeRank.unfold`: every leaf's leading axis split into ``like``'s two leading axes."""
    lead = _first_leaf(inputs["like"]).shape[:2]
    return _map_leaves(lambda x: x.reshape(lead + x.shape[1:]), inputs["inputs"])


def time_distributed_dense(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                           config: dict[str, Any]) -> np.ndarray:
    """Oracle of `TimeDistributedDense.apply`: the dense layer at every step (any layout)."""
    return dense(inputs["inputs"], weights, config, prefix="dense/")


def identity(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of a one-argument method that returns its argument unchanged (`TimeRankRoundTrip.roundtrip`)."""
    (value,) = inputs.values()
    return value


def synced_pair_source(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `SyncedPair.source` on fresh weights."""
    return dense(inputs["inputs"], weights, config, prefix="source/")


def synced_pair_target(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `SyncedPair.target` on fresh weights."""
    return dense(inputs["inputs"], weights, config, prefix="target/")


class SyncedPairModel:
    """NumPy model of `SyncedPair`: two dense layers and a (soft) copy from the first into the second.

    Args:
        config: the spec's `SyncedPair` config (``units``, ``activation``, ``tau``).
        weights: the initial weights, relative to the pair (``source/kernel``, ...).
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
        self.config = dict(config)
        self.tau = float(config.get("tau", 1.0))
        self._weights = {k: np.array(v) for k, v in weights.items()}

    def weights(self) -> dict[str, np.ndarray]:
        """The pair's variables by relative path (the stateful check compares them after every step)."""
        return self._weights

    def source(self, inputs: np.ndarray) -> np.ndarray:
        """The source layer's output."""
        return dense(inputs, self._weights, self.config, prefix="source/")

    def target(self, inputs: np.ndarray) -> np.ndarray:
        """The target layer's output."""
        return dense(inputs, self._weights, self.config, prefix="target/")

    def sync(self) -> None:
        """``target = tau * source + (1 - tau) * target`` for every variable."""
        for key in [k for k in self._weights if k.startswith("source/")]:
            target_key = "target/" + key[len("source/"):]
            source, target = self._weights[key], self._weights[target_key]
            blended = self.tau * source.astype(np.float64) + (1.0 - self.tau) * target.astype(np.float64)
            self._weights[target_key] = (source.copy() if self.tau == 1.0 else blended.astype(target.dtype))
