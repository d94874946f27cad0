"""NumPy oracles for the components of `reference_agents.agents` (the Q-network of DQN)."""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.oracles.common import dense
from reference_agents.oracles.nn import dueling, network


def q_network_q_values(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `QNetwork.q_values`: the torso's layers, then a linear layer or the dueling combination."""
    features = network(inputs["states"], weights, config["layers"], prefix="network/")
    if not config.get("dueling", False):
        return dense(features, weights, {}, prefix="q_values/")
    value, advantages = dueling(features, {k[len("dueling_head/"):]: v for k, v in weights.items()
                                           if k.startswith("dueling_head/")})
    v, a = value.astype(np.float64), advantages.astype(np.float64)
    return (v[..., None] + a - a.mean(axis=-1, keepdims=True)).astype(advantages.dtype)
