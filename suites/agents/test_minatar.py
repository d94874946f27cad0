"""MinAtar games as agent environments (reference_agents/minatar.py): every id makes and steps with uint8
observations, the DQN config learns a few updates on every game on both backends, and without the extra the
error (and the skip reason) says how to install it."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import yaml

from harness.spaces import IntBox
from reference_agents import minatar
from reference_agents.environments import env_spaces, frames_per_step, make_env

BACKENDS = [b for b in os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",") if b]
CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs")
needs_minatar = pytest.mark.skipif(minatar.missing() is not None, reason=str(minatar.missing()))
#: Channels per game (the package's state_shape), and the minimal action count of the -v1 ids.
CHANNELS = {"Asterix": 4, "Breakout": 4, "Freeway": 7, "Seaquest": 10, "SpaceInvaders": 6}
MINIMAL_ACTIONS = {"Asterix": 5, "Breakout": 3, "Freeway": 3, "Seaquest": 6, "SpaceInvaders": 4}


@needs_minatar
@pytest.mark.parametrize("env_id", minatar.env_ids())
def test_every_id_makes_and_steps_with_uint8_observations(env_id):
    title, version = env_id.removeprefix("MinAtar/").rsplit("-v", 1)
    env = make_env(env_id)
    try:
        obs, _ = env.reset(seed=3)
        shape = (10, 10, CHANNELS[title])
        assert obs.shape == shape and obs.dtype == np.uint8 and env.observation_space.contains(obs)
        assert env.action_space.n == (6 if version == "0" else MINIMAL_ACTIONS[title])
        assert frames_per_step(env) == 1.0
        rng, total, steps = np.random.default_rng(0), 0.0, 0
        while steps < 300:
            obs, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            assert obs.dtype == np.uint8 and set(np.unique(obs)) <= {0, 1} and obs.shape == shape
            total, steps = total + reward, steps + 1
            if terminated or truncated:
                env.reset()
        assert np.isfinite(total)
    finally:
        env.close()
    state, action = env_spaces(env_id)
    assert isinstance(state, IntBox) and state.shape == shape and int(state.high.max()) == 1
    assert int(action.high) + 1 == env.action_space.n


@needs_minatar
def test_the_same_seed_replays_the_same_game():
    def play(seed):
        env = make_env("MinAtar/SpaceInvaders-v0")
        obs = [env.reset(seed=seed)[0]]
        obs += [env.step(i % 6)[0] for i in range(60)]
        env.close()
        return np.stack(obs)

    np.testing.assert_array_equal(play(5), play(5))
    assert not np.array_equal(play(5), play(6))
    # seeds past the package's 32 bits (Ape-X workers derive such seeds) are mapped into them, still distinct
    np.testing.assert_array_equal(play(2 ** 40), play(2 ** 40))
    assert not np.array_equal(play(2 ** 40), play(2 ** 40 + 1))


def small_config(game: str, name: str = "dqn_minatar_breakout") -> dict:
    """The MinAtar DQN config on ``game`` with a small replay and an early start, so a few updates run."""
    with open(os.path.join(CONFIGS, name + ".yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["env"]["id"] = f"MinAtar/{game}-v0"
    cfg["memory"]["capacity"] = 500
    cfg["update"] = {**cfg["update"], "batch_size": 8, "start_after": 40}
    cfg["target_sync"]["every"] = 5
    return cfg


@needs_minatar
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("game", sorted(CHANNELS))
def test_the_dqn_config_updates_on_every_game(game, backend):
    from reference_agents.agents import DQNAgent
    from reference_agents.workers.vector_worker import VectorEnvWorker

    agent = DQNAgent(small_config(game), backend=backend, seed=1)
    before = agent.q_values(np.zeros((1, 10, 10, CHANNELS[game]), np.uint8))
    worker = VectorEnvWorker.for_agent(agent)
    try:
        worker.run(num_steps=80)
    finally:
        worker.close()
    assert worker.total_steps == 80 and 30 <= worker.total_updates <= 41
    assert worker.last_loss is not None and np.isfinite(worker.last_loss)
    after = agent.q_values(np.zeros((1, 10, 10, CHANNELS[game]), np.uint8))
    assert after.shape == (1, 6) and not np.allclose(before, after)


def test_configs_name_the_papers_settings():
    for name in ("dqn_minatar_breakout", "apex_minatar_breakout"):
        from reference_agents.agents import load_config

        cfg, _ = load_config(os.path.join(CONFIGS, name + ".yaml"))
        assert cfg.env.id == "MinAtar/Breakout-v0"   # all 6 actions, as the published curves
        assert [layer.get("filters") or layer.get("units") for layer in cfg.network.layers] == [16, None, 128]
        assert cfg.optimizer.type == "rmsprop" and cfg.optimizer.learning_rate == 0.00025
        # PyTorch's RMSprop(alpha=0.95, eps=0.01, centered=True), as the paper's code: epsilon outside the root
        extra = cfg.optimizer.model_extra
        assert (extra["decay"], extra["epsilon"], extra["centered"], extra["epsilon_outside"]) == (0.95, 0.01, True, True)
        assert cfg.memory.capacity == 100_000 and cfg.update.batch_size == 32 and cfg.target_sync.every == 1000


def test_without_the_extra_a_minatar_id_says_how_to_install_it(monkeypatch):
    import gymnasium

    monkeypatch.setitem(sys.modules, "minatar", None)       # `import minatar` now raises ImportError
    monkeypatch.setitem(sys.modules, "minatar.gym", None)
    registry = {k: v for k, v in gymnasium.registry.items() if not k.startswith("MinAtar/")}
    monkeypatch.setattr(gymnasium, "registry", registry)
    assert minatar.missing() == "minatar extra not installed: pip install '.[minatar]'"
    assert minatar.register() is False and "MinAtar/Breakout-v0" not in registry
    with pytest.raises(ValueError, match=r"make_env: 'MinAtar/Breakout-v0' is a MinAtar game; minatar extra not "
                                         r"installed: pip install '\.\[minatar\]'"):
        make_env("MinAtar/Breakout-v0")
    with pytest.raises(ValueError, match=r"game must be one of .*'breakout'.*got 'pong'"):
        minatar.make_minatar("pong")


@needs_minatar
def test_the_apex_config_acts_and_learns_on_minatar_with_local_workers():
    from reference_agents.agents.apex import ApexDriver, load_apex_config
    from reference_agents.training.apex import make_actor_executor

    cfg = small_config("Breakout", "apex_minatar_breakout")
    cfg["memory"]["capacity"] = 1000
    config, _ = load_apex_config(cfg)
    driver = ApexDriver(config, make_actor_executor("local"))
    try:
        driver.run(num_steps=300)
        ledger = driver.ledger()
    finally:
        driver.close()
    assert driver.worker_failures == [] and driver.shard_failures == []
    assert ledger["produced"] > 0 and ledger["learned"] > 0
