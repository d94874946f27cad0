"""Native (C++) Atari vector environments behind the `VectorEnv` interface: the ``env.vectorizer`` option.

``env: {id: ALE/Pong-v5, atari: true, vectorizer: ale}`` steps the N environments in ale-py's
``AtariVectorEnv`` (emulation, gray conversion, resize and frame stack in C++) and ``vectorizer: envpool`` in
EnvPool's; ``python`` (the default) is `VectorEnv` over `make_env` (`AtariFrames`, NumPy resize). The native
environments are configured to the ALE id's own settings (``ALE/*-v5``: frameskip 4, sticky actions 0.25,
minimal action set, 108,000 frames an episode at most; no noop starts, no fire reset, no life-loss ends, no
reward clipping, no max-pooling where the library has the switch) and give the same observations as the python
path: ``uint8[N,84,84,4]``, the last 4 frames channel-last, oldest first, a new episode's first frame filling
the whole stack. What cannot be the same (the resize filter, EnvPool's max-pool of the last two frames, the
sticky-action random stream) is listed in the docs (``docs/workers.md``) and measured by
``suites/workers/test_native_envs.py``.

`make_vector_env` is what workers call: it reads ``vectorizer`` out of the environment keyword arguments.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from harness.seeds import derive_seed
from reference_agents.environments import ATARI_FRAMES, ATARI_SIZE
from reference_agents.workers.envs import EnvFactory, VectorEnv

#: The ``env.vectorizer`` values: ``python`` (`VectorEnv`), ``ale`` (ale-py's AtariVectorEnv), ``envpool``.
VECTORIZERS = ("python", "ale", "envpool")

#: ``gymnasium.make`` keyword arguments of an ALE id that the native environments take too.
NATIVE_KWARGS = ("repeat_action_probability", "frameskip", "full_action_space", "max_num_frames_per_episode",
                 "obs_type")


def make_vector_env(env_id: str | EnvFactory, num_envs: int = 1, env_kwargs: dict[str, Any] | None = None) -> Any:
    """The lockstep vector environment ``env_kwargs["vectorizer"]`` names (default ``python``).

    Args:
        env_id: a gymnasium id, or a callable returning a new environment (``python`` only).
        num_envs: the number of environments N.
        env_kwargs: `make_env`'s keyword arguments (``atari`` and ``gymnasium.make``'s), plus ``vectorizer``.

    Returns:
        A `VectorEnv`, or a `NativeAtariVectorEnv` with the same interface.

    Raises:
        ValueError: for an unknown vectorizer (naming ``env.vectorizer`` and the allowed values), a native
            vectorizer without ``atari`` or for a non-ALE id, or an uninstalled library; and `VectorEnv`'s.
    """
    kwargs = dict(env_kwargs or {})
    vectorizer = kwargs.pop("vectorizer", "python")
    if vectorizer not in VECTORIZERS:
        raise ValueError(f"env.vectorizer: expected one of {', '.join(VECTORIZERS)}; got {vectorizer!r}")
    if vectorizer == "python":
        return VectorEnv(env_id, num_envs, kwargs or None)
    return NativeAtariVectorEnv(env_id, num_envs, kwargs, vectorizer)


def env_kwargs_of(env: Mapping[str, Any]) -> dict[str, Any]:
    """`make_vector_env`'s keyword arguments of an ``env`` section as a mapping (``kwargs``, and ``atari`` and
    ``vectorizer`` where set)."""
    kwargs = dict(env.get("kwargs") or {})
    if env.get("atari"):
        kwargs["atari"] = True
    if env.get("vectorizer", "python") != "python":
        kwargs["vectorizer"] = env["vectorizer"]
    return kwargs


def ale_settings(env_id: Any, vectorizer: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ALE settings of ``env_id`` (its registered keyword arguments, ``kwargs`` over them).

    Returns:
        ``{game, repeat_action_probability, frameskip, full_action_space, max_num_frames_per_episode,
        num_threads}`` (one thread: a worker is a process of its own, and frames per CPU-second are what count).

    Raises:
        ValueError: naming ``env.vectorizer`` when ``env_id`` is not an ALE id, ``atari`` is not true, or
            a keyword argument has no native counterpart.
    """
    import gymnasium

    where = f"env.vectorizer {vectorizer!r}"
    if kwargs.pop("atari", False) is not True:
        raise ValueError(f"{where} steps Atari with the native frame processing: it needs env.atari: true")
    if not isinstance(env_id, str):
        raise ValueError(f"{where} needs an ALE environment id such as ALE/Pong-v5; got {env_id!r}")
    if env_id not in gymnasium.registry:
        try:
            import ale_py
        except ImportError:
            raise ValueError(f"{where} needs ale-py (pip install ale-py); it is not installed") from None
        gymnasium.register_envs(ale_py)
    spec = gymnasium.registry.get(env_id)
    if spec is None or "ale_py" not in str(spec.entry_point):
        made_by = "not a registered id" if spec is None else f"made by {spec.entry_point}"
        raise ValueError(f"{where} needs an ALE environment id such as ALE/Pong-v5; {env_id!r} is {made_by}")
    unknown = sorted(set(kwargs) - set(NATIVE_KWARGS))
    if unknown:
        raise ValueError(f"{where}: env.kwargs {unknown} have no native counterpart (it takes "
                         f"{', '.join(NATIVE_KWARGS)}); use vectorizer: python for them")
    settings = {"game": spec.kwargs.get("game"), "repeat_action_probability": 0.25, "frameskip": 4,
                "full_action_space": False, "max_num_frames_per_episode": 108_000, "num_threads": 1}
    settings.update({k: v for k, v in spec.kwargs.items() if k in settings})
    settings.update(kwargs)
    if settings.pop("obs_type", "grayscale") != "grayscale":
        raise ValueError(f"{where}: env.kwargs obs_type must be grayscale (the native frames are gray)")
    if isinstance(settings["frameskip"], bool) or not isinstance(settings["frameskip"], int) \
            or settings["frameskip"] <= 0:
        raise ValueError(f"{where}: env.kwargs frameskip must be a positive int (no random frameskip natively); "
                         f"got {settings['frameskip']!r}")
    return settings


