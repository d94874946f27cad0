"""`AtariFrames`: env-side gray 84x84 frames, 4 stacked channel-last, oldest first."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from reference_agents.environments import AtariFrames, env_spaces


class FakeGray:
    """A gray-frame env whose frame t is the constant 10 * t (so resizing keeps the value)."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (210, 160), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.spec, self.unwrapped, self.t = None, self, 0

    def reset(self, **kwargs):
        self.t = 0
        return np.full((210, 160), 0, np.uint8), {}

    def step(self, action):
        self.t += 1
        return np.full((210, 160), 10 * self.t, np.uint8), 1.0, False, False, {}

    def close(self):
        pass


def test_reset_fills_the_stack_and_steps_shift_it():
    env = AtariFrames(FakeGray())
    obs, _ = env.reset()
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8 and (obs == 0).all()
    for _ in range(2):
        obs, *_ = env.step(0)
    assert [int(obs[40, 40, c]) for c in range(4)] == [0, 0, 10, 20]  # oldest first, newest last
    assert env.observation_space.shape == (84, 84, 4)


def test_resize_is_bilinear_on_real_pong_frames():
    from reference_agents.components.preprocessors.resize import bilinear_matrix
    from reference_agents.workers.envs import make_env

    raw = make_env("ALE/Pong-v5", obs_type="grayscale")
    frames = AtariFrames(make_env("ALE/Pong-v5", obs_type="grayscale"))
    first, _ = raw.reset(seed=3)
    obs, _ = frames.reset(seed=3)
    expected = np.rint(bilinear_matrix(210, 84) @ first.astype(np.float64) @ bilinear_matrix(160, 84).T)
    assert np.abs(obs[..., 3].astype(np.int64) - expected.astype(np.int64)).max() <= 1
    assert env_spaces("ALE/Pong-v5", atari=True)[0].shape == (84, 84, 4)


def test_rejects_color_frames():
    from reference_agents.workers.envs import make_env

    with pytest.raises(ValueError, match="obs_type='grayscale'"):
        AtariFrames(make_env("ALE/Pong-v5"))
