"""Greedy evaluation of a worker's agent on environments of its own (`GreedyEvaluation`, a mixin of
`VectorEnvWorker`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.seeds import derive_seed
from reference_agents.workers.native_envs import make_vector_env


class GreedyEvaluation:
    """`evaluate` for `VectorEnvWorker` (it uses the worker's ``agent``, ``env_id``, ``env_kwargs``, ``seed``,
    ``num_envs`` and its observation and action checks)."""

    agent: Any
    env_id: Any
    env_kwargs: dict[str, Any]
    seed: int
    num_envs: int

    def evaluate(self, num_episodes: int, num_envs: int | None = None, seed: int | None = None,
                 max_steps: int | None = None) -> list[float]:
        """Greedy returns (``explore=False``) of ``num_episodes`` episodes on separate environments.

        Nothing is observed and nothing is updated; the worker's own environments and counters are
        untouched. The agent's stateful preprocessing is per environment slot, so evaluation uses slots
        ``0..num_envs-1`` and restarts them before and after; the training episodes in progress lose
        their preprocessing history (their frame stacks restart), which for agents without stateful
        preprocessing changes nothing.

        Args:
            num_episodes: how many episodes to finish, a positive int.
            num_envs: environments evaluated in lockstep; default ``min(num_episodes, N)``.
            seed: environment ``i`` gets ``seed + i``; default ``self.seed + 10_000`` (``derive_seed(self.seed, "eval_screen")``).
            max_steps: an optional bound on lockstep steps, after which unfinished episodes are dropped.

        Returns:
            The returns of ``num_episodes`` episodes: environment ``i`` runs
            ``num_episodes // n`` of them (one more for the first ``num_episodes % n``), so
            short episodes are not over-represented; grouped by environment. Fewer when
            ``max_steps`` cut the evaluation short.
        """
        for name, value in (("num_episodes", num_episodes), ("num_envs", num_envs), ("max_steps", max_steps)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value <= 0):
                raise ValueError(f"VectorEnvWorker.evaluate: {name} must be a positive int; got {value!r}")
        n = int(num_envs) if num_envs is not None else min(int(num_episodes), self.num_envs)
        envs = make_vector_env(self.env_id, n, self.env_kwargs or None)
        reset_pre = getattr(self.agent, "reset_preprocessor", None)
        try:
            obs = envs.reset(seed=derive_seed(self.seed, "eval_screen") if seed is None else seed)
            self._check_observations(obs, "evaluation reset")
            if reset_pre is not None:
                reset_pre(list(range(n)))
            # Each environment runs a fixed quota of episodes (env i: episodes i, i+n, ...), so short
            # episodes are not over-represented, as they would be by taking the first to finish.
            quota = np.array([num_episodes // n + (1 if i < num_episodes % n else 0) for i in range(n)])
            finished: list[list[float]] = [[] for _ in range(n)]
            running = np.zeros(n, np.float64)
            steps = 0
            while any(len(f) < q for f, q in zip(finished, quota)) and (max_steps is None or steps < max_steps):
                actions = self._check_actions(self.agent.get_actions(obs, explore=False), steps, n)
                _, rewards, terminated, truncated, _, obs = envs.step(actions)
                running += rewards
                steps += 1
                ended = np.flatnonzero(terminated | truncated)
                for i in ended:
                    if len(finished[i]) < quota[i]:
                        finished[i].append(float(running[i]))
                    running[i] = 0.0
                if ended.size and reset_pre is not None:
                    reset_pre([int(i) for i in ended])
            return [r for f in finished for r in f]
        finally:
            envs.close()
            if reset_pre is not None:
                reset_pre(list(range(max(n, self.num_envs))))
