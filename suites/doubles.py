"""Test doubles the suites share: a fake agent, an environment with scripted episodes, a fake clock, a text sink.

Import them in tests as ``from suites.doubles import FakeAgent, ScriptedEnv, FakeClock, TextSink``
(pytest's importlib mode makes ``suites`` a package; nothing is added to ``sys.path``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from harness.spaces import Space
from reference_agents.components.helpers import NStepAccumulator


# ---- agents -------------------------------------------------------------------------------------------
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
        self.q_calls: list[np.ndarray] = []                  # q_values() calls (states)
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

    def fixed_q_values(self, states: Any) -> np.ndarray:
        """Q-values ``[N, A]``, a fixed function of each observation: ``Q(s, a) = sum(s) - 0.1 a`` (nothing
        recorded)."""
        flat = np.asarray(states, np.float64).reshape(len(states), -1).sum(1)
        return (flat[:, None] - 0.1 * np.arange(self.num_actions)[None]).astype(np.float32)

    def q_values(self, states: Any) -> np.ndarray:
        """`fixed_q_values`, the call recorded in ``q_calls``."""
        self.q_calls.append(np.array(states))
        return self.fixed_q_values(states)

    def get_actions_and_q_values(self, states: Any, explore: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """`get_actions` and the Q-values of the same states (recorded in ``acted``, not in ``q_calls``)."""
        return self.get_actions(states, explore), self.fixed_q_values(states)

    def update_on_schedule(self) -> list[dict[str, float]]:
        out = []
        while self.timesteps - self._updated_at >= self.update_every:
            self._updated_at += self.update_every
            self.updates += 1
            out.append({"loss": 1.0 / self.updates, "grad_norm": 0.0})
        return out

    def reset_preprocessor(self, env_ids=None) -> None:
        self.resets.append(list(env_ids))


# ---- environments -------------------------------------------------------------------------------------
class ScriptedEnv(gym.Env):
    """An environment whose episodes follow a script: lengths, how each ends, and the rewards.

    Episode ``k`` (counted over resets, the script repeating) lasts ``script[k % len(script)][0]``
    steps and ends ``terminated`` or ``truncated`` as the script's second entry says; every step of
    it pays ``k + 1``, so an episode's return is ``(k + 1) * length``. The observation is
    ``float32[2]``: ``(k, step within the episode)``; actions (``Discrete(num_actions)``) are recorded
    in `actions` and otherwise ignored.

    Args:
        script: ``[(length, "terminated" | "truncated"), ...]``.
        num_actions: the size of the action space.

    Raises:
        ValueError: for an empty script, a non-positive length or an unknown ending.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, script: Sequence[tuple[int, str]], num_actions: int = 2) -> None:
        if not script:
            raise ValueError("ScriptedEnv: the script needs at least one episode")
        for length, end in script:
            if length <= 0 or end not in ("terminated", "truncated"):
                raise ValueError(f"ScriptedEnv: episodes are (positive length, 'terminated'|'truncated'); "
                                 f"got {(length, end)!r}")
        self.script = list(script)
        self.observation_space = gym.spaces.Box(0.0, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(num_actions)
        self.episode, self.t = -1, 0
        self.actions: list[int] = []
        self.seeds: list[int | None] = []

    def _obs(self) -> np.ndarray:
        return np.array([self.episode, self.t], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.seeds.append(seed)
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {"episode": self.episode}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.actions.append(int(action))
        self.t += 1
        length, end = self.script[self.episode % len(self.script)]
        done = self.t >= length
        return (self._obs(), float(self.episode + 1), done and end == "terminated", done and end == "truncated",
                {})

    @staticmethod
    def episodes(script: Sequence[tuple[int, str]], count: int) -> list[tuple[int, float, bool, bool]]:
        """The first ``count`` episodes the script gives: ``(length, return, terminated, truncated)``."""
        out = []
        for k in range(count):
            length, end = script[k % len(script)]
            out.append((length, float((k + 1) * length), end == "terminated", end == "truncated"))
        return out


# ---- time and output ----------------------------------------------------------------------------------
class FakeClock:
    """A clock that moves only when told, for code that reads ``time.perf_counter`` and friends.

    Install it in place of a module's ``time`` (``monkeypatch.setattr(module, "time", clock)``):
    `perf_counter`, `monotonic`, `process_time` and `time` all read it, `sleep` advances it.

    Args:
        start: the first reading.
        tick: how far every reading advances the clock afterwards (0: only `advance` and `sleep` move it).
    """

    def __init__(self, start: float = 0.0, tick: float = 0.0) -> None:
        self.now, self.tick, self.readings = float(start), float(tick), 0

    def __call__(self) -> float:
        value = self.now
        self.now += self.tick
        self.readings += 1
        return value

    perf_counter = monotonic = process_time = time = __call__

    def advance(self, seconds: float) -> None:
        """Moves the clock forward by ``seconds``."""
        self.now += seconds

    sleep = advance


class TextSink:
    """A text stream that keeps what is written (``text``); not a terminal."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
