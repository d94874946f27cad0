"""Replay memories: a uniform ring buffer, segment trees and prioritized replay."""

from reference_agents.components.memories.prioritized_replay import PrioritizedReplay
from reference_agents.components.memories.replay_memory import ReplayMemory
from reference_agents.components.memories.segment_tree import SegmentTree

__all__ = ["ReplayMemory", "SegmentTree", "PrioritizedReplay"]
