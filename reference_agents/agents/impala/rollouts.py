"""Cutting lockstep environment steps into IMPALA's time-major rollouts (actor side, NumPy only)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: The keys of a rollout dict (and the learner's update arguments, in this order); recurrent
#: rollouts add ``initial_state`` (``(h, c)``, each ``[N, units]``) and ``resets``.
ROLLOUT_KEYS = ("rollout_states", "actions", "rewards", "discounts", "behaviour_logits")


class RolloutBuilder:
    """Collects ``T`` lockstep steps of ``N`` environments and hands out one rollout per ``T`` steps.

    A rollout is a dict of time-major arrays: ``rollout_states`` ``[T+1, N, ...]`` (the ``T`` states
    acted on, then the state after the last step, for the bootstrap value), ``actions`` ``[T, N]``,
    ``rewards`` and ``discounts`` ``[T, N]`` (``discounts`` is 0 after an episode end, else 1),
    ``behaviour_logits`` ``[T, N, A]``, and for a recurrent policy ``initial_state`` (the actor's
    ``(h, c)`` before the first step) and ``resets`` ``bool[T+1, N]`` (true where a step starts a new
    episode, so the learner restarts the state there as the actor did). A rollout may span episode
    ends; consecutive rollouts of one actor continue each other (``rollout_states[T]`` of one is the
    state the next acts on, unless an episode ended at its last step). ``tag`` numbers the rollouts.

    Args:
        length: ``T``.
        recurrent: whether to record ``initial_state`` and ``resets``.
    """

    def __init__(self, length: int, recurrent: bool) -> None:
        self.length = int(length)
        self.recurrent = bool(recurrent)
        self.tag = 0
        self._clear()

    def _clear(self) -> None:
        self.states: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.discounts: list[np.ndarray] = []
        self.logits: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.initial_state: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.actions)

    def add(self, states: np.ndarray, actions: np.ndarray, rewards: np.ndarray, discounts: np.ndarray,
            logits: np.ndarray, next_states: np.ndarray, starts: np.ndarray,
            state_before: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any] | None:
        """Adds one lockstep step; returns the finished rollout after every ``T``-th step, else None.

        ``starts``: which environments begin an episode with this step; ``state_before``: the recurrent
        state the actor acted from (recorded for the first step of a rollout).
        """
        if not self.actions and self.recurrent:
            self.initial_state = (np.array(state_before[0], np.float32), np.array(state_before[1], np.float32))
        self.states.append(np.asarray(states))
        self.actions.append(np.asarray(actions, np.int64))
        self.rewards.append(np.asarray(rewards, np.float32))
        self.discounts.append(np.asarray(discounts, np.float32))
        self.logits.append(np.asarray(logits, np.float32))
        self.starts.append(np.asarray(starts, bool))
        if len(self.actions) < self.length:
            return None
        rollout = {"rollout_states": np.stack(self.states + [np.asarray(next_states)]),
                   "actions": np.stack(self.actions), "rewards": np.stack(self.rewards),
                   "discounts": np.stack(self.discounts), "behaviour_logits": np.stack(self.logits),
                   "tag": self.tag}
        if self.recurrent:
            # the initial state already restarted for an episode that begins at step 0; the bootstrap row
            # restarts after an episode that ended at the last step (its discount is 0: it is never used)
            resets = np.stack(self.starts + [self.discounts[-1] == 0.0])
            resets[0] = False
            rollout["initial_state"] = self.initial_state
            rollout["resets"] = resets
        self.tag += 1
        self._clear()
        return rollout


def concat_rollouts(rollouts: list[dict[str, Any]]) -> dict[str, Any]:
    """Rollouts of equal ``T`` concatenated along the batch axis (axis 1; axis 0 for ``initial_state``)."""
    if not rollouts:
        raise ValueError("concat_rollouts: no rollouts")
    if len(rollouts) == 1:
        return rollouts[0]
    lengths = {r["actions"].shape[0] for r in rollouts}
    if len(lengths) != 1:
        raise ValueError(f"concat_rollouts: rollouts of different lengths {sorted(lengths)}")
    out: dict[str, Any] = {k: np.concatenate([r[k] for r in rollouts], axis=1) for k in ROLLOUT_KEYS}
    if "initial_state" in rollouts[0]:
        out["initial_state"] = tuple(np.concatenate([r["initial_state"][i] for r in rollouts]) for i in range(2))
        out["resets"] = np.concatenate([r["resets"] for r in rollouts], axis=1)
    out["tag"] = [r["tag"] for r in rollouts]
    return out
