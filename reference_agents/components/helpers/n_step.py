"""`n_step_transitions`: worker-side folding of a rollout into n-step transitions, in NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np


def n_step_transitions(rewards: Any, terminals: Any, n: int, gamma: float,
                       keep_partial: bool = False) -> dict[str, np.ndarray]:
    """Folds the steps of rollouts into n-step transitions, one per start step.

    The transition from step ``t`` covers ``k`` steps, ``k = min(n, steps to
    the episode's end, steps to the rollout's end)``: its reward is
    ``sum_{i<k} gamma^i r_{t+i}``, its discount ``gamma^k``, it is terminal when
    the episode ended within those ``k`` steps, and it bootstraps from the
    observation ``t + k`` (observations ``0..T``: ``obs[t + 1]`` follows step
    ``t``). This is the n-step target of Mnih et al. 2016 (eq. in section 4)
    and Hessel et al. 2018 (eq. 2): ``R_t^(n) + gamma^n max_a Q(s_{t+n}, a)``.

    A window cut short by the rollout's end (not by a terminal) has
    ``k < n``; `DQNLoss` with ``n_step=n`` bootstraps every transition with
    ``gamma^n``, so such windows are marked invalid unless ``keep_partial``.

    Args:
        rewards: float rewards, time-major ``[T]`` or ``[T, ...]`` (one column per rollout).
        terminals: bools of ``rewards``' shape; ``terminals[t]`` means the episode ended with step ``t``.
        n: the number of steps, a positive int.
        gamma: the discount, in [0, 1].
        keep_partial: whether windows cut by the rollout's end count as valid.

    Returns:
        A dict of arrays of ``rewards``' shape: ``rewards`` (float64 n-step sums),
        ``discounts`` (``gamma^k``), ``terminals`` (bool), ``next_index``
        (int64 ``t + k``), ``steps`` (int64 ``k``) and ``valid`` (bool).

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"n_step_transitions: n must be a positive int; got {n!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"n_step_transitions: gamma must be a number in [0, 1]; got {gamma!r}")
    r = np.asarray(rewards, dtype=np.float64)
    done = np.asarray(terminals)
    if done.dtype != np.bool_:
        raise ValueError(f"n_step_transitions: terminals must be bools; got dtype {done.dtype}")
    if r.ndim == 0 or r.shape != done.shape:
        raise ValueError(f"n_step_transitions: rewards and terminals must share one shape [T, ...]; got "
                         f"{r.shape} and {done.shape}")
    length = r.shape[0]
    sums = np.zeros_like(r)
    steps = np.zeros(r.shape, np.int64)
    ended = np.zeros(r.shape, bool)
    open_ = np.ones(r.shape, bool)  # windows still collecting rewards
    for i in range(n):
        # step t + i of the window starting at t, for every t that has one
        idx = np.arange(length) + i
        inside = idx < length
        take = open_ & inside.reshape((-1,) + (1,) * (r.ndim - 1))
        shifted_r = np.zeros_like(r)
        shifted_d = np.zeros_like(done)
        shifted_r[inside] = r[idx[inside]]
        shifted_d[inside] = done[idx[inside]]
        sums = np.where(take, sums + gamma ** i * shifted_r, sums)
        steps = np.where(take, steps + 1, steps)
        ended = ended | (take & shifted_d)
        open_ = take & ~shifted_d
    starts = np.arange(length, dtype=np.int64).reshape((-1,) + (1,) * (r.ndim - 1))
    return {
        "rewards": sums,
        "discounts": np.power(float(gamma), steps).astype(np.float64),
        "terminals": ended,
        "next_index": starts + steps,
        "steps": steps,
        "valid": ended | (steps == n) | bool(keep_partial),
    }


