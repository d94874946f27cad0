"""Observing and staging transitions for replay: the `DQNAgent` methods between the environment and replay."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from reference_agents.agents.dqn.graph import RECORD_KEYS
from reference_agents.components.helpers import NStepAccumulator


class StagingMixin:
    """`observe` (agent-side n-step folding per environment), `observe_transitions` (folded elsewhere),
    the staging list and `flush` into the agent's replay (``self.replay``, see `replay_stores`)."""

    def observe(self, states: Any, actions: Any, rewards: Any, terminals: Any, next_states: Any,
                env_id: Any = None, truncated: Any = None) -> None:
        """Takes one environment step of N environments (or of one, unbatched) and stages its transitions.

        Args:
            states: the observations acted on, ``[N, *obs_shape]``.
            actions: the actions taken, ``[N]``.
            rewards: ``[N]``.
            terminals: gymnasium's ``terminated``, ``[N]`` bools: no bootstrap from these next states.
            next_states: the observations after the step (for an episode that ended, its *final*
                observation, not the reset one), ``[N, *obs_shape]``.
            env_id: which environment each row came from (default ``0..N-1``); n-step windows are
                kept per environment.
            truncated: gymnasium's ``truncated`` (time limits), ``[N]`` bools (default all False):
                these transitions bootstrap.

        Raises:
            ValueError: naming the argument whose shape or length does not fit.
        """
        batch, single = self._batch(states, self.state_space, "observe")
        n = batch.shape[0]
        nxt, _ = self._batch(next_states, self.state_space, "observe (next_states)")

        def column(value: Any, name: str, dtype: Any) -> np.ndarray:
            arr = np.asarray(value, dtype=dtype).reshape(-1) if value is not None else np.zeros(n, dtype)
            if arr.shape != (n,):
                raise ValueError(f"DQNAgent.observe: {name} must have one entry per state ({n}); got shape "
                                 f"{np.shape(value)}")
            return arr

        actions_ = column(actions, "actions", np.int64)
        if np.any((actions_ < 0) | (actions_ >= self.num_actions)):
            raise ValueError(f"DQNAgent.observe: actions must lie in 0..{self.num_actions - 1}; got {actions_}")
        rewards_ = column(rewards, "rewards", np.float64)
        terminals_ = column(terminals, "terminals", bool)
        truncated_ = column(truncated, "truncated", bool)
        ids = column(list(range(n)) if env_id is None else env_id, "env_id", np.int64)
        if nxt.shape[0] != n:
            raise ValueError(f"DQNAgent.observe: next_states has {nxt.shape[0]} rows, states {n}")
        for i in range(n):
            acc = self._accumulators.get(int(ids[i]))
            if acc is None:
                acc = self._accumulators[int(ids[i])] = NStepAccumulator(self.n_step, self.gamma)
            self._staged += acc.push(batch[i], actions_[i], rewards_[i], nxt[i], bool(terminals_[i]),
                                     bool(truncated_[i]) and not bool(terminals_[i]))
        self.timesteps += n
        if len(self._staged) >= self.flush_every:
            self.flush()

    def observe_transitions(self, records: dict[str, Any], count_steps: bool = True) -> None:
        """Stages transitions folded elsewhere (worker-side n-step): a dict of ``RECORD_KEYS`` arrays.

        Args:
            records: ``states``, ``actions``, ``rewards``, ``terminals``, ``next_states``, ``discounts`` (``gamma^k``).
            count_steps: add the number of records to `timesteps` (each stands for one env step).
        """
        missing = [k for k in RECORD_KEYS if k not in records]
        if missing:
            raise ValueError(f"DQNAgent.observe_transitions: records lack {missing}; they need {list(RECORD_KEYS)}")
        n = len(records["actions"])
        for i in range(n):
            self._staged.append({k: records[k][i] for k in RECORD_KEYS})
        if count_steps:
            self.timesteps += n
        if len(self._staged) >= self.flush_every:
            self.flush()

    def _records(self, rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        return {
            "states": np.stack([r["states"] for r in rows]).astype(self.state_space.dtype, copy=False),
            "actions": np.asarray([r["actions"] for r in rows], np.int64),
            "rewards": np.asarray([r["rewards"] for r in rows], np.float32),
            "terminals": np.asarray([r["terminals"] for r in rows], bool),
            "next_states": np.stack([r["next_states"] for r in rows]).astype(self.state_space.dtype, copy=False),
            "discounts": np.asarray([r["discounts"] for r in rows], np.float32),
        }

    def flush(self) -> int:
        """Writes the staged transitions into replay in one call; returns how many."""
        if not self._staged:
            return 0
        rows, self._staged = self._staged, []
        self.replay.insert(self.executor, self._records(rows))
        return len(rows)

    def memory_size(self) -> int:
        """The number of records in replay that can be sampled (staged ones not included)."""
        return self.replay.size(self.executor)
