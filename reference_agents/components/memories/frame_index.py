"""`FrameIndex`: the bookkeeping of a frame replay, shared by its in-graph and host-side forms.

A frame replay holds transitions ``(states, actions, rewards, terminals, next_states,
discounts)`` whose states are stacks of the last ``D`` frames (``uint8[H,W,D]``,
oldest first, as `reference_agents.environments.AtariFrames` makes them), but stores
each frame once:

- **Frames** live in a ring of ``frame_capacity`` slots. Each slot holds one frame
  ``[H,W]`` and ``prev``, the slot of the frame before it in its stack; a slot whose
  ``prev`` is itself starts a chain and pads: the stack of slot ``q`` is its frame and
  its ``D - 1`` ancestors, oldest first, the oldest repeated where the chain is shorter.
  That is how an environment's reset stack ``[f, f, f, f]`` looks, so episode starts
  pad exactly as the env-side stacking pads them.
- **Transitions** live in a ring of ``capacity`` slots numbered like `ReplayMemory`'s
  (the ``t``-th transition ever added goes to slot ``t mod capacity``); each holds the
  frame slots of its state and next state (``state``, ``target``), ``action``,
  ``reward``, ``terminal`` and ``discount``.

Which frame slot a stack gets is found by content, so neither environment ids nor
episode flags are needed and any number of environments may interleave: a stack equal
to a recently stored one reuses its slot (a transition's state is usually the next
state of the transition ``n`` steps earlier); a stack whose oldest ``D - 1`` frames
are the newest ``D - 1`` of a recent stack adds one frame chained to it (the next step
of the same environment); anything else starts a new chain (an episode start costs one
frame; a stack met mid-episode costs up to ``D``). Candidates come from a dictionary of
frame hashes over the last ``match_window`` frames and are always compared byte for
byte against a copy of those frames, so a rebuilt stack is the stack that was added.

A transition is *valid* (may be sampled) while every frame slot of its two stacks still
holds the frame it was built from: with frames stamped by their write count ``F``, while
the oldest stamp among them is ``>= F - frame_capacity``. `add` returns a write plan
(frames and transitions to write, transitions that died) that the storage applies: the
host store to NumPy arrays, the in-graph `FrameReplay` in one graph call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from reference_agents.components.common.arguments import check_positive_int

#: The fields of a record, as the agent stages them and `VectorEnvWorker.sample` returns them.
RECORD_FIELDS = ("states", "actions", "rewards", "terminals", "next_states", "discounts")


def default_frame_capacity(capacity: int, stack: int) -> int:
    """Frame slots for ``capacity`` transitions: 0.5% spare for episode ends and resets (two frames per
    episode: 0.25% for Pong's ~800-step episodes), and two stacks."""
    return capacity + capacity // 200 + 2 * stack


def default_match_window(capacity: int) -> int:
    """Newest frames kept as reuse candidates: ``capacity / 500`` within [64, 4096] (0.2% of the frames)."""
    return min(4096, max(64, capacity // 500))


def check_frame_arguments(owner: str, capacity: Any, stack: Any, frame_capacity: Any = None,
                          match_window: Any = None) -> tuple[int, int, int, int]:
    """Checks the sizes of a frame replay; returns ``(capacity, stack, frame_capacity, match_window)``.

    Raises:
        ValueError: naming the argument: ``stack`` not a positive int; ``capacity`` not a positive int
            or below ``stack``; ``frame_capacity`` below ``2 * stack``; ``match_window`` not positive.
    """
    stack = check_positive_int(owner, "stack", stack)
    capacity = check_positive_int(owner, "capacity", capacity)
    if capacity < stack:
        raise ValueError(f"{owner}: capacity must be at least the stack depth ({stack}) frames; got {capacity}")
    frame_capacity = default_frame_capacity(capacity, stack) if frame_capacity is None else \
        check_positive_int(owner, "frame_capacity", frame_capacity)
    if frame_capacity < 2 * stack:
        raise ValueError(f"{owner}: frame_capacity must hold two stacks (>= {2 * stack}); got {frame_capacity}")
    match_window = default_match_window(capacity) if match_window is None else \
        check_positive_int(owner, "match_window", match_window)
    match_window = min(match_window, frame_capacity)
    return capacity, stack, frame_capacity, match_window


@dataclasses.dataclass
class WritePlan:
    """What one `FrameIndex.add` changed, for the storage to apply.

    Attributes:
        frame_slots: frame slots written ``int64[K]`` (each once: the last write wins).
        frames: their frames ``uint8[K,H,W]``.
        frame_prevs: their ``prev`` slots ``int64[K]``.
        slots: transition slots written, in order and contiguous mod capacity (the last
            ``capacity`` of the batch), ``int64[M]``.
        transitions: their fields ``state``, ``target``, ``actions``, ``rewards``, ``terminals``,
            ``discounts`` (arrays of length M).
        dead: transition slots that are not valid after the add (written ones among them), ``int64[J]``.
    """

    frame_slots: np.ndarray
    frames: np.ndarray
    frame_prevs: np.ndarray
    slots: np.ndarray
    transitions: dict[str, np.ndarray]
    dead: np.ndarray


class FrameIndex:
    """Slot assignment, chains and validity of a frame replay (see the module docstring).

    Args:
        capacity: transitions held, at least ``stack``.
        frame_shape: the shape of one frame (a stack without its last axis), e.g. ``(84, 84)``.
        stack: frames per stack ``D`` (the stacks' last axis).
        frame_capacity: frame slots (default `default_frame_capacity`).
        match_window: how many of the newest frames are candidates for reuse (a copy of them is kept;
            default `default_match_window`). A replay fed by many interleaved senders (an Ape-X shard)
            wants one that spans a round of their batches, or each batch starts its streams afresh.

    Raises:
        ValueError: naming the argument when one is invalid.
    """

    def __init__(self, capacity: int, frame_shape: tuple[int, ...], stack: int, frame_capacity: int | None = None,
                 match_window: int | None = None, owner: str = "FrameIndex") -> None:
        self.capacity, self.stack, self.frame_capacity, self.window = check_frame_arguments(
            owner, capacity, stack, frame_capacity, match_window)
        self.owner = owner
        self.frame_shape = tuple(int(d) for d in frame_shape)
        self.prev = np.zeros(self.frame_capacity, np.int64)
        self.stamp = np.full(self.frame_capacity, -1, np.int64)
        self.recent = np.zeros((self.window,) + self.frame_shape, np.uint8)
        self.recent_keys: list[Any] = [None] * self.window
        self.full: dict[tuple, int] = {}
        self.suffix: dict[tuple, int] = {}
        self.frames_written = 0
        c = self.capacity
        self.t_state = np.zeros(c, np.int64)
        self.t_target = np.zeros(c, np.int64)
        self.t_oldest = np.full(c, -1, np.int64)
        self.t_action = np.zeros(c, np.int64)
        self.t_reward = np.zeros(c, np.float32)
        self.t_terminal = np.zeros(c, bool)
        self.t_discount = np.zeros(c, np.float32)
        self.valid = np.zeros(c, bool)
        self.added = 0               # transitions ever added
        self._min_oldest = 0         # no valid transition is older than this stamp

    # ---- sizes ---------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """The number of valid transitions."""
        return int(np.count_nonzero(self.valid))

    def metadata_nbytes(self) -> int:
        """Bytes of everything but the stored frames (chains, stamps, transitions, the match window)."""
        arrays = (self.prev, self.stamp, self.recent, self.t_state, self.t_target, self.t_oldest, self.t_action,
                  self.t_reward, self.t_terminal, self.t_discount, self.valid)
        return int(sum(a.nbytes for a in arrays))

    # ---- stacks ---------------------------------------------------------------------------------
    def chains(self, slots: np.ndarray) -> np.ndarray:
        """Frame slots of the stacks ending at ``slots``: ``int64[len, D]``, oldest first."""
        cols = [np.asarray(slots, np.int64)]
        for _ in range(self.stack - 1):
            cols.append(self.prev[cols[-1]])
        return np.stack(cols[::-1], axis=1)

    def _in_window(self, slot: int) -> bool:
        # the oldest frame (stamp frames_written - frame_capacity) is the next one overwritten: matching it
        # would let a stack chained to it take its slot (a cycle in the chain) when the window spans the ring
        s = self.stamp[slot]
        return s >= 0 and s >= self.frames_written - self.window and s > self.frames_written - self.frame_capacity

    def _matches(self, slot: int, frames: list[np.ndarray]) -> bool:
        """Whether the chain from ``slot`` back holds ``frames`` (newest first), all in the match window."""
        cur = slot
        for j, frame in enumerate(frames):
            if not self._in_window(cur) or not np.array_equal(self.recent[self.stamp[cur] % self.window], frame):
                return False
            if j + 1 < len(frames):
                parent = int(self.prev[cur])
                if parent != cur and self.stamp[parent] >= self.stamp[cur]:
                    return False  # the ancestor was overwritten
                cur = parent
        return True

    def _write_frame(self, frame: np.ndarray, h: int, parent: int | None, plan: dict[int, tuple]) -> int:
        slot = self.frames_written % self.frame_capacity
        pos = self.frames_written % self.window
        old = self.recent_keys[pos]
        if old is not None:  # the frame leaving the match window stops being a candidate
            key, suffix, old_slot = old
            if self.full.get(key) == old_slot:
                del self.full[key]
            if self.suffix.get(suffix) == old_slot:
                del self.suffix[suffix]
        if parent is None:
            key = (h,) * self.stack
            self.prev[slot] = slot
        else:
            key = self.recent_keys[self.stamp[parent] % self.window][0][1:] + (h,)
            self.prev[slot] = parent
        self.stamp[slot] = self.frames_written
        self.recent[pos] = frame
        self.full[key] = slot
        self.suffix[key[1:]] = slot
        self.recent_keys[pos] = (key, key[1:], slot)
        self.frames_written += 1
        plan[slot] = (frame, int(self.prev[slot]))
        return slot

    def _place(self, stack: np.ndarray, plan: dict[int, tuple]) -> int:
        """The frame slot whose stack is ``stack`` (``[*frame_shape, D]``), writing frames as needed."""
        d = self.stack
        frames = [stack[..., j] for j in range(d)]
        hashes = tuple(hash(np.ascontiguousarray(f).tobytes()) for f in frames)
        slot = self.full.get(hashes)
        if slot is not None and self._matches(slot, frames[::-1]):
            return slot
        if d > 1:
            parent = self.suffix.get(hashes[:-1])
            if parent is not None and self._matches(parent, frames[-2::-1]):
                return self._write_frame(frames[-1], hashes[-1], parent, plan)
        start = 0
        while start + 1 < d and np.array_equal(frames[start + 1], frames[0]):
            start += 1
        slot = self._write_frame(frames[start], hashes[start], None, plan)
        for j in range(start + 1, d):
            slot = self._write_frame(frames[j], hashes[j], slot, plan)
        return slot

    # ---- adding --------------------------------------------------------------------------------
    def check_records(self, records: dict[str, Any]) -> tuple[dict[str, np.ndarray], int]:
        """The records as arrays of the stored dtypes, and their number.

        Raises:
            ValueError: naming the field that is missing or does not fit.
        """
        missing = [k for k in RECORD_FIELDS if k not in records]
        if missing:
            raise ValueError(f"{self.owner}: records lack {missing}; they need {list(RECORD_FIELDS)}")
        out = {k: np.asarray(records[k]) for k in RECORD_FIELDS}
        n = len(out["actions"])
        shape = self.frame_shape + (self.stack,)
        for key in ("states", "next_states"):
            arr = out[key]
            if arr.dtype != np.uint8 or arr.shape != (n,) + shape:
                raise ValueError(f"{self.owner}: records[{key!r}] must be uint8 stacks [{n}, "
                                 f"{', '.join(map(str, shape))}] (frames {list(self.frame_shape)}, stack "
                                 f"{self.stack}); got {arr.dtype}{list(arr.shape)}")
        for key in ("rewards", "terminals", "discounts"):
            if out[key].shape != (n,):
                raise ValueError(f"{self.owner}: records[{key!r}] must have one entry per record ({n}); "
                                 f"got shape {out[key].shape}")
        return out, n

    def add(self, records: dict[str, Any]) -> WritePlan:
        """Adds a batch of records (dict of `RECORD_FIELDS` arrays); returns the write plan.

        Raises:
            ValueError: naming the field that is missing or does not fit.
        """
        recs, n = self.check_records(records)
        frame_plan: dict[int, tuple] = {}
        written: list[int] = []
        for i in range(n):
            state = self._place(recs["states"][i], frame_plan)
            # the state's oldest stamp before the target's writes, which may overwrite its frames (then
            # `_expire` finds the transition dead instead of its chain reading the new frames)
            state_oldest = int(self.stamp[self.chains([state])].min())
            target = self._place(recs["next_states"][i], frame_plan)
            slot = self.added % self.capacity
            self.t_state[slot], self.t_target[slot] = state, target
            self.t_action[slot] = int(recs["actions"][i])
            self.t_reward[slot] = recs["rewards"][i]
            self.t_terminal[slot] = bool(recs["terminals"][i])
            self.t_discount[slot] = recs["discounts"][i]
            self.t_oldest[slot] = min(state_oldest, int(self.stamp[self.chains([target])].min()))
            self.valid[slot] = True
            self.added += 1
            written.append(slot)
        slots = np.asarray(written[-self.capacity:], np.int64)
        self._min_oldest = min(self._min_oldest, int(self.t_oldest[slots].min())) if n else self._min_oldest
        dead = self._expire()
        frame_slots = np.fromiter(frame_plan, np.int64, len(frame_plan))
        frames = (np.stack([frame_plan[s][0] for s in frame_plan]) if frame_plan
                  else np.zeros((0,) + self.frame_shape, np.uint8))
        prevs = np.asarray([frame_plan[s][1] for s in frame_plan], np.int64)
        transitions = {"state": self.t_state[slots].copy(), "target": self.t_target[slots].copy(),
                       "actions": self.t_action[slots].copy(), "rewards": self.t_reward[slots].copy(),
                       "terminals": self.t_terminal[slots].copy(), "discounts": self.t_discount[slots].copy()}
        dead = np.union1d(dead, slots[~self.valid[slots]]).astype(np.int64)
        return WritePlan(frame_slots, frames, prevs, slots, transitions, dead)

    def _expire(self) -> np.ndarray:
        """Marks transitions whose frames were overwritten invalid; returns their slots."""
        threshold = self.frames_written - self.frame_capacity
        if threshold <= self._min_oldest:
            return np.zeros(0, np.int64)
        dying = np.flatnonzero(self.valid & (self.t_oldest < threshold))
        self.valid[dying] = False
        alive = self.t_oldest[self.valid]
        self._min_oldest = int(alive.min()) if alive.size else self.frames_written
        return dying.astype(np.int64)

    # ---- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Every array and counter (the match dictionaries are rebuilt from them on load)."""
        return {"prev": self.prev, "stamp": self.stamp, "recent": self.recent, "t_state": self.t_state,
                "t_target": self.t_target, "t_oldest": self.t_oldest, "t_action": self.t_action,
                "t_reward": self.t_reward, "t_terminal": self.t_terminal, "t_discount": self.t_discount,
                "valid": self.valid, "counters": np.asarray([self.frames_written, self.added, self._min_oldest],
                                                            np.int64),
                "sizes": np.asarray([self.capacity, self.frame_capacity, self.window, self.stack], np.int64)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restores `state_dict` output.

        Raises:
            ValueError: when it was saved with other sizes (naming them).
        """
        sizes = [int(x) for x in np.asarray(state["sizes"])]
        own = [self.capacity, self.frame_capacity, self.window, self.stack]
        if sizes != own:
            raise ValueError(f"{self.owner}: the saved replay has (capacity, frame_capacity, match_window, stack) "
                             f"= {tuple(sizes)}; this one {tuple(own)}")
        for key in ("prev", "stamp", "recent", "t_state", "t_target", "t_oldest", "t_action", "t_reward",
                    "t_terminal", "t_discount", "valid"):
            getattr(self, key)[...] = state[key]
        self.frames_written, self.added, self._min_oldest = (int(x) for x in np.asarray(state["counters"]))
        self.full, self.suffix = {}, {}
        self.recent_keys = [None] * self.window
        first = max(0, self.frames_written - self.window)
        for stamp in range(first, self.frames_written):  # oldest first, so parents' keys exist
            slot = stamp % self.frame_capacity
            h = hash(np.ascontiguousarray(self.recent[stamp % self.window]).tobytes())
            parent = int(self.prev[slot])
            pkeys = self.recent_keys[self.stamp[parent] % self.window] if parent != slot and \
                self.stamp[parent] >= first else None
            if parent != slot and pkeys is None:
                continue  # its parent left the window: not a candidate (a later match adds a new chain)
            key = (h,) * self.stack if parent == slot else pkeys[0][1:] + (h,)
            self.full[key] = slot
            self.suffix[key[1:]] = slot
            self.recent_keys[stamp % self.window] = (key, key[1:], slot)
