"""A `RecordQueue` and a `WeightStore` that live on the learner's TensorFlow server, reached over gRPC.

Each process builds the same small graph-mode graph (``tf.compat.v1``) in its own `tf.Graph`: FIFO queues
and resource variables placed on ``/job:learner/task:0`` under fixed ``shared_name``s, so every session
that runs them (the learner's on its server, each actor's on its own server in the same cluster) reaches
the one queue and the one set of variables held by the learner task's resource manager. Actors enqueue
rollouts and read weights with one ``Session.run`` each; the learner dequeues batches and publishes weights.
Why this mechanism: docs/architecture.md ("IMPALA on distributed TensorFlow").
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from harness.execution.transport import (OutcomeUnknown, QueueClosed, RecordQueue, RecordSpec, WeightStore,
                                         check_record)

LEARNER_DEVICE = "/job:learner/replica:0/task:0/device:CPU:0"
_DELIVERED_TWICE = "request was received twice"
_RETRIES = 3


def _tf() -> Any:
    from harness.backends.tf_import import import_tensorflow

    return import_tensorflow()


class TFSession:
    """A ``tf.compat.v1.Session`` on ``target`` over one private graph, seeing only the learner and ``own`` task."""

    def __init__(self, target: str, own: str | None) -> None:
        tf = _tf()
        self.tf = tf
        self.graph = tf.Graph()
        filters = ["/job:learner"] + ([own] if own else [])
        self.config = tf.compat.v1.ConfigProto(device_filters=filters)
        self.target = target
        self._session = None

    def open(self) -> None:
        self._session = self.tf.compat.v1.Session(self.target, graph=self.graph, config=self.config)

    def run(self, fetches: Any, feed: dict | None = None, timeout: float | None = None,
            idempotent: bool = False) -> Any:
        """``Session.run`` with TF's errors turned into `QueueClosed` (closed queue, learner gone) and
        `TimeoutError` (``timeout`` seconds passed).

        TF's gRPC layer can deliver a retried step twice; the server then rejects it ("The same RunGraph
        request was received twice", an ``AbortedError``: seen here when an actor is killed under load).
        ``idempotent`` steps (sizes, flags, weight reads) are run again; for the others the step's outcome
        is unknown, which is raised as `OutcomeUnknown` (not as a closed queue: nothing closed). A 2-hour
        Pong run saw one on a learner's take under full load (2 cores, 3 processes).
        """
        tf = self.tf
        options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout * 1000)) if timeout else None
        for attempt in range(_RETRIES + 1):
            try:
                return self._session.run(fetches, feed, options=options)
            except tf.errors.DeadlineExceededError:
                raise TimeoutError(f"no answer from the learner's server within {timeout} s") from None
            except (tf.errors.OutOfRangeError, tf.errors.CancelledError) as exc:
                raise QueueClosed(f"the queue is closed ({type(exc).__name__})") from None
            except tf.errors.AbortedError as exc:
                if _DELIVERED_TWICE not in exc.message:
                    raise QueueClosed(f"the queue is closed: {exc.message}") from None
                if not idempotent or attempt == _RETRIES:
                    raise OutcomeUnknown(f"TF session on {self.target}: a step reached the learner's server twice "
                                         f"(gRPC retry) and was rejected; its outcome is unknown") from None
            except tf.errors.UnavailableError as exc:
                raise QueueClosed(f"the learner's server is gone: {exc.message.splitlines()[0]}") from None

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


class TFRecordQueue(RecordQueue):
    """A FIFO queue of records on the learner task (``shared_name`` ``spacegraph/<name>``).

    Args:
        session: the process's `TFSession` (its graph gets the queue's ops; open it after building).
        name: the queue's name (the same in every process).
        spec: the records' fields.
        capacity: records the queue holds before ``put`` waits.
    """

    def __init__(self, session: TFSession, name: str, spec: RecordSpec, capacity: int) -> None:
        tf = session.tf
        self.session, self.name, self.spec = session, name, dict(spec)
        names = list(self.spec)
        with session.graph.as_default(), tf.device(LEARNER_DEVICE):
            self._queue = tf.queue.FIFOQueue(capacity, [self.spec[n][0] for n in names],
                                             shapes=[list(self.spec[n][1]) for n in names], names=names,
                                             shared_name=f"spacegraph/{name}", name=name)
            self._inputs = {n: tf.compat.v1.placeholder(self.spec[n][0], list(self.spec[n][1]), name=f"{name}_{n}")
                            for n in names}
            self._enqueue = self._queue.enqueue(self._inputs)
            self._count = tf.compat.v1.placeholder(tf.int32, [], name=f"{name}_count")
            self._dequeue = self._queue.dequeue_many(self._count)
            self._dequeue_one = {n: tf.expand_dims(t, 0) for n, t in self._queue.dequeue().items()}
            self._size = self._queue.size()
            self._is_closed = self._queue.is_closed()
            self._close = self._queue.close(cancel_pending_enqueues=True)

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        checked = check_record(self.spec, record, f"TFRecordQueue {self.name!r}.put")
        self.session.run(self._enqueue, {self._inputs[k]: v for k, v in checked.items()}, timeout)

    def take(self, count: int, timeout: float | None = None) -> dict[str, np.ndarray]:
        """The next ``count`` records; for one consumer (the learner).

        A TF dequeue whose run times out can drop records (seen here: ``dequeue_many`` loses those it had
        taken, and a timed-out ``dequeue`` lost rollouts that arrived later), so this waits until ``count``
        records are there (polling `size`, at most 2 ms apart) and then dequeues them without a timeout.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0002
        while self.size() < count:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"TFRecordQueue {self.name!r}.take: {count} records did not come within "
                                   f"{timeout} s")
            if self._closed():
                raise QueueClosed(f"take: queue {self.name!r} is closed and holds too few records")
            time.sleep(pause)
            pause = min(pause * 2, 0.002)
        if count == 1:
            return self.session.run(self._dequeue_one)
        return self.session.run(self._dequeue, {self._count: int(count)})

    def size(self) -> int:
        return int(self.session.run(self._size, idempotent=True))

    def _closed(self) -> bool:
        return bool(self.session.run(self._is_closed, idempotent=True))

    def close(self) -> None:
        try:
            self.session.run(self._close)
        except QueueClosed:
            pass


