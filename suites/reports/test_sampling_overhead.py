"""The hand-written loop of the sampling-overhead comparison computes what the agent computes, and is measured."""

import numpy as np
import pytest

from spacegraph.reports import sampling_contenders as sc
from spacegraph.reports.sampling_overhead import comparable_config, make_contenders, measure


def _agent(backend, config=sc.CARTPOLE_CONFIG, **network):
    from reference_agents.agents import DQNAgent

    cfg = sc.load_config(config)
    cfg["network"] = {**cfg["network"], **network}
    return DQNAgent(cfg, backend=backend, seed=3)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_the_hand_written_q_network_is_the_agents(backend):
    agent = _agent(backend)
    q = sc.q_network_by_hand(agent)  # checks itself against agent.q_values on drawn states
    states = np.random.default_rng(1).uniform(-0.4, 0.4, (7, 4)).astype(np.float32)  # inside the pole-angle bound
    np.testing.assert_allclose(q(states), agent.q_values(states), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_the_hand_written_nature_network_takes_uint8_frames(backend):
    agent = _agent(backend, sc.PONG_CONFIG)
    frames = np.random.default_rng(2).integers(0, 256, (3, 84, 84, 4), dtype=np.uint8)
    np.testing.assert_allclose(sc.q_network_by_hand(agent)(frames), agent.q_values(frames), rtol=1e-4, atol=1e-4)


def test_a_hand_written_network_that_differs_is_refused(monkeypatch):
    agent = _agent("torch")
    wrong = sc._dueling_mlp

    def swapped(backend, k0, b0, vk, vb, ak, ab):  # the biases of the two streams swapped in: a planted bug
        return wrong(backend, k0, b0, vk, vb + 0.5, ak, ab)
    monkeypatch.setattr(sc, "_dueling_mlp", swapped)
    with pytest.raises(AssertionError):
        sc.q_network_by_hand(agent)


def test_other_networks_are_named():
    agent = _agent("torch", layers=[{"type": "dense", "units": 8, "activation": "relu"}] * 2)
    with pytest.raises(ValueError, match=r"no hand-written network for the layers \['dense_0', 'dense_1'\]"):
        sc.q_network_by_hand(agent)


def test_the_direct_loop_steps_and_acts_greedily_at_epsilon_zero():
    agent = _agent("torch")
    loop = sc.DirectLoopContender(agent, sc.env_factory(sc.load_config(sc.CARTPOLE_CONFIG)), 3, epsilon=0.0)
    obs = loop.obs
    steps, frames = loop.chunk(1)
    assert (steps, frames) == (3, 3)
    greedy = np.argmax(agent.q_values(obs), -1)
    # the same environments, reset with the same seed and stepped with the greedy actions, give the same states
    check = sc.DirectLoopContender(agent, sc.env_factory(sc.load_config(sc.CARTPOLE_CONFIG)), 3, epsilon=0.0)
    np.testing.assert_array_equal(check.envs.step(greedy)[5], loop.obs)
    loop.close()
    check.close()


def test_measure_gives_both_ratios_for_one_point():
    out = measure("torch", "cartpole", 2, seconds=0.2, rounds=2)
    assert out["direct_frames_per_cpu_s"] > 0 and out["worker_frames_per_cpu_s"] > 0
    assert out["worker_hand_over_direct"] > 0 and out["worker_traced_over_direct"] > 0
    assert out["worker_eager_over_direct"] > 0
    with pytest.raises(ValueError, match="config must be one of"):
        measure("torch", "breakout", 1)


def test_the_hand_acting_agent_is_the_agents_greedy_policy_with_numpy_exploration():
    agent = _agent("torch")
    states = agent.state_space.with_batch_rank().sample(size=400, rng=3)
    greedy = np.argmax(agent.q_values(states), -1)
    never = sc.HandActingAgent(agent, 2, epsilon=0.0)
    np.testing.assert_array_equal(never.get_actions(states), greedy)
    always = sc.HandActingAgent(agent, 2, epsilon=1.0, seed=5)
    np.testing.assert_array_equal(always.get_actions(states, explore=False), greedy)
    drawn = always.get_actions(states)
    assert set(drawn.tolist()) == {0, 1} and abs(drawn.mean() - 0.5) < 0.1  # uniform: 0.5 +- 4 sd at n=400


@pytest.mark.parametrize("config", ["cartpole", "pong"])
def test_the_framework_side_explores_at_the_loops_constant_epsilon(config):
    cfg = comparable_config(config)
    assert cfg["exploration"] == {"type": "constant", "value": sc.HAND_EPSILON}
    assert cfg["env"] == sc.load_config(sc.PONG_CONFIG if config == "pong" else sc.CARTPOLE_CONFIG)["env"]
    with pytest.raises(ValueError, match="config must be one of"):
        comparable_config("breakout")


def test_both_sides_end_episodes_alike():
    # Every episode end costs a reset and the worker's bookkeeping, so the framework's side must explore at the
    # loop's rate: with the config's own schedule (epsilon 1.0 at time step 0) its episodes lasted twice as long.
    contenders = make_contenders("torch", "cartpole", 4)
    try:
        agent = contenders["worker_act"].worker.agent
        for t in (0, 5_000, 10**7):
            assert agent.executor.execute("epsilon", np.int64(t)) == np.float32(sc.HAND_EPSILON)
        counts = {}
        for name in ("worker_act", "worker_hand"):   # the framework's act and the loop's, in the same worker
            contenders[name].chunk(4000)
            counts[name] = len(contenders[name].worker.episodes)
        # ~380 episodes of ~10.5 steps each; the two counts differ by a few (their lengths' sd is ~2 steps)
        assert abs(counts["worker_act"] - counts["worker_hand"]) <= 0.1 * counts["worker_hand"], counts
    finally:
        for contender in contenders.values():
            contender.close()


def test_ratios_are_medians_of_per_round_ratios(monkeypatch):
    """Each ratio pairs the two contenders round by round: a round in which the machine ran slow for both
    (round 2 below) leaves the ratio alone, where the ratio of the two medians moved with it."""
    from spacegraph.reports import sampling_measure, sampling_overhead

    rounds = {"direct": [100.0, 50.0, 100.0], "worker_act": [90.0, 45.0, 30.0], "worker": [60.0, 30.0, 60.0],
              "worker_hand": [95.0, 47.5, 95.0], "worker_traced": [80.0, 70.0, 85.0],
              "worker_eager": [70.0, 40.0, 80.0]}

    def fake_time(contenders, **_):
        assert set(contenders) == set(rounds)
        return {name: {"frames_per_cpu_s_median": sorted(r)[1], "frames_per_cpu_s_rounds": r}
                for name, r in rounds.items()}

    closed = []
    fakes = {name: type("C", (), {"close": lambda self, n=name: closed.append(n)})() for name in rounds}
    monkeypatch.setattr(sampling_overhead, "make_contenders", lambda *a: fakes)
    monkeypatch.setattr(sampling_measure, "time_contenders", fake_time)
    out = sampling_overhead.measure("torch", "cartpole", 1)
    assert out["worker_act_over_direct"] == pytest.approx(0.9)        # 0.9, 0.9, 0.3: not 45 / 100
    assert out["worker_over_direct"] == pytest.approx(0.6)
    assert out["worker_hand_over_direct"] == pytest.approx(0.95)
    assert out["worker_traced_over_direct"] == pytest.approx(0.85)    # 0.8, 1.4, 0.85
    assert out["worker_eager_over_direct"] == pytest.approx(0.8)      # 0.7, 0.8, 0.8
    assert out["worker_act_frames_per_cpu_s"] == 45.0 and sorted(closed) == sorted(rounds)
    with pytest.raises(ValueError, match="same number of rounds"):
        sampling_overhead.paired_ratio([1.0, 2.0], [1.0])
