"""IMPALA (Espeholt et al. 2018): a V-trace actor-critic whose actors and learner share one config and graph."""

from reference_agents.agents.impala.agent import IMPALAAgent
from reference_agents.agents.impala.config import IMPALAConfig, load_impala_config
from reference_agents.agents.impala.graph import IMPALAGraph
from reference_agents.agents.impala.rollouts import ROLLOUT_KEYS, RolloutBuilder, concat_rollouts

__all__ = ["IMPALAAgent", "IMPALAConfig", "IMPALAGraph", "ROLLOUT_KEYS", "RolloutBuilder", "concat_rollouts",
           "load_impala_config"]
