"""Learning regression guard: the greedy return DQN reaches on CartPole-v1 after a fixed budget of env steps.

The real agent (``reference_agents/configs/dqn_cartpole.yaml``, seed 0) trains
for ``STEPS`` environment steps with a `VectorEnvWorker` (one env), then plays
``EVAL_EPISODES`` greedy episodes on fresh environments; the mean of their
returns is tracked (CartPole-v1 caps a return at 500). A drop between commits
means learning got worse (or slower); a single seed, so small moves are noise.

``SPACEGRAPH_BENCH_QUICK=1`` (set by ``run_offline.py --quick`` and by the
benchmark smoke test; see `common.quick`) shrinks the budget to a few dozen
updates past the config's ``update.start_after`` and one episode: the same code
path, a meaningless number, not kept.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from .common import agent_config_path, quick, require_module  # noqa: E402

ENV_ID = "CartPole-v1"
CONFIG = "dqn_cartpole"
SEED = 0
STEPS = 10_000
EVAL_EPISODES = 5
QUICK_EPISODES = 1
QUICK_UPDATES = 50  # a smoke run trains this many steps past the config's update.start_after


class DQNCartPoleReturn:
    """Mean greedy return on CartPole-v1 after ``STEPS`` training steps (seed 0), per backend."""

    params = ["tf", "torch"]
    param_names = ["backend"]
    timeout = 1200

    def setup(self, backend):
        require_module("reference_agents.workers")
        config = agent_config_path(CONFIG)
        from reference_agents.agents import build_agent
        from reference_agents.workers import VectorEnvWorker

        self.agent = build_agent(config, backend=backend, seed=SEED)
        self.worker = VectorEnvWorker(self.agent, ENV_ID, num_envs=1, seed=SEED)
        if quick():
            self.steps = int(self.agent.config.update.start_after) + QUICK_UPDATES
            self.episodes = QUICK_EPISODES
        else:
            self.steps, self.episodes = STEPS, EVAL_EPISODES

    def teardown(self, backend):
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.close()

    def track_greedy_return(self, backend):
        """Trains for the step budget, then returns the mean return of greedy evaluation episodes."""
        self.worker.run(num_steps=self.steps)
        returns = self.worker.evaluate(self.episodes)
        return float(np.mean(returns))

    track_greedy_return.unit = "return"
