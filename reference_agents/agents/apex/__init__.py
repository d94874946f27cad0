"""Ape-X (distributed prioritized replay) over the DQN component graph, written against
`harness.execution.actors` (it runs in one process or on Ray without a line changed)."""

from reference_agents.agents.apex.agent import ApexAgent
from reference_agents.agents.apex.config import ApexConfig, ApexSection, load_apex_config
from reference_agents.agents.apex.driver import ApexDriver
from reference_agents.agents.apex.learner import ApexLearner
from reference_agents.agents.apex.shard import HostRecordReplay, ReplayShard
from reference_agents.agents.apex.worker import ApexWorker

__all__ = ["ApexAgent", "ApexConfig", "ApexDriver", "ApexLearner", "ApexSection", "ApexWorker", "HostRecordReplay",
           "ReplayShard", "load_apex_config"]
