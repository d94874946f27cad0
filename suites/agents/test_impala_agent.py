"""The IMPALA agent: rollouts (layout, episode ends, truncation), the learner's view of them against NumPy
oracles and the actor's behaviour logits, the loss, weights, models and checkpoints, config errors."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from reference_agents.agents import ConfigError, IMPALAAgent, build_agent, load_checkpoint
from reference_agents.agents.impala import RolloutBuilder, concat_rollouts
from reference_agents.oracles.common import dense
from reference_agents.oracles.losses import impala_loss
from reference_agents.oracles.nn import lstm_apply_with_resets, network
from reference_agents.workers import VectorEnvWorker

BACKENDS = [b for b in os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",") if b]
CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "impala_cartpole.yaml")
LAYERS = [{"type": "dense", "units": 16, "activation": "tanh"}]


def small_config(lstm_units=None, **changes):
    """The CartPole config with a small network, 4 environments and rollouts of 12 steps."""
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg["env"] = {"id": "CartPole-v1", "num_envs": 4}
    cfg["network"] = {"layers": LAYERS, "lstm_units": lstm_units}
    cfg["rollout"] = {"length": 12, "batch_size": 2}
    cfg["loss"] = {**cfg["loss"], "gamma": 0.9, "entropy_cost": 0.05, "rho_bar": 1.5, "c_bar": 0.8}
    cfg.update(changes)
    return cfg


@pytest.fixture(scope="module", params=[(b, u) for b in BACKENDS for u in (None, 6)],
                ids=lambda p: f"{p[0]}-{'lstm' if p[1] else 'ff'}")
def agent(request):
    backend, units = request.param
    return IMPALAAgent(small_config(units), backend=backend, seed=5)


def collect(agent, rollouts=2, seed=0):
    """Rollouts from CartPole under the agent's policy (nothing learns); episodes end inside them."""
    worker = VectorEnvWorker.for_agent(agent, seed=seed, update=False)
    agent.outbox.clear()
    steps = rollouts * agent.config.rollout.length * agent.config.env.num_envs
    worker.run(num_steps=steps)
    out = list(agent.outbox)
    agent.outbox.clear()
    return out


def oracle_view(agent, rollout):
    """NumPy logits ``[T+1,N,A]`` and values ``[T+1,N]`` of a rollout under the agent's current weights."""
    w = {k.split("/", 1)[1]: v for k, v in agent.get_weights().items()}  # relative to the root scope
    x = network(rollout["rollout_states"], w, LAYERS, prefix="torso/")
    if agent.recurrent:
        out, _ = lstm_apply_with_resets({"inputs": x.transpose(1, 0, 2), "initial_state": rollout["initial_state"],
                                         "resets": rollout["resets"].T},
                                        {"kernel": w["lstm/kernel"], "bias": w["lstm/bias"]},
                                        {"units": agent.units})
        x = out.transpose(1, 0, 2)
    logits = dense(x, w, {}, prefix="policy/logits/")
    values = dense(x, w, {}, prefix="value/")[..., 0]
    return logits, values


# ---- rollouts -----------------------------------------------------------------------------------------------
def test_rollout_builder_cuts_time_major_rollouts_with_episode_starts():
    builder = RolloutBuilder(3, recurrent=True)
    state = (np.ones((2, 1)), np.ones((2, 1)))
    outs = []
    for t in range(6):
        s = np.full((2, 1), t, np.float32)
        outs.append(builder.add(s, [t % 2, 1], [1.0, 2.0], [0.0 if t == 1 else 1.0, 1.0], np.zeros((2, 3)),
                                s + 0.5, np.array([t == 2, t == 0]), state))
    assert [o is None for o in outs] == [True, True, False, True, True, False]
    first, second = outs[2], outs[5]
    assert first["rollout_states"].shape == (4, 2, 1) and first["actions"].shape == (3, 2)
    np.testing.assert_array_equal(first["rollout_states"][:, 0, 0], [0, 1, 2, 2.5])  # last row: next state
    np.testing.assert_array_equal(first["discounts"][:, 0], [1, 0, 1])
    # env 0 starts an episode at step 2 (after the end at step 1); env 1's start at step 0 is in the state already
    np.testing.assert_array_equal(first["resets"], [[False, False], [False, False], [True, False], [False, False]])
    assert (first["tag"], second["tag"]) == (0, 1)
    both = concat_rollouts([first, second])
    assert both["actions"].shape == (3, 4) and both["initial_state"][0].shape == (4, 1) and both["tag"] == [0, 1]
    with pytest.raises(ValueError, match="different lengths"):
        concat_rollouts([first, {**second, "actions": second["actions"][:2]}])


