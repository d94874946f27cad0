"""The native libraries behind `reference_agents.workers.native_envs.NativeAtariVectorEnv`: ale-py's
``AtariVectorEnv`` (``ale``) and EnvPool's Atari pool (``envpool``), each set to an ALE id's settings
(`native_envs.ale_settings`) and wrapped to one small interface:

- ``reset(seeds | None) -> stacks``: every environment, ``uint8[N,4,84,84]`` oldest frame first;
- ``step(int32 actions [N]) -> (stacks, rewards, terminated, truncated, finals, infos)``: finished
  environments are reset in the same call (``stacks`` holds their new first observation, ``finals`` the
  stacks that ended their episodes, in ascending environment order), ``infos`` one dict per environment;
- ``num_actions``, ``close()``.

A stack's frames older than the episode are zeros here; `NativeAtariVectorEnv` fills them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.environments import ATARI_FRAMES, ATARI_SIZE

#: The per-step info keys passed on per environment (ALE's, as ale-py's gymnasium env reports them).
INFO_KEYS = ("lives", "episode_frame_number", "frame_number")


def make_backend(vectorizer: str, settings: dict[str, Any], num_envs: int) -> Any:
    """The ``vectorizer``'s native vector environment for ``settings`` (`native_envs.ale_settings`).

    Raises:
        ValueError: naming ``env.vectorizer`` and the package to install when the library does not import.
    """
    backend = {"ale": AleBackend, "envpool": EnvPoolBackend}[vectorizer]
    return backend(settings, num_envs)


def _infos(info: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    columns = [(k, np.asarray(info[k]).tolist()) for k in INFO_KEYS if k in info]
    return [{k: v[i] for k, v in columns} for i in range(num_envs)]


class AleBackend:
    """ale-py's ``AtariVectorEnv`` (C++ emulation and preprocessing, one thread by default), autoreset in the
    same step; no max-pool, noop starts, fire reset, life-loss ends or reward clipping (as ``ALE/*-v5``)."""

    def __init__(self, settings: dict[str, Any], num_envs: int) -> None:
        try:
            from ale_py.vector_env import AtariVectorEnv
        except ImportError as exc:
            raise ValueError(f"env.vectorizer 'ale' needs ale-py >= 0.11 (pip install ale-py): {exc}") from None
        self.num_envs = num_envs
        self.env = AtariVectorEnv(
            settings["game"], num_envs, num_threads=settings["num_threads"],
            repeat_action_probability=float(settings["repeat_action_probability"]),
            frameskip=settings["frameskip"], full_action_space=bool(settings["full_action_space"]),
            max_num_frames_per_episode=int(settings["max_num_frames_per_episode"]), autoreset_mode="SameStep",
            img_height=ATARI_SIZE, img_width=ATARI_SIZE, grayscale=True, stack_num=ATARI_FRAMES, maxpool=False,
            noop_max=0, episodic_life=False, reward_clipping=False, use_fire_reset=False)
        self.num_actions = int(self.env.single_action_space.n)

    def reset(self, seeds: list[int] | None) -> np.ndarray:
        stacks, _ = self.env.reset(seed=None if seeds is None else np.asarray(seeds, np.int64))
        return stacks

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        stacks, rewards, terminated, truncated, info = self.env.step(actions)
        done = np.flatnonzero(terminated | truncated)
        finals = info["final_obs"][done] if done.size else stacks[:0]
        return stacks, rewards, terminated, truncated, finals, _infos(info, self.num_envs)

    def close(self) -> None:
        self.env.close()


class EnvPoolBackend:
    """EnvPool's Atari pool (C++; bilinear resize, one thread by default), finished environments reset at
    once; no noop starts, fire reset, life-loss ends or reward clipping. EnvPool always max-pools the last
    two frames of a step and has no switch for it."""

    def __init__(self, settings: dict[str, Any], num_envs: int) -> None:
        try:
            import envpool
        except ImportError as exc:
            raise ValueError(f"env.vectorizer 'envpool' needs EnvPool (pip install 'spacegraph[envpool]'): "
                             f"{exc}") from None
        self.settings, self.num_envs, self._envpool = settings, num_envs, envpool
        self.env = self._make(None)
        self.num_actions = int(self.env.action_space.n)
        self._ids = np.arange(num_envs, dtype=np.int32)

    def _make(self, seeds: list[int] | None) -> Any:
        """A pool for ``settings``; EnvPool seeds its environments when it makes them (``env_seed``)."""
        # noop_max=1: no noop starts (EnvPool draws 0..noop_max-1 noops; noop_max=0 crashes its reset)
        settings = self.settings
        task = "".join(part.capitalize() for part in str(settings["game"]).split("_")) + "-v5"
        frameskip = settings["frameskip"]
        seeding = {} if seeds is None else {"env_seed": [int(s) % 2 ** 31 for s in seeds]}
        return self._envpool.make_gymnasium(
            task, num_envs=self.num_envs, batch_size=self.num_envs, num_threads=settings["num_threads"],
            repeat_action_probability=float(settings["repeat_action_probability"]), frame_skip=frameskip,
            full_action_space=bool(settings["full_action_space"]),
            max_episode_steps=int(settings["max_num_frames_per_episode"]) // frameskip, img_height=ATARI_SIZE,
            img_width=ATARI_SIZE, gray_scale=True, stack_num=ATARI_FRAMES, noop_max=1, episodic_life=False,
            reward_clip=False, use_fire_reset=False, use_inter_area_resize=False, **seeding)

    def reset(self, seeds: list[int] | None) -> np.ndarray:
        if seeds is not None:   # a seeded reset re-makes the pool with those seeds
            self.env.close()
            self.env = self._make(seeds)
        stacks, _ = self.env.reset(self._ids)
        return np.array(stacks)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        stacks, rewards, terminated, truncated, info = self.env.step(actions, self._ids)
        stacks = np.array(stacks)
        done = np.flatnonzero(terminated | truncated)
        finals = stacks[done].copy()
        if done.size:
            fresh, _ = self.env.reset(done.astype(np.int32))
            stacks[done] = fresh
        return stacks, rewards, terminated, truncated, finals, _infos(info, self.num_envs)

    def close(self) -> None:
        self.env.close()