class TFWeightStore(WeightStore):
    """Resource variables on the learner task (``shared_name`` ``spacegraph/weights/<slot>/<key>``), double
    buffered, and a version counting publications.

    Publication ``v`` writes buffer ``v % 2`` and then sets the version to ``v``; a reader takes the
    version, reads that buffer and the version again: the buffer it read is overwritten only by
    publication ``v + 2``, so arrays read while the version is still ``v`` or ``v + 1`` are all of
    publication ``v`` (else it reads again). A reader never sees arrays of two publications mixed.

    Args:
        session: the process's `TFSession`.
        spec: ``{key: (dtype, shape)}`` of the weights.
        create: build the initialiser (the learner calls `initialize` once, before any actor starts).
    """

    def __init__(self, session: TFSession, spec: RecordSpec, create: bool = False) -> None:
        tf = session.tf
        self.session, self.spec = session, dict(spec)
        with session.graph.as_default(), tf.device(LEARNER_DEVICE):
            def handle(key: str, dtype: Any, shape: Any) -> Any:
                return tf.raw_ops.VarHandleOp(dtype=dtype, shape=list(shape), shared_name=f"spacegraph/weights/{key}",
                                              container="", name="w")

            self._buffers = [{k: handle(f"{slot}/{k}", d, s) for k, (d, s) in self.spec.items()} for slot in (0, 1)]
            version = handle("__version__", tf.int64, [])
            self._version = tf.raw_ops.ReadVariableOp(resource=version, dtype=tf.int64)
            self._inputs = {k: tf.compat.v1.placeholder(d, list(s)) for k, (d, s) in self.spec.items()}
            self._publish = []
            for slot in (0, 1):
                assigns = [tf.raw_ops.AssignVariableOp(resource=self._buffers[slot][k], value=self._inputs[k])
                           for k in self.spec]
                with tf.control_dependencies(assigns):
                    bump = tf.raw_ops.AssignAddVariableOp(resource=version, value=tf.constant(1, tf.int64))
                with tf.control_dependencies([bump]):
                    self._publish.append(tf.raw_ops.ReadVariableOp(resource=version, dtype=tf.int64))
            self._read = []
            for slot in (0, 1):
                arrays = {k: tf.raw_ops.ReadVariableOp(resource=h, dtype=self.spec[k][0])
                          for k, h in self._buffers[slot].items()}
                with tf.control_dependencies(list(arrays.values())):
                    after = tf.raw_ops.ReadVariableOp(resource=version, dtype=tf.int64)
                self._read.append((arrays, after))
            inits = [tf.raw_ops.AssignVariableOp(resource=h, value=tf.zeros(self.spec[k][1], self.spec[k][0]))
                     for buffer in self._buffers for k, h in buffer.items()]
            inits.append(tf.raw_ops.AssignVariableOp(resource=version, value=tf.constant(0, tf.int64)))
            self._init = tf.group(*inits) if create else None

    def initialize(self) -> None:
        """Creates the variables on the learner task with zeros and version 0 (the learner calls this)."""
        self.session.run(self._init)

    def initialize_within(self, timeout: float) -> None:
        """`initialize`, giving up after ``timeout`` seconds (`TimeoutError`) while the server is not up."""
        self.session.run(self._init, timeout=timeout)

    def publish(self, weights: dict[str, np.ndarray]) -> int:
        """Writes the next buffer and bumps the version (one learner publishes; not for concurrent publishers)."""
        checked = check_record(self.spec, weights, "TFWeightStore.publish")
        slot = (self.version() + 1) % 2
        return int(self.session.run(self._publish[slot], {self._inputs[k]: v for k, v in checked.items()}))

    def read(self) -> tuple[int, dict[str, np.ndarray]]:
        while True:
            version = self.version()
            arrays, after = self.session.run(self._read[version % 2], idempotent=True)
            if int(after) <= version + 1:
                return version, arrays

    def version(self) -> int:
        return int(self.session.run(self._version, idempotent=True))
