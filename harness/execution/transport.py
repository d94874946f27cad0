"""Actor-learner transport behind two small interfaces: a queue of fixed-shape records and a weight store.

Coordination code (IMPALA's actor and learner loops) is written against `RecordQueue` and `WeightStore`
and never imports a distributed engine. `InProcessRecordQueue`/`InProcessWeightStore` serve one process
(tests, debugging); `harness.execution.tf_dist` keeps both on a learner's TensorFlow server, reached over
gRPC by actor processes.

A record is a dict of NumPy arrays whose dtypes and shapes a `RecordSpec` fixes (``{name: (dtype, shape)}``):
IMPALA's rollouts of ``T`` steps of ``N`` environments always have the same shapes.
"""

from __future__ import annotations

import abc
import queue
import threading
from typing import Any

import numpy as np

RecordSpec = dict[str, tuple[str, tuple[int, ...]]]


class QueueClosed(RuntimeError):
    """The queue was closed: nothing more can be put (an actor's cue to stop) or taken once it is empty."""


def check_record(spec: RecordSpec, record: dict[str, Any], where: str) -> dict[str, np.ndarray]:
    """``record`` as arrays of the spec's dtypes, checked against its keys and shapes.

    Raises:
        ValueError: naming ``where``, the key, the expected and the received shape or the missing keys.
    """
    missing, extra = sorted(set(spec) - set(record)), sorted(set(record) - set(spec))
    if missing or extra:
        raise ValueError(f"{where}: record keys differ from the spec: missing {missing}, unexpected {extra}")
    out = {}
    for name, (dtype, shape) in spec.items():
        arr = np.asarray(record[name])
        if arr.shape != tuple(shape):
            raise ValueError(f"{where}: record[{name!r}] has shape {arr.shape}; the spec says {tuple(shape)}")
        out[name] = arr.astype(dtype, copy=False)
    return out


class RecordQueue(abc.ABC):
    """A bounded FIFO queue of records of one `RecordSpec`, shared by producers (actors) and a consumer."""

    spec: RecordSpec

    @abc.abstractmethod
    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        """Adds one record, waiting while the queue is full.

        Raises:
            QueueClosed: once the queue is closed. TimeoutError: if no room came within ``timeout``.
        """

    @abc.abstractmethod
    def take(self, count: int, timeout: float | None = None) -> dict[str, np.ndarray]:
        """The next ``count`` records, each field stacked on a new axis 0 (``[count, *shape]``).

        Raises:
            QueueClosed: when the queue is closed and holds fewer. TimeoutError: if they did not come in time.
        """

    @abc.abstractmethod
    def size(self) -> int:
        """Records waiting now."""

    @abc.abstractmethod
    def close(self) -> None:
        """Closes the queue: further puts fail, takes drain what is left."""


class WeightStore(abc.ABC):
    """Named arrays that a learner publishes and actors read, with a version number counting publications."""

    @abc.abstractmethod
    def publish(self, weights: dict[str, np.ndarray]) -> int:
        """Replaces every array at once; returns the new version (1 for the first publication)."""

    @abc.abstractmethod
    def read(self) -> tuple[int, dict[str, np.ndarray]]:
        """``(version, weights)`` as last published (version 0: nothing published yet)."""

    @abc.abstractmethod
    def version(self) -> int:
        """The current version, without the arrays (cheap: actors poll it)."""


class InProcessRecordQueue(RecordQueue):
    """A `RecordQueue` on `queue.Queue` (one process, threads)."""

    def __init__(self, spec: RecordSpec, capacity: int) -> None:
        self.spec = dict(spec)
        self._queue: queue.Queue = queue.Queue(capacity)
        self._closed = threading.Event()

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        if self._closed.is_set():
            raise QueueClosed("put: the queue is closed")
        try:
            self._queue.put(check_record(self.spec, record, "RecordQueue.put"), timeout=timeout)
        except queue.Full:
            raise TimeoutError(f"RecordQueue.put: no room within {timeout} s") from None

    def take(self, count: int, timeout: float | None = None) -> dict[str, np.ndarray]:
        records = []
        for _ in range(count):
            try:
                records.append(self._queue.get(timeout=0.0 if self._closed.is_set() else timeout))
            except queue.Empty:
                for r in reversed(records):  # what was taken goes back in front (single consumer)
                    self._queue.queue.appendleft(r)
                if self._closed.is_set():
                    raise QueueClosed("take: the queue is closed and holds too few records") from None
                raise TimeoutError(f"RecordQueue.take: {count} records did not come within {timeout} s") from None
        return {k: np.stack([r[k] for r in records]) for k in self.spec}

    def size(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        self._closed.set()


class InProcessWeightStore(WeightStore):
    """A `WeightStore` in one process (a dict of copies under a lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._weights: dict[str, np.ndarray] = {}

    def publish(self, weights: dict[str, np.ndarray]) -> int:
        copies = {k: np.array(v) for k, v in weights.items()}
        with self._lock:
            self._weights = copies
            self._version += 1
            return self._version

    def read(self) -> tuple[int, dict[str, np.ndarray]]:
        with self._lock:
            return self._version, dict(self._weights)

    def version(self) -> int:
        return self._version