def test_observe_needs_the_sampled_step_and_bootstraps_time_limits(agent):
    with pytest.raises(ValueError, match="last get_actions"):
        agent.observe(np.zeros((4, 4), np.float32), [0, 1, 0, 1], np.ones(4), np.zeros(4, bool),
                      np.zeros((4, 4), np.float32))
    agent.outbox.clear()
    agent.reset_preprocessor(range(4))
    rng = np.random.default_rng(1)
    rows, finals = [], []
    for t in range(agent.config.rollout.length):
        s = (rng.uniform(-1, 1, (4, 4)) * [1, 1, 0.2, 1]).astype(np.float32)
        nxt = (s * 0.9).astype(np.float32)
        actions = agent.get_actions(s)
        truncated = np.array([t == 3, False, False, False])
        if t == 3:
            finals = agent.values(nxt) if not agent.recurrent else None
            after = agent._last["after"]
        agent.observe(s, actions, np.ones(4), np.zeros(4, bool), nxt, truncated=truncated)
        rows.append(s)
    rollout = agent.outbox.popleft()
    assert rollout["discounts"][3, 0] == 0.0 and rollout["discounts"][3, 1] == 1.0
    if finals is not None:
        np.testing.assert_allclose(rollout["rewards"][3, 0], 1.0 + agent.gamma * finals[0], rtol=1e-5)
    else:
        boot = agent.executor.execute("values_recurrent", (rows[3] * 0.9).astype(np.float32), after)
        np.testing.assert_allclose(rollout["rewards"][3, 0], 1.0 + agent.gamma * np.asarray(boot)[0], rtol=1e-5)
    assert rollout["rewards"][3, 1] == 1.0


# ---- the learner's view against oracles and the actor ---------------------------------------------------
def test_learner_sees_the_actors_behaviour_logits_and_the_oracles(agent):
    rollouts = collect(agent)
    assert len(rollouts) == 2 and any((r["discounts"] == 0).any() for r in rollouts), "no episode ended inside"
    for rollout in rollouts:
        logits, values = agent.rollout_logits(rollout)
        np.testing.assert_allclose(logits[:-1], rollout["behaviour_logits"], rtol=1e-4, atol=1e-5)
        want_logits, want_values = oracle_view(agent, rollout)
        np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(values, want_values, rtol=1e-4, atol=1e-5)


def test_a_learner_that_ignores_episode_starts_is_caught():
    agent = IMPALAAgent(small_config(6), backend=BACKENDS[-1], seed=5)
    rollout = next(r for r in collect(agent, rollouts=4) if r["resets"].any())
    planted = dict(rollout, resets=np.zeros_like(rollout["resets"]))  # the learner forgets the restarts
    logits, _ = agent.rollout_logits(planted)
    assert not np.allclose(logits[:-1], rollout["behaviour_logits"], rtol=1e-4, atol=1e-5)


