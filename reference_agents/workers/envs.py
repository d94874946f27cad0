"""A lockstep `VectorEnv` for workers (environments themselves are made by `reference_agents.environments`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from harness.seeds import derive_seed
from reference_agents.environments import frames_per_step, make_env  # noqa: F401  (re-exported)

EnvFactory = Callable[[], Any]

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


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "keys " + str(sorted(value))
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"shape {np.shape(value)}"


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
        #: The indices of the environments whose episode ended at the last `step` (int64 ``[k]``, ascending).
        self.done_indices = np.zeros(0, np.int64)

    def reset(self, seed: int | None = None) -> Any:
        """Resets every environment; environment ``i`` gets ``seed + i`` (None: unseeded; `harness.seeds`).

        Returns:
            The observations stacked along a leading axis of size N.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"VectorEnv.reset: seed must be an int or None; got {seed!r}")
        if seed is not None and seed < 0:
            raise ValueError(f"VectorEnv.reset: seed must be >= 0 (environments take non-negative seeds); got {seed}")
        obs = []
        for i, env in enumerate(self.envs):
            o, _ = env.reset(seed=None if seed is None else derive_seed(int(seed), "env", i))
            obs.append(o)
        self._needs_reset = False
        self.done_indices = np.zeros(0, np.int64)
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
            the two are the same object. The finished environments' indices are
            kept as `done_indices` until the next step.

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
        self.done_indices = done = np.flatnonzero(terminated_arr | truncated_arr)
        act_on = next_obs
        if done.size:
            act_on = _copy_value(next_obs)
            for i in done:
                o, reset_info = self.envs[i].reset()
                try:
                    _set_row(act_on, int(i), o)
                except (ValueError, TypeError, KeyError, IndexError) as exc:
                    raise ValueError(f"VectorEnv.step: environment {int(i)}'s reset observation has "
                                     f"{_describe(o)}; its row of the batch has {_describe(index_value(act_on, 0))} "
                                     f"({type(exc).__name__}: {exc})") from exc
                infos[i]["reset_info"] = reset_info
        return next_obs, np.asarray(rewards, dtype=np.float64), terminated_arr, truncated_arr, infos, act_on

    def close(self) -> None:
        """Closes every environment."""
        for env in self.envs:
            env.close()
