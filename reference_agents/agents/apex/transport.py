"""How transitions travel from an Ape-X worker to a shard: frame stacks as their distinct frames once.

An n-step transition's ``states`` and ``next_states`` are frame stacks ``uint8[..., D]``; within one
sample call consecutive stacks of an environment share ``D - 1`` frames and ``next_states`` repeat later
``states``, so a batch of ``B`` transitions holds about ``B + D`` distinct frames, not ``2 B D``.
`pack_records` sends each distinct frame once with ``int32[B, D]`` indices; `unpack_records` rebuilds the
stacks (the shard's `HostFrameReplay` then stores each frame once again). Records without frame stacks
(``float32`` vectors) pass unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PACKED = "__frames__"


def packable(records: dict[str, Any]) -> bool:
    """Whether the records' states are uint8 frame stacks ``[B, H, W, D]`` (worth packing)."""
    states = np.asarray(records["states"])
    return states.dtype == np.uint8 and states.ndim >= 4


def pack_records(records: dict[str, Any]) -> dict[str, Any]:
    """The records with ``states`` / ``next_states`` replaced by distinct frames and per-stack indices."""
    if not packable(records):
        return records
    states, next_states = np.asarray(records["states"]), np.asarray(records["next_states"])
    stack = states.shape[-1]
    seen: dict[bytes, int] = {}
    frames: list[np.ndarray] = []

    def index(stacks: np.ndarray) -> np.ndarray:
        out = np.empty((stacks.shape[0], stack), np.int32)
        for b in range(stacks.shape[0]):
            for d in range(stack):
                frame = np.ascontiguousarray(stacks[b, ..., d])
                key = frame.tobytes()
                slot = seen.get(key)
                if slot is None:
                    slot = seen[key] = len(frames)
                    frames.append(frame)
                out[b, d] = slot
        return out

    packed = {k: v for k, v in records.items() if k not in ("states", "next_states")}
    state_index, next_index = index(states), index(next_states)   # (fills `frames`)
    packed[PACKED] = {"frames": np.stack(frames) if frames else np.zeros((0,) + states.shape[1:-1], np.uint8),
                      "states": state_index, "next_states": next_index}
    return packed


def unpack_records(packed: dict[str, Any]) -> dict[str, Any]:
    """The records `pack_records` packed, stacks rebuilt ``uint8[B, H, W, D]`` (unpacked ones as they are)."""
    if PACKED not in packed:
        return packed
    parts = packed[PACKED]
    frames = parts["frames"]
    records = {k: v for k, v in packed.items() if k != PACKED}
    for key in ("states", "next_states"):
        records[key] = np.moveaxis(frames[parts[key]], 1, -1)   # [B, D, H, W] -> [B, H, W, D]
    return records
