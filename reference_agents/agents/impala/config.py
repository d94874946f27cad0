"""The IMPALA agent's config: a declarative YAML/JSON file (or dict) checked into typed sections.

``reference_agents/configs/impala_cartpole.yaml`` is a complete example::

    agent: impala
    backend: torch
    seed: 0
    env: {id: CartPole-v1, num_envs: 16}
    network: {layers: [{type: dense, units: 64, activation: relu}], lstm_units: null}
    preprocessing: []                      # stateless in-graph preprocessors (Atari: [{type: divide, divisor: 255}])
    rollout: {length: 20, batch_size: 1}   # T steps of every env per rollout; rollouts per learner update
    loss: {gamma: 0.99, baseline_cost: 0.5, entropy_cost: 0.01, rho_bar: 1.0, c_bar: 1.0, rho_bar_pg: 1.0}
    optimizer: {type: rmsprop, learning_rate: 0.0006, decay: 0.99, epsilon: 0.1, clip_grad_norm: 40}
    evaluation: {every: 10000, screen_episodes: 10, episodes: 100, target_return: 475}

Errors name the file and the key path, as for DQN (`reference_agents.agents.config`).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import ConfigDict, Field

from reference_agents.agents.config import EnvConfig, EvaluationConfig, ExecutionConfig, Section, load_agent_config


class IMPALANetworkConfig(Section):
    """The policy: a `NeuralNetwork` torso, optionally an `LSTM`, then logits and value heads."""

    layers: list[dict[str, Any]] | Literal["nature", "impala_resnet"] = Field(
        description="NeuralNetwork layer dicts, or 'nature' for the Nature DQN stack, 'impala_resnet' for "
                    "IMPALA's deep ResNet")
    lstm_units: int | None = Field(None, ge=1, description="an LSTM of this size after the torso (None: none)")


class RolloutConfig(Section):
    """How actors cut experience into rollouts and how many the learner takes per update."""

    length: int = Field(20, ge=1, le=100, description="T: env steps per rollout (time-major [T, envs])")
    batch_size: int = Field(1, ge=1, description="rollouts per learner update (concatenated along the batch)")
    epochs: int = Field(1, ge=1, le=16, description="learning steps on each batch (V-trace corrects for the policy "
                                                    "moving between them: more learning per env frame for more "
                                                    "learner time per batch)")


class IMPALALossConfig(Section):
    """`IMPALALoss` (and `VTrace`) arguments."""

    gamma: float = Field(0.99, ge=0.0, le=1.0)
    baseline_cost: float = Field(0.5, ge=0.0)
    entropy_cost: float = Field(0.01, ge=0.0)
    rho_bar: float | None = Field(1.0, gt=0.0)
    c_bar: float | None = Field(1.0, gt=0.0)
    rho_bar_pg: float | None = Field(1.0, gt=0.0)
    reduction: Literal["sum", "mean"] = "sum"
    normalize_advantages: bool = Field(False, description="scale the policy gradient's advantages to a unit root "
                                                          "mean square over each batch (IMPALALoss)")


class IMPALAOptimizerConfig(Section):
    """The optimizer (RMSProp as the paper; adam and sgd also) with its arguments."""

    model_config = ConfigDict(extra="allow")
    type: Literal["rmsprop", "adam", "sgd"] = "rmsprop"
    learning_rate: float = Field(6e-4, gt=0.0)
    clip_grad_norm: float | None = Field(40.0, gt=0.0)


class IMPALAConfig(Section):
    """A whole IMPALA agent config (see the module docstring)."""

    agent: Literal["impala"] = "impala"
    backend: Literal["tf", "torch"] = "tf"
    actor_backend: Literal["tf", "torch"] | None = Field(
        None, description="the backend of distributed actors (tf-dist, ray; default: backend's); weights are the "
                          "same arrays on either, so a TensorFlow learner can feed PyTorch actors")
    seed: int = 0
    env: EnvConfig
    network: IMPALANetworkConfig
    preprocessing: list[dict[str, Any]] = Field(default_factory=list, description="stateless in-graph preprocessors")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    loss: IMPALALossConfig = Field(default_factory=IMPALALossConfig)
    optimizer: IMPALAOptimizerConfig = Field(default_factory=IMPALAOptimizerConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)


def load_impala_config(config: str | os.PathLike | dict[str, Any] | IMPALAConfig,
                       overrides: dict[str, Any] | None = None) -> tuple[IMPALAConfig, str]:
    """A checked `IMPALAConfig` and where it came from; `ConfigError` naming file and key paths otherwise."""
    return load_agent_config(config, overrides, model=IMPALAConfig)
