"""A fake agent with the DQN agent's worker-facing interface, recording every call."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from harness.spaces import FloatBox, Space, from_gymnasium
from reference_agents.components.helpers import NStepAccumulator


def pseudo_random_policy(states: np.ndarray, num_actions: int) -> np.ndarray:
    """Actions that look random but are a function of each observation alone (so a hand-stepped
    reference can recompute them)."""
    flat = np.asarray(states, np.float64).reshape(len(states), -1)
    return (np.floor(np.abs(flat.sum(axis=1)) * 997.0 + flat.shape[1]) % num_actions).astype(np.int64)


def greedy_policy(states: np.ndarray, num_actions: int) -> np.ndarray:
    """CartPole's pole-balancing rule (push towards the pole's lean): long episodes."""
    s = np.asarray(states, np.float64)
    return ((s[:, 2] + 0.5 * s[:, 3]) > 0).astype(np.int64) % num_actions


class FakeAgent:
    """Records the calls a worker makes; acts with a deterministic function of the observations.

    Args:
        state_space: the space of one observation.
        num_actions: the number of discrete actions.
        policy: ``fn(states, num_actions) -> int64 [N]`` used when exploring.
        greedy: the same for ``explore=False``.
        n_step, gamma: the config's folding parameters; the agent folds per env_id in `observe`.
        update_every: `update_on_schedule` returns one metrics dict per this many observed rows.
    """

    def __init__(self, state_space: Space, num_actions: int,
                 policy: Callable[[np.ndarray, int], np.ndarray] = pseudo_random_policy,
                 greedy: Callable[[np.ndarray, int], np.ndarray] = greedy_policy,
                 n_step: int = 1, gamma: float = 0.9, update_every: int = 4) -> None:
        self.state_space = state_space
        self.num_actions = num_actions
        self.policy, self.greedy = policy, greedy
        self.config = {"n_step": n_step, "gamma": gamma}
        self.update_every = update_every
        self.timesteps = 0
        self._updated_at = 0
        self.acted: list[tuple[np.ndarray, bool]] = []      # (states, explore)
        self.observed: list[dict[str, Any]] = []             # observe() calls
        self.transitions: list[dict[str, Any]] = []          # observe_transitions() calls
        self.folded: list[dict[str, Any]] = []               # what observe() folded (agent side)
        self.td_calls: list[dict[str, Any]] = []
        self.resets: list[list[int]] = []
        self.updates = 0
        self._acc: dict[int, NStepAccumulator] = {}

    def get_actions(self, states: Any, explore: bool = True, preprocess: bool = True) -> np.ndarray:
        states = np.array(states)
        self.acted.append((states, explore))
        return (self.policy if explore else self.greedy)(states, self.num_actions)

    def observe(self, states, actions, rewards, terminals, next_states, env_id=None, truncated=None) -> None:
        n = len(rewards)
        env_id = list(range(n)) if env_id is None else list(env_id)
        truncated = np.zeros(n, bool) if truncated is None else np.asarray(truncated)
        self.observed.append({"states": np.array(states), "actions": np.array(actions),
                              "rewards": np.array(rewards), "terminals": np.array(terminals),
                              "next_states": np.array(next_states), "env_id": env_id,
                              "truncated": np.array(truncated)})
        for row, e in enumerate(env_id):
            acc = self._acc.setdefault(e, NStepAccumulator(self.config["n_step"], self.config["gamma"]))
            self.folded += acc.push(np.array(states[row]), actions[row], rewards[row], np.array(next_states[row]),
                                    bool(terminals[row]), bool(truncated[row]))
        self.timesteps += n

    def observe_transitions(self, records: dict[str, Any]) -> None:
        self.transitions.append({k: np.array(v) for k, v in records.items()})
        self.timesteps += len(records["rewards"])

    def td_errors(self, records: dict[str, Any]) -> np.ndarray:
        self.td_calls.append(records)
        s = np.asarray(records["states"], np.float64).reshape(len(records["rewards"]), -1).sum(1)
        s2 = np.asarray(records["next_states"], np.float64).reshape(len(records["rewards"]), -1).sum(1)
        return (np.asarray(records["rewards"]) - 1.25 + np.asarray(records["discounts"])
                * (1.0 - np.asarray(records["terminals"], np.float64)) * s2 - s - 0.1 * records["actions"])

    def update_on_schedule(self) -> list[dict[str, float]]:
        out = []
        while self.timesteps - self._updated_at >= self.update_every:
            self._updated_at += self.update_every
            self.updates += 1
            out.append({"loss": 1.0 / self.updates, "grad_norm": 0.0})
        return out

    def reset_preprocessor(self, env_ids=None) -> None:
        self.resets.append(list(env_ids))


@pytest.fixture
def cartpole_agent():
    """A fake agent for CartPole-v1 (float32[4] observations, 2 actions)."""
    import gymnasium

    space = from_gymnasium(gymnasium.make("CartPole-v1").observation_space)
    assert isinstance(space, FloatBox)
    return lambda **kw: FakeAgent(space, 2, **kw)


@pytest.fixture
def fake_agent_cls():
    """The `FakeAgent` class, for agents over other spaces."""
    return FakeAgent


@pytest.fixture
def policies():
    """The fake agent's policies: ``(pseudo_random_policy, greedy_policy)``."""
    return pseudo_random_policy, greedy_policy
