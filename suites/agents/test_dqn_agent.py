"""The DQN agent API: weights across backends, export/import and checkpoints, external batches, n-step and truncation."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from reference_agents.agents import ConfigError, DQNAgent, build_agent
from reference_agents.agents import load_config

BACKENDS = [b for b in os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",") if b]
CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "dqn_cartpole.yaml")


def small_config(**changes):
    """The CartPole config with a small replay and network, so the tests build fast."""
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg["memory"] = {"type": "replay", "capacity": 500}
    cfg["network"] = {"layers": [{"type": "dense", "units": 16, "activation": "relu"}], "dueling": True}
    cfg["update"] = {"batch_size": 8, "start_after": 16, "every": 2, "repeats": 1}
    cfg["target_sync"] = {"every": 1, "tau": 0.5}
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


@pytest.fixture(scope="module", params=BACKENDS)
def agent(request):
    return DQNAgent(small_config(), backend=request.param, seed=3)


def states(n, seed=0):
    # inside CartPole's observation space (the pole angle is bounded by 0.418 rad): validate mode checks it
    return (np.random.default_rng(seed).uniform(-1, 1, (n, 4)) * [1, 1, 0.4, 1]).astype(np.float32)


def batch(n, seed=0, gamma=0.99):
    rng = np.random.default_rng(seed)
    return {"states": states(n, seed), "actions": rng.integers(0, 2, n), "rewards": rng.normal(size=n),
            "terminals": rng.random(n) < 0.3, "next_states": states(n, seed + 1),
            "discounts": np.full(n, gamma ** 3)}


def test_actions_fit_the_action_space_single_and_batched(agent):
    acts = agent.get_actions(states(5))
    assert acts.shape == (5,) and acts.dtype == np.int64 and set(acts) <= {0, 1}
    one = agent.get_actions(states(1)[0], explore=False)
    assert np.ndim(one) == 0
    assert one == agent.get_actions(states(1), explore=False)[0]
    greedy = agent.get_actions(states(5), explore=False)
    np.testing.assert_array_equal(greedy, agent.q_values(states(5)).argmax(-1))
    with pytest.raises(ValueError, match=r"shape \(4,\).*got \(5, 3\)"):
        agent.get_actions(np.zeros((5, 3), np.float32))


def test_weights_round_trip_across_backends():
    if len(BACKENDS) < 2:
        pytest.skip("needs both backends")
    a = DQNAgent(small_config(), backend="tf", seed=1)
    b = DQNAgent(small_config(), backend="torch", seed=2)
    x = states(32)
    assert not np.allclose(a.q_values(x), b.q_values(x))
    b.set_weights(a.get_weights())
    np.testing.assert_allclose(b.q_values(x), a.q_values(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b.get_actions(x, explore=False), a.get_actions(x, explore=False))
    assert set(a.get_weights()) == {"network/dense_0/kernel", "network/dense_0/bias",
                                    "dueling_head/value/kernel", "dueling_head/value/bias",
                                    "dueling_head/advantage/kernel", "dueling_head/advantage/bias"}
    with pytest.raises(ValueError, match="missing"):
        b.set_weights({k: v for k, v in a.get_weights().items() if "value" not in k})


@pytest.mark.parametrize("source", BACKENDS)
def test_export_import_resumes_to_identical_actions(tmp_path, source):
    a = DQNAgent(small_config(), backend=source, seed=4)
    x = states(64)
    for _ in range(3):
        a.update(batch(16, seed=_))  # move the weights away from their initial values
    path = a.export_model(str(tmp_path / "model"))
    a.set_weights(a.get_weights())  # target := online, as an import does
    for target in BACKENDS:
        b = DQNAgent(small_config(), backend=target, seed=9)
        b.import_model(path)
        np.testing.assert_array_equal(b.get_actions(x, explore=False), a.get_actions(x, explore=False))
        # the import reached the target network too (else b's own initial target would differ)
        np.testing.assert_allclose(b.td_errors(batch(16, 5)), a.td_errors(batch(16, 5)), rtol=1e-4, atol=1e-5)
    bad = DQNAgent(small_config(network={"layers": [{"type": "dense", "units": 8, "activation": "relu"}]}),
                   backend=source)
    with pytest.raises(ValueError, match=r"import_model: .*model\.npz.*shape"):
        bad.import_model(path)
    with pytest.raises(ValueError, match=r"missing\.npz is missing"):
        bad.import_model(str(tmp_path / "missing.npz"))


def test_external_batch_updates_and_td_errors_match_numpy(agent):
    agent.set_weights(agent.get_weights())  # online == target, so the oracle needs one network only
    b = batch(32, seed=11)
    q, q_next = agent.q_values(b["states"]), agent.q_values(b["next_states"])
    best = q_next.argmax(-1)
    target = b["rewards"] + (1 - b["terminals"]) * b["discounts"] * q_next[np.arange(32), best]
    expected = target - q[np.arange(32), b["actions"]]
    np.testing.assert_allclose(agent.td_errors(b), expected, rtol=1e-4, atol=1e-5)
    before = agent.get_weights()
    out = agent.update(b)
    assert set(out) == {"loss", "grad_norm", "td_errors"} and out["td_errors"].shape == (32,)
    np.testing.assert_allclose(out["td_errors"], expected, rtol=1e-4, atol=1e-5)
    after = agent.get_weights()
    assert any(not np.allclose(before[k], after[k]) for k in before)
    with pytest.raises(ValueError, match=r"batch lacks \['next_states'\]"):
        agent.update({k: v for k, v in b.items() if k != "next_states"})


def test_truncation_bootstraps_and_termination_does_not():
    agent = DQNAgent(small_config(loss={"n_step": 2, "gamma": 0.5}), backend=BACKENDS[0])
    s = states(4)
    # env 0: truncated after one step (window of 1 step: bootstraps with gamma^1)
    agent.observe(s[:1], [1], [1.0], [False], s[1:2], env_id=[0], truncated=[True])
    # env 1: two steps then terminated
    agent.observe(s[:1], [0], [1.0], [False], s[1:2], env_id=[1])
    agent.observe(s[1:2], [1], [2.0], [True], s[2:3], env_id=[1])
    rows = [(r["terminals"], r["discounts"], r["rewards"]) for r in agent._staged]
    assert rows == [(False, 0.5, 1.0), (True, 0.25, 2.0), (True, 0.5, 2.0)]
    assert agent.timesteps == 3
    assert agent.flush() == 3 and agent.memory_size() == 3


def test_update_schedule_counts_env_steps():
    agent = DQNAgent(small_config(update={"batch_size": 4, "start_after": 8, "every": 4, "repeats": 2}),
                     backend=BACKENDS[0])
    done = []
    for t in range(16):
        agent.observe(states(1, t), [0], [0.0], [False], states(1, t + 1))
        done.append(len(agent.update_on_schedule()))
    # due at 8 env steps (2 updates), at 12 (2 more), at 16 (2 more)
    assert done == [0] * 7 + [2, 0, 0, 0, 2, 0, 0, 0, 2]
    assert agent.updates == 6


def test_update_from_memory_needs_enough_records():
    agent = DQNAgent(small_config(), backend=BACKENDS[0])
    with pytest.raises(RuntimeError, match="replay holds 0 records"):
        agent.update()


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_restores_everything_on_either_backend(tmp_path, backend):
    agent = DQNAgent(small_config(memory={"type": "prioritized", "capacity": 64}), backend=backend, seed=5)
    rng = np.random.default_rng(0)
    for t in range(40):
        agent.observe(states(2, t), rng.integers(0, 2, 2), [1.0, 0.0], [False, t % 7 == 0], states(2, t + 1))
        agent.update_on_schedule()
    agent.observe(states(1, 99), [1], [1.0], [False], states(1, 100), env_id=[0])  # an open n-step window
    agent.save_checkpoint(str(tmp_path / "ckpt"))
    for target in BACKENDS:
        other = DQNAgent.load_checkpoint(str(tmp_path / "ckpt"), backend=target)
        assert (other.timesteps, other.updates, other.memory_size()) == \
            (agent.timesteps, agent.updates, agent.memory_size())
        mine, theirs = agent.get_weights(everything=True), other.get_weights(everything=True)
        assert set(mine) == set(theirs)
        for key in mine:  # replay contents, priorities, optimizer moments, target network
            np.testing.assert_allclose(theirs[key], mine[key], rtol=1e-6, err_msg=key)
        # the open window of the saved episode is closed as cut short (the resumed run starts new episodes)
        open_steps = sum(len(a) for a in agent._accumulators.values())
        assert open_steps >= 1 and sum(len(a) for a in other._accumulators.values()) == 0
        assert len(other._staged) == open_steps and not any(c["terminals"] for c in other._staged)
        newest = [c for c in other._staged if c["discounts"] == pytest.approx(agent.gamma)
                  and np.array_equal(c["states"], states(1, 99)[0])]
        assert len(newest) == 1 and (newest[0]["actions"], newest[0]["rewards"]) == (1, 1.0)
        np.testing.assert_array_equal(newest[0]["next_states"], states(1, 100)[0])
    with pytest.raises(ValueError, match="holds no readable agent checkpoint"):
        DQNAgent.load_checkpoint(str(tmp_path / "nothing"))


def test_config_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    cfg = small_config()
    cfg["update"]["batch_size"] = 0
    cfg["memroy"] = {}
    bad.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as info:
        load_config(str(bad))
    text = str(info.value)
    assert str(bad) in text and "update.batch_size" in text and "memroy: Extra inputs" in text
    with pytest.raises(ConfigError, match=r"memory: PrioritizedReplay: alpha"):
        DQNAgent(small_config(memory={"type": "prioritized", "alpha": -1.0}), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match=r"network: .*layers\[0\].*unknown key 'unit'"):
        DQNAgent(small_config(network={"layers": [{"type": "dense", "unit": 3}]}), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match=r"env: DQN needs a discrete action space"):
        DQNAgent(small_config(), backend=BACKENDS[0], action_space="float32[2]")
    with pytest.raises(ConfigError, match="preprocessing must be stateless"):
        DQNAgent(small_config(preprocessing=[{"type": "frame_stack", "num_frames": 2, "batch_size": 1}]),
                 backend=BACKENDS[0])


def test_build_agent_finds_ready_configs_by_name():
    agent = build_agent("dqn_cartpole", backend=BACKENDS[0])
    assert agent.config.env.id == "CartPole-v1" and agent.num_actions == 2
    assert repr(agent.state_space).startswith("float32[4]")


def test_observing_without_updates_does_not_pile_up_staged_transitions():
    agent = DQNAgent(small_config(update={"batch_size": 8, "start_after": 10**9, "every": 1, "repeats": 1}),
                     backend=BACKENDS[0])
    for t in range(agent.flush_every + 5):
        agent.observe(states(1, t), [0], [0.0], [False], states(1, t + 1))
    assert len(agent._staged) < agent.flush_every
    assert agent.memory_size() + len(agent._staged) == agent.flush_every + 5 - (agent.n_step - 1)
