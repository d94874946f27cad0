"""An agent config's ``execution`` section selects the strategy: the IMPALA agent (LSTM) on two replicas."""

from __future__ import annotations

import os

import numpy as np
import yaml

from reference_agents.agents import IMPALAAgent
from spacegraph.reports import multi_device_graphs as mdg

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "impala_cartpole.yaml")


def config(**changes):
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg["env"] = {"id": "CartPole-v1", "num_envs": 2}
    cfg["network"] = {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}], "lstm_units": 6}
    cfg.update(changes)
    return cfg


def test_impala_agent_on_sync_replicas_equals_one_device_with_an_lstm():
    local = IMPALAAgent(config(), backend="torch", seed=3)
    replicated = IMPALAAgent(config(execution={"strategy": "sync-replicas", "devices": ["cpu", "cpu"]}),
                             backend="torch", seed=3)
    assert replicated.executor.strategy.name == "sync-replicas"
    assert replicated.executor.placement()["impala/replica_1"]["device"] == "cpu"
    rng = np.random.default_rng(0)
    for step in range(2):
        states, actions, rewards, discounts, logits = mdg.impala_batch(3, obs=4, actions=2, seed=step)
        states = np.clip(states, -0.4, 0.4)  # inside the CartPole observation bounds
        args = (states, actions, rewards, discounts, logits,
                tuple(rng.normal(size=(3, 6)).astype(np.float32) for _ in range(2)), rng.random((6, 3)) < 0.2)  # resets [T+1,B], as rollout_states
        a = local.executor.execute("update_recurrent", *args)
        b = replicated.executor.execute("update_recurrent", *args)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-5)  # the total loss over the 3 rollouts
    want = mdg.main_weights(local.executor)
    got = mdg.main_weights(replicated.executor)
    assert max(float(np.max(np.abs(want[k] - got[k]))) for k in want) < 2e-5
