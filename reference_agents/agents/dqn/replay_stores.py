"""Where a `DQNAgent`'s replay lives: in its graph (`ReplayMemory`, `PrioritizedReplay`, `FrameReplay`) or
host-side (`HostFrameReplay`), behind one small interface the agent calls."""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.components.memories import FrameIndex, HostFrameReplay


class GraphReplay:
    """Records replay inside the graph: ``insert_records``, ``memory_size``, ``update_from_memory``.

    Args:
        sampled: learn in three graph calls instead of one: ``sample_from_memory``, ``update_from_batch`` (the
            method a replicated strategy shards and replicates) and, from prioritized replay,
            ``update_priorities``.
        prioritized: the replay samples by priority (its draws have slots whose priorities go back).
    """

    inserts: tuple[str, ...] = ("insert_records", "memory_size")

    def __init__(self, sampled: bool = False, prioritized: bool = False) -> None:
        self.sampled, self.prioritized = bool(sampled), bool(prioritized)

    @property
    def methods(self) -> tuple[str, ...]:
        """The graph's API methods this replay calls."""
        if not self.sampled:
            return (*self.inserts, "update_from_memory")
        return (*self.inserts, "sample_from_memory", *(("update_priorities",) if self.prioritized else ()))

    def insert(self, executor: Any, records: dict[str, np.ndarray]) -> None:
        executor.execute("insert_records", records)

    def size(self, executor: Any) -> int:
        return int(executor.execute("memory_size"))

    def learn(self, executor: Any, batch_size: int) -> Any:
        """One ``update_from_memory`` call (sample, learn and write priorities in the graph), or, ``sampled``, the
        draw, ``update_from_batch`` on it and the new priorities."""
        if not self.sampled:
            return executor.execute("update_from_memory", np.int64(batch_size))
        records, weights, *slots = executor.execute("sample_from_memory", np.int64(batch_size))
        out = executor.execute("update_from_batch", records, weights)
        if self.prioritized:
            executor.execute("update_priorities", slots[0], out[2])
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        return {}  # the graph's variables hold everything

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        pass


class GraphFrameReplay(GraphReplay):
    """`FrameReplay` in the graph; its `FrameIndex` (slot assignment, chains, validity) host-side."""

    inserts = ("insert_frames",)

    def __init__(self, capacity: int, frame_shape: tuple[int, ...], stack: int, frame_capacity: int | None,
                 match_window: int, sampled: bool = False) -> None:
        super().__init__(sampled, prioritized=True)  # FrameReplay samples like PrioritizedReplay
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


#: the stack layout (`HostFrameReplay.records_at`) each backend's ``update_from_batch`` takes without a copy:
#: TensorFlow converts C-contiguous NHWC as is (a strided array costs it a copy); PyTorch's NCHW convolutions
#: want the channel-first views
BATCH_LAYOUTS = {"tf": "nhwc", "torch": "nchw_view"}


class HostReplay:
    """`HostFrameReplay` outside the graph: sampled in NumPy, learned with ``update_from_batch``.

    Args:
        store: the replay.
        layout: the stacks' layout in sampled batches (one of `HostFrameReplay`'s ``LAYOUTS``; see
            `BATCH_LAYOUTS` for the backend's).
    """

    methods: tuple[str, ...] = ()

    def __init__(self, store: HostFrameReplay, layout: str = "nchw_view") -> None:
        self.store, self.layout = store, layout

    @classmethod
    def for_backend(cls, store: HostFrameReplay, backend: str) -> HostReplay:
        """A `HostReplay` sampling in the layout `BATCH_LAYOUTS` names for ``backend`` (the view when unnamed)."""
        return cls(store, BATCH_LAYOUTS.get(backend, "nchw_view"))

    def insert(self, executor: Any, records: dict[str, np.ndarray]) -> None:
        self.store.add(records)

    def size(self, executor: Any) -> int:
        return self.store.size

    def learn(self, executor: Any, batch_size: int) -> Any:
        """Samples host-side, learns in one graph call, writes the new priorities back host-side."""
        records, slots, weights = self.store.sample(batch_size, layout=self.layout)
        out = executor.execute("update_from_batch", records, weights)
        self.store.update_priorities(slots, np.asarray(out[2]))
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.store.state_dict()

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.store.load_state_dict(state)
