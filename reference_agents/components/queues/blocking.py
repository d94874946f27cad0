"""`BlockingQueue`: blocking, thread-safe ``put``/``get`` with timeouts around a built queue's non-blocking API.

Not a component: graph functions are traced by TF and must never block, so the
waiting happens here, in Python, around calls of a built executor.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

import numpy as np

__all__ = ["BlockingQueue", "QueueClosedError"]


class QueueClosedError(RuntimeError):
    """Raised by `BlockingQueue.put`/`get` once the queue is closed (waiters are woken with it)."""


def _map(fn: Callable[[np.ndarray], Any], value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _map(fn, v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_map(fn, v) for v in value)
    return fn(np.asarray(value))


def _batch_size(value: Any) -> int:
    sizes: list[int] = []
    _map(lambda a: sizes.append(int(a.shape[0])), value)
    if not sizes or len(set(sizes)) != 1:
        raise ValueError(f"BlockingQueue: records must be arrays sharing one batch size; got batch sizes {sizes}")
    return sizes[0]


def _rows(value: Any, start: int, stop: int | None = None) -> Any:
    return _map(lambda a: a[start:stop], value)


class BlockingQueue:
    """Blocking ``put``/``get`` with timeouts over a built executor holding a `FIFOQueue`.

    Every executor call happens under one lock, so producer and consumer threads
    may share the wrapper (the executor itself is not assumed to be thread-safe).
    ``put`` enqueues what fits at once and waits on a `threading.Condition` for room
    for the rest; ``get`` waits until ``num_records`` records are held, then
    dequeues them all in one call, so records come out in the order they went in,
    whatever threads put them. Waiters are woken by the other side's calls and also
    re-check the queue every ``poll_interval`` seconds, so calls made on the
    executor directly (not through this wrapper) are noticed too.

    Args:
        executor: a built `GraphExecutor` whose root is, or routes to, a `FIFOQueue`.
        enqueue: the API method taking a batch of records and returning the number taken.
        dequeue: the API method taking a count and returning ``(records, count)``.
        size: the API method returning the number of records held.
        capacity: the queue's capacity; None reads ``executor.root.capacity`` when it has one.
            ``get`` of more records than this raises ValueError instead of waiting forever.
        poll_interval: the longest a waiter sleeps between checks, in seconds.

    Raises:
        ValueError: naming ``capacity`` or ``poll_interval`` when not positive.
    """

    def __init__(self, executor: Any, enqueue: str = "enqueue_records", dequeue: str = "dequeue_records",
                 size: str = "get_size", capacity: int | None = None, poll_interval: float = 0.05) -> None:
        if capacity is None:
            capacity = getattr(getattr(executor, "root", None), "capacity", None)
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer))
                                     or capacity <= 0):
            raise ValueError(f"BlockingQueue: capacity must be a positive int or None; got {capacity!r}")
        if not poll_interval > 0:
            raise ValueError(f"BlockingQueue: poll_interval must be positive; got {poll_interval!r}")
        self.executor = executor
        self.capacity = None if capacity is None else int(capacity)
        self.poll_interval = float(poll_interval)
        self._methods = (enqueue, dequeue, size)
        self._cond = threading.Condition()
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise QueueClosedError(f"BlockingQueue.{what}: the queue is closed")

    def _wait(self, deadline: float | None) -> bool:
        """Waits for a notification or a poll interval; False once the deadline has passed."""
        left = self.poll_interval if deadline is None else min(self.poll_interval, deadline - time.monotonic())
        if left <= 0:
            return False
        self._cond.wait(left)
        return True

    def qsize(self) -> int:
        """The number of records held now."""
        with self._cond:
            return int(self.executor.execute(self._methods[2]))

    def put(self, records: Any, timeout: float | None = None) -> None:
        """Enqueues every record of the batch, waiting for room as needed.

        Args:
            records: a batch (an array, or a dict/tuple of arrays sharing their first dim).
            timeout: the most seconds to wait; None waits as long as it takes.

        Raises:
            queue.Full: when the timeout passes first. The records enqueued before that
                stay in the queue; the exception says how many, and the ones not taken
                are attached as ``.remaining`` (with ``.accepted``, the count taken).
            QueueClosedError: when the queue is (or becomes) closed while records are left.
        """
        total = _batch_size(records)
        deadline = None if timeout is None else time.monotonic() + max(float(timeout), 0.0)
        done = 0
        with self._cond:
            while done < total:
                self._check_open("put")
                accepted = int(self.executor.execute(self._methods[0], _rows(records, done)))
                if accepted:
                    done += accepted
                    self._cond.notify_all()
                    continue
                if not self._wait(deadline):
                    error = queue.Full(f"BlockingQueue.put: timed out after {timeout} s with {done} of {total} "
                                       f"records enqueued; the {total - done} not taken are in .remaining")
                    error.accepted = done  # type: ignore[attr-defined]
                    error.remaining = _rows(records, done)  # type: ignore[attr-defined]
                    raise error

    def get(self, num_records: int, timeout: float | None = None) -> Any:
        """Waits until ``num_records`` records are held, then dequeues them (oldest first).

        Args:
            num_records: how many records to take, a non-negative int (at most the capacity).
            timeout: the most seconds to wait; None waits as long as it takes.

        Returns:
            The records, a batch of ``num_records``.

        Raises:
            ValueError: naming ``num_records`` when negative or above the capacity.
            queue.Empty: when the timeout passes first (nothing is dequeued then).
            QueueClosedError: when the queue is (or becomes) closed.
        """
        if isinstance(num_records, bool) or not isinstance(num_records, (int, np.integer)) or num_records < 0:
            raise ValueError(f"BlockingQueue.get: num_records must be a non-negative int; got {num_records!r}")
        if self.capacity is not None and num_records > self.capacity:
            raise ValueError(f"BlockingQueue.get: num_records={num_records} exceeds the capacity {self.capacity}; "
                             f"it could never be met")
        deadline = None if timeout is None else time.monotonic() + max(float(timeout), 0.0)
        with self._cond:
            while True:
                self._check_open("get")
                if int(self.executor.execute(self._methods[2])) >= num_records:
                    records, count = self.executor.execute(self._methods[1], np.int64(num_records))
                    if int(count) != num_records:
                        raise RuntimeError(f"BlockingQueue.get: dequeued {int(count)} of {num_records} records "
                                           f"although the size allowed them; the queue was changed elsewhere")
                    self._cond.notify_all()
                    return records
                if not self._wait(deadline):
                    held = int(self.executor.execute(self._methods[2]))
                    raise queue.Empty(f"BlockingQueue.get: timed out after {timeout} s waiting for {num_records} "
                                      f"records ({held} held)")

    def close(self) -> None:
        """Closes the queue: every waiting and later `put`/`get` raises `QueueClosedError`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
