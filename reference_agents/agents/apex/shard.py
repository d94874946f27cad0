"""`ReplayShard`: one prioritized replay shard of Ape-X (an actor), with its in/out counts and snapshots.

A shard holds records (`HostRecordReplay`) or, for frame-stack states (Atari), a `HostFrameReplay`
(each frame stored once). Both sample as `PrioritizedReplay` does (stratified proportional draws
over ``p^alpha`` in float32 segment trees, ``w = (min p^alpha / p^alpha)^beta``): `HostRecordReplay`
reuses `HostFrameReplay`'s trees and draws. Every record carries a tag (an int64 the driver gives it)
so that a test can check that nothing held is duplicated or lost.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.execution.formats import declare_format
from harness.execution.serialization import BadFileError, read_npz
from reference_agents.agents.apex.transport import unpack_records
from reference_agents.agents.checkpoints import META_MEMBER, write_meta_npz
from reference_agents.components.memories import HostFrameReplay
from reference_agents.components.memories.host_frame_replay import HostSumMinTrees

RECORD_KEYS = ("states", "actions", "rewards", "terminals", "next_states", "discounts")
SNAPSHOT_FORMAT = "spacegraph-replay-shard"
# Format 1: what spacegraph wrote before formats carried versions (then without metadata: read as format 1).
declare_format(SNAPSHOT_FORMAT, 1, "a replay shard snapshot")


class HostRecordReplay(HostFrameReplay):
    """Prioritized replay of whole records in NumPy rings (states that are not frame stacks).

    Args:
        capacity: records held (the oldest is overwritten).
        alpha, beta, epsilon: `PrioritizedReplay`'s (ignored without ``prioritized``).
        seed: the sampling generator's seed.
        prioritized: proportional prioritized sampling; False: uniform over the records held
            (``alpha = beta = 0``, as `HostFrameReplay` does).
    """

    def __init__(self, capacity: int, alpha: float = 0.6, beta: float = 0.4, epsilon: float = 1e-6,
                 seed: int | None = None, prioritized: bool = True) -> None:
        from reference_agents.components.memories.prioritized_replay import checked_number

        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"HostRecordReplay: capacity must be a positive int; got {capacity!r}")
        self.capacity = int(capacity)
        self.prioritized = bool(prioritized)
        self.alpha = checked_number("HostRecordReplay", "alpha", alpha, 0.0, None, True) if prioritized else 0.0
        self.beta = checked_number("HostRecordReplay", "beta", beta, 0.0, 1.0, True) if prioritized else 0.0
        self.epsilon = checked_number("HostRecordReplay", "epsilon", epsilon, 0.0, None, False)
        self.trees = HostSumMinTrees(self.capacity)
        self.max_priority = np.float32(1.0)
        self.rng = np.random.default_rng(seed)
        self.buffers: dict[str, np.ndarray] | None = None
        self.written = 0

    @property
    def size(self) -> int:
        return min(self.written, self.capacity)

    def add(self, records: dict[str, Any], priorities: Any = None) -> np.ndarray:
        """Adds records (``RECORD_KEYS`` arrays); returns the slots written."""
        missing = [k for k in RECORD_KEYS if k not in records]
        if missing:
            raise ValueError(f"HostRecordReplay.add: records lack {missing}; they need {list(RECORD_KEYS)}")
        n = len(np.asarray(records["actions"]))
        if self.buffers is None:
            self.buffers = {k: np.zeros((self.capacity,) + np.asarray(records[k]).shape[1:], np.asarray(records[k]).dtype)
                            for k in RECORD_KEYS}
        keep = min(n, self.capacity)
        slots = (self.written + np.arange(n - keep, n)) % self.capacity
        for k in RECORD_KEYS:
            self.buffers[k][slots] = np.asarray(records[k])[n - keep:]
        self.written += n
        if priorities is None:
            values = np.full(keep, self._weighted(self.max_priority), np.float32)
        else:
            p = np.abs(np.asarray(priorities, np.float32).reshape(-1)) + np.float32(self.epsilon)
            if p.shape != (n,):
                raise ValueError(f"HostRecordReplay.add: priorities must have one entry per record ({n}); got {p.shape}")
            p = p[n - keep:]
            if p.size:
                self.max_priority = np.float32(max(self.max_priority, p.max()))
            values = self._weighted(p)
        self.trees.set(slots, values)
        return slots

    def records_at(self, slots: Any, layout: str = "nchw_view") -> dict[str, np.ndarray]:
        slots = np.asarray(slots, np.int64) % self.capacity
        assert self.buffers is not None
        return {k: self.buffers[k][slots] for k in RECORD_KEYS}

    def update_priorities(self, slots: Any, priorities: Any) -> None:
        if not self.prioritized:
            return
        slots = np.asarray(slots, np.int64).reshape(-1)
        p = np.abs(np.asarray(priorities, np.float32).reshape(-1)) + np.float32(self.epsilon)
        live = slots < self.size
        if live.any():
            self.max_priority = np.float32(max(self.max_priority, p[live].max()))
            self.trees.set(slots[live], self._weighted(p[live]))

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {"trees/sum": self.trees.sum, "trees/min": self.trees.min, "written": np.asarray(self.written),
                 "max_priority": np.asarray(self.max_priority, np.float32)}
        for k, v in (self.buffers or {}).items():
            state[f"buffers/{k}"] = v[:self.size]
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.trees.sum[:], self.trees.min[:] = state["trees/sum"], state["trees/min"]
        self.written = int(state["written"])
        self.max_priority = np.float32(state["max_priority"])
        keys = [k for k in state if k.startswith("buffers/")]
        if keys:
            self.buffers = {}
            for key in keys:
                held = np.asarray(state[key])
                buf = np.zeros((self.capacity,) + held.shape[1:], held.dtype)
                buf[:len(held)] = held
                self.buffers[key.split("/", 1)[1]] = buf


class ReplayShard:
    """One Ape-X replay shard: adds workers' transitions with their priorities, samples for the learner,
    takes its new priorities, and counts what came in and went out.

    Args:
        name: the shard's name (reports name a dead shard by it).
        capacity: transitions held.
        frames: ``(frame_shape, stack)`` for a frame store (`HostFrameReplay`), None for records.
        alpha, beta, epsilon: the prioritization's.
        compression: frames only: None or ``"lz4"``.
        layout: frames only: the stacks' layout in sampled batches (see `HostFrameReplay.records_at`).
        seed: the sampling seed.
        prioritized: proportional prioritized sampling (Ape-X's); False: uniform, and new priorities are
            ignored (a config's ``memory.type: replay`` or ``prioritized: false``).
        frame_capacity, match_window: frames only: `HostFrameReplay`'s (None: its defaults).
    """

    def __init__(self, name: str, capacity: int, frames: tuple[tuple[int, ...], int] | None = None,
                 alpha: float = 0.6, beta: float = 0.4, epsilon: float = 1e-6, compression: str | None = None,
                 layout: str = "nhwc", seed: int | None = None, prioritized: bool = True,
                 frame_capacity: int | None = None, match_window: int | None = None) -> None:
        self.name, self.layout = name, layout
        if frames is None:
            self.store: HostFrameReplay = HostRecordReplay(capacity, alpha, beta, epsilon, seed=seed,
                                                           prioritized=prioritized)
        else:
            frame_shape, stack = frames
            self.store = HostFrameReplay(capacity, tuple(frame_shape), int(stack), prioritized, alpha, beta,
                                         epsilon, compression, frame_capacity, match_window, seed=seed)
        self.tags = np.full(self.store.capacity, -1, np.int64)
        import os
        import time

        self.instance = f"{os.getpid()}-{id(self)}-{time.time_ns()}"   # changes when the engine replaces the shard
        self.added = 0          # transitions added (this incarnation, restored ones included)
        self.sampled = 0        # transitions handed out in sampled batches
        self.priority_updates = 0

    def add(self, records: dict[str, Any], priorities: Any = None, tags: Any = None) -> dict[str, int]:
        """Adds transitions; returns `stats` after it."""
        n = len(np.asarray(records["actions"]))
        slots = self.store.add(records, priorities)
        if tags is not None:
            tags = np.asarray(tags, np.int64).reshape(-1)
            self.tags[slots] = tags[n - slots.size:]
        self.added += n
        return self.stats()

    def add_payload(self, payload: dict[str, Any], first_tag: int) -> dict[str, Any]:
        """Adds a worker's `ApexWorker.sample_split` payload (packed records and priorities), tagged
        ``first_tag, first_tag + 1, ...``; returns `stats`."""
        records = unpack_records(payload["records"])
        n = len(np.asarray(records["actions"]))
        return self.add(records, payload["priorities"], np.arange(first_tag, first_tag + n, dtype=np.int64))

    def sample(self, batch_size: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray] | None:
        """``(records, slots, importance weights)`` of ``batch_size`` draws, or None while the shard holds fewer."""
        if self.store.size < batch_size:
            return None
        records, slots, weights = self.store.sample(int(batch_size), layout=self.layout)
        self.sampled += int(batch_size)
        return records, slots, weights

    def update_priorities(self, slots: Any, priorities: Any) -> int:
        """New priorities (``|TD error|``) for sampled slots; returns how many."""
        self.store.update_priorities(slots, priorities)
        self.priority_updates += int(np.asarray(slots).size)
        return int(np.asarray(slots).size)

    def stats(self) -> dict[str, Any]:
        """``name``, ``size`` (held), ``added``, ``evicted`` (added but no longer held), ``sampled``,
        ``priority_updates``."""
        size = int(self.store.size)
        return {"name": self.name, "size": size, "added": self.added, "evicted": self.added - size,
                "sampled": self.sampled, "priority_updates": self.priority_updates, "instance": self.instance}

    def held_tags(self) -> np.ndarray:
        """The tags of the transitions held (valid ones), for accounting checks."""
        if isinstance(self.store, HostRecordReplay):
            return self.tags[:self.store.size].copy()
        return self.tags[self.store.index.valid].copy()

    def snapshot(self) -> dict[str, np.ndarray]:
        """The shard's whole state as arrays (store, tags, counts)."""
        state = {f"store/{k}": v for k, v in self.store.state_dict().items()}
        state.update({"tags": self.tags, "added": np.asarray(self.added), "sampled": np.asarray(self.sampled)})
        return state

    def restore(self, state: dict[str, np.ndarray]) -> dict[str, Any]:
        """Loads a `snapshot`; returns `stats` after it."""
        self.store.load_state_dict({k[len("store/"):]: v for k, v in state.items() if k.startswith("store/")})
        self.tags[:] = state["tags"]
        self.added, self.sampled = int(state["added"]), int(state["sampled"])
        return self.stats()

    def save(self, path: str) -> dict[str, Any]:
        """Writes `snapshot` to ``path`` (``.npz``, replaced whole by a rename; metadata: the format stamp and
        `stats`); returns `stats`."""
        stats = self.stats()
        write_meta_npz(path, {"format": SNAPSHOT_FORMAT, "stats": stats}, self.snapshot())
        return stats

    def load(self, path: str) -> dict[str, Any]:
        """Restores the snapshot `save` wrote to ``path``; returns `stats`.

        Raises:
            BadFileError: (a ValueError) naming the file when it is missing, damaged or does not fit this shard.
        """
        where = f"ReplayShard {self.name!r}: cannot read the snapshot"
        try:
            _, state = read_npz(path, "a replay shard snapshot", meta_key=META_MEMBER, formats=SNAPSHOT_FORMAT,
                                required=("tags", "added", "sampled"), assume_format=SNAPSHOT_FORMAT)
        except BadFileError as exc:
            raise exc.within(where) from None
        try:
            return self.restore(state)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise BadFileError(path, f"does not fit this shard: {type(exc).__name__}: {exc}", where) from None

    def ping(self) -> str:
        return self.name
