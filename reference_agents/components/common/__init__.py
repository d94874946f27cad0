"""Utility components every graph needs: dense layers, container routing, time ranks, variable sync."""

from reference_agents.components.common.containers import ContainerMerger, ContainerSplitter
from reference_agents.components.common.dense import Dense
from reference_agents.components.common.synchronizer import Synchronizer
from reference_agents.components.common.time_rank import FoldTimeRank, UnfoldTimeRank

__all__ = ["Dense", "ContainerSplitter", "ContainerMerger", "FoldTimeRank", "UnfoldTimeRank", "Synchronizer"]