def test_update_is_the_vtrace_loss_of_the_oracle_and_learns(agent):
    rollouts = collect(agent, seed=1)
    batch = concat_rollouts(rollouts)
    logits, values = oracle_view(agent, batch)
    cfg = agent.config.loss.model_dump()
    want = impala_loss({"logits": logits[:-1], "actions": batch["actions"], "behaviour_logits": batch["behaviour_logits"],
                        "rewards": batch["rewards"], "discounts": batch["discounts"], "values": values[:-1],
                        "bootstrap_value": values[-1]}, {}, cfg)
    before = agent.get_weights()
    metrics = agent.update(rollouts)
    np.testing.assert_allclose([metrics[k] for k in ("loss", "pg", "baseline", "entropy")],
                               [float(v) for v in want], rtol=1e-4, atol=1e-4)
    after = agent.get_weights()
    assert any(not np.allclose(before[k], after[k]) for k in before)
    assert metrics["rollouts"] == agent.rollouts_learned
    z = logits[:-1] - logits[:-1].max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    assert metrics["policy_entropy"] == pytest.approx(-(np.exp(log_p) * log_p).sum(-1).mean(), rel=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_policy_entropy_is_per_step_whatever_the_loss_reduction(backend):
    summed, meaned = (IMPALAAgent(small_config(loss={**small_config()["loss"], "reduction": r}), backend=backend,
                                  seed=3) for r in ("sum", "mean"))
    rollouts = collect(summed, seed=2)
    a, b = summed.update(rollouts), meaned.update(rollouts)
    assert a["entropy"] == pytest.approx(b["entropy"] * 2 * 12 * 4, rel=1e-5)   # the loss term: summed over [T, N]
    assert a["policy_entropy"] == pytest.approx(b["policy_entropy"], rel=1e-5)
    assert 0 < a["policy_entropy"] <= np.log(2) + 1e-6   # CartPole: 2 actions


@pytest.mark.parametrize("backend", BACKENDS)
def test_epochs_take_that_many_steps_on_the_batch_and_report_the_first(backend):
    once, thrice = (IMPALAAgent(small_config(), backend=backend, seed=3),
                    IMPALAAgent(small_config(rollout={"length": 12, "batch_size": 2, "epochs": 3}), backend=backend,
                                seed=3))
    rollouts = collect(once, seed=2)
    first = once.update(rollouts)
    for _ in range(2):
        once.update(rollouts)
    got = thrice.update(rollouts)
    want, have = once.get_weights(), thrice.get_weights()
    for k in want:
        np.testing.assert_allclose(have[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert got["loss"] == pytest.approx(first["loss"], rel=1e-5) and thrice.updates == 3 == once.updates
    assert got["rollouts"] == 2 and once.rollouts_learned == 6


# ---- weights, models, checkpoints, configs --------------------------------------------------------------------
def test_weights_travel_between_backends_and_models_round_trip(tmp_path):
    if len(BACKENDS) < 2:
        pytest.skip("needs both backends")
    tf_agent, torch_agent = (IMPALAAgent(small_config(6), backend=b, seed=s) for b, s in (("tf", 1), ("torch", 2)))
    states = np.random.default_rng(0).uniform(-0.2, 0.2, (5, 4)).astype(np.float32)
    torch_agent.set_weights(tf_agent.get_weights())
    np.testing.assert_allclose(torch_agent.values(states), tf_agent.values(states), rtol=1e-5, atol=1e-6)
    path = tf_agent.export_model(tmp_path / "model")
    fresh = IMPALAAgent(small_config(6), backend="torch", seed=9)
    fresh.import_model(path)
    np.testing.assert_allclose(fresh.values(states), tf_agent.values(states), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="missing"):
        fresh.set_weights({k: v for k, v in tf_agent.get_weights().items() if "lstm" not in k})
    with pytest.raises(ValueError, match=r"model\.npz does not fit this agent: .*unexpected \['impala/lstm/bias'"):  # an LSTM model, no LSTM
        IMPALAAgent(small_config(None), backend="torch").import_model(path)
    (tmp_path / "other.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"other\.npz is damaged: truncated, corrupted or not an \.npz archive"):
        fresh.import_model(tmp_path / "other.npz")


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoints_restore_weights_counters_and_waiting_rollouts(backend, tmp_path):
    agent = build_agent(small_config(6), backend=backend, seed=2)
    assert isinstance(agent, IMPALAAgent)
    rollouts = collect(agent, rollouts=3)
    agent.update(rollouts[:2])
    agent.outbox.append(rollouts[2])
    agent.save_checkpoint(str(tmp_path))
    restored = load_checkpoint(str(tmp_path))
    assert isinstance(restored, IMPALAAgent) and restored.backend == backend
    assert (restored.updates, restored.timesteps, restored.rollouts_learned) == (1, agent.timesteps, 2)
    for k, v in agent.get_weights(everything=True).items():
        np.testing.assert_array_equal(restored.get_weights(everything=True)[k], v)
    assert len(restored.outbox) == 1
    np.testing.assert_array_equal(restored.outbox[0]["resets"], rollouts[2]["resets"])
    np.testing.assert_array_equal(restored.outbox[0]["initial_state"][1], rollouts[2]["initial_state"][1])
    restored.update([restored.outbox.popleft()])
    assert restored.updates == 2 and restored.rollouts_learned == 3


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"network.lstm_units"):
        IMPALAAgent(small_config(0), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match=r"rollout.length"):
        IMPALAAgent(small_config(None, rollout={"length": 101}), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match=r"rollout.epochs"):
        IMPALAAgent(small_config(None, rollout={"length": 12, "epochs": 0}), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match=r"agent"):
        build_agent({**small_config(None), "agent": "a3c"}, backend=BACKENDS[0])
    with pytest.raises(ConfigError, match=r"loss.c_bar"):
        IMPALAAgent(small_config(None, loss={"c_bar": -1.0}), backend=BACKENDS[0])


def test_the_impala_resnet_preset_builds_acts_and_learns_on_pong_frames():
    from reference_agents.components.nn import impala_resnet_layers

    with open(CONFIG.replace("impala_cartpole", "impala_pong")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["env"]["num_envs"] = 2
    cfg["network"] = {"layers": "impala_resnet", "lstm_units": None}
    cfg["rollout"] = {"length": 3, "batch_size": 1}
    agent = IMPALAAgent(cfg, backend=BACKENDS[-1], seed=1)
    torso = {k: v for k, v in agent.get_weights().items() if "/torso/" in f"/{k}"}
    assert sum(v.size for v in torso.values()) == 1_089_232
    assert sum(1 for k in torso if "residual_block" in k) == 6 * 4  # 6 blocks: 2 kernels and 2 biases each
    rollout = collect(agent, rollouts=1)[0]
    assert rollout["rollout_states"].shape[:2] == (4, 2)
    before = agent.get_weights()
    agent.update(rollout)
    changed = [k for k, v in agent.get_weights().items() if not np.array_equal(v, before[k])]
    assert any("residual_block_2/conv_a/kernel" in k for k in changed)
    with pytest.raises(ConfigError, match=r"network.layers"):
        IMPALAAgent({**cfg, "network": {"layers": "resnet", "lstm_units": None}}, backend=BACKENDS[-1])
    assert impala_resnet_layers()[2] == {"type": "residual_block", "filters": 16}
