"""DQN (double Q, dueling, n-step, prioritized and frame replay): its config, graph, replay stores,
staging of n-step records, checkpoints and the agent."""

from reference_agents.agents.dqn.agent import DQNAgent
from reference_agents.agents.dqn.config import DQNConfig
from reference_agents.agents.dqn.graph import RECORD_KEYS, DQNGraph, QNetwork

__all__ = ["DQNAgent", "DQNConfig", "DQNGraph", "QNetwork", "RECORD_KEYS"]