class NativeAtariVectorEnv:
    """N Atari environments stepped by a native vector environment, with `VectorEnv`'s interface.

    ``reset(seed)`` seeds environment ``i`` with ``derive_seed(seed, "env", i)`` (modulo 2**31) as `VectorEnv`
    does; the native sticky-action random stream still differs from ale-py's gymnasium env's for the same
    seed (ale-py's vector env, seen), and EnvPool takes seeds only when it makes the pool (a seeded `reset`
    re-makes it). ``step(actions)`` returns ``(next_obs, rewards, terminated,
    truncated, infos, obs_to_act_on)`` with finished environments reset in the same step and their indices
    kept as `done_indices`.

    Args:
        env_id: an ALE gymnasium id (``ALE/Pong-v5``).
        num_envs: N, a positive int.
        env_kwargs: ``atari`` (must be true) and the ALE keyword arguments in `NATIVE_KWARGS`.
        vectorizer: ``ale`` or ``envpool``.

    Raises:
        ValueError: see `ale_settings`; also when the library is not installed.
    """

    def __init__(self, env_id: str, num_envs: int, env_kwargs: dict[str, Any], vectorizer: str) -> None:
        import gymnasium as gym

        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs <= 0:
            raise ValueError(f"NativeAtariVectorEnv: num_envs must be a positive int; got {num_envs!r}")
        settings = ale_settings(env_id, vectorizer, dict(env_kwargs))
        self.env_id, self.vectorizer, self.num_envs = env_id, vectorizer, int(num_envs)
        self.frames_per_step = float(settings["frameskip"])
        from reference_agents.workers.native_backends import make_backend

        self.backend = make_backend(vectorizer, settings, self.num_envs)
        self.observation_space = gym.spaces.Box(0, 255, (ATARI_SIZE, ATARI_SIZE, ATARI_FRAMES), np.uint8)
        self.action_space = gym.spaces.Discrete(self.backend.num_actions)
        #: Steps since each environment's reset, up to `ATARI_FRAMES` - 1 (the stack still holds padding).
        self._age = np.zeros(self.num_envs, np.int64)
        self._needs_reset = True
        self.done_indices = np.zeros(0, np.int64)

    def _fill(self, stacks: np.ndarray, rows: np.ndarray, ages: np.ndarray) -> None:
        """Overwrites the padding of ``stacks[rows]`` (``[k, 4, H, W]``) with each episode's first frame."""
        for row, age in zip(rows, ages):
            first = ATARI_FRAMES - 1 - int(age)
            if first > 0:
                stacks[row, :first] = stacks[row, first]

    def _fresh(self, stacks: np.ndarray) -> np.ndarray:
        young = np.flatnonzero(self._age < ATARI_FRAMES - 1)
        self._fill(stacks, young, self._age[young])
        return stacks

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Resets every environment; environment ``i`` from ``derive_seed(seed, "env", i)`` (None: unseeded).

        Returns:
            ``uint8[N,84,84,4]``.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"VectorEnv.reset: seed must be an int or None; got {seed!r}")
        if seed is not None and seed < 0:
            raise ValueError(f"VectorEnv.reset: seed must be >= 0 (environments take non-negative seeds); got {seed}")
        seeds = None if seed is None else [derive_seed(int(seed), "env", i) % 2 ** 31   # native seeds: int32
                                           for i in range(self.num_envs)]
        stacks = self.backend.reset(seeds)
        self._age[:] = 0
        self._needs_reset = False
        self.done_indices = np.zeros(0, np.int64)
        return _channel_last(self._fresh(stacks))

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict], np.ndarray]:
        """Steps every environment; finished ones are reset (see `VectorEnv.step`, the same contract)."""
        if self._needs_reset:
            raise RuntimeError("VectorEnv.step: call reset() first")
        n = len(actions) if hasattr(actions, "__len__") else None
        if n != self.num_envs:
            raise ValueError(f"VectorEnv.step: expected {self.num_envs} actions (one per env), got "
                             f"{'a non-sequence' if n is None else n}: {actions!r}")
        self._age += 1
        stacks, rewards, terminated, truncated, finals, infos = self.backend.step(np.asarray(actions, np.int32))
        self.done_indices = done = np.flatnonzero(terminated | truncated)
        if done.size:
            finals = finals.copy()
            self._fill(finals, np.arange(done.size), self._age[done])
            self._age[done] = 0
        act_on = _channel_last(self._fresh(stacks))
        next_obs = act_on
        if done.size:
            next_obs = act_on.copy()
            next_obs[done] = _channel_last(finals)
            for i in done:
                infos[i]["reset_info"] = {}
        return next_obs, rewards.astype(np.float64), terminated, truncated, infos, act_on

    def close(self) -> None:
        """Closes the native environment."""
        self.backend.close()


def _channel_last(stacks: np.ndarray) -> np.ndarray:
    """``[k, 4, H, W]`` stacks as ``[k, H, W, 4]`` (a contiguous copy)."""
    return np.ascontiguousarray(stacks.transpose(0, 2, 3, 1))
