"""`GrpcActorLearnerExecutor`: the actor-learner executor interface over a streaming gRPC service (grpcio).

For actors on machines without Ray or TensorFlow: the learner's process serves its queues and weight store
through one bidirectional-streaming gRPC method (``/spacegraph.Transport/Stream``, a generic handler:
grpcio's own HTTP/2 transport, no protocol of our own beyond the message layout). Each actor process opens
one stream to the learner's address and sends its queue and weight operations over it, one answer per
operation, in order: ``put``/``take``/``size``/``close`` on a named queue, ``version``/``read`` of the
weights. Messages are pickled tuples of NumPy arrays (a trusted cluster: anyone who can reach the port can
run code in the learner through pickle, so serve on 127.0.0.1 or a private network only).

The learner's side uses its queues in process (`InProcessRecordQueue`); a stream whose actor is gone ends,
and nothing waits for it. Actor processes are `ActorProcesses` (spawned, watched, restarted after a crash).
"""

from __future__ import annotations

import os
import pickle
import queue
import threading
from concurrent import futures
from typing import Any, Callable, Iterator

import grpc

from harness.execution.processes import ProcessActorsMixin, watch_parent
from harness.execution.transport import (
    InProcessRecordQueue, InProcessWeightStore, QueueClosed, RecordQueue, RecordSpec, WeightStore, Transport)

METHOD = "/spacegraph.Transport/Stream"
_ERRORS = {"QueueClosed": QueueClosed, "TimeoutError": TimeoutError, "ValueError": ValueError}


class _Stream:
    """An actor's one stream to the learner: operations go out in order, each waits for its answer."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=60)
        call = self.channel.stream_stream(METHOD, request_serializer=pickle.dumps,
                                          response_deserializer=pickle.loads)
        self._out: queue.Queue = queue.Queue()
        self._answers = call(iter(self._out.get, None))
        self._lock = threading.Lock()

    def call(self, *operation: Any) -> Any:
        with self._lock:
            self._out.put(operation)
            try:
                status, value = next(self._answers)
            except (grpc.RpcError, StopIteration) as exc:
                raise QueueClosed(f"the learner's gRPC service is gone: {exc}") from None
        if status == "error":
            kind, text = value
            raise _ERRORS.get(kind, RuntimeError)(text)
        return value

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


class GrpcRecordQueue(RecordQueue):
    """A client of one of the learner's queues, over the actor's stream."""

    def __init__(self, stream: _Stream, name: str, spec: RecordSpec) -> None:
        self.stream, self.name, self.spec = stream, name, dict(spec)

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        self.stream.call("put", self.name, dict(record), timeout)

    def take(self, count: int, timeout: float | None = None) -> dict[str, Any]:
        return self.stream.call("take", self.name, count, timeout)

    def size(self) -> int:
        return self.stream.call("size", self.name)

    def close(self) -> None:
        self.stream.call("close", self.name)


class GrpcWeightStore(WeightStore):
    """The learner's weight store, over the actor's stream."""

    def __init__(self, stream: _Stream) -> None:
        self.stream = stream

    def publish(self, weights: dict[str, Any]) -> int:
        return self.stream.call("publish", dict(weights))

    def read(self) -> tuple[int, dict[str, Any]]:
        return self.stream.call("read")

    def version(self) -> int:
        return self.stream.call("version")


def _actor_main(address: str, index: int, incarnation: int, parent: int, specs: dict[str, RecordSpec],
                env: dict[str, str], body: Callable[..., Any], args: tuple) -> None:
    os.environ.update(env)
    threading.Thread(target=watch_parent, args=(parent,), daemon=True).start()
    stream = _Stream(address)
    try:
        body(Transport({n: GrpcRecordQueue(stream, n, s) for n, s in specs.items()}, GrpcWeightStore(stream)),
             index, incarnation, *args)
    finally:
        stream.close()


class GrpcActorLearnerExecutor(ProcessActorsMixin):
    """Queues and weights served by a gRPC streaming service in this process; actors as spawned processes.

    Args:
        num_actors: actor processes.
        queues: ``{name: (record spec, capacity)}``.
        weights: the spec of the published weights (the in-process store takes any arrays).
        host: the address the service binds (127.0.0.1 by default; a private network address for real
            machines, whose actors are then started there with the same body).
        port: the port (0: a free one).
        restarts: how often each actor may be restarted after a crash.
        env: environment variables for the actor processes.
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 host: str = "127.0.0.1", port: int = 0, restarts: int = 3, env: dict[str, str] | None = None) -> None:
        self.num_actors, self.restarts, self.cluster = int(num_actors), int(restarts), None
        self.queues = {name: InProcessRecordQueue(spec, capacity) for name, (spec, capacity) in queues.items()}
        self.weights = InProcessWeightStore()
        self._specs = {name: spec for name, (spec, _) in queues.items()}
        self.env = {"OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
        stream = grpc.stream_stream_rpc_method_handler(self._serve, request_deserializer=pickle.loads,
                                                       response_serializer=pickle.dumps)
        handler = grpc.method_handlers_generic_handler("spacegraph.Transport", {"Stream": stream})
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2 * self.num_actors + 4))
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port(f"{host}:{int(port)}")
        self.address = f"{host}:{self.port}"
        self._server.start()
        self._actors = None
        self._closed = False

    def _serve(self, operations: Iterator[tuple], context: Any) -> Iterator[tuple]:
        for op, *args in operations:
            try:
                if op == "read":
                    value: Any = self.weights.read()
                elif op == "version":
                    value = self.weights.version()
                elif op == "publish":
                    value = self.weights.publish(args[0])
                else:
                    value = getattr(self.queues[args[0]], op)(*args[1:])
                yield "ok", value
            except (QueueClosed, TimeoutError, ValueError) as exc:
                yield "error", (type(exc).__name__, str(exc))

    def start_actors(self, body: Callable[..., Any], *args: Any) -> None:
        """Starts every actor process running ``body(transport, index, incarnation, *args)``."""
        self._start_processes(_actor_main, lambda index, incarnation: (
            self.address, index, incarnation, os.getpid(), self._specs, self.env, body, args))

    def shutdown(self, timeout: float = 10.0) -> None:
        """Closes the queues (actors' next operation fails: they return), stops the actors and the service."""
        if self._closed:
            return
        self._closed = True
        self._close_and_stop(timeout)
        self._server.stop(grace=1.0).wait(5)

    def __enter__(self) -> "GrpcActorLearnerExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
