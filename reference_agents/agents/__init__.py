"""Reference agents built from the component library: `DQNAgent` (double Q, dueling, n-step, PER)."""

from reference_agents.agents.config import ConfigError, DQNConfig, load_agent_config
from reference_agents.agents.dqn_agent import DQNAgent
from reference_agents.agents.dqn_graph import DQNGraph, QNetwork

CONFIG_DIR = __import__("os").path.join(__import__("os").path.dirname(__import__("os").path.dirname(__file__)),
                                        "configs")


def build_agent(config, backend=None, seed=None, **kwargs) -> DQNAgent:
    """An agent from a config file, dict or `DQNConfig` (its ``agent`` key picks the class; only ``dqn`` now).

    A bare name like ``"dqn_cartpole"`` means ``reference_agents/configs/dqn_cartpole.yaml``.
    """
    import os

    if isinstance(config, str) and not os.path.exists(config) and os.sep not in config and "." not in config:
        config = os.path.join(CONFIG_DIR, config + ".yaml")
    return DQNAgent(config, backend=backend, seed=seed, **kwargs)


__all__ = ["ConfigError", "DQNAgent", "DQNConfig", "DQNGraph", "QNetwork", "build_agent", "load_agent_config"]
