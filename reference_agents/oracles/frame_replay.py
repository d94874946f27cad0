"""NumPy oracles of the frame replay: full-stack rollouts, a naive full-stack replay, and a model of `FrameReplay`.

The naive replay keeps every record whole (``states`` and ``next_states`` stacks
included) in a ring numbered like `ReplayMemory`, so slot ``i`` of a frame replay must
rebuild exactly its record ``i``. Rollouts stack frames the way
`reference_agents.environments.AtariFrames` does (a reset fills the stack with the
first frame; a step drops the oldest and appends the newest) and fold n-step windows
with `NStepAccumulator`, so their records are what an agent or a worker hands to replay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.oracles.memories import PrioritizedReplayModel


def atari_like_records(rng: np.random.Generator, num_envs: int, steps: int, n_step: int, gamma: float = 0.9,
                       frame_shape: tuple[int, ...] = (3, 3), stack: int = 4, palette: int = 3,
                       p_terminate: float = 0.1, p_truncate: float = 0.1) -> list[dict[str, Any]]:
    """Records of ``num_envs`` interleaved environments stepped in lockstep ``steps`` times.

    Frames are random ``uint8`` arrays over ``palette`` values (small palettes repeat frames and
    whole stacks, which a content-matching store must not confuse); each step terminates with
    probability ``p_terminate`` and else truncates with ``p_truncate``.
    """
    from reference_agents.components.helpers import NStepAccumulator

    def frame() -> np.ndarray:
        return rng.integers(0, palette, frame_shape, dtype=np.uint8)

    accs = [NStepAccumulator(n_step, gamma) for _ in range(num_envs)]
    stacks = [np.repeat(frame()[..., None], stack, -1) for _ in range(num_envs)]
    out: list[dict[str, Any]] = []
    for _ in range(steps):
        for e in range(num_envs):
            state = stacks[e]
            nxt = np.concatenate([state[..., 1:], frame()[..., None]], -1)
            terminated = bool(rng.random() < p_terminate)
            truncated = not terminated and bool(rng.random() < p_truncate)
            out += accs[e].push(state, int(rng.integers(0, 6)), float(rng.normal()), nxt, terminated, truncated)
            stacks[e] = np.repeat(frame()[..., None], stack, -1) if terminated or truncated else nxt
    return out


def stack_records(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """A batch (dict of arrays in the stored dtypes) from record dicts."""
    return {"states": np.stack([r["states"] for r in rows]).astype(np.uint8),
            "actions": np.asarray([r["actions"] for r in rows], np.int64),
            "rewards": np.asarray([r["rewards"] for r in rows], np.float32),
            "terminals": np.asarray([r["terminals"] for r in rows], bool),
            "next_states": np.stack([r["next_states"] for r in rows]).astype(np.uint8),
            "discounts": np.asarray([r["discounts"] for r in rows], np.float32)}


class FullStackReplay:
    """The naive oracle: whole records in a ring of ``capacity`` (record ``t`` in slot ``t mod capacity``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.slots: list[dict[str, Any] | None] = [None] * capacity
        self.added = 0

    def add(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.slots[self.added % self.capacity] = row
            self.added += 1

    def records_at(self, slots: Any) -> dict[str, np.ndarray]:
        return stack_records([self.slots[int(s) % self.capacity] for s in np.asarray(slots).reshape(-1)])


class FrameReplayModel:
    """NumPy model of `FrameReplay`: frame and ``prev`` scatters, a `PrioritizedReplayModel` of transitions,
    dead slots at leaves 0 / +inf, stacks rebuilt by following ``prev`` from each newest frame."""

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
        self.stack = int(config.get("stack", 4))
        prioritized = config.get("prioritized", True)
        per = {"capacity": config["capacity"], "alpha": config.get("alpha", 0.6) if prioritized else 0.0,
               "epsilon": config.get("epsilon", 1e-6)}
        self.replay = PrioritizedReplayModel(per, {k[len("transitions/"):]: v for k, v in weights.items()
                                                   if k.startswith("transitions/")})
        self.frames = np.array(weights["frames"])
        self.prevs = np.array(weights["prevs"])

    def insert(self, frame_slots: Any, frames: Any, frame_prevs: Any, transitions: Any, dead_slots: Any) -> Any:
        fc = len(self.prevs)
        for slot, frame, prev in zip(np.asarray(frame_slots) % fc, np.asarray(frames), np.asarray(frame_prevs)):
            self.frames[slot], self.prevs[slot] = frame, prev % fc
        slots = self.replay.insert_records(transitions)
        dead = np.asarray(dead_slots, np.int64)
        self.replay.sum_tree.update(dead, np.zeros(len(dead), np.float32))
        self.replay.min_tree.update(dead, np.full(len(dead), np.inf, np.float32))
        return slots

    def _stacks(self, newest: np.ndarray) -> np.ndarray:
        fc = len(self.prevs)
        chain = [np.asarray(newest, np.int64) % fc]
        for _ in range(self.stack - 1):
            chain.append(self.prevs[chain[-1]])
        return np.stack([self.frames[c] for c in reversed(chain)], axis=-1)

    def get_records_at(self, indices: Any) -> dict[str, np.ndarray]:
        meta = self.replay.memory.get_records_at(indices)
        return {"states": self._stacks(meta["state"]), "actions": meta["actions"], "rewards": meta["rewards"],
                "terminals": meta["terminals"], "next_states": self._stacks(meta["target"]),
                "discounts": meta["discounts"]}

    def get_size(self) -> np.ndarray:
        return self.replay.get_size()

    def weights(self) -> dict[str, np.ndarray]:
        return {"frames": self.frames, "prevs": self.prevs,
                **{f"transitions/{k}": v for k, v in self.replay.weights().items()}}
