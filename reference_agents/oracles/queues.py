"""NumPy oracles and stateful models of the queues, written from their definitions.

See `reference_agents.oracles.common` for the oracle and model conventions. The
model holds its records in a `collections.deque` (the definition of FIFO order)
and lays them out in a ring of ``capacity`` rows only to compare the variables.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from reference_agents.oracles.memories import flatten_records, nest_records, record_buffers


def fifo_get_size(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `FIFOQueue.get_size`: the ``size`` variable."""
    return np.asarray(weights["size"], np.int64)


class FIFOQueueModel:
    """NumPy model of `FIFOQueue`: a deque of at most ``capacity`` records.

    Enqueue appends records in order until the deque is full and drops the rest
    (returning how many it kept); dequeue pops from the left. For `weights`, the
    k-th oldest record lives in row ``(head + k) mod capacity`` of the buffers,
    where ``head`` counts the records ever dequeued (mod capacity); rows not live
    keep whatever was last written there.

    Args:
        config: the spec's config (``capacity``).
        weights: the initial weights (``records/...``, ``head``, ``size``), relative to the queue.
        prefix: the queue's path inside the component under test (with a trailing ``/``).
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray], prefix: str = "") -> None:
        self.capacity = int(config["capacity"])
        self.prefix = prefix
        self.buffers = record_buffers(weights, prefix)
        self.head = int(weights[f"{prefix}head"])
        self.records: collections.deque = collections.deque()
        for k in range(int(weights[f"{prefix}size"])):
            row = (self.head + k) % self.capacity
            self.records.append({p: b[row].copy() for p, b in self.buffers.items()})

    def enqueue_records(self, records: Any) -> np.ndarray:
        """Appends records in order while there is room; the number appended."""
        flat = flatten_records(records)
        n = len(next(iter(flat.values())))
        taken = 0
        for i in range(n):
            if len(self.records) == self.capacity:
                break
            row = (self.head + len(self.records)) % self.capacity
            record = {p: np.asarray(v[i]) for p, v in flat.items()}
            for p, buf in self.buffers.items():
                buf[row] = record[p]
            self.records.append(record)
            taken += 1
        return np.asarray(taken, np.int64)

    def dequeue_records(self, num_records: np.ndarray) -> tuple[Any, np.ndarray]:
        """Pops up to ``num_records`` records; ``num_records`` rows, zeros past the count popped."""
        n = max(int(num_records), 0)
        out = {p: np.zeros((n,) + b.shape[1:], b.dtype) for p, b in self.buffers.items()}
        count = 0
        while count < n and self.records:
            record = self.records.popleft()
            for p in out:
                out[p][count] = record[p]
            count += 1
        self.head = (self.head + count) % self.capacity
        return nest_records(out), np.asarray(count, np.int64)

    def get_size(self) -> np.ndarray:
        """The number of records held."""
        return np.asarray(len(self.records), np.int64)

    def weights(self) -> dict[str, np.ndarray]:
        """The buffers, ``head`` and ``size`` by relative path."""
        out = {f"{self.prefix}records/{p}" if p else f"{self.prefix}records": b for p, b in self.buffers.items()}
        out[f"{self.prefix}head"] = np.asarray(self.head, np.int64)
        out[f"{self.prefix}size"] = np.asarray(len(self.records), np.int64)
        return out
