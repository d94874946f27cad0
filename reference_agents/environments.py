"""Atari frame processing env-side (`AtariFrames`) and the spaces of the environment an agent config names.

Environments are made by `reference_agents.workers.envs.make_env`.

``env: {id: ALE/Pong-v5, atari: true}`` gives observations ``uint8[84,84,4]``:
the ALE v5 env skips 4 frames per step itself (``frameskip=4``, sticky actions
0.25) and returns gray frames (``obs_type="grayscale"``); `AtariFrames` resizes
each to 84x84 and stacks the last 4 on the channel axis, oldest first. The stack
lives env-side because replay stores observations: a transition's state and
next state must each carry their own 4 frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ATARI_FRAMES = 4
ATARI_SIZE = 84


class AtariFrames:
    """Gray ``size x size`` frames, the last ``frames`` of them stacked channel-last, as uint8.

    Wraps an ALE env made with ``obs_type="grayscale"`` (``uint8[210,160]``
    frames). Each frame is resized bilinearly by two matrix products (the same
    `bilinear_matrix` the in-graph `ImageResize` uses) and rounded. After a reset
    the first frame fills the whole stack. Implemented in NumPy (no OpenCV).
    """

    def __init__(self, env: Any, frames: int = ATARI_FRAMES, size: int = ATARI_SIZE) -> None:
        import gymnasium as gym

        from reference_agents.components.preprocessors.resize import bilinear_matrix

        shape = env.observation_space.shape
        if len(shape) != 2 or env.observation_space.dtype != np.uint8:
            raise ValueError(f"AtariFrames: expected gray uint8 frames [H,W] (make the ALE env with "
                             f"obs_type='grayscale'); got {env.observation_space}")
        self.env = env
        self.frames = frames
        self.rows = bilinear_matrix(shape[0], size).astype(np.float32)      # [size, H]
        self.cols = bilinear_matrix(shape[1], size).astype(np.float32).T    # [W, size]
        self.stack = np.zeros((size, size, frames), np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, (size, size, frames), np.uint8)
        self.action_space = env.action_space
        self.spec = env.spec
        self.unwrapped = env.unwrapped

    def _frame(self, raw: np.ndarray) -> np.ndarray:
        small = self.rows @ raw.astype(np.float32) @ self.cols
        return np.clip(np.rint(small), 0, 255).astype(np.uint8)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(**kwargs)
        self.stack[...] = self._frame(obs)[..., None]
        return self.stack.copy(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.stack[..., :-1] = self.stack[..., 1:]
        self.stack[..., -1] = self._frame(obs)
        return self.stack.copy(), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()


def env_spaces(env_id: str, atari: bool = False, **kwargs: Any) -> tuple[Any, Any]:
    """``(observation space, action space)`` of the environment as spacegraph spaces (no batch rank)."""
    from harness.spaces import from_gymnasium
    from reference_agents.workers.envs import make_env

    env = make_env(env_id, atari=atari, **kwargs)
    try:
        return from_gymnasium(env.observation_space), from_gymnasium(env.action_space)
    finally:
        env.close()
