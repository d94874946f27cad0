"""The sides of the DQN learning comparison: our agent on its worker (`OursSide`) and RLlib's DQN (`RLlibSide`).

Each side has ``train_chunk() -> env steps in all`` and ``act(obs) -> greedy actions``;
`limit_threads` gives every framework a side uses one thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from harness.measure.machine import configure_threads
from spacegraph.reports.learning_criterion import AGENT_CONFIG, ENV_ID
from spacegraph.reports.rllib import import_rllib_safely
from spacegraph.reports.rllib import rllib_missing as _rllib_missing

#: Environment variables every run's subprocess gets: one thread per framework and BLAS.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
#: RLlib's tuned CartPole DQN (rllib/tuned_examples/dqn/cartpole_dqn.py, Ray 2.x), as keyword
#: arguments of ``DQNConfig.training`` and of ``DefaultModelConfig``; everything else is RLlib's default.
RLLIB_SETTINGS: dict[str, Any] = {
    "training": {"lr": 0.0005, "train_batch_size_per_learner": 32,
                 "replay_buffer_config": {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000,
                                          "alpha": 0.6, "beta": 0.4},
                 "n_step": (2, 5), "double_q": True, "dueling": True, "epsilon": [(0, 1.0), (10000, 0.02)]},
    "model": {"fcnet_hiddens": [256], "fcnet_activation": "tanh", "fcnet_bias_initializer": "zeros_",
              "head_fcnet_bias_initializer": "zeros_", "head_fcnet_hiddens": [256]},
}


class OursSide:
    """Our DQN agent from ``config`` on ``backend``, trained by its `VectorEnvWorker`.

    Args:
        backend: ``"tf"`` or ``"torch"``.
        seed: the agent's (and its environments') seed.
        chunk: env steps per `train_chunk`.
        config: the agent config file.
    """

    def __init__(self, backend: str, seed: int, chunk: int, config: str | Path = AGENT_CONFIG) -> None:
        from reference_agents.agents import build_agent
        from reference_agents.workers import VectorEnvWorker

        self.agent = build_agent(str(config), backend=backend, seed=seed)
        self.worker = VectorEnvWorker.for_agent(self.agent)
        self.chunk = chunk

    def train_chunk(self) -> int:
        """Trains ``chunk`` more env steps; returns the env steps trained in all."""
        self.worker.run(num_steps=self.chunk)
        return int(self.worker.total_steps)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions."""
        return self.agent.get_actions(obs.astype(np.float32), explore=False)

    def close(self) -> None:
        self.worker.close()


class RLlibSide:
    """RLlib's DQN with `RLLIB_SETTINGS` on CartPole-v1, in a local Ray instance it starts and shuts down.

    ``min_sample_timesteps_per_iteration`` is set to ``chunk`` so that one ``algo.train()``
    samples ``chunk`` env steps (RLlib's default is 1000; it only sets how often results
    are reported, not how the algorithm learns).

    Args:
        seed: ``DQNConfig.debugging(seed=...)``.
        chunk: env steps per `train_chunk`.

    Raises:
        ImportError: when ``ray[rllib]`` is not installed.
    """

    def __init__(self, seed: int, chunk: int) -> None:
        import_rllib_safely()
        from ray.rllib.algorithms.dqn import DQNConfig
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        from harness.execution.ray import init_local_ray, shutdown_local_ray

        self._shutdown = shutdown_local_ray
        init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            config = (DQNConfig()
                      .environment(ENV_ID)
                      .framework("torch")
                      .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
                      .learners(num_learners=0)
                      .reporting(min_sample_timesteps_per_iteration=chunk)
                      .debugging(seed=seed)
                      .training(**RLLIB_SETTINGS["training"])
                      .rl_module(model_config=DefaultModelConfig(**RLLIB_SETTINGS["model"])))
            self.algo = config.build_algo()
        except BaseException:
            shutdown_local_ray()
            raise
        self.chunk = chunk
        self.module = self.algo.get_module()

    def train_chunk(self) -> int:
        """One ``algo.train()``; returns RLlib's sampled env steps in all."""
        from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

        result = self.algo.train()
        return int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions of the env runner's RLModule (weights synced after every update)."""
        import torch

        with torch.no_grad():
            out = self.module.forward_inference({"obs": torch.as_tensor(obs, dtype=torch.float32)})
        return out["actions"].numpy()

    def describe(self) -> dict[str, Any]:
        """The settings the built algorithm runs with, read off its config, and its module as printed."""
        c = self.algo.config
        return {
            "lr": c.lr, "train_batch_size_per_learner": c.train_batch_size_per_learner,
            "replay_buffer_config": dict(c.replay_buffer_config), "n_step": list(c.n_step)
            if isinstance(c.n_step, (tuple, list)) else c.n_step,
            "double_q": c.double_q, "dueling": c.dueling, "epsilon": [list(p) for p in c.epsilon],
            "target_network_update_freq": c.target_network_update_freq, "tau": c.tau,
            "num_steps_sampled_before_learning_starts": c.num_steps_sampled_before_learning_starts,
            "rollout_fragment_length": c.get_rollout_fragment_length(), "training_intensity": c.training_intensity,
            "gamma": c.gamma, "grad_clip": c.grad_clip, "grad_clip_by": c.grad_clip_by,
            "td_error_loss_fn": c.td_error_loss_fn, "adam_epsilon": c.adam_epsilon,
            "model": dict(RLLIB_SETTINGS["model"]), "module": str(self.module),
        }

    def close(self) -> None:
        try:
            self.algo.stop()
        finally:
            self._shutdown()


def limit_threads(side: str) -> dict[str, int | None]:
    """One thread for every framework the side uses (TensorFlow is imported before RLlib, see `RLlibSide`)."""
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    if side in ("ours_tf", "rllib"):
        import tensorflow  # noqa: F401
    import torch

    threads = configure_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before torch's first parallel work
        pass
    return threads


def rllib_missing() -> str | None:
    """None when RLlib's DQN imports, else why not."""
    return _rllib_missing("ray.rllib.algorithms.dqn")
