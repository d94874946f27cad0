"""Where a `DQNAgent`'s replay lives: in its graph (`ReplayMemory`, `PrioritizedReplay`, `FrameReplay`) or
host-side (`HostFrameReplay`), behind one small interface the agent calls."""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.components.memories import FrameIndex, HostFrameReplay


class GraphReplay:
    """Records replay inside the graph: ``insert_records``, ``memory_size``, ``update_from_memory``."""

    methods = ("insert_records", "memory_size", "update_from_memory")

    def insert(self, executor: Any, records: dict[str, np.ndarray]) -> None:
        executor.execute("insert_records", records)

    def size(self, executor: Any) -> int:
        return int(executor.execute("memory_size"))

    def learn(self, executor: Any, batch_size: int) -> Any:
        """One ``update_from_memory`` call: sample, learn and write priorities in the graph."""
        return executor.execute("update_from_memory", np.int64(batch_size))

    def state_dict(self) -> dict[str, np.ndarray]:
        return {}  # the graph's variables hold everything

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        pass


class GraphFrameReplay(GraphReplay):
    """`FrameReplay` in the graph; its `FrameIndex` (slot assignment, chains, validity) host-side."""

    methods = ("insert_frames", "update_from_memory")

    def __init__(self, capacity: int, frame_shape: tuple[int, ...], stack: int, frame_capacity: int | None,
                 match_window: int) -> None:
        self.index = FrameIndex(capacity, frame_shape, stack, frame_capacity, match_window, owner="FrameReplay")

    def insert(self, executor: Any, records: dict[str, np.ndarray]) -> None:
        plan = self.index.add(records)
        executor.execute("insert_frames", plan.frame_slots, plan.frames, plan.frame_prevs, plan.transitions,
                         plan.dead)

    def size(self, executor: Any) -> int:
        return self.index.size

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.index.state_dict()

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.index.load_state_dict(state)


class HostReplay:
    """`HostFrameReplay` outside the graph: sampled in NumPy, learned with ``update_from_batch``."""

    methods: tuple[str, ...] = ()

    def __init__(self, store: HostFrameReplay) -> None:
        self.store = store

    def insert(self, executor: Any, records: dict[str, np.ndarray]) -> None:
        self.store.add(records)

    def size(self, executor: Any) -> int:
        return self.store.size

    def learn(self, executor: Any, batch_size: int) -> Any:
        """Samples host-side, learns in one graph call, writes the new priorities back host-side."""
        records, slots, weights = self.store.sample(batch_size)
        out = executor.execute("update_from_batch", records, weights)
        self.store.update_priorities(slots, np.asarray(out[2]))
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.store.state_dict()

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.store.load_state_dict(state)
