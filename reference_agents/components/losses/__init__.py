"""Loss functions: DQN's TD loss, V-trace and IMPALA's actor-critic loss."""

from reference_agents.components.losses.dqn_loss import DQNLoss
from reference_agents.components.losses.impala_loss import IMPALALoss
from reference_agents.components.losses.vtrace import VTrace

__all__ = ["DQNLoss", "VTrace", "IMPALALoss"]
