"""Reference agents built from the component library: `DQNAgent` (double Q, dueling, n-step, PER) and
`IMPALAAgent` (V-trace actor-critic, feed-forward or LSTM)."""

import os
from typing import Any

from harness.execution.serialization import BadFileError
from reference_agents.agents.config import ConfigError, DQNConfig, _read, load_agent_config
from reference_agents.agents.dqn_agent import DQNAgent
from reference_agents.agents.dqn_graph import DQNGraph, QNetwork
from reference_agents.agents.impala import IMPALAAgent, IMPALAConfig

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "configs")

#: Agent classes and their config classes by a config's ``agent`` key.
AGENTS: dict[str, tuple[type, type]] = {"dqn": (DQNAgent, DQNConfig), "impala": (IMPALAAgent, IMPALAConfig)}
#: Agent classes by the ``format`` their checkpoints carry.
CHECKPOINT_FORMATS = {"spacegraph-dqn-checkpoint": DQNAgent, "spacegraph-impala-checkpoint": IMPALAAgent}


def _resolve(config: Any) -> Any:
    if isinstance(config, str) and not os.path.exists(config) and os.sep not in config and "." not in config:
        return os.path.join(CONFIG_DIR, config + ".yaml")
    return config


def agent_kind(config: Any) -> str:
    """The ``agent`` key of a config file, dict or config object (``dqn`` when it has none).

    Raises:
        ConfigError: naming the file and the key when it names no known agent.
    """
    if isinstance(config, (str, os.PathLike)):
        data, source = _read(os.fspath(config)), os.fspath(config)
    elif isinstance(config, dict):
        data, source = config, "<dict>"
    else:
        return getattr(config, "agent", "dqn")
    kind = data.get("agent", "dqn") if isinstance(data, dict) else "dqn"
    if kind not in AGENTS:
        raise ConfigError(source, [("agent", f"must be one of {sorted(AGENTS)}; got {kind!r}")])
    return kind


def load_config(config: Any, overrides: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The checked config of whichever agent the config's ``agent`` key names, and its source."""
    config = _resolve(config)
    return load_agent_config(config, overrides, model=AGENTS[agent_kind(config)][1])


def build_agent(config: Any, backend: str | None = None, seed: int | None = None, **kwargs: Any) -> Any:
    """An agent from a config file, dict or config object; its ``agent`` key picks the class (`AGENTS`).

    A bare name like ``"dqn_cartpole"`` means ``reference_agents/configs/dqn_cartpole.yaml``.
    """
    config = _resolve(config)
    return AGENTS[agent_kind(config)][0](config, backend=backend, seed=seed, **kwargs)


def checkpoint_format(directory: str) -> str:
    """The ``format`` an agent checkpoint directory's ``agent_state.npz`` names (one of `CHECKPOINT_FORMATS`).

    Raises:
        BadFileError: (a ValueError) naming the file when it is missing, damaged or of another format.
    """
    from reference_agents.agents.checkpoints import read_agent_state

    try:
        meta, _ = read_agent_state(directory, formats=tuple(CHECKPOINT_FORMATS))
    except BadFileError as exc:
        raise exc.within(f"load_checkpoint: {directory} holds no readable agent checkpoint") from None
    return meta["format"]


def load_checkpoint(directory: str, backend: str | None = None) -> Any:
    """The agent a checkpoint directory holds (DQN or IMPALA, by its format), restored.

    Raises:
        BadFileError: (a ValueError) naming the checkpoint file that is missing, damaged or does not fit.
    """
    return CHECKPOINT_FORMATS[checkpoint_format(directory)].load_checkpoint(directory, backend=backend)


__all__ = ["AGENTS", "BadFileError", "ConfigError", "DQNAgent", "DQNConfig", "DQNGraph", "IMPALAAgent", "IMPALAConfig",
           "QNetwork", "agent_kind", "build_agent", "checkpoint_format", "load_agent_config", "load_checkpoint",
           "load_config"]
