"""Optimizers: components that update other components' trainable variables from a loss."""

from reference_agents.components.optimizers.adam import Adam
from reference_agents.components.optimizers.base import Optimizer
from reference_agents.components.optimizers.rmsprop import RMSProp
from reference_agents.components.optimizers.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "RMSProp"]
