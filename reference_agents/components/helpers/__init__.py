"""Return and advantage helpers: discounted sums in the graph, n-step folding on workers."""

from reference_agents.components.helpers.n_step import NStepAccumulator, n_step_transitions
from reference_agents.components.helpers.returns import DiscountedReturns

__all__ = ["DiscountedReturns", "NStepAccumulator", "n_step_transitions"]
