"""Agent configs: a declarative YAML/JSON file (or dict) checked into typed sections with located errors.

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

"Solved" is the mean return of ``evaluation.episodes`` greedy episodes reaching ``evaluation.target_return``,
played when a ``screen_episodes`` screen reaches it (see `EvaluationConfig`). Errors name the file and the key path (``dqn.yaml: update.batch_size: ...``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigError(ValueError):
    """An agent config is invalid: names the file (or ``<dict>``), the key path and what was expected."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem(s) in the agent config"]
        lines += [f"  {path or '<top>'}: {msg}" for path, msg in problems]
        super().__init__("\n".join(lines))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvConfig(_Section):
    """The environment the agent acts in (the worker and `spacegraph train` make it)."""

    id: str = Field(description="a gymnasium id, e.g. CartPole-v1 or ALE/Pong-v5")
    num_envs: int = Field(1, ge=1, description="environments stepped in lockstep by one worker")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to gymnasium.make")
    atari: bool = Field(False, description="Atari frame processing env-side: gray 84x84, 4 stacked, uint8")


class NetworkConfig(_Section):
    """The Q-network: a `NeuralNetwork` layer list plus a Q-value layer or a dueling head."""

    layers: list[dict[str, Any]] | Literal["nature", "impala_resnet"] = Field(
        description="NeuralNetwork layer dicts, or 'nature' for the Nature DQN stack, 'impala_resnet' for "
                    "IMPALA's deep ResNet")
    dueling: bool = False


class MemoryConfig(_Section):
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


class LossConfig(_Section):
    """`DQNLoss` arguments; ``n_step`` also sets how transitions are folded when observed."""

    gamma: float = 0.99
    double_q: bool = True
    huber_delta: float | None = 1.0
    n_step: int = Field(1, ge=1)


