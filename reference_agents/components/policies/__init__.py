"""Policies and their action adapters: network outputs to action distributions and actions."""

from reference_agents.components.policies.categorical import CategoricalAdapter
from reference_agents.components.policies.gaussian import GaussianAdapter
from reference_agents.components.policies.policy import Policy, adapter_for

__all__ = ["CategoricalAdapter", "GaussianAdapter", "Policy", "adapter_for"]
