"""Exploration: epsilon-greedy action selection with schedules, and Ape-X per-actor rates."""

from reference_agents.components.explorations.apex import apex_epsilons
from reference_agents.components.explorations.epsilon_greedy import EpsilonGreedy, check_schedule

__all__ = ["EpsilonGreedy", "apex_epsilons", "check_schedule"]