class NStepAccumulator:
    """Streaming n-step folding for ONE environment: push steps as they happen, get finished transitions.

    The window starting at step ``t`` holds ``k <= n`` steps and becomes the
    transition ``(s_t, a_t, R, s_{t+k}, terminal, discount)`` with
    ``R = sum_{i<k} gamma^i r_{t+i}``:

    - a full window (``k = n``) without an episode end: ``terminal=False``,
      ``discount = gamma^n``; emitted as soon as its n-th step is pushed;
    - an episode that *terminates* (gymnasium ``terminated``): every open window
      ends there with ``terminal=True`` (no bootstrap; ``discount = gamma^k``
      for the record, zeroed by the terminal in the loss);
    - an episode that is *truncated* (a time limit, gymnasium ``truncated``): every
      open window ends there with ``terminal=False`` and ``discount = gamma^k``,
      bootstrapping from the last observation: the state did not end, the clock did.

    ``n = 1`` gives the ordinary one-step transitions with ``discount = gamma``
    (0 steps of folding). The transitions match `n_step_transitions` on the same
    rollout, with truncations treated as cut windows that bootstrap.

    Args:
        n: the number of steps per window, a positive int.
        gamma: the discount, in [0, 1].

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, n: int, gamma: float) -> None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise ValueError(f"NStepAccumulator: n must be a positive int; got {n!r}")
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
            raise ValueError(f"NStepAccumulator: gamma must be a number in [0, 1]; got {gamma!r}")
        self.n, self.gamma = int(n), float(gamma)
        self._steps: list[tuple[Any, Any, float]] = []  # (state, action, reward) of the open windows' steps
        self.last_next_state: Any = None  # the next state of the newest open step

    def __len__(self) -> int:
        """The number of pushed steps whose windows are still open."""
        return len(self._steps)

    def _window(self, start: int, next_state: Any, terminal: bool) -> dict[str, Any]:
        steps = self._steps[start:]
        reward = sum(self.gamma ** i * r for i, (_, _, r) in enumerate(steps))
        state, action, _ = steps[0]
        return {"states": state, "actions": action, "rewards": reward, "next_states": next_state,
                "terminals": terminal, "discounts": self.gamma ** len(steps)}

    def push(self, state: Any, action: Any, reward: float, next_state: Any, terminated: bool,
             truncated: bool = False) -> list[dict[str, Any]]:
        """Adds one step; returns the transitions it finished (oldest window first).

        Args:
            state: the observation acted on.
            action: the action taken.
            reward: the reward received.
            next_state: the observation after the step (the *final* observation when the episode ended,
                not the reset one).
            terminated: the episode ended in a terminal state (no bootstrap).
            truncated: the episode was cut by a time limit (bootstrap from ``next_state``).
        """
        self._steps.append((state, action, float(reward)))
        self.last_next_state = next_state
        if terminated or truncated:
            out = [self._window(i, next_state, bool(terminated)) for i in range(len(self._steps))]
            self._steps.clear()
            return out
        if len(self._steps) == self.n:
            out = [self._window(0, next_state, False)]
            self._steps.pop(0)
            return out
        return []

    def flush(self, next_state: Any = None) -> list[dict[str, Any]]:
        """Closes every open window as cut short, bootstrapping from ``next_state`` (default: the newest
        step's next state), e.g. when the episodes cannot continue (a resumed run starts new ones)."""
        next_state = self.last_next_state if next_state is None else next_state
        out = [self._window(i, next_state, False) for i in range(len(self._steps))]
        self._steps.clear()
        return out

    def clear(self) -> None:
        """Drops the open windows (e.g. when the environment is reset from outside)."""
        self._steps.clear()

    def state_dict(self) -> dict[str, Any]:
        """The open windows' steps, for checkpoints."""
        return {"n": self.n, "gamma": self.gamma, "steps": list(self._steps), "last_next_state": self.last_next_state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what `state_dict` returned (n and gamma must match)."""
        if state.get("n") != self.n or state.get("gamma") != self.gamma:
            raise ValueError(f"NStepAccumulator.load_state_dict: saved n={state.get('n')}, gamma={state.get('gamma')} "
                             f"differ from this accumulator's n={self.n}, gamma={self.gamma}")
        self._steps = [tuple(s) for s in state["steps"]]
        self.last_next_state = state.get("last_next_state")
