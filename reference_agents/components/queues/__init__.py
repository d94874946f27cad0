"""Queues for actor-learner hand-off: an in-graph FIFO queue, a blocking wrapper and a prefetcher."""

from reference_agents.components.queues.blocking import BlockingQueue, QueueClosedError
from reference_agents.components.queues.fifo_queue import FIFOQueue
from reference_agents.components.queues.prefetcher import Prefetcher

__all__ = ["FIFOQueue", "BlockingQueue", "QueueClosedError", "Prefetcher"]
