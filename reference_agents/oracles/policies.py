"""NumPy oracles for the action adapters and `Policy`, and the fixture root the policy specs build.

Written from the distributions' definitions: a categorical distribution
``p = softmax(logits)`` and a diagonal Gaussian ``N(mean, exp(log_std)^2)``.
Float maths runs in float64 and is cast back to the input's dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.graph import Component, forward
from harness.spaces import Dict, IntBox, Space, Tuple, parse
from reference_agents.components.common import Dense
from reference_agents.components.policies import Policy
from reference_agents.oracles.common import dense


# ---- categorical -------------------------------------------------------------------------------------

def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def categorical_greedy_of(logits: np.ndarray) -> np.ndarray:
    """``argmax`` over the last axis (the first index among ties), int64."""
    return np.argmax(np.asarray(logits), axis=-1).astype(np.int64)


def categorical_log_prob_of(logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``log softmax(logits)[actions]`` in float64."""
    log_p = _log_softmax(logits)
    return np.take_along_axis(log_p, np.asarray(actions, np.int64)[..., None], axis=-1)[..., 0]


def categorical_entropy_of(logits: np.ndarray) -> np.ndarray:
    """``-sum p log p`` with ``p = softmax(logits)``, clipped into ``[0, log A]`` (float32 bound), float64."""
    log_p = _log_softmax(logits)
    ent = -(np.exp(log_p) * log_p).sum(axis=-1)
    return np.clip(ent, 0.0, float(np.float32(np.log(log_p.shape[-1]))))


