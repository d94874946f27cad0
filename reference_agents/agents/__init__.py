"""Reference agents built from the component library, one folder each: `DQNAgent` (``dqn/``: double Q,
dueling, n-step, PER), `IMPALAAgent` (``impala/``: V-trace actor-critic, feed-forward or LSTM, with its
actor-learner and central-inference coordination) and Ape-X (``apex/``: distributed prioritized replay over the
DQN graph). The registry (`registry`) maps a config's ``agent`` key to its agent; `load_config`,
`build_agent` and `load_checkpoint` are the one way in. `base` holds the `Agent` protocol."""

from harness.execution.serialization import BadFileError
from reference_agents.agents.base import Agent
from reference_agents.agents.config import (CONFIG_DIR, ConfigError, describe_config_path, load_agent_config,
                                            resolve_config_path)
from reference_agents.agents.dqn import DQNAgent, DQNConfig, DQNGraph, QNetwork
from reference_agents.agents.impala import IMPALAAgent, IMPALAConfig
from reference_agents.agents.registry import (AGENTS, AgentEntry, agent_entry, agent_kind, build_agent,
                                              checkpoint_format, checkpoint_kind, load_checkpoint, load_config,
                                              register_agent)

__all__ = ["AGENTS", "Agent", "AgentEntry", "BadFileError", "CONFIG_DIR", "ConfigError", "DQNAgent", "DQNConfig",
           "DQNGraph", "IMPALAAgent", "IMPALAConfig", "QNetwork", "agent_entry", "agent_kind", "build_agent",
           "checkpoint_format", "checkpoint_kind", "describe_config_path", "load_agent_config", "load_checkpoint", "load_config",
           "register_agent", "resolve_config_path"]
