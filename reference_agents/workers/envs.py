"""Environments for workers: `make_env`, `frames_per_step` and a lockstep `VectorEnv`."""

from __future__ import annotations

import difflib
from typing import Any, Callable, Sequence

import numpy as np

EnvFactory = Callable[[], Any]

# Attributes through which a wrapper layer (or the unwrapped env) repeats one action over
# several emulator frames: ale_py's AtariEnv (`_frameskip`), gymnasium's AtariPreprocessing
# (`frame_skip`) and MaxAndSkipObservation (`_skip`).
_SKIP_ATTRIBUTES = ("_frameskip", "frame_skip", "_skip")


def _registry() -> dict[str, Any]:
    import gymnasium

    return gymnasium.registry


def _register_ale() -> bool:
    """Registers ale-py's Atari ids with gymnasium; False when ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    import gymnasium

    gymnasium.register_envs(ale_py)
    return True


def make_env(env_id: str, atari: bool = False, **kwargs: Any) -> Any:
    """A gymnasium environment for a registered id (classic control, Box2D, ALE, ...).

    ALE ids (``"ALE/Pong-v5"``, ``"PongNoFrameskip-v4"``) are registered from
    ale-py on first use, so callers need not import it.

    Args:
        env_id: a gymnasium id.
        atari: Atari frame processing env-side, as an agent config's ``env.atari`` asks: gray
            frames (``obs_type="grayscale"``) resized to 84x84 and the last 4 stacked
            (`reference_agents.environments.AtariFrames`), ``uint8[84,84,4]``.
        **kwargs: passed to ``gymnasium.make`` (e.g. ``max_episode_steps``, ``frameskip``).

    Returns:
        The environment ``gymnasium.make`` returns (wrapped in ``AtariFrames`` with ``atari``).

    Raises:
        ValueError: if ``env_id`` is not a string or not registered (naming it and listing
            close matches), or if the environment rejects ``kwargs`` (naming them).
    """
    import gymnasium

    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"make_env: env_id must be a non-empty gymnasium id string; got {env_id!r}")
    registry = _registry()
    if env_id not in registry:
        ale = _register_ale()
        if env_id not in registry:
            close = difflib.get_close_matches(env_id, list(registry), n=5, cutoff=0.6)
            hint = f"; close matches: {close}" if close else ""
            if not ale and (env_id.startswith("ALE/") or "NoFrameskip" in env_id):
                hint += " (ale-py is not installed, so no Atari ids are registered)"
            raise ValueError(f"make_env: unknown environment id {env_id!r}{hint}")
    if not isinstance(atari, bool):
        raise ValueError(f"make_env: atari must be a bool; got {atari!r}")
    if atari:
        entry = str(registry[env_id].entry_point)
        if "ale_py" not in entry:
            raise ValueError(f"make_env: atari=True needs an ALE environment; {env_id!r} is made by {entry}")
        kwargs.setdefault("obs_type", "grayscale")
    try:
        env = gymnasium.make(env_id, **kwargs)
    except TypeError as exc:
        raise ValueError(f"make_env: environment {env_id!r} rejected the keyword arguments "
                         f"{sorted(kwargs)}: {exc}") from exc
    if atari:
        from reference_agents.environments import AtariFrames

        try:
            env = AtariFrames(env)
        except ValueError as exc:
            raise ValueError(f"make_env: atari=True for {env_id!r} with {kwargs}: {exc}") from exc
    return env


def frames_per_step(env: Any) -> float:
    """The emulator frames one ``env.step`` advances.

    The product of the frame skips of every wrapper layer and of the unwrapped
    environment: ALE's ``frameskip`` (4 for ``ALE/*-v5``, 1 for ``*NoFrameskip-v4``),
    gymnasium's ``AtariPreprocessing(frame_skip=k)`` and ``MaxAndSkipObservation(skip=k)``.
    Environments without frames (classic control) count 1. A stochastic ALE
    frameskip ``(low, high)`` (uniform in ``low..high-1``) counts its mean.

    Args:
        env: a gymnasium environment, wrapped or not.

    Returns:
        Frames per step (an int-valued float unless the frameskip is stochastic).

    Raises:
        ValueError: if a layer's frame skip is not a positive int or a ``(low, high)`` pair.
    """
    frames = 1.0
    layer = env
    seen: set[int] = set()
    while layer is not None and id(layer) not in seen:
        seen.add(id(layer))
        own = vars(layer) if hasattr(layer, "__dict__") else {}
        for name in _SKIP_ATTRIBUTES:
            if name in own:
                frames *= _skip_value(type(layer).__name__, name, own[name])
        layer = own.get("env")
    return frames


def _skip_value(owner: str, name: str, value: Any) -> float:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return float(value)
    if (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
            and 0 < value[0] < value[1]):
        return (value[0] + value[1] - 1) / 2.0
    raise ValueError(f"frames_per_step: {owner}.{name} must be a positive int or a (low, high) pair; "
                     f"got {value!r}")


def stack_values(values: Sequence[Any]) -> Any:
    """Stacks per-env values (arrays, or dicts/tuples of them) along a new leading axis."""
    first = values[0]
    if isinstance(first, dict):
        return {k: stack_values([v[k] for v in values]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack_values([v[i] for v in values]) for i in range(len(first)))
    return np.stack([np.asarray(v) for v in values])


def index_value(value: Any, i: int) -> Any:
    """Row ``i`` of a stacked value (arrays, or dicts/tuples of them)."""
    if isinstance(value, dict):
        return {k: index_value(v, i) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(index_value(v, i) for v in value)
    return value[i]


def _set_row(target: Any, i: int, value: Any) -> None:
    if isinstance(target, dict):
        for k in target:
            _set_row(target[k], i, value[k])
    elif isinstance(target, tuple):
        for t, v in zip(target, value):
            _set_row(t, i, v)
    else:
        target[i] = value


def _copy_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_copy_value(v) for v in value)
    return value.copy()


class VectorEnv:
    """N independent environments stepped in lockstep, each reset as soon as its episode ends.

    Unlike gymnasium's vector environments, `step` returns both the observation
    that ended an episode (for the transition's ``next_state``) and the
    observation of the episode that starts in its place (to act on next).
    Environment ``i`` is seeded with ``seed + i`` on the first `reset`; later
    resets continue each environment's own random stream, so a run is
    reproducible from the one seed.

    Args:
        env_id: a gymnasium id (made with `make_env`), or a callable returning a new environment.
        num_envs: the number of environments N, a positive int.
        env_kwargs: keyword arguments for `make_env` (only with an id).

    Raises:
        ValueError: for a bad ``env_id``/``num_envs``/``env_kwargs``.
    """

    def __init__(self, env_id: str | EnvFactory, num_envs: int = 1,
                 env_kwargs: dict[str, Any] | None = None) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs <= 0:
            raise ValueError(f"VectorEnv: num_envs must be a positive int; got {num_envs!r}")
        if env_kwargs is not None and not isinstance(env_kwargs, dict):
            raise ValueError(f"VectorEnv: env_kwargs must be a dict or None; got {type(env_kwargs).__name__}")
        if callable(env_id):
            if env_kwargs:
                raise ValueError("VectorEnv: env_kwargs are only for an env id, not an environment factory")
            self.env_id = getattr(env_id, "__name__", repr(env_id))
            self.envs = [env_id() for _ in range(int(num_envs))]
        else:
            self.env_id = env_id
            self.envs = [make_env(env_id, **(env_kwargs or {})) for _ in range(int(num_envs))]
        self.num_envs = int(num_envs)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.frames_per_step = frames_per_step(self.envs[0])
        self._needs_reset = True

    def reset(self, seed: int | None = None) -> Any:
        """Resets every environment; environment ``i`` gets ``seed + i`` (None: unseeded).

        Returns:
            The observations stacked along a leading axis of size N.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"VectorEnv.reset: seed must be an int or None; got {seed!r}")
        obs = []
        for i, env in enumerate(self.envs):
            o, _ = env.reset(seed=None if seed is None else int(seed) + i)
            obs.append(o)
        self._needs_reset = False
        return stack_values(obs)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[dict], Any]:
        """Steps every environment with its action; finished environments are reset.

        Args:
            actions: N actions, one per environment (indexable by environment).

        Returns:
            ``(next_obs, rewards, terminated, truncated, infos, obs_to_act_on)``:
            ``next_obs`` holds each step's own observation (for a finished episode
            its final one), ``rewards`` float64 ``[N]``, ``terminated`` and
            ``truncated`` bool ``[N]``, ``infos`` one dict per environment (a reset
            environment's reset info under ``"reset_info"``), ``obs_to_act_on``
            equal to ``next_obs`` except in the rows of finished environments,
            which hold the new episode's first observation. When no episode ended
            the two are the same object.

        Raises:
            RuntimeError: if called before `reset`.
            ValueError: if ``actions`` does not hold N actions.
        """
        if self._needs_reset:
            raise RuntimeError("VectorEnv.step: call reset() first")
        n = len(actions) if hasattr(actions, "__len__") else None
        if n != self.num_envs:
            raise ValueError(f"VectorEnv.step: expected {self.num_envs} actions (one per env), got "
                             f"{'a non-sequence' if n is None else n}: {actions!r}")
        obs, rewards, terminated, truncated, infos = [], [], [], [], []
        for i, env in enumerate(self.envs):
            o, r, term, trunc, info = env.step(actions[i])
            obs.append(o)
            rewards.append(r)
            terminated.append(term)
            truncated.append(trunc)
            infos.append(dict(info))
        next_obs = stack_values(obs)
        terminated_arr = np.asarray(terminated, dtype=bool)
        truncated_arr = np.asarray(truncated, dtype=bool)
        done = np.flatnonzero(terminated_arr | truncated_arr)
        act_on = next_obs
        if done.size:
            act_on = _copy_value(next_obs)
            for i in done:
                o, reset_info = self.envs[i].reset()
                _set_row(act_on, int(i), o)
                infos[i]["reset_info"] = reset_info
        return next_obs, np.asarray(rewards, dtype=np.float64), terminated_arr, truncated_arr, infos, act_on

    def close(self) -> None:
        """Closes every environment."""
        for env in self.envs:
            env.close()
