"""NumPy oracles and stateful models of the replay memories, written from their definitions.

See `reference_agents.oracles.common` for the oracle and model conventions.
Record values are flattened to ``{key path: array}`` (``"s"``, ``"a/0"``) and
re-nested the same way; the memories' buffers are the weights
``records/<key path>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def flatten_records(value: Any, path: str = "") -> dict[str, np.ndarray]:
    if isinstance(value, dict):
        out: dict[str, np.ndarray] = {}
        for k in value:
            out.update(flatten_records(value[k], f"{path}/{k}" if path else str(k)))
        return out
    if isinstance(value, (tuple, list)):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten_records(v, f"{path}/{i}" if path else str(i)))
        return out
    return {path: np.asarray(value)}


def nest_records(flat: dict[str, Any]) -> Any:
    """Re-nests ``{key path: value}``; a level whose keys are 0..n-1 becomes a tuple."""
    if list(flat) == [""]:
        return flat[""]
    groups: dict[str, dict[str, Any]] = {}
    for path, value in flat.items():
        head, _, rest = path.partition("/")
        groups.setdefault(head, {})[rest] = value
    nested = {k: nest_records(v) for k, v in groups.items()}
    if sorted(nested) == [str(i) for i in range(len(nested))]:
        return tuple(nested[str(i)] for i in range(len(nested)))
    return nested


def record_buffers(weights: dict[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
    head = f"{prefix}records"
    return {k[len(head) + 1:]: np.array(v) for k, v in weights.items() if k.startswith(head + "/")} or \
        ({"": np.array(weights[head])} if head in weights else {})


def replay_get_records_at(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `ReplayMemory.get_records_at`: ``buffer[indices mod capacity]`` per record leaf."""
    slots = np.asarray(inputs["indices"], np.int64) % int(config["capacity"])
    return nest_records({p: buf[slots] for p, buf in record_buffers(weights).items()})


