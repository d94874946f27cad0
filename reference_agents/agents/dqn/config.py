"""The DQN agent's config: `DQNConfig` and its sections.

A DQN config has the sections below (all but ``env`` and ``network`` have
defaults); ``reference_agents/configs/dqn_cartpole.yaml`` is a complete example::

    agent: dqn
    backend: torch            # tf | torch: the one key that picks the backend
    seed: 0
    env: {id: CartPole-v1, num_envs: 1, kwargs: {}, atari: false}
    network: {layers: [{type: dense, units: 64, activation: relu}], dueling: false}
    preprocessing: []         # stateless in-graph preprocessors (e.g. [{type: divide, divisor: 255}])
    memory: {type: replay, capacity: 50000}          # or {type: prioritized, capacity, alpha, beta, epsilon}
                              # or {type: frames, capacity, prioritized, form: host|graph, compression: lz4}
    loss: {gamma: 0.99, double_q: true, huber_delta: 1.0, n_step: 1}
    optimizer: {type: adam, learning_rate: 0.001, clip_grad_norm: 10.0}   # adam | sgd | rmsprop (+ their args)
    exploration: {type: linear, from: 1.0, to: 0.02, steps: 10000}        # an EpsilonGreedy schedule
    update: {batch_size: 64, start_after: 1000, every: 1, repeats: 1}    # in env steps
    target_sync: {every: 500, tau: 1.0}                                  # in updates
    evaluation: {every: 2500, screen_episodes: 10, episodes: 100, target_return: 475}   # `EvaluationConfig`
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from reference_agents.agents.config import EnvConfig, EvaluationConfig, ExecutionConfig, Section


class NetworkConfig(Section):
    """The Q-network: a `NeuralNetwork` layer list plus a Q-value layer or a dueling head."""

    layers: list[dict[str, Any]] | Literal["nature", "impala_resnet"] = Field(
        description="NeuralNetwork layer dicts, or 'nature' for the Nature DQN stack, 'impala_resnet' for "
                    "IMPALA's deep ResNet")
    dueling: bool = False


class MemoryConfig(Section):
    """Replay: ``replay`` (uniform `ReplayMemory`), ``prioritized`` (`PrioritizedReplay`) or ``frames``
    (frame-stack transitions with each frame stored once: `HostFrameReplay` with ``form: host``,
    in-graph `FrameReplay` with ``form: graph``; uniform or prioritized by ``prioritized``)."""

    type: Literal["replay", "prioritized", "frames"] = "replay"
    capacity: int = Field(50_000, ge=1)
    alpha: float = 0.6
    beta: float = 0.4
    epsilon: float = 1e-6
    prioritized: bool = Field(True, description="frames only: proportional prioritized (else uniform) sampling")
    form: Literal["host", "graph"] = Field("host", description="frames only: host-side NumPy store or graph "
                                                                "variables (see docs/architecture.md)")
    compression: Literal["lz4"] | None = Field(None, description="frames, form host only: LZ4 per frame")
    frame_capacity: int | None = Field(None, ge=1, description="frames only: frame slots (default capacity + 1% "
                                                                "+ two stacks)")
    match_window: int | None = Field(None, ge=1, description="frames only: newest frames a new stack may reuse "
                                                              "(default capacity / 500 within [64, 4096])")


class LossConfig(Section):
    """`DQNLoss` arguments; ``n_step`` also sets how transitions are folded when observed."""

    gamma: float = 0.99
    double_q: bool = True
    huber_delta: float | None = 1.0
    n_step: int = Field(1, ge=1)


class OptimizerConfig(Section):
    """An optimizer by ``type`` with its arguments (see `reference_agents.components.optimizers`)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["adam", "sgd", "rmsprop"] = "adam"
    learning_rate: float = 1e-3
    clip_grad_norm: float | None = None


class UpdateConfig(Section):
    """When to learn, in environment steps observed (summed over environments)."""

    batch_size: int = Field(32, ge=1)
    start_after: int = Field(1000, ge=0, description="no updates before this many env steps")
    every: int = Field(1, ge=1, description="do `repeats` updates every `every` env steps")
    repeats: int = Field(1, ge=1)


class TargetSyncConfig(Section):
    """Target-network synchronisation, counted in updates."""

    every: int = Field(500, ge=1)
    tau: float = Field(1.0, gt=0.0, le=1.0)


class DQNConfig(Section):
    """A whole DQN agent config (see the module docstring)."""

    agent: Literal["dqn"] = "dqn"
    backend: Literal["tf", "torch"] = "tf"
    seed: int = 0
    env: EnvConfig
    network: NetworkConfig
    preprocessing: list[dict[str, Any]] = Field(default_factory=list)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    exploration: dict[str, Any] = Field(default_factory=lambda: {"type": "linear", "from": 1.0, "to": 0.05,
                                                                 "steps": 10_000})
    update: UpdateConfig = Field(default_factory=UpdateConfig)
    target_sync: TargetSyncConfig = Field(default_factory=TargetSyncConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
