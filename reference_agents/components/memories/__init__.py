"""Replay memories: a uniform ring buffer, segment trees and prioritized replay."""

from reference_agents.components.memories.prioritized_replay import PrioritizedReplay
from reference_agents.components.memories.replay_memory import ReplayMemory
from reference_agents.components.memories.segment_tree import SegmentTree

__all__ = ["ReplayMemory", "SegmentTree", "PrioritizedReplay"]

from reference_agents.components.memories.frame_index import FrameIndex  # noqa: E402
from reference_agents.components.memories.frame_replay import FrameReplay  # noqa: E402
from reference_agents.components.memories.host_frame_replay import HostFrameReplay  # noqa: E402

__all__ += ["FrameIndex", "FrameReplay", "HostFrameReplay"]
