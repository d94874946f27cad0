"""`VectorEnvWorker` with a fake agent, against CartPole/Pong stepped by hand with the same seeds."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest

from harness.spaces import FloatBox, from_gymnasium
from reference_agents.components.helpers import n_step_transitions
from reference_agents.workers import Episode, VectorEnvWorker, frames_per_step, make_env
from suites.doubles import ScriptedEnv

LIMIT = {"max_episode_steps": 30}  # random CartPole episodes last ~10-60 steps: both endings occur


def hand_stepped(policy, num_envs, seed, steps, env_id="CartPole-v1", env_kwargs=LIMIT, num_actions=2):
    """Each environment stepped on its own (seed + i) with the policy applied to one observation at a time."""
    out = []
    for i in range(num_envs):
        env = gymnasium.make(env_id, **env_kwargs)
        obs, _ = env.reset(seed=seed + i)
        rows = []
        for _ in range(steps):
            a = int(policy(obs[None], num_actions)[0])
            nxt, r, term, trunc, _ = env.step(a)
            reset = env.reset()[0] if term or trunc else None
            rows.append({"obs": obs, "action": a, "reward": float(r), "next": nxt, "term": term, "trunc": trunc,
                         "reset": reset})
            obs = nxt if reset is None else reset
        out.append(rows)
    return out


def expected_episodes(rows):
    """Finished episodes in lockstep order (step, then env), as the worker numbers them."""
    n = len(rows)
    ret, length, out = [0.0] * n, [0] * n, []
    for t in range(len(rows[0])):
        for i in range(n):
            row = rows[i][t]
            ret[i] += row["reward"]
            length[i] += 1
            if row["term"] or row["trunc"]:
                out.append(Episode(i, ret[i], length[i], row["term"], row["trunc"], (t + 1) * n, (t + 1) * n))
                ret[i], length[i] = 0.0, 0
    return out


def test_episode_accounting_matches_hand_stepped_envs(cartpole_agent, policies):
    n, seed, steps = 3, 7, 100
    agent = cartpole_agent()
    worker = VectorEnvWorker(agent, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT)
    stats = worker.run(num_steps=n * steps)
    want = expected_episodes(hand_stepped(policies[0], n, seed, steps))
    assert any(e.terminated for e in want) and any(e.truncated for e in want)
    assert worker.episodes == want
    assert stats.episodes == want
    assert stats.steps == stats.total_steps == n * steps and stats.frames == n * steps
    assert stats.mean_return_100 == pytest.approx(np.mean([e.episode_return for e in want[-100:]]))
    assert stats.seconds > 0 and stats.steps_per_s == pytest.approx(stats.steps / stats.seconds)


def test_scripted_episodes_are_accounted_exactly(fake_agent_cls):
    scripts = [[(3, "terminated"), (5, "truncated")], [(4, "truncated")]]
    made = []

    def factory():
        made.append(ScriptedEnv(scripts[len(made)]))
        return made[-1]

    agent = fake_agent_cls(from_gymnasium(ScriptedEnv(scripts[0]).observation_space), 2)
    worker = VectorEnvWorker(agent, factory, num_envs=2, seed=11)
    stats = worker.run(num_steps=16)  # 8 lockstep steps
    assert stats.episodes == worker.episodes == [
        Episode(0, 3.0, 3, True, False, 6, 6), Episode(1, 4.0, 4, False, True, 8, 8),
        Episode(0, 10.0, 5, False, True, 16, 16), Episode(1, 8.0, 4, False, True, 16, 16)]
    for env, script in zip(made, scripts):
        assert [(e.length, e.episode_return, e.terminated, e.truncated) for e in worker.episodes
                if e.env_id == made.index(env)] == ScriptedEnv.episodes(script, 2)
        assert len(env.actions) == 8
    assert [env.seeds for env in made] == [[11, None, None], [12, None, None]]
    # The transition that ends an episode carries its last observation; the next action sees the new episode.
    step3 = agent.observed[2]
    assert step3["next_states"][0].tolist() == [0, 3] and bool(step3["terminals"][0])
    assert agent.acted[3][0][0].tolist() == [1, 0]
    step4 = agent.observed[3]
    assert bool(step4["truncated"][1]) and not bool(step4["terminals"][1])


def test_runs_continue_episodes_and_count_steps_over_envs(cartpole_agent, policies):
    n, seed = 3, 5
    worker = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT)
    first = worker.run(num_steps=100)  # 100 is not a multiple of 3: whole lockstep steps, 102
    assert first.steps == 102
    second = worker.run(num_steps=99)
    assert second.steps == 99 and worker.total_steps == 201
    assert first.episodes + second.episodes == expected_episodes(hand_stepped(policies[0], n, seed, 67))
    by_episodes = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT)
    stats = by_episodes.run(num_episodes=4)
    assert len(stats.episodes) >= 4 and len(stats.episodes) - 4 < n
    assert stats.episodes == expected_episodes(hand_stepped(policies[0], n, seed, stats.steps // n))


def test_one_batched_action_call_per_step_and_observe_arguments(cartpole_agent, policies):
    n, seed, steps = 2, 3, 60
    agent = cartpole_agent()
    VectorEnvWorker(agent, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT).run(num_steps=n * steps)
    rows = hand_stepped(policies[0], n, seed, steps)
    assert len(agent.acted) == len(agent.observed) == steps
    ended = {"term": 0, "trunc": 0}
    for t, (call, (acted, explore)) in enumerate(zip(agent.observed, agent.acted)):
        assert explore is True and acted.shape == (n, 4)
        np.testing.assert_array_equal(call["states"], acted)
        assert call["env_id"] == list(range(n))
        for i in range(n):
            row = rows[i][t]
            np.testing.assert_array_equal(call["states"][i], row["obs"])
            assert call["actions"][i] == row["action"] and call["rewards"][i] == row["reward"]
            # the observation that ended the episode is the transition's next state ...
            np.testing.assert_array_equal(call["next_states"][i], row["next"])
            # ... terminated and truncated are passed through unchanged ...
            assert (bool(call["terminals"][i]), bool(call["truncated"][i])) == (row["term"], row["trunc"])
            if row["reset"] is not None:
                ended["term" if row["term"] else "trunc"] += 1
                # ... and the reset observation is what the agent acts on next
                if t + 1 < steps:
                    np.testing.assert_array_equal(agent.acted[t + 1][0][i], row["reset"])
                    assert not np.array_equal(agent.acted[t + 1][0][i], row["next"])
    assert ended["term"] > 0 and ended["trunc"] > 0


def test_preprocessors_reset_for_ended_envs_and_updates_counted(cartpole_agent, policies):
    n, seed, steps = 3, 2, 50
    agent = cartpole_agent(update_every=7)
    stats = VectorEnvWorker(agent, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT).run(num_steps=n * steps)
    rows = hand_stepped(policies[0], n, seed, steps)
    want = [[0, 1, 2]] + [[i for i in range(n) if rows[i][t]["reset"] is not None] for t in range(steps)]
    assert agent.resets == [ids for ids in want if ids]
    assert stats.num_updates == agent.updates == (n * steps) // 7
    assert stats.last_loss == pytest.approx(1.0 / agent.updates)
    quiet = cartpole_agent(update_every=7)
    VectorEnvWorker(quiet, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT, update=False).run(num_steps=30)
    assert quiet.updates == 0


def test_callback_every_k_steps_and_stop(cartpole_agent):
    seen = []
    worker = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=2, seed=0)
    worker.run(num_steps=50, callback=lambda s: seen.append((s.steps, s.total_steps)), callback_every=10)
    assert seen == [(10, 10), (20, 20), (30, 30), (40, 40), (50, 50)]  # the last one is also the end
    seen.clear()
    worker.run(num_steps=25, callback=lambda s: seen.append((s.steps, s.total_steps)), callback_every=10)
    assert seen == [(10, 60), (20, 70), (26, 76)]  # every 10 steps, and at the end
    stats = worker.run(num_steps=1000, callback=lambda s: s.steps < 20, callback_every=10)
    assert stats.stopped_by_callback and stats.steps == 20 and worker.total_steps == 96


def fold_reference(rows, n, gamma):
    """Every n-step window the rollout finished, folded per episode by `n_step_transitions`."""
    out = {}
    for env_rows in rows:
        start = 0
        for t, row in enumerate(env_rows + [None]):
            if row is not None and not (row["term"] or row["trunc"]):
                continue
            seg = env_rows[start:t + 1] if row is not None else env_rows[start:]
            if seg:
                f = n_step_transitions(np.array([r["reward"] for r in seg]), np.array([r["term"] for r in seg]),
                                       n, gamma, keep_partial=row is not None)  # a time limit cuts and bootstraps
                for k, r in enumerate(seg):
                    if f["valid"][k]:
                        out[r["obs"].tobytes()] = {
                            "states": r["obs"], "actions": r["action"], "rewards": f["rewards"][k],
                            "next_states": seg[f["next_index"][k] - 1]["next"], "terminals": f["terminals"][k],
                            "discounts": f["discounts"][k]}
            start = t + 1
    return out


def assert_records_match(records, reference):
    assert len(records["rewards"]) == len(reference)
    for j in range(len(records["rewards"])):
        ref = reference[records["states"][j].tobytes()]
        np.testing.assert_array_equal(records["next_states"][j], ref["next_states"])
        assert records["actions"][j] == ref["actions"] and bool(records["terminals"][j]) == ref["terminals"]
        assert records["rewards"][j] == pytest.approx(ref["rewards"], rel=1e-6)
        assert records["discounts"][j] == pytest.approx(ref["discounts"], rel=1e-6)


def concat(batches):
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_worker_side_n_step_equals_agent_side_folding(cartpole_agent, policies):
    n, seed, steps, n_step, gamma = 3, 4, 80, 3, 0.9
    worker_side = cartpole_agent(n_step=n_step, gamma=gamma)
    VectorEnvWorker(worker_side, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT,
                    worker_side_n_step=True).run(num_steps=n * steps)
    assert worker_side.observed == [] and worker_side.transitions
    records = concat(worker_side.transitions)
    rows = hand_stepped(policies[0], n, seed, steps)
    assert any(r["trunc"] for env in rows for r in env) and any(r["term"] for env in rows for r in env)
    assert_records_match(records, fold_reference(rows, n_step, gamma))
    agent_side = cartpole_agent(n_step=n_step, gamma=gamma)
    VectorEnvWorker(agent_side, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT).run(num_steps=n * steps)
    assert len(agent_side.folded) == len(records["rewards"])
    assert_records_match(concat([{k: np.array([f[k]]) for k in f} for f in agent_side.folded]),
                         fold_reference(rows, n_step, gamma))
    # n_step and gamma from arguments override the agent config
    other = cartpole_agent(n_step=1, gamma=0.5)
    VectorEnvWorker(other, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT, worker_side_n_step=True,
                    n_step=n_step, gamma=gamma).run(num_steps=n * steps)
    assert_records_match(concat(other.transitions), fold_reference(rows, n_step, gamma))


def act_time_priority(agent, record):
    """The Ape-X actor's priority of one folded record from the fake agent's fixed Q-values (NumPy oracle)."""
    q = agent.fixed_q_values(np.stack([record["states"], record["next_states"]])).astype(np.float64)
    bootstrap = 0.0 if record["terminals"] else record["discounts"] * q[1].max()
    return abs(record["rewards"] + bootstrap - q[0, record["actions"]])


def test_sample_returns_act_time_priorities_without_observing(cartpole_agent, policies):
    n, seed, steps = 2, 9, 45
    agent = cartpole_agent(n_step=2, gamma=0.5)
    worker = VectorEnvWorker(agent, "CartPole-v1", num_envs=n, seed=seed, env_kwargs=LIMIT, observe=False,
                             compute_priorities=True, update=False)
    first = worker.sample(40)
    second = worker.sample(n * steps - 40)
    assert agent.observed == [] and agent.transitions == [] and agent.timesteps == 0
    assert first.stats.steps == 40 and worker.total_steps == n * steps
    assert len(first) == len(first.priorities) and len(second) == len(second.priorities)
    records = concat([first.records, second.records])
    priorities = np.concatenate([first.priorities, second.priorities])
    rows = hand_stepped(policies[0], n, seed, steps)
    reference = fold_reference(rows, 2, 0.5)
    # every transition but those bootstrapping from the states of the last step (acted on in the next call's
    # first step, their priority unknown until then) came, with the priority of the act-time Q-values
    last = {env_rows[-1]["next"].tobytes() for env_rows in rows if not (env_rows[-1]["term"] or env_rows[-1]["trunc"])}
    assert_records_match(records, {k: r for k, r in reference.items() if r["next_states"].tobytes() not in last})
    assert len(reference) - len(records["rewards"]) == len(last) == n
    assert any(r["terminals"] for r in reference.values()) and any(r["trunc"] for env in rows for r in env)
    for j in range(len(priorities)):
        record = {k: v[j] for k, v in records.items()}
        assert priorities[j] == pytest.approx(act_time_priority(agent, record), rel=1e-5, abs=1e-5), j
    # the windows that waited come first in the next call, scored with the values of its first act call
    third = worker.sample(n)
    waited = [j for j in range(len(third)) if third.records["next_states"][j].tobytes() in last]
    assert len(waited) == n and waited == list(range(n))


def test_priorities_take_one_act_call_per_step_and_q_values_only_at_time_limits(fake_agent_cls):
    # env 0: terminated after 3 steps, truncated after 5; env 1: truncated every 4 steps
    scripts = [[(3, "terminated"), (5, "truncated")], [(4, "truncated")]]
    made = []

    def factory():
        made.append(ScriptedEnv(scripts[len(made)]))
        return made[-1]

    agent = fake_agent_cls(from_gymnasium(ScriptedEnv(scripts[0]).observation_space), 2, n_step=3, gamma=0.5)
    worker = VectorEnvWorker(agent, factory, num_envs=2, seed=11, observe=False, compute_priorities=True,
                             update=False)
    batch = worker.sample(2 * 16)   # 16 lockstep steps
    assert len(agent.acted) == 16 and all(explore for _, explore in agent.acted)
    # truncations: env 1 at steps 4, 8, 12, 16; env 0 at step 8 (with env 1: one call of two rows) and 16
    assert [len(q) for q in agent.q_calls] == [1, 2, 1, 2]
    np.testing.assert_array_equal(agent.q_calls[1], [[1, 5], [1, 4]])   # the final observations, not the reset
    for j in range(len(batch)):
        record = {k: v[j] for k, v in batch.records.items()}
        assert batch.priorities[j] == pytest.approx(act_time_priority(agent, record), rel=1e-6), j
    cut = ~batch.records["terminals"] & (batch.records["discounts"] > 0.5 ** 3)   # time-limited, bootstrapping
    assert batch.records["terminals"].any() and cut.any()
    # a run (nothing kept) acts without Q-values and scores nothing, also at its time limits (steps 20 and 24)
    agent.q_calls.clear()
    worker.run(num_steps=2 * 8)
    assert agent.q_calls == [] and len(agent.acted) == 24


def test_evaluate_is_greedy_and_observes_nothing(cartpole_agent, policies):
    n, seed = 2, 1
    greedy = lambda states, k: 1 - policies[0](states, k)  # noqa: E731  (differs from the exploring policy)
    agent = cartpole_agent(greedy=greedy)
    worker = VectorEnvWorker(agent, "CartPole-v1", num_envs=n, seed=seed, env_kwargs={"max_episode_steps": 40})
    worker.run(num_steps=20)
    observed, updates, steps = len(agent.observed), agent.updates, worker.total_steps
    acted = len(agent.acted)
    resets = len(agent.resets)
    returns = worker.evaluate(3, seed=100)
    # evaluation restarts the preprocessing slots it uses before, and all of them after
    assert agent.resets[resets] == [0, 1] and agent.resets[-1] == [0, 1]
    assert len(agent.observed) == observed and agent.updates == updates and worker.total_steps == steps
    assert all(explore is False for _, explore in agent.acted[acted:])
    def per_env_quota(episodes):  # env 0 runs 2 of the 3 episodes, env 1 runs 1, grouped by env
        return [e.episode_return for i, q in ((0, 2), (1, 1)) for e in [e for e in episodes if e.env_id == i][:q]]

    ref = expected_episodes(hand_stepped(greedy, n, 100, 200, env_kwargs={"max_episode_steps": 40}))
    assert returns == per_env_quota(ref)
    explored = expected_episodes(hand_stepped(policies[0], n, 100, 200, env_kwargs={"max_episode_steps": 40}))
    assert returns != per_env_quota(explored)
    # training continues as if no evaluation had happened
    worker.run(num_steps=100)
    plain = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=n, seed=seed,
                            env_kwargs={"max_episode_steps": 40})
    plain.run(num_steps=120)
    assert worker.episodes == plain.episodes


def test_state_dict_resume_continues_numbering(cartpole_agent):
    worker = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=2, seed=3, env_kwargs=LIMIT)
    worker.run(num_steps=120)
    state = worker.state_dict()
    resumed = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=2, seed=3, env_kwargs=LIMIT)
    resumed.load_state_dict(state)
    stats = resumed.run(num_steps=80)
    assert resumed.total_steps == 200 and stats.total_steps == 200 and stats.steps == 80
    assert resumed.episodes[:len(worker.episodes)] == worker.episodes
    assert stats.episodes and all(e.end_step > 120 for e in stats.episodes)
    assert all(e.length <= (e.end_step - 120) // 2 for e in stats.episodes if e.env_id == 0)  # fresh episodes
    # a resumed run does not replay the first start's episodes
    fresh = VectorEnvWorker(cartpole_agent(), "CartPole-v1", num_envs=2, seed=3, env_kwargs=LIMIT)
    assert fresh.run(num_steps=80).episodes != [
        Episode(e.env_id, e.episode_return, e.length, e.terminated, e.truncated, e.end_step - 120,
                e.end_frame - 120) for e in stats.episodes]
    with pytest.raises(ValueError, match=r"missing keys \['episodes'\]"):
        resumed.load_state_dict({k: v for k, v in state.items() if k != "episodes"})
    with pytest.raises(ValueError, match=r"total_steps must be a non-negative int; got -1"):
        resumed.load_state_dict({**state, "total_steps": -1})


def test_pong_frames_are_four_per_step(fake_agent_cls):
    space = from_gymnasium(make_env("ALE/Pong-v5").observation_space)
    agent = fake_agent_cls(space, 6)
    worker = VectorEnvWorker(agent, "ALE/Pong-v5", num_envs=2, seed=0)
    stats = worker.run(num_steps=60)
    assert worker.frames_per_step == 4
    assert stats.steps == 60 and stats.frames == 240 and worker.total_frames == 240
    assert stats.frames_per_s == pytest.approx(4 * stats.steps_per_s)
    assert sum(e.unwrapped.ale.getFrameNumber() for e in worker.envs.envs) == stats.frames
    assert agent.acted[0][0].shape == (2, 210, 160, 3) and agent.acted[0][0].dtype == np.uint8
    stacked = make_env("ALE/Pong-v5", atari=True)  # env-side Atari frames, as a config's env.atari asks
    assert frames_per_step(stacked) == 4
    atari = VectorEnvWorker(fake_agent_cls(from_gymnasium(stacked.observation_space), 6), "ALE/Pong-v5",
                            num_envs=2, seed=0, env_kwargs={"atari": True})
    assert atari.run(num_steps=20).frames == 80
    assert atari.agent.acted[-1][0].shape == (2, 84, 84, 4) and atari.agent.acted[-1][0].dtype == np.uint8
    skip2 = VectorEnvWorker(fake_agent_cls(space, 6), "ALE/Pong-v5", num_envs=1, seed=0, env_kwargs={"frameskip": 2})
    assert skip2.run(num_steps=10).frames == 20 == skip2.envs.envs[0].unwrapped.ale.getFrameNumber()


def test_errors_name_the_step_env_and_expectation(cartpole_agent, fake_agent_cls):
    bad_shape = cartpole_agent(policy=lambda s, k: np.zeros((len(s), 1), np.int64))
    worker = VectorEnvWorker(bad_shape, "CartPole-v1", num_envs=3)
    with pytest.raises(ValueError, match=r"actions of shape \(3, 1\) at worker step 0; expected \(3,\)"):
        worker.run(num_steps=3)
    out_of_range = cartpole_agent(policy=lambda s, k: np.array([0, 5, 1]))
    with pytest.raises(ValueError, match=r"outside the action space int64\[\]\(0,1\) of .CartPole-v1. at worker step 0 "
                                         r"\(envs \[1\], actions \[5\]\)"):
        VectorEnvWorker(out_of_range, "CartPole-v1", num_envs=3).run(num_steps=3)
    # below the low bound, and past `SMALL_ACTIONS` environments (checked by NumPy reductions, not in Python)
    negative = cartpole_agent(policy=lambda s, k: np.array([0, -1, 1]))
    with pytest.raises(ValueError, match=r"outside the action space .* \(envs \[1\], actions \[-1\]\)"):
        VectorEnvWorker(negative, "CartPole-v1", num_envs=3).run(num_steps=3)
    many = VectorEnvWorker.SMALL_ACTIONS + 2
    wide = cartpole_agent(policy=lambda s, k: np.where(np.arange(len(s)) == many - 1, 2, 0))
    with pytest.raises(ValueError, match=rf"outside the action space .* \(envs \[{many - 1}\], actions \[2\]\)"):
        VectorEnvWorker(wide, "CartPole-v1", num_envs=many).run(num_steps=many)
    late = cartpole_agent(policy=lambda s, k: np.full(len(s), 0 if len(late.acted) <= 4 else 2))
    with pytest.raises(ValueError, match=r"at worker step 8 \(envs \[0, 1\]"):
        VectorEnvWorker(late, "CartPole-v1", num_envs=2).run(num_steps=20)
    with pytest.raises(ValueError, match=r"'CartPole-v1' observes float32\[4\].*does not fit the agent's state_space "
                                         r"float32\[5\]"):
        VectorEnvWorker(fake_agent_cls(FloatBox(5), 2), "CartPole-v1")
    with pytest.raises(ValueError, match=r"unknown environment id 'CartPol-v1'; close matches: \['CartPole-v1'"):
        VectorEnvWorker(cartpole_agent(), "CartPol-v1")


@pytest.mark.parametrize("kwargs, message", [
    ({"num_envs": 0}, r"num_envs must be a positive int; got 0"),
    ({"seed": "0"}, r"seed must be an int; got '0'"),
    ({"observe": 1}, r"observe must be a bool; got 1"),
    ({"compute_priorities": True}, r"compute_priorities needs observe=False"),
    ({"compute_priorities": True, "worker_side_n_step": True}, r"compute_priorities needs observe=False"),
    ({"worker_side_n_step": True, "n_step": 0}, r"n_step \(argument\) must be a positive int; got 0"),
    ({"worker_side_n_step": True, "gamma": 1.5}, r"gamma \(argument\) must be a number in \[0, 1\]; got 1.5"),
])
def test_argument_errors(cartpole_agent, kwargs, message):
    with pytest.raises(ValueError, match=message):
        VectorEnvWorker(cartpole_agent(), "CartPole-v1", **kwargs)


def test_for_agent_needs_an_agent_config_with_env(cartpole_agent):
    with pytest.raises(ValueError, match=r"FakeAgent has no config.env to read the environment from"):
        VectorEnvWorker.for_agent(cartpole_agent())


def test_folding_needs_gamma_from_somewhere(cartpole_agent):
    agent = cartpole_agent()
    del agent.config["gamma"]
    with pytest.raises(ValueError, match=r"worker-side n-step folding needs gamma: pass gamma="):
        VectorEnvWorker(agent, "CartPole-v1", observe=False)
    assert VectorEnvWorker(agent, "CartPole-v1", observe=False, gamma=0.9).gamma == 0.9


@pytest.mark.parametrize("call, message", [
    (lambda w: w.run(), r"give num_steps and/or num_episodes"),
    (lambda w: w.run(num_steps=0), r"num_steps must be a positive int or None; got 0"),
    (lambda w: w.run(num_steps=5, callback=3), r"callback must be callable; got 3"),
    (lambda w: w.sample(10), r"the worker does not fold transitions"),
    (lambda w: w.evaluate(0), r"num_episodes must be a positive int; got 0"),
])
def test_run_argument_errors(cartpole_agent, call, message):
    with pytest.raises(ValueError, match=message):
        call(VectorEnvWorker(cartpole_agent(), "CartPole-v1"))


def test_mean_return_is_nan_before_the_first_episode(cartpole_agent):
    worker = VectorEnvWorker(cartpole_agent(), "CartPole-v1")
    assert math.isnan(worker.run(num_steps=2).mean_return_100)


def test_run_without_observing_folds_nothing_and_sample_starts_fresh_windows():
    # ScriptedEnv observes (episode, step within it): a record's n-step window is consecutive when its
    # next_states is n steps after its states in the same episode (or fewer, when the episode ended).
    from suites.doubles import FakeAgent

    n_step = 3
    agent = FakeAgent(FloatBox(2), 2, n_step=n_step, gamma=0.5)
    worker = VectorEnvWorker(agent, lambda: ScriptedEnv([(50, "terminated")]), num_envs=2, observe=False,
                             update=False)
    first = worker.sample(8)  # 4 lockstep steps: windows of the last steps are still open
    assert len(first) == 2 * (4 - n_step + 1)
    worker.run(num_steps=10)  # acts and steps, keeps nothing
    assert all(len(acc) == 0 for acc in worker._accumulators)
    second = worker.sample(8)
    states, nxt = second.records["states"], second.records["next_states"]
    assert len(second) == 2 * (4 - n_step + 1)
    np.testing.assert_array_equal(nxt[:, 0], states[:, 0])
    np.testing.assert_array_equal(nxt[:, 1] - states[:, 1], n_step)
    # the windows start at the first step of the second sample (steps 9.. of each episode)
    assert states[:, 1].min() == 4 + 5
    assert agent.observed == [] and agent.transitions == []


def test_a_restart_counts_episode_lengths_from_the_restart():
    # load_state_dict drops the episodes in progress: the next run restarts them, and their lengths count
    # from there (ScriptedEnv's episodes last exactly 5 steps).
    from suites.doubles import FakeAgent

    agent = FakeAgent(FloatBox(2), 2)
    worker = VectorEnvWorker(agent, lambda: ScriptedEnv([(5, "terminated")]), num_envs=2, update=False)
    worker.run(num_steps=2 * 3)  # 3 steps into the first episodes
    worker.load_state_dict(worker.state_dict())
    stats = worker.run(num_episodes=2)
    assert [e.length for e in stats.episodes] == [5, 5]
    assert [e.length for e in worker.run(num_episodes=2).episodes] == [5, 5]


class _BadReset(ScriptedEnv):
    """ScriptedEnv whose episode ``at`` (0: the first) starts with a bad observation: NaN, float64 or a wrong
    shape."""

    def __init__(self, bad: str, at: int) -> None:
        super().__init__([(3, "terminated")])
        self.bad, self.at = bad, at

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        if self.episode == self.at:
            obs = {"nan": np.array([np.nan, 0.0], np.float32), "float64": obs.astype(np.float64),
                   "shape": np.zeros(3, np.float32)}[self.bad]
        return obs, info


@pytest.mark.parametrize("bad, at, when, says", [
    ("nan", 1, r"reset after worker step 4", "NaN at index"),
    ("nan", 0, "after reset", "NaN at index"),
    ("float64", 0, "after reset", "dtype float64"),
    ("shape", 0, "after reset", r"shape \(2, 3\)")])
def test_a_bad_observation_after_a_reset_is_named(bad, at, when, says):
    from suites.doubles import FakeAgent

    worker = VectorEnvWorker(FakeAgent(FloatBox(2), 2), lambda: _BadReset(bad, at), num_envs=2, update=False)
    with pytest.raises(ValueError, match=rf"observations of environment .* \({when}\) do not fit the agent's "
                                         rf"state_space .*{says}"):
        worker.run(num_steps=20)


def test_later_reset_observations_are_checked_only_in_validate_mode():
    from suites.doubles import FakeAgent

    zeros = FakeAgent(FloatBox(2), 2, policy=lambda states, n: np.zeros(len(states), np.int64))  # NaN-proof
    quiet = VectorEnvWorker(zeros, lambda: _BadReset("nan", 1), num_envs=2, update=False, validate=False)
    assert quiet.run(num_steps=20).steps == 20  # the NaN of the second episodes' reset goes unchecked
    with pytest.raises(ValueError, match=r"\(after reset\) do not fit"):  # the first reset is checked anyway
        VectorEnvWorker(FakeAgent(FloatBox(2), 2), lambda: _BadReset("nan", 0), num_envs=2, update=False,
                        validate=False).run(num_steps=20)


def test_a_reset_observation_of_another_shape_is_named_by_the_vector_env():
    from reference_agents.workers import VectorEnv

    envs = VectorEnv(lambda: _BadReset("shape", 1), 2)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"VectorEnv.step: environment 0's reset observation has shape \(3,\); "
                                         r"its row of the batch has shape \(2,\)"):
        for _ in range(3):
            envs.step([0, 0])


def test_an_agent_declaring_the_env_action_space_is_held_to_it_once_unless_validating(cartpole_agent):
    """Without validate, the actions of an agent that declares the environment's own action space are not checked
    on every step (the reference agents' act graphs give actions of that space by construction); validate checks
    them, and an agent declaring another space (or none) is checked on every step either way."""
    from harness.spaces import IntBox

    def agent(space):
        fake = cartpole_agent(policy=lambda s, k: np.full(len(s), 5, np.int64))   # always out of range
        fake.action_space = space
        return fake

    for space, validate in ((IntBox(2), True), (IntBox(6), False), (None, False)):
        worker = VectorEnvWorker(agent(space), "CartPole-v1", num_envs=2, update=False, validate=validate)
        with pytest.raises(ValueError, match=r"outside the action space int64\[\]\(0,1\) of .CartPole-v1. at worker "
                                             r"step 0 \(envs \[0, 1\], actions \[5, 5\]\)"):
            worker.run(num_steps=2)
    trusted = VectorEnvWorker(agent(IntBox(2)), "CartPole-v1", num_envs=2, update=False, validate=False)
    with pytest.raises(AssertionError, match="invalid"):   # CartPole's own check: the worker passed them on
        trusted.run(num_steps=2)
