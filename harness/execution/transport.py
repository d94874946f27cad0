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
import time
from typing import Any

import numpy as np

RecordSpec = dict[str, tuple[str, tuple[int, ...]]]


class QueueClosed(RuntimeError):
    """The queue was closed: nothing more can be put (an actor's cue to stop) or taken once it is empty."""


class OutcomeUnknown(RuntimeError):
    """A step that changes state (a put, a take, a publication) may or may not have run: the transport lost
    its answer (for TF's gRPC: a retried request the server rejected as a duplicate). A take's records are
    then lost if it ran; a put's record may have arrived; a publication may have bumped the version."""


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
    """A `RecordQueue` on `queue.Queue` (one process, threads; one consumer takes)."""

    def __init__(self, spec: RecordSpec, capacity: int) -> None:
        self.spec = dict(spec)
        self._queue: queue.Queue = queue.Queue(capacity)
        self._closed = threading.Event()

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        checked = check_record(self.spec, record, "RecordQueue.put")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:  # short waits, so that closing the queue wakes a put blocked on a full queue
            if self._closed.is_set():
                raise QueueClosed("put: the queue is closed")
            try:
                self._queue.put(checked, timeout=0.05)
                return
            except queue.Full:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"RecordQueue.put: no room within {timeout} s") from None

    def take(self, count: int, timeout: float | None = None) -> dict[str, np.ndarray]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.qsize() < count:  # one consumer: once there, they stay there
            if self._closed.is_set():
                raise QueueClosed("take: the queue is closed and holds too few records")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"RecordQueue.take: {count} records did not come within {timeout} s")
            time.sleep(0.005)
        records = [self._queue.get_nowait() for _ in range(count)]
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


class ThreadActorLearnerExecutor:
    """The actor-learner executor interface of `harness.execution.tf_dist.TFActorLearnerExecutor` with the
    actors as threads of this process and in-process queues (tests, debugging, one-machine runs without
    TF servers).

    Args:
        num_actors: actor threads.
        queues: ``{name: (record spec, capacity)}``.
        weights: the spec of the published weights (unused: the in-process store takes any arrays).
        restarts: how often an actor whose body raised is restarted.
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 restarts: int = 3) -> None:
        self.num_actors, self.restarts = int(num_actors), int(restarts)
        self.queues = {name: InProcessRecordQueue(spec, capacity) for name, (spec, capacity) in queues.items()}
        self.weights = InProcessWeightStore()
        self.incarnations = [0] * self.num_actors
        self.restarts_used = [0] * self.num_actors
        self.failures: list[Any] = []
        self._threads: list[threading.Thread | None] = [None] * self.num_actors
        self._errors: list[BaseException | None] = [None] * self.num_actors
        self._body: tuple[Any, tuple] | None = None
        self._closed = False

    def _spawn(self, index: int) -> None:
        body, args = self._body

        def run() -> None:
            try:
                body(Transport(self.queues, self.weights), index, self.incarnations[index], *args)
            except BaseException as exc:  # noqa: BLE001 - reported by poll()
                self._errors[index] = exc

        self._errors[index] = None
        thread = threading.Thread(target=run, name=f"actor-{index}", daemon=True)
        thread.start()
        self._threads[index] = thread

    def start_actors(self, body: Any, *args: Any) -> None:
        """Starts every actor thread running ``body(transport, index, incarnation, *args)``."""
        self._body = (body, args)
        for index in range(self.num_actors):
            self._spawn(index)

    def pids(self) -> list[int | None]:
        """No processes: one None per actor."""
        return [None] * self.num_actors

    def poll(self) -> list[Any]:
        """Actor threads that ended since the last poll, reported (and restarted if their body raised)."""
        from types import SimpleNamespace

        reports = []
        for index, thread in enumerate(self._threads):
            if thread is None or thread.is_alive():
                continue
            error = self._errors[index]
            restart = error is not None and self.restarts_used[index] < self.restarts and not self._closed
            reports.append(SimpleNamespace(
                index=index, incarnation=self.incarnations[index], exitcode=None if error is None else 1,
                restarted=restart, message=f"actor {index} (incarnation {self.incarnations[index]}, thread) "
                                           f"{'raised ' + repr(error) if error else 'returned'}"
                                           + ("; restarted" if restart else "; not restarted")))
            self._threads[index] = None
            if restart:
                self.restarts_used[index] += 1
                self.incarnations[index] += 1
                self._spawn(index)
        self.failures.extend(reports)
        return reports

    def shutdown(self, timeout: float = 10.0) -> None:
        """Closes the queues (actors' next put fails: they return) and waits for the threads."""
        self._closed = True
        for q in self.queues.values():
            q.close()
        for thread in self._threads:
            if thread is not None:
                thread.join(timeout)

    def __enter__(self) -> "ThreadActorLearnerExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class Transport:
    """What an actor body receives: ``queues`` by name and the ``weights`` store."""

    def __init__(self, queues: dict[str, RecordQueue], weights: WeightStore) -> None:
        self.queues, self.weights = queues, weights
