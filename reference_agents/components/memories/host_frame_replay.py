"""`HostFrameReplay`: a frame replay held in NumPy outside any graph (an agent's host-side replay, Ape-X shards).

Same store as the in-graph `FrameReplay` (the `FrameIndex` decides every slot; see its
module docstring), with frames in a NumPy array, or LZ4-compressed one by one
(``compression="lz4"``), and priorities in NumPy segment trees computed as
`PrioritizedReplay` computes them (``p^alpha`` in float32, stratified proportional
sampling, ``w = (min p^alpha / p^alpha)^beta``). ``prioritized=False`` samples valid
transitions uniformly (``alpha = beta = 0``: every valid leaf is 1, every weight 1).

Uncompressed frames are one ``np.zeros`` array: the kernel hands out zero pages on
first write, so building costs no time or resident memory in proportion to capacity.

Stacks come back in one of `LAYOUTS` (the same bytes, ``uint8[B, *frame_shape, stack]`` either way):
``"nchw_view"``, views of one channel-first gather (free for PyTorch's NCHW convolutions), or ``"nhwc"``,
C-contiguous arrays gathered channel by channel (what TensorFlow takes without a copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.components.memories.frame_index import RECORD_FIELDS, FrameIndex

COMPRESSIONS = (None, "lz4")
#: how `HostFrameReplay.records_at` / `sample` lay out stacks: views of a channel-first gather, or C-contiguous NHWC
LAYOUTS = ("nchw_view", "nhwc")
BYTES_HEADER = 33  # sys.getsizeof(b"") on CPython 3.x: what each LZ4 blob costs beyond its length


class HostSumMinTrees:
    """A sum tree and a min tree over ``2^k >= capacity`` float32 leaves (0 and +inf when unused), in NumPy."""

    def __init__(self, capacity: int) -> None:
        self.leaves = 1 << max(0, (capacity - 1).bit_length())
        self.sum = np.zeros(2 * self.leaves, np.float32)
        self.min = np.full(2 * self.leaves, np.inf, np.float32)

    def set(self, slots: np.ndarray, values: np.ndarray, min_values: np.ndarray | None = None) -> None:
        """Sets leaves (the last of repeated slots wins) and recomputes their ancestors."""
        slots = np.asarray(slots, np.int64)
        if not slots.size:
            return
        values = np.asarray(values, np.float32)
        min_values = values if min_values is None else np.asarray(min_values, np.float32)
        nodes = slots + self.leaves
        self.sum[nodes] = values      # NumPy fancy assignment: the last of repeats wins
        self.min[nodes] = min_values
        nodes = np.unique(nodes)
        while nodes[0] > 1:
            nodes = np.unique(nodes >> 1)
            self.sum[nodes] = self.sum[2 * nodes] + self.sum[2 * nodes + 1]
            self.min[nodes] = np.minimum(self.min[2 * nodes], self.min[2 * nodes + 1])

    def prefix_sum_index(self, masses: np.ndarray) -> np.ndarray:
        """The leaf holding each mass, walking float32 node sums from the root as `SegmentTree` does."""
        node = np.ones(len(masses), np.int64)
        mass = np.array(masses, np.float32)
        for _ in range(self.leaves.bit_length() - 1):
            node <<= 1                       # the left child
            left = self.sum[node]
            right = mass >= left
            mass -= left * right             # sums are finite, so this is mass - left or mass exactly
            node += right
        return node - self.leaves


class HostFrameReplay:
    """Frame replay in host memory: add records, sample stacked transitions, update priorities.

    Args:
        capacity: transitions held (at least ``stack``).
        frame_shape: one frame's shape, e.g. ``(84, 84)``; stacks are ``[*frame_shape, stack]``.
        stack: frames per stack.
        prioritized: proportional prioritized sampling (else uniform over valid transitions).
        alpha, beta, epsilon: `PrioritizedReplay`'s (ignored without ``prioritized``).
        compression: None or ``"lz4"`` (each frame compressed on its own with ``lz4.block``).
        frame_capacity, match_window: see `FrameIndex`.
        seed: the sampling generator's seed.

    Raises:
        ValueError: naming the argument when one is invalid.
    """

    def __init__(self, capacity: int, frame_shape: tuple[int, ...] = (84, 84), stack: int = 4,
                 prioritized: bool = True, alpha: float = 0.6, beta: float = 0.4, epsilon: float = 1e-6,
                 compression: str | None = None, frame_capacity: int | None = None, match_window: int | None = None,
                 seed: int | None = None) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"HostFrameReplay: compression must be one of {COMPRESSIONS}; got {compression!r}")
        from reference_agents.components.memories.prioritized_replay import checked_number

        self.index = FrameIndex(capacity, frame_shape, stack, frame_capacity, match_window, owner="HostFrameReplay")
        self.capacity, self.stack, self.frame_shape = self.index.capacity, self.index.stack, self.index.frame_shape
        self.prioritized = bool(prioritized)
        self.alpha = checked_number("HostFrameReplay", "alpha", alpha, 0.0, None, True) if prioritized else 0.0
        self.beta = checked_number("HostFrameReplay", "beta", beta, 0.0, 1.0, True) if prioritized else 0.0
        self.epsilon = checked_number("HostFrameReplay", "epsilon", epsilon, 0.0, None, False)
        self.compression = compression
        fc = self.index.frame_capacity
        if compression == "lz4":
            import lz4.block  # noqa: F401 - fail at build, not at the first add

            self.packed: list[bytes | None] = [None] * fc
            self.frames = None
        else:
            self.frames = np.zeros((fc,) + self.frame_shape, np.uint8)  # zero pages: no cost until written
        self.frame_bytes = int(np.prod(self.frame_shape))
        self.packed_bytes = 0
        self.trees = HostSumMinTrees(self.capacity)
        self.max_priority = np.float32(1.0)
        self.rng = np.random.default_rng(seed)

    # ---- adding --------------------------------------------------------------------------------
    def _weighted(self, p: Any) -> np.ndarray:
        p = np.asarray(p, np.float32)
        return np.exp(np.float32(self.alpha) * np.log(p)).astype(np.float32)

    def add(self, records: dict[str, Any], priorities: Any = None) -> np.ndarray:
        """Adds records (a dict of `RECORD_FIELDS` arrays: an agent's staged batch or `SampleBatch.records`).

        Args:
            records: ``states``/``next_states`` uint8 stacks, ``actions``, ``rewards``, ``terminals``, ``discounts``.
            priorities: optional ``|TD error|`` per record (worker-side priorities, Ape-X); default the
                largest priority so far.

        Returns:
            The transition slots written (the last ``capacity`` records').
        """
        n = len(np.asarray(records["actions"])) if "actions" in records else 0
        plan = self.index.add(records)
        if plan.frame_slots.size:
            if self.frames is not None:
                self.frames[plan.frame_slots] = plan.frames
            else:
                import lz4.block

                for slot, frame in zip(plan.frame_slots.tolist(), plan.frames):
                    old = self.packed[slot]
                    blob = lz4.block.compress(frame.tobytes(), store_size=False)
                    self.packed[slot] = blob
                    self.packed_bytes += len(blob) - (len(old) if old is not None else 0)
        if priorities is None:
            values = np.full(plan.slots.size, self._weighted(self.max_priority), np.float32)
        else:
            p = np.abs(np.asarray(priorities, np.float32).reshape(-1)) + np.float32(self.epsilon)
            if p.shape != (n,):
                raise ValueError(f"HostFrameReplay.add: priorities must have one entry per record ({n}); "
                                 f"got {p.shape}")
            p = p[n - plan.slots.size:]
            self.max_priority = np.float32(max(self.max_priority, p.max())) if p.size else self.max_priority
            values = self._weighted(p)
        self.trees.set(plan.slots, values)
        self.trees.set(plan.dead, np.zeros(plan.dead.size, np.float32), np.full(plan.dead.size, np.inf, np.float32))
        return plan.slots

    # ---- sampling ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Valid transitions (those that can be sampled)."""
        return self.index.size

    def _frame_source(self, chains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(frames, rows)`` with ``frames[rows]`` the frames of ``chains``: the frame array and the chains
        themselves, or (LZ4) each distinct frame decompressed once and where each chain entry finds it."""
        if self.frames is not None:
            return self.frames, chains
        import lz4.block

        unique, inverse = np.unique(chains, return_inverse=True)
        out = np.empty((unique.size,) + self.frame_shape, np.uint8)
        flat = out.reshape(unique.size, -1)
        for i, slot in enumerate(unique.tolist()):
            flat[i] = np.frombuffer(lz4.block.decompress(self.packed[slot], uncompressed_size=self.frame_bytes),
                                    np.uint8)
        return out, inverse.reshape(chains.shape)

    def _stacks(self, chains: np.ndarray, layout: str) -> np.ndarray:
        """``[N, *frame_shape, D]`` stacks of ``chains`` (``[N, D]`` frame slots) in ``layout``."""
        frames, rows = self._frame_source(chains)
        if layout == "nchw_view":
            return np.moveaxis(frames[rows], 1, -1)                   # a view of a [N, D, *frame_shape] gather
        if layout != "nhwc":
            raise ValueError(f"HostFrameReplay: layout must be one of {LAYOUTS}; got {layout!r}")
        out = np.empty((rows.shape[0],) + self.frame_shape + (self.stack,), np.uint8)
        for d in range(self.stack):                                  # channel by channel into C-contiguous NHWC
            out[..., d] = frames[rows[:, d]]
        return out

    def records_at(self, slots: Any, layout: str = "nchw_view") -> dict[str, np.ndarray]:
        """The transitions in ``slots`` with their stacks rebuilt (valid or not: see `FrameIndex`).

        Args:
            slots: transition slots (taken modulo ``capacity``).
            layout: how ``states`` / ``next_states`` (``uint8[B, *frame_shape, stack]`` either way, the same
                bytes) lie in memory: ``"nchw_view"`` (default) views of one ``[2B, stack, *frame_shape]``
                gather, channel-first in memory (what PyTorch's NCHW convolutions take without a copy);
                ``"nhwc"`` C-contiguous arrays gathered channel by channel (what TensorFlow converts
                without a copy; much cheaper than ``np.ascontiguousarray`` of the views).

        Raises:
            ValueError: for another ``layout``.
        """
        slots = np.asarray(slots, np.int64) % self.capacity
        ix = self.index
        both = np.concatenate([ix.t_state[slots], ix.t_target[slots]])
        stacks = self._stacks(ix.chains(both), layout)               # [2B, *frame_shape, D]
        b = slots.size
        return {"states": stacks[:b], "actions": ix.t_action[slots].copy(), "rewards": ix.t_reward[slots].copy(),
                "terminals": ix.t_terminal[slots].copy(), "next_states": stacks[b:],
                "discounts": ix.t_discount[slots].copy()}

    def sample_slots(self, num_records: int, masses: Any = None) -> np.ndarray:
        """Slots of ``num_records`` proportional draws (stratified masses as `PrioritizedReplay` draws them,
        unless given).

        Raises:
            RuntimeError: when no transition is valid.
        """
        total = self.trees.sum[1]
        if not total > 0:
            raise RuntimeError("HostFrameReplay.sample: no valid transition to sample; add records first")
        if masses is None:
            u = self.rng.random(num_records, dtype=np.float32)
            masses = np.minimum((np.arange(num_records, dtype=np.float32) + u) / np.float32(max(num_records, 1)),
                                np.float32(1.0)) * total
        slots = np.minimum(self.trees.prefix_sum_index(masses), self.capacity - 1)
        bad = self.trees.sum[slots + self.trees.leaves] <= 0  # a mass rounded onto an empty leaf: draw again
        while bad.any():
            slots[bad] = np.minimum(self.trees.prefix_sum_index(self.rng.random(int(bad.sum()), dtype=np.float32)
                                                                * total), self.capacity - 1)
            bad = self.trees.sum[slots + self.trees.leaves] <= 0
        return slots

    def weights(self, slots: Any) -> np.ndarray:
        """Importance weights ``(min p^alpha / p^alpha)^beta`` of ``slots`` (float32)."""
        weighted = self.trees.sum[np.asarray(slots, np.int64) + self.trees.leaves]
        ratio = np.minimum(self.trees.min[1] / np.maximum(weighted, np.float32(1e-30)), np.float32(1.0))
        w = np.exp(np.float32(self.beta) * np.log(ratio)).astype(np.float32)
        return np.where(weighted > 0, w, np.float32(1.0)).astype(np.float32)

    def sample(self, num_records: int, masses: Any = None, layout: str = "nchw_view"
               ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """``(records, slots, importance weights)`` for ``num_records`` draws (stacks in ``layout``: see
        `records_at`)."""
        if layout not in LAYOUTS:
            raise ValueError(f"HostFrameReplay: layout must be one of {LAYOUTS}; got {layout!r}")
        slots = self.sample_slots(num_records, masses)
        return self.records_at(slots, layout), slots, self.weights(slots)

    def update_priorities(self, slots: Any, priorities: Any) -> None:
        """``p = |priority| + epsilon`` for ``slots`` that are still valid (others stay unsampleable)."""
        if not self.prioritized:
            return
        slots = np.asarray(slots, np.int64).reshape(-1)
        p = np.abs(np.asarray(priorities, np.float32).reshape(-1)) + np.float32(self.epsilon)
        live = self.index.valid[slots]
        if live.any():
            self.max_priority = np.float32(max(self.max_priority, p[live].max()))
            self.trees.set(slots[live], self._weighted(p[live]))

    # ---- accounting and state -----------------------------------------------------------------
    def frame_nbytes(self) -> int:
        """Bytes the stored frames take: the array, or the LZ4 blobs (their lengths plus CPython's 33-byte
        ``bytes`` header each) and the list's pointers."""
        if self.frames is not None:
            return int(self.frames.nbytes)
        blobs = min(self.index.frames_written, self.index.frame_capacity)
        return int(self.packed_bytes + BYTES_HEADER * blobs + 8 * len(self.packed))

    def nbytes(self) -> int:
        """Bytes of the whole store: frames, index and trees."""
        return self.frame_nbytes() + self.index.metadata_nbytes() + int(self.trees.sum.nbytes + self.trees.min.nbytes)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything as arrays (frames as stored: uncompressed, or LZ4 blobs concatenated with offsets)."""
        state = {f"index/{k}": v for k, v in self.index.state_dict().items()}
        state.update({"trees/sum": self.trees.sum, "trees/min": self.trees.min,
                      "max_priority": np.asarray(self.max_priority, np.float32),
                      "compression": np.asarray(self.compression or "")})
        if self.frames is not None:
            used = min(self.index.frames_written, self.index.frame_capacity)
            state["frames"] = self.frames[:used]
        else:
            lengths = np.asarray([len(b) if b is not None else -1 for b in self.packed], np.int64)
            state["packed_lengths"] = lengths
            state["packed"] = np.frombuffer(b"".join(b for b in self.packed if b is not None), np.uint8)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restores `state_dict` output (same sizes and compression).

        Raises:
            ValueError: naming what differs.
        """
        saved = str(np.asarray(state["compression"])) or None
        if saved != self.compression:
            raise ValueError(f"HostFrameReplay: the saved replay has compression {saved!r}; this one "
                             f"{self.compression!r}")
        self.index.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("index/")})
        self.trees.sum[...] = state["trees/sum"]
        self.trees.min[...] = state["trees/min"]
        self.max_priority = np.float32(state["max_priority"])
        if self.frames is not None:
            frames = np.asarray(state["frames"])
            self.frames[:len(frames)] = frames
        else:
            lengths, blob = np.asarray(state["packed_lengths"]), np.asarray(state["packed"]).tobytes()
            offset = 0
            self.packed_bytes = 0
            for i, n in enumerate(lengths.tolist()):
                if n < 0:
                    self.packed[i] = None
                else:
                    self.packed[i] = blob[offset:offset + n]
                    offset += n
                    self.packed_bytes += n


__all__ = ["LAYOUTS", "RECORD_FIELDS", "HostFrameReplay", "HostSumMinTrees"]
