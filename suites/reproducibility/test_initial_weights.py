"""The same seed gives the same initial weights on TensorFlow and PyTorch, for every agent (docs/reproducibility.md).

Every variable's initial value is drawn in NumPy from the seed and the variable's scope path
(`harness.backends.base.initial_value`) and each backend's ``get_weights`` returns the canonical layout, so
every array of the graph (networks, target networks, optimizer slots) must agree by name.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import initial_value

SEED = 11
#: (config, how to build it): each agent's CartPole configs and the Pong-sized Nature CNNs.
AGENTS = ["dqn_cartpole", "dqn_pong", "impala_cartpole", "impala_cartpole_lstm", "impala_pong", "apex_cartpole",
          "apex_pong"]


def build(config: str, backend: str, seed: int = SEED):
    if config.startswith("apex_"):
        from reference_agents.agents.apex.agent import ApexAgent

        return ApexAgent(config, backend=backend, seed=seed)
    from reference_agents.agents import build_agent

    return build_agent(config, backend=backend, seed=seed)


def all_weights(config: str, backend: str, seed: int = SEED) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in build(config, backend, seed).get_weights(everything=True).items()}


@pytest.mark.parametrize("config", AGENTS)
def test_both_backends_start_from_the_same_weights(config):
    tf, torch = all_weights(config, "tf"), all_weights(config, "torch")
    assert sorted(tf) == sorted(torch), f"variables only on tf: {sorted(set(tf) - set(torch))}; " \
                                        f"only on torch: {sorted(set(torch) - set(tf))}"
    network = [k for k in tf if k.endswith("kernel")]
    assert network, "no kernels found: the comparison would be empty"
    differ = []
    for name in sorted(tf):
        a, b = tf[name], torch[name]
        if a.shape != b.shape or a.dtype != b.dtype or not np.allclose(a, b, rtol=0, atol=1e-6):
            differ.append(f"{name}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
    assert differ == [], "\n".join(differ)
    # (and the seed matters: a random kernel is not what another seed draws)
    assert any(np.abs(tf[k]).max() > 0 for k in network)


def test_another_seed_gives_other_weights():
    one, other = all_weights("impala_cartpole", "torch"), all_weights("impala_cartpole", "torch", SEED + 1)
    kernels = [k for k in one if k.endswith("kernel")]
    assert kernels and all(not np.array_equal(one[k], other[k]) for k in kernels)


def test_initial_values_do_not_depend_on_the_order_of_the_build():
    a = initial_value("net/dense_0/kernel", (4, 3), np.float32, "glorot_uniform", SEED)
    initial_value("net/dense_1/kernel", (3, 2), np.float32, "glorot_uniform", SEED)
    assert np.array_equal(a, initial_value("net/dense_0/kernel", (4, 3), np.float32, "glorot_uniform", SEED))