def replay_get_size(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `ReplayMemory.get_size`: the ``size`` variable."""
    return np.asarray(weights["size"], np.int64)


class ReplayMemoryModel:
    """NumPy model of `ReplayMemory`: records written one by one at ``index``, which wraps at ``capacity``.

    Args:
        config: the spec's config (``capacity``).
        weights: the initial weights (``records/...``, ``index``, ``size``), relative to the memory.
        prefix: the memory's path inside the component under test (with a trailing ``/``).
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray], prefix: str = "") -> None:
        self.capacity = int(config["capacity"])
        self.prefix = prefix
        self.buffers = record_buffers(weights, prefix)
        self.index = int(weights[f"{prefix}index"])
        self.size = int(weights[f"{prefix}size"])

    def insert_records(self, records: Any) -> np.ndarray:
        """Writes the records in order (later ones overwrite earlier ones); the slots of the survivors."""
        flat = flatten_records(records)
        n = len(next(iter(flat.values())))
        slots = []
        for i in range(n):
            slot = (self.index + i) % self.capacity
            for path, buf in self.buffers.items():
                buf[slot] = flat[path][i]
            slots.append(slot)
        self.index = (self.index + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        return np.asarray(slots[max(0, n - self.capacity):], np.int64)

    def get_records_at(self, indices: np.ndarray) -> Any:
        """The records in slots ``indices mod capacity``."""
        slots = np.asarray(indices, np.int64) % self.capacity
        return nest_records({p: buf[slots].copy() for p, buf in self.buffers.items()})

    def get_size(self) -> np.ndarray:
        """The number of records written, at most ``capacity``."""
        return np.asarray(self.size, np.int64)

    def weights(self) -> dict[str, np.ndarray]:
        """The buffers, ``index`` and ``size`` by relative path."""
        out = {f"{self.prefix}records/{p}" if p else f"{self.prefix}records": b for p, b in self.buffers.items()}
        out[f"{self.prefix}index"] = np.asarray(self.index, np.int64)
        out[f"{self.prefix}size"] = np.asarray(self.size, np.int64)
        return out


def _leaves(weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    capacity = int(config["capacity"])
    return np.asarray(weights["tree"])[capacity:2 * capacity]


def segment_tree_reduce(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `SegmentTree.reduce`: the sum (or min) of the leaves."""
    leaves = _leaves(weights, config).astype(np.float64)
    reduced = leaves.sum() if config.get("operation", "sum") == "sum" else leaves.min()
    return np.asarray(reduced, np.float32)


def segment_tree_get(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `SegmentTree.get`: the leaves at ``indices mod capacity``."""
    return _leaves(weights, config)[np.asarray(inputs["indices"], np.int64) % int(config["capacity"])]


def prefix_sum_index(leaves: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """The first ``j`` with ``leaves[0] + ... + leaves[j] > m`` for each mass, else the last leaf."""
    cumulative = np.cumsum(np.asarray(leaves, np.float64))
    found = np.searchsorted(cumulative, np.asarray(masses, np.float64), side="right")
    return np.minimum(found, len(leaves) - 1).astype(np.int64)


def segment_tree_prefix_sum_index(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                                  config: dict[str, Any]) -> np.ndarray:
    """Oracle of `SegmentTree.prefix_sum_index` from the cumulative sums of the leaves."""
    return prefix_sum_index(_leaves(weights, config), inputs["masses"])


class SegmentTreeModel:
    """NumPy model of `SegmentTree`: leaves set in order, every inner node recomputed in float32.

    The prefix-sum search walks the model's own float32 node sums from the root
    (right where the mass is at least the left child's sum), so that masses on a
    boundary that float32 rounding moves land where the component's do; a unit
    test compares it with the cumulative-sum definition.

    Args:
        config: the spec's config (``capacity``, ``operation``).
        weights: the initial weights (``tree``), relative to the tree.
        prefix: the tree's path inside the component under test (with a trailing ``/``).
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray], prefix: str = "") -> None:
        self.capacity = int(config["capacity"])
        self.operation = config.get("operation", "sum")
        self.prefix = prefix
        self.tree = np.array(weights[f"{prefix}tree"], np.float32)

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Sets leaves ``indices mod capacity`` to ``values`` in order, then every inner node."""
        for i, v in zip(np.asarray(indices, np.int64) % self.capacity, np.asarray(values, np.float32)):
            self.tree[self.capacity + i] = v
        combine = np.add if self.operation == "sum" else np.minimum
        for node in range(self.capacity - 1, 0, -1):
            self.tree[node] = combine(self.tree[2 * node], self.tree[2 * node + 1])

    def reduce(self) -> np.ndarray:
        """The root."""
        return self.tree[1].copy()

    def get(self, indices: np.ndarray) -> np.ndarray:
        """The leaves at ``indices mod capacity``."""
        return self.tree[self.capacity + np.asarray(indices, np.int64) % self.capacity].copy()

    def prefix_sum_index(self, masses: np.ndarray) -> np.ndarray:
        """The leaf whose cumulative range holds each mass (see the class docstring)."""
        out = []
        for mass in np.asarray(masses, np.float32):
            node = 1
            while node < self.capacity:
                left = self.tree[2 * node]
                if mass >= left:
                    mass, node = np.float32(mass - left), 2 * node + 1
                else:
                    node = 2 * node
            out.append(node - self.capacity)
        return np.asarray(out, np.int64)

    def weights(self) -> dict[str, np.ndarray]:
        """``tree`` by relative path."""
        return {f"{self.prefix}tree": self.tree}


class PrioritizedReplayModel:
    """NumPy model of `PrioritizedReplay`'s state: records, ``p^alpha`` in both trees, the largest ``p``.

    Args:
        config: the spec's config (``capacity``, ``alpha``, ``epsilon``; defaults as the component's).
        weights: the initial weights, relative to the component.
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
        capacity = int(config["capacity"])
        leaves = 1 << (capacity - 1).bit_length()
        self.alpha = float(config.get("alpha", 0.6))
        self.epsilon = float(config.get("epsilon", 1e-6))
        self.memory = ReplayMemoryModel({"capacity": capacity}, weights, prefix="memory/")
        self.sum_tree = SegmentTreeModel({"capacity": leaves, "operation": "sum"}, weights, prefix="sum_tree/")
        self.min_tree = SegmentTreeModel({"capacity": leaves, "operation": "min"}, weights, prefix="min_tree/")
        self.max_priority = float(weights["max_priority"])

    def _set(self, slots: np.ndarray, p: np.ndarray) -> None:
        weighted = (np.asarray(p, np.float64) ** self.alpha).astype(np.float32)
        self.sum_tree.update(slots, weighted)
        self.min_tree.update(slots, weighted)

    def insert_records(self, records: Any) -> np.ndarray:
        """Stores the records; each gets the largest priority so far."""
        slots = self.memory.insert_records(records)
        self._set(slots, np.full(len(slots), self.max_priority))
        return slots

    def update_records(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """``p = |priority| + epsilon`` for the slots (the last of repeated slots wins)."""
        p = np.abs(np.asarray(priorities, np.float64)) + self.epsilon
        self._set(np.asarray(indices), p)
        self.max_priority = float(np.float32(max(self.max_priority, float(p.max()))))

    def get_size(self) -> np.ndarray:
        """The number of filled slots."""
        return self.memory.get_size()

    def weights(self) -> dict[str, np.ndarray]:
        """All state by relative path."""
        return {**self.memory.weights(), **self.sum_tree.weights(), **self.min_tree.weights(),
                "max_priority": np.asarray(self.max_priority, np.float32)}


def importance_weights(priorities: np.ndarray, slots: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """``w_i = (N P(i))^-beta / max_j (N P(j))^-beta`` with ``P(i) = p_i^alpha / sum p^alpha`` over ``N`` records."""
    p = np.asarray(priorities, np.float64) ** alpha
    prob = p / p.sum()
    w = (len(p) * prob) ** -beta
    return (w[np.asarray(slots)] / w.max()).astype(np.float32)
