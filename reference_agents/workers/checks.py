"""What `VectorEnvWorker` checks of its agent and environments: settings read from the agent's config (for
worker-side n-step folding), the environment's spaces against the agent's declared ones, and every batch of
observations and actions against them (`WorkerChecks`, a mixin of the worker)."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.spaces import Space, from_gymnasium


class WorkerChecks:
    """The checks of `VectorEnvWorker` (it sets ``agent``, ``envs``, ``num_envs``, ``validate`` and
    ``SMALL_ACTIONS`` before calling them)."""

    agent: Any
    envs: Any
    num_envs: int
    validate: bool
    SMALL_ACTIONS: int

    def _agent_setting(self, name: str) -> Any:
        config = getattr(self.agent, "config", None)
        if isinstance(config, dict) and name in config:
            return config[name]
        if config is not None and hasattr(config, name):
            return getattr(config, name)
        return getattr(self.agent, name, None)

    def _resolve(self, name: str, given: Any, default: Any, positive_int: bool = False) -> Any:
        value = given if given is not None else self._agent_setting(name)
        where = "argument" if given is not None else "agent config"
        if value is None:
            if default is None:
                raise ValueError(f"VectorEnvWorker: worker-side n-step folding needs {name}: pass {name}= or use an "
                                 f"agent whose config has {name!r}")
            return default
        if positive_int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"VectorEnvWorker: {name} ({where}) must be a positive int; got {value!r}")
            return int(value)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"VectorEnvWorker: {name} ({where}) must be a number in [0, 1]; got {value!r}")
        return float(value)

    def _check_spaces(self) -> None:
        try:
            self._action_space = from_gymnasium(self.envs.action_space).with_batch_rank()
        except ValueError:
            self._action_space = None
        self._action_bounds = None
        self._action_shape = None if self._action_space is None else (self.num_envs,) + tuple(self._action_space.shape)
        self._action_integer = self._action_space is not None and np.dtype(self._action_space.dtype).kind in "iu"
        if self._action_integer:
            low, high = np.asarray(self._action_space.low), np.asarray(self._action_space.high)
            if low.size and (low == low.flat[0]).all() and (high == high.flat[0]).all():
                self._action_bounds = (int(low.flat[0]), int(high.flat[0]))
        # An agent that declares the environment's own action space (`action_space`, as both reference agents do:
        # their act graphs' output space is it, so every action is in it by construction) is held to it here, once;
        # its actions are then not checked again on every step, unless validate asks for it (about 1 us a step
        # alone, 3 us inside a 1-env CartPole loop). Any other agent's actions are checked on every step.
        declared = getattr(self.agent, "action_space", None)
        self._trusted_actions = (not self.validate and self._action_space is not None and isinstance(declared, Space)
                                 and declared.with_batch_rank() == self._action_space)
        state_space = getattr(self.agent, "state_space", None)
        self._state_space = None if state_space is None else state_space.with_batch_rank().without_bounds()
        if self._state_space is None:
            return
        try:
            env_space = from_gymnasium(self.envs.observation_space)
        except ValueError:
            return
        # shape and dtype only: environments may step outside their declared bounds
        if env_space.without_bounds() != state_space.without_bounds().strip_ranks():
            raise ValueError(f"VectorEnvWorker: environment {self.envs.env_id!r} observes {env_space}, which does "
                             f"not fit the agent's state_space {state_space} (shape and dtype must agree)")

    def _check_observations(self, obs: Any, when: str) -> None:
        if self._state_space is None:
            return
        reason = self._state_space.why_not(obs)
        if reason is not None:
            raise ValueError(f"VectorEnvWorker: observations of environment {self.envs.env_id!r} ({when}) do not fit "
                             f"the agent's state_space {self._state_space}: {reason}")

    def _check_actions(self, actions: Any, step: int, num_envs: int | None = None) -> np.ndarray:
        arr = np.asarray(actions)
        space = self._action_space
        if space is None:
            return arr
        n = self.num_envs if num_envs is None else num_envs
        want = self._action_shape if num_envs is None else (n,) + tuple(space.shape)
        if arr.shape != want:
            raise ValueError(f"VectorEnvWorker: agent.get_actions returned actions of shape {arr.shape} at worker step "
                             f"{step}; expected {want} (one action of shape {tuple(space.shape)} for each of "
                             f"{n} envs of {self.envs.env_id!r})")
        integer = arr.dtype.kind in "iu" and self._action_integer
        if integer and arr.size and self._action_bounds is not None:
            # the per-step fast path for discrete actions; why_not only to explain a failure
            low, high = self._action_bounds
            if arr.size <= self.SMALL_ACTIONS:
                # a few environments: Python's min and max over a list (about 0.5 us at 4 actions, 1.4 us at
                # 16), not two NumPy reductions (2.3 and 4 us)
                values = arr.ravel().tolist()
                if low <= min(values) and max(values) <= high:
                    return arr
            elif low <= arr.min() and arr.max() <= high:
                return arr
        probe = arr.astype(space.dtype) if integer else arr
        reason = space.why_not(probe)
        if reason is not None:
            core = space.strip_ranks()
            rows = [i for i in range(n) if core.why_not(probe[i]) is not None]
            raise ValueError(f"VectorEnvWorker: agent.get_actions returned actions outside the action space "
                             f"{core} of {self.envs.env_id!r} at worker step {step} (envs {rows}, actions "
                             f"{[probe[i].tolist() for i in rows]}): {reason}")
        return arr
