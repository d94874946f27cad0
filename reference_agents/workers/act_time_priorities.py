"""`ActTimePriorities`: initial replay priorities of n-step transitions from the Q-values computed when acting.

The Ape-X actor's priority (Horgan et al. 2018, section 3): for the transition folded from the window that
starts at step ``t`` and covers ``k <= n`` steps,

    p_t = | R_t^(k) + discount * (1 - terminal) * max_a Q(s_{t+k}, a) - Q(s_t, a_t) |

with ``discount = gamma^k`` (the record's own), ``Q(s_t, a_t)`` the value the acting network gave the action
taken at ``t`` and ``max_a Q(s_{t+k}, a)`` its value of the state the window bootstraps from, computed when
the worker acted on that state at step ``t + k``. It is the plain n-step Q-learning error of the acting
network: the double-Q / target-network form the learner optimises needs a second network's values, which
acting does not compute. No forward pass is added for it, with one exception: a window cut by a time limit
(truncated) bootstraps from the episode's final observation, on which nobody acts (the worker acts on the
reset one), so the final observations of the environments truncated in a step are scored in one
``q_values`` call (a few rows, at episode ends only).

A window that ends without an episode end waits one step for its bootstrap value (the next act call);
terminated windows need none.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from reference_agents.workers.envs import index_value


class ActTimePriorities:
    """Per-environment bookkeeping of act-time Q-values, turning folded windows into priorities.

    Use per lockstep step: `acted` with the act call's Q-values and actions (it returns the transitions that
    waited for these values, and their priorities), then `finished` once per environment with the windows
    its `NStepAccumulator` closed in that step, then `score_truncated`.

    Args:
        num_envs: the number of environments.
    """

    def __init__(self, num_envs: int) -> None:
        self.num_envs = int(num_envs)
        self._taken: list[deque[float]] = [deque() for _ in range(self.num_envs)]  # Q(s_t, a_t) per open window
        self._waiting: list[tuple[int, dict[str, Any], float]] = []   # (env, record, Q(s_t, a_t)): bootstrap next
        self._truncated: list[tuple[int, dict[str, Any], float]] = []  # the same, bootstrapping from a final obs
        self._ready: list[dict[str, Any]] = []
        self._ready_priorities: list[float] = []

    def clear(self) -> None:
        """Drops every open window and every transition still waiting (the environments restart)."""
        for taken in self._taken:
            taken.clear()
        self._waiting.clear()
        self._truncated.clear()
        self._ready.clear()
        self._ready_priorities.clear()

    @property
    def waiting(self) -> int:
        """Transitions folded but not yet scored (they come with the next step's `take`)."""
        return len(self._waiting)

    def acted(self, q_values: np.ndarray, actions: np.ndarray) -> None:
        """The act call of a step: scores the transitions waiting for the values of the states acted on now and
        keeps ``Q(s, a)`` of the actions taken (each starts a window).

        Args:
            q_values: the act call's Q-values ``[N, A]``.
            actions: the actions taken ``[N]``.
        """
        q = np.asarray(q_values, np.float64)
        if self._waiting:
            best = q.max(axis=1)
            for env, record, q_taken in self._waiting:
                self._score(record, q_taken, best[env])
            self._waiting.clear()
        taken = q[np.arange(self.num_envs), np.asarray(actions, np.int64)]
        for env in range(self.num_envs):
            self._taken[env].append(float(taken[env]))

    def finished(self, env: int, records: list[dict[str, Any]], truncated: bool) -> None:
        """The windows environment ``env`` closed in this step (oldest first, as `NStepAccumulator.push`
        returns them); ``truncated``: its episode was cut by a time limit in this step."""
        taken = self._taken[env]
        for record in records:
            q_taken = taken.popleft()
            if record["terminals"]:
                self._score(record, q_taken, 0.0)
            elif truncated:
                self._truncated.append((env, record, q_taken))
            else:
                self._waiting.append((env, record, q_taken))
        if truncated:
            taken.clear()

    def score_truncated(self, agent: Any, next_obs: Any) -> None:
        """Scores the windows cut by time limits in this step with one ``agent.q_values`` call on the final
        observations ``next_obs`` (rows of the environments concerned)."""
        if not self._truncated:
            return
        envs = sorted({env for env, _, _ in self._truncated})
        rows = {env: row for row, env in enumerate(envs)}
        final = np.stack([np.asarray(index_value(next_obs, env)) for env in envs])
        best = np.asarray(agent.q_values(final), np.float64).max(axis=1)
        for env, record, q_taken in self._truncated:
            self._score(record, q_taken, best[rows[env]])
        self._truncated.clear()

    def take(self) -> tuple[list[dict[str, Any]], np.ndarray]:
        """The transitions scored since the last `take`, and their priorities (in the same order)."""
        records, priorities = self._ready, np.asarray(self._ready_priorities, np.float64)
        self._ready, self._ready_priorities = [], []
        return records, priorities

    def _score(self, record: dict[str, Any], q_taken: float, best_next: float) -> None:
        bootstrap = 0.0 if record["terminals"] else float(record["discounts"]) * best_next
        self._ready.append(record)
        self._ready_priorities.append(abs(float(record["rewards"]) + bootstrap - q_taken))