class OptimizerConfig(_Section):
    """An optimizer by ``type`` with its arguments (see `reference_agents.components.optimizers`)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["adam", "sgd", "rmsprop"] = "adam"
    learning_rate: float = 1e-3
    clip_grad_norm: float | None = None


class UpdateConfig(_Section):
    """When to learn, in environment steps observed (summed over environments)."""

    batch_size: int = Field(32, ge=1)
    start_after: int = Field(1000, ge=0, description="no updates before this many env steps")
    every: int = Field(1, ge=1, description="do `repeats` updates every `every` env steps")
    repeats: int = Field(1, ge=1)


class TargetSyncConfig(_Section):
    """Target-network synchronisation, counted in updates."""

    every: int = Field(500, ge=1)
    tau: float = Field(1.0, gt=0.0, le=1.0)


class EvaluationConfig(_Section):
    """Greedy evaluation during training, and what counts as solved
    (`reference_agents.training.EvaluationProtocol` applies it).

    Every ``every`` env steps the greedy policy plays ``screen_episodes`` episodes; when their mean
    reaches ``target_return`` it plays the full ``episodes``, and the run is solved when *their* mean
    reaches ``target_return``. Without a target each evaluation is the screen alone; with
    ``screen_episodes`` null (or not below ``episodes``) each evaluation plays ``episodes``.
    """

    every: int = Field(5000, ge=1, description="env steps between evaluations")
    episodes: int = Field(100, ge=1, description="episodes of the full evaluation, whose mean decides solved")
    screen_episodes: int | None = Field(10, ge=1, description="episodes of the screen played first")
    target_return: float | None = Field(None, allow_inf_nan=False, description="the full mean that counts as solved")
    envs: int | None = Field(None, ge=1, description="environments per evaluation (default: screen one per "
                                                    "episode, full min(episodes, 20))")

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in _RENAMED_EVALUATION_KEYS.items():
                if old in data:
                    raise ValueError(f"key {old!r} is called {new!r} here (evaluation.{new}); the keys are "
                                     f"every, episodes, screen_episodes, target_return, envs")
        return data


#: Keys an ``evaluation`` section may be written with elsewhere (agent specs, the learning report, CLI
#: flags), and their names here.
_RENAMED_EVALUATION_KEYS = {"min_return": "target_return", "target": "target_return", "eval_episodes": "episodes",
                            "eval_every": "every", "screen": "screen_episodes", "eval_envs": "envs"}


class ExecutionConfig(_Section):
    """Where the update runs: ``local`` (one device, the default) or ``sync-replicas``: synchronous
    replicas of the update on ``devices`` (one entry per replica; a name may repeat), built by the
    executor (`harness.execution.strategies.SyncReplicas`); which API methods run as a recorded graph
    per input shapes (``trace``, `GraphExecutor`'s; on PyTorch a TorchScript trace, on TF a no-op); and
    whether the other methods without gradients run as replays of their recorded PyTorch calls (``replay``,
    `GraphExecutor`'s; on TF a no-op)."""

    strategy: Literal["local", "sync-replicas"] = "local"
    devices: list[str] = Field(default_factory=list, description="one device per replica, e.g. ['/cpu:0', '/cpu:1']")
    trace: list[str] = Field(default_factory=list, description="API methods run as a recorded graph per input shapes "
                             "(GraphExecutor's trace; PyTorch: TorchScript), e.g. ['act']")
    replay: bool = Field(True, description="PyTorch: run the methods that record no gradients (and are not traced) "
                         "as replays of the ops their first two calls per input shapes record (GraphExecutor's "
                         "replay); false: step by step, eagerly")

    @model_validator(mode="after")
    def _devices_given(self) -> "ExecutionConfig":
        if self.strategy == "sync-replicas" and not self.devices:
            raise ValueError("strategy sync-replicas needs devices: a non-empty list of device names")
        return self


class DQNConfig(_Section):
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


#: libyaml's safe loader where PyYAML was built with it (the same documents, about 8x faster: a config is read
#: two or three times on every `spacegraph train` start), else PyYAML's own.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read(path: str) -> Any:
    """The data in a YAML or JSON config file; `ConfigError` naming the file when it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ConfigError(path, [("", f"not a text file (UTF-8): {exc}")]) from None
    except OSError as exc:
        raise ConfigError(path, [("", f"cannot read the file: {exc}")]) from None
    try:
        return json.loads(text) if path.endswith(".json") else yaml.load(text, Loader=_YAML_LOADER)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise ConfigError(path, [("", f"not valid {'JSON' if path.endswith('.json') else 'YAML'}: "
                                      f"{type(exc).__name__ if isinstance(exc, RecursionError) else exc}")]) from None


def load_agent_config(config: str | os.PathLike | dict[str, Any] | BaseModel,
                      overrides: dict[str, Any] | None = None, model: type[BaseModel] = DQNConfig) -> tuple[Any, str]:
    """A checked config (a `DQNConfig` by default) and where it came from (the file path, or ``<dict>``).

    Args:
        config: a YAML or JSON file path, a dict of the same structure, or a config object.
        overrides: top-level keys to replace before checking (``{"backend": "tf", "seed": 3}``).
        model: the config class to check against (`DQNConfig`, the IMPALA agent's `IMPALAConfig`, ...).

    Raises:
        ConfigError: naming the file, every key path at fault and what was expected.
    """
    if isinstance(config, BaseModel):
        data, source = config.model_dump(by_alias=True), "<config>"
    elif isinstance(config, dict):
        data, source = dict(config), "<dict>"
    elif isinstance(config, (str, os.PathLike)):
        source = os.fspath(config)
        data = _read(source)
    else:
        raise ConfigError("<config>", [("", f"expected a file path, a dict or a {model.__name__}; got "
                                            f"{type(config).__name__}")])
    if not isinstance(data, dict):
        raise ConfigError(source, [("", f"expected a mapping at the top; got {type(data).__name__}")])
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    try:
        return model.model_validate(data), source
    except ValidationError as exc:
        problems = [(".".join(str(p) for p in err["loc"]), err["msg"].removeprefix("Value error, ")
                     + (f" (got {err['input']!r})" if err["type"] not in ("missing", "extra_forbidden")
                        and not isinstance(err.get("input"), (dict, list)) else ""))
                    for err in exc.errors()]
        raise ConfigError(source, problems) from None


def discrete_env_spaces(agent: str, cfg: Any, source: str, state_space: Any = None,
                        action_space: Any = None) -> tuple[Any, Any, int]:
    """``(state_space, action_space, num_actions)`` of a discrete-action agent.

    A space not given comes from the config's environment (``cfg.env``); text forms are parsed.
    The state space loses its batch rank; the action space must be ``IntBox(n)`` (``int64[](0,n-1)``).

    Raises:
        ConfigError: naming ``source`` and the ``env`` key when the action space is not discrete.
        TypeError: naming ``agent`` when a given space is neither a Space nor its text form.
    """
    from harness.spaces import IntBox, Space, parse

    if state_space is None or action_space is None:
        from reference_agents.environments import env_spaces

        env_state, env_action = env_spaces(cfg.env.id, atari=cfg.env.atari, **cfg.env.kwargs)
        state_space = state_space if state_space is not None else env_state
        action_space = action_space if action_space is not None else env_action
    spaces = []
    for space, what in ((state_space, "state_space"), (action_space, "action_space")):
        if isinstance(space, str):
            space = parse(space)
        if not isinstance(space, Space):
            raise TypeError(f"{agent}Agent: {what} must be a Space or its text form; got {space!r}")
        spaces.append(space)
    state, action = spaces[0].with_batch_rank(False), spaces[1]
    if not (isinstance(action, IntBox) and action.shape == () and action.bounded and int(action.low) == 0):
        raise ConfigError(source, [("env", f"{agent} needs a discrete action space IntBox(n) "
                                           f"(int64[](0,n-1)); the env has {action!r}")])
    return state, action, int(action.high) + 1
