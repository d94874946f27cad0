"""`make_env`, `frames_per_step` and `VectorEnv` against environments stepped by hand."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from reference_agents.workers import VectorEnv, frames_per_step, make_env


def test_make_env_names_an_unknown_id_and_its_close_matches():
    with pytest.raises(ValueError, match=r"unknown environment id 'CartPol-v1'.*'CartPole-v1'"):
        make_env("CartPol-v1")
    with pytest.raises(ValueError, match=r"unknown environment id 'ALE/Pongg-v5'.*'ALE/Pong-v5'"):
        make_env("ALE/Pongg-v5")
    with pytest.raises(ValueError, match=r"env_id must be a non-empty gymnasium id string; got 3"):
        make_env(3)
    with pytest.raises(ValueError, match=r"'CartPole-v1' rejected the keyword arguments \['foo'\]"):
        make_env("CartPole-v1", foo=1)
    with pytest.raises(ValueError, match=r"atari=True needs an ALE environment; 'CartPole-v1' is made by "):
        make_env("CartPole-v1", atari=True)
    with pytest.raises(ValueError, match=r"atari must be a bool; got 'yes'"):
        make_env("ALE/Pong-v5", atari="yes")


def test_make_env_imports_the_module_of_a_module_qualified_id(tmp_path):
    """``module:Id`` makes a user's environment in a fresh process (a Ray actor's, a TF task's) that never
    imported the module; a module that does not import is named."""
    import subprocess
    import sys

    code = ("import gymnasium; from reference_agents.workers import make_env; "
            "assert 'CrashingCartPole-v1' not in gymnasium.registry; "
            f"env = make_env('harness.testing.faulty_envs:CrashingCartPole-v1', crash_after=3, "
            f"marker={str(tmp_path / 'm')!r}); env.reset(seed=0); print(type(env.unwrapped).__name__)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "CartPoleEnv", run.stderr[-2000:]
    with pytest.raises(ValueError, match=r"names the module 'no_such_module_xyz', which does not import"):
        make_env("no_such_module_xyz:Thing-v0")


def test_make_env_registers_ale_ids_and_passes_kwargs():
    env = make_env("ALE/Pong-v5", frameskip=2)
    assert env.spec.id == "ALE/Pong-v5" and env.unwrapped._frameskip == 2
    assert make_env("CartPole-v1", max_episode_steps=7).spec.max_episode_steps == 7


@pytest.mark.parametrize("build, frames", [
    (lambda: make_env("CartPole-v1"), 1),
    (lambda: make_env("ALE/Pong-v5"), 4),
    (lambda: make_env("ALE/Pong-v5", frameskip=3), 3),
    (lambda: make_env("PongNoFrameskip-v4"), 1),
    (lambda: gymnasium.wrappers.MaxAndSkipObservation(make_env("PongNoFrameskip-v4"), skip=4), 4),
    (lambda: gymnasium.wrappers.MaxAndSkipObservation(make_env("ALE/Pong-v5"), skip=2), 8),
    (lambda: make_env("Pong-v4"), 3),  # stochastic frameskip (2, 5): 2, 3 or 4 frames, mean 3
], ids=["cartpole", "pong-v5", "pong-v5-skip3", "noframeskip", "maxandskip4", "v5-maxandskip2", "stochastic"])
def test_frames_per_step(build, frames):
    assert frames_per_step(build()) == frames


def test_frames_per_step_counts_what_ale_counts():
    env = make_env("ALE/Pong-v5")
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    assert env.unwrapped.ale.getFrameNumber() == 5 * frames_per_step(env)


def test_frames_per_step_rejects_a_bad_skip():
    env = make_env("ALE/Pong-v5")
    env.unwrapped._frameskip = 0
    with pytest.raises(ValueError, match=r"AtariEnv\._frameskip must be a positive int .* got 0"):
        frames_per_step(env)


def _hand_stepped(env_id, seed, actions, **kwargs):
    env = gymnasium.make(env_id, **kwargs)
    obs, _ = env.reset(seed=seed)
    rows = []
    for a in actions:
        nxt, r, term, trunc, _ = env.step(a)
        reset = env.reset()[0] if term or trunc else None
        rows.append((obs, nxt, r, term, trunc, reset))
        obs = nxt if reset is None else reset
    return rows


def test_vector_env_returns_final_and_reset_observations():
    n, seed, steps = 3, 11, 40
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(steps, n))
    venv = VectorEnv("CartPole-v1", n, {"max_episode_steps": 12})
    refs = [_hand_stepped("CartPole-v1", seed + i, actions[:, i], max_episode_steps=12) for i in range(n)]
    obs = venv.reset(seed=seed)
    ended = 0
    for t in range(steps):
        for i in range(n):
            np.testing.assert_array_equal(obs[i], refs[i][t][0])
        next_obs, rewards, term, trunc, infos, act_on = venv.step(actions[t])
        assert next_obs.shape == (n, 4) and rewards.dtype == np.float64 and len(infos) == n
        assert venv.done_indices.tolist() == [i for i in range(n) if refs[i][t][5] is not None]
        for i in range(n):
            _, ref_next, ref_r, ref_term, ref_trunc, ref_reset = refs[i][t]
            np.testing.assert_array_equal(next_obs[i], ref_next)
            assert (rewards[i], term[i], trunc[i]) == (ref_r, ref_term, ref_trunc)
            if ref_reset is not None:
                ended += 1
                np.testing.assert_array_equal(act_on[i], ref_reset)
                assert not np.array_equal(act_on[i], next_obs[i])
                assert "reset_info" in infos[i]
            else:
                np.testing.assert_array_equal(act_on[i], ref_next)
        obs = act_on
    assert ended >= n  # every env ended at least one episode (12-step limit)


def test_vector_env_argument_errors():
    with pytest.raises(ValueError, match=r"num_envs must be a positive int; got 0"):
        VectorEnv("CartPole-v1", 0)
    with pytest.raises(ValueError, match=r"env_kwargs must be a dict or None; got list"):
        VectorEnv("CartPole-v1", 1, [1])
    venv = VectorEnv("CartPole-v1", 2)
    with pytest.raises(RuntimeError, match=r"call reset\(\) first"):
        venv.step([0, 0])
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"expected 2 actions \(one per env\), got 3"):
        venv.step([0, 1, 0])
    with pytest.raises(ValueError, match=r"seed must be an int or None; got 1.5"):
        venv.reset(seed=1.5)
