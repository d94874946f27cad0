"""`VectorEnvWorker` driving the real `DQNAgent` (PyTorch, CartPole-v1 config): short runs, no learning asserts."""

from __future__ import annotations

import os

import numpy as np
import pytest

from reference_agents.workers import VectorEnvWorker

agents = pytest.importorskip("reference_agents.agents")
CONFIG = os.path.join(os.path.dirname(agents.__file__), "..", "configs", "dqn_cartpole.yaml")


def make_agent(exploration=None, **sections):
    """The CartPole DQN agent with config sections changed (``update={"start_after": 50}``) or, for
    ``exploration``, replaced. Tests pin every setting they rely on, so tuning the file breaks none."""
    config, _ = agents.load_config(CONFIG, {"backend": "torch", "seed": 3})
    raw = config.model_dump(by_alias=True)
    for name, values in sections.items():
        raw[name] = {**raw[name], **values}
    if exploration is not None:
        raw["exploration"] = exploration
    return agents.DQNAgent(raw)


def replay(agent):
    agent.flush()
    return {k: v for k, v in agent.get_weights(everything=True).items() if k.startswith("dqn/memory/")}


def test_runs_observes_and_updates_on_schedule():
    agent = make_agent(update={"start_after": 60, "batch_size": 16, "every": 4, "repeats": 1}, loss={"n_step": 1})
    worker = VectorEnvWorker.for_agent(agent, num_envs=2)
    assert worker.env_id == "CartPole-v1" and worker.seed == 3
    stats = worker.run(num_steps=120)
    assert agent.timesteps == 120 == stats.steps and agent.memory_size() == 120
    assert stats.num_updates == agent.updates > 0
    assert stats.last_loss == pytest.approx(agent.last_metrics["loss"])
    assert sum(e.length for e in stats.episodes) <= 120 and stats.episodes
    timesteps, size, updates = agent.timesteps, agent.memory_size(), agent.updates
    returns = worker.evaluate(2, max_steps=60)
    assert agent.timesteps == timesteps and agent.memory_size() == size and agent.updates == updates
    assert len(returns) <= 2 and all(r > 0 for r in returns)


def test_worker_side_n_step_fills_replay_like_agent_side_folding():
    # a constant epsilon and no updates: both agents (same seed, same weights, same coins) take the same
    # actions, though worker-side folding makes the agent count its steps later (the epsilon would differ)
    kwargs = {"num_envs": 2, "seed": 5, "env_kwargs": {"max_episode_steps": 20}, "update": False}
    constant = {"type": "constant", "value": 0.5}
    agent_side = make_agent(constant, loss={"n_step": 3})
    VectorEnvWorker.for_agent(agent_side, **kwargs).run(num_steps=200)
    worker_side = make_agent(constant, loss={"n_step": 3})
    VectorEnvWorker.for_agent(worker_side, worker_side_n_step=True, **kwargs).run(num_steps=200)
    a, w = replay(agent_side), replay(worker_side)
    size = int(a["dqn/memory/size"])
    assert size > 190 and int(w["dqn/memory/size"]) == size
    for key in a:
        np.testing.assert_array_equal(w[key], a[key], err_msg=key)
    discounts = a["dqn/memory/records/discounts"][:size]
    terminals = a["dqn/memory/records/terminals"][:size]
    gamma = agent_side.gamma
    # windows cut by the 20-step time limit bootstrap with gamma^k, k < 3, and are not terminal
    assert np.any(~terminals & np.isclose(discounts, gamma)) and np.any(terminals)
    assert np.all(np.isclose(discounts, gamma) | np.isclose(discounts, gamma ** 2) | np.isclose(discounts, gamma ** 3))


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_sample_priorities_come_from_the_act_time_q_values(backend, monkeypatch):
    config, _ = agents.load_config(CONFIG, {"backend": backend, "seed": 3})
    agent = agents.DQNAgent(dict(config.model_dump(by_alias=True), loss={**config.loss.model_dump(), "n_step": 3}))
    seen = {}       # observation bytes -> the Q-values the agent computed for it
    calls = []      # the executor's API calls
    execute = agent.executor.execute

    def counting(method, *args):
        calls.append(method)
        out = execute(method, *args)
        if method in ("act_and_q_values", "q_values"):
            q = np.asarray(out[1] if method == "act_and_q_values" else out)
            for row, values in zip(np.asarray(args[0]), q):
                seen[row.tobytes()] = values.astype(np.float64)
        return out

    monkeypatch.setattr(agent.executor, "execute", counting)
    worker = VectorEnvWorker.for_agent(agent, num_envs=2, observe=False, compute_priorities=True, update=False,
                                       env_kwargs={"max_episode_steps": 12})
    assert (worker.n_step, worker.gamma) == (3, agent.gamma)
    batch = worker.sample(60)
    sampling = list(calls)
    assert agent.timesteps == 0 and agent.memory_size() == 0
    # one forward pass per lockstep step; q_values only on the final observations of time-limited episodes
    steps_with_truncation = len({e.end_step for e in batch.stats.episodes if e.truncated})
    assert steps_with_truncation > 0
    assert sampling.count("act_and_q_values") == 30 and sampling.count("q_values") == steps_with_truncation
    assert set(sampling) == {"act_and_q_values", "q_values"}
    r = batch.records
    assert len(batch) >= 50 and len(batch.priorities) == len(batch)
    # the NumPy oracle: |R + discount * (1 - terminal) * max_a Q(s', a) - Q(s, a)| from the recorded values
    q_s = np.stack([seen[s.tobytes()] for s in r["states"]])[np.arange(len(batch)), r["actions"]]
    best_next = np.stack([seen[s.tobytes()] for s in r["next_states"]]).max(axis=1)
    want = np.abs(r["rewards"] + r["discounts"] * (1.0 - r["terminals"]) * best_next - q_s)
    np.testing.assert_allclose(batch.priorities, want, rtol=1e-5, atol=1e-6)
    assert batch.priorities.std() > 0