def categorical_logits(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `CategoricalAdapter.logits`/`parameters`: a linear layer ``features @ kernel + bias``."""
    return dense(inputs["features"], weights, {}, prefix="logits/")


def categorical_greedy(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `CategoricalAdapter.greedy_action`."""
    return categorical_greedy_of(inputs["parameters"])


def categorical_log_prob(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                         config: dict[str, Any]) -> np.ndarray:
    """Oracle of `CategoricalAdapter.log_prob`."""
    logits = np.asarray(inputs["parameters"])
    return categorical_log_prob_of(logits, inputs["actions"]).astype(logits.dtype)


def categorical_entropy(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                        config: dict[str, Any]) -> np.ndarray:
    """Oracle of `CategoricalAdapter.entropy`."""
    logits = np.asarray(inputs["parameters"])
    return categorical_entropy_of(logits).astype(logits.dtype)


# ---- diagonal Gaussian -------------------------------------------------------------------------------

def _bounds(config: dict[str, Any], dim: int) -> tuple[np.ndarray, np.ndarray]:
    low = config.get("low")
    high = config.get("high")
    lo = np.full(dim, -np.inf) if low is None else np.broadcast_to(np.asarray(low, np.float64), (dim,))
    hi = np.full(dim, np.inf) if high is None else np.broadcast_to(np.asarray(high, np.float64), (dim,))
    return lo, hi


def gaussian_parameters_of(features: np.ndarray, weights: dict[str, np.ndarray], config: dict[str, Any],
                           prefix: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``(features @ W_mean + b_mean, clip(features @ W_std + b_std, log_std_min, log_std_max))``."""
    mean = dense(features, weights, {}, prefix=f"{prefix}mean/")
    raw = dense(features, weights, {}, prefix=f"{prefix}log_std/")
    log_std = np.clip(raw, config.get("log_std_min", -5.0), config.get("log_std_max", 2.0)).astype(raw.dtype)
    return mean, log_std


def gaussian_greedy_of(mean: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """The mean clipped into the configured bounds."""
    mean = np.asarray(mean)
    lo, hi = _bounds(config, mean.shape[-1])
    return np.clip(mean.astype(np.float64), lo, hi).astype(mean.dtype)


def gaussian_log_prob_of(mean: np.ndarray, log_std: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``sum_d log N(a; mean, exp(log_std)^2)`` in float64."""
    m, s, a = (np.asarray(v, np.float64) for v in (mean, log_std, actions))
    z = (a - m) / np.exp(s)
    return (-0.5 * z ** 2 - s - 0.5 * math.log(2.0 * math.pi)).sum(axis=-1)


def gaussian_entropy_of(log_std: np.ndarray) -> np.ndarray:
    """``sum_d 0.5 log(2 pi e sigma^2) = sum_d log_std + 0.5 (1 + log 2 pi)`` in float64."""
    s = np.asarray(log_std, np.float64)
    return (s + 0.5 * (1.0 + math.log(2.0 * math.pi))).sum(axis=-1)


def gaussian_parameters(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> tuple:
    """Oracle of `GaussianAdapter.parameters`."""
    return gaussian_parameters_of(inputs["features"], weights, config)


def gaussian_greedy(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `GaussianAdapter.greedy_action`."""
    return gaussian_greedy_of(inputs["parameters"][0], config)


def gaussian_log_prob(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `GaussianAdapter.log_prob`."""
    mean, log_std = inputs["parameters"]
    return gaussian_log_prob_of(mean, log_std, inputs["actions"]).astype(np.asarray(mean).dtype)


def gaussian_entropy(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `GaussianAdapter.entropy`."""
    log_std = np.asarray(inputs["parameters"][1])
    return gaussian_entropy_of(log_std).astype(log_std.dtype)


# ---- Policy (through the DensePolicy fixture) --------------------------------------------------------

class DensePolicy(Component):
    """A `Policy` over a one-layer `Dense` network: the root the policy specs build.

    API: the `Policy` methods, forwarded. Variables: ``policy/network/kernel``
    and ``bias``, and each adapter's (``policy/adapter/logits/kernel``, or
    ``policy/adapter_<key>/mean/kernel`` ... for container actions).

    Args:
        units: the network's output size.
        action_space: the policy's action space (a space text).
        activation: the network's activation.
        scope: the component's name.
    """

    spec_covers = (Policy,)

    def __init__(self, units: int, action_space: Any, activation: str | None = "tanh",
                 scope: str = "dense_policy") -> None:
        self.policy = Policy(Dense(units, activation, bias_initializer="normal(0.5)", scope="network"), action_space)
        super().__init__(self.policy, scope=scope)

    action_logits = forward("policy", Policy.action_logits)
    greedy_actions = forward("policy", Policy.greedy_actions)
    sample_actions = forward("policy", Policy.sample_actions)
    log_probs = forward("policy", Policy.log_probs)
    entropy = forward("policy", Policy.entropy)


def _policy_leaves(config: dict[str, Any]) -> tuple[list[tuple[Any, str, Space]], bool, bool]:
    """``[(key, adapter scope, leaf space)]``, whether the action space is a container, and whether a Tuple."""
    space = parse(config["action_space"])
    if isinstance(space, (Dict, Tuple)):
        keys = list(range(len(space))) if isinstance(space, Tuple) else list(space.keys())
        return [(k, f"adapter_{k}", space[k]) for k in keys], True, isinstance(space, Tuple)
    return [(None, "adapter", space)], False, False


def _policy_parameters(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> list:
    states = np.asarray(inputs["states"])
    features = dense(states, weights, {"activation": config.get("activation", "tanh")}, prefix="policy/network/")
    out = []
    for key, name, leaf in _policy_leaves(config)[0]:
        prefix = f"policy/{name}/"
        if isinstance(leaf, IntBox):
            out.append((key, leaf, dense(features, weights, {}, prefix=f"{prefix}logits/")))
        else:
            out.append((key, leaf, gaussian_parameters_of(features, weights, {}, prefix=prefix)))
    return out


def _nest(values: list[Any], config: dict[str, Any]) -> Any:
    leaves, container, is_tuple = _policy_leaves(config)
    if not container:
        return values[0]
    return tuple(values) if is_tuple else {key: v for (key, _, _), v in zip(leaves, values)}


def _leaf_config(leaf: Space) -> dict[str, Any]:
    return {"low": np.asarray(leaf.low, np.float64), "high": np.asarray(leaf.high, np.float64)}


def policy_action_logits(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `Policy.action_logits`: the network ``act(s @ W + b)``, then each adapter's parameters."""
    return _nest([p for _, _, p in _policy_parameters(inputs, weights, config)], config)


def policy_greedy_actions(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `Policy.greedy_actions`: argmax of the logits, or the mean clipped into the leaf's bounds."""
    out = []
    for _, leaf, params in _policy_parameters(inputs, weights, config):
        out.append(categorical_greedy_of(params) if isinstance(leaf, IntBox)
                   else gaussian_greedy_of(params[0], _leaf_config(leaf)))
    return _nest(out, config)


def policy_log_probs(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Policy.log_probs`: the sum over leaves of each leaf's log-likelihood."""
    actions = inputs["actions"]
    leaves = _policy_leaves(config)[0]
    total = 0.0
    for (key, _, _), (_, leaf, params) in zip(leaves, _policy_parameters(inputs, weights, config)):
        a = actions if key is None else actions[key]
        total = total + (categorical_log_prob_of(params, a) if isinstance(leaf, IntBox)
                         else gaussian_log_prob_of(params[0], params[1], a))
    return np.asarray(total).astype(np.float32)


def policy_entropy(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Policy.entropy`: the sum over leaves of each leaf's entropy."""
    total = 0.0
    for _, leaf, params in _policy_parameters(inputs, weights, config):
        total = total + (categorical_entropy_of(params) if isinstance(leaf, IntBox) else gaussian_entropy_of(params[1]))
    return np.asarray(total).astype(np.float32)
