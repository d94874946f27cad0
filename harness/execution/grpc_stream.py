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

With ``spawn=False`` the learner starts no actors: it serves at a fixed address, and actors started
elsewhere (another machine, or processes that outlive the learner) join with `run_remote_actor`
(``spacegraph actor --address HOST:PORT --index I``). Such an actor asks the learner what to run (the
body and its arguments, pickled by reference), runs it, and when its stream breaks (the learner died or
the network failed: `ConnectionLost`) it reconnects to the same address for up to ``reconnect_s`` seconds
and starts the body again as its next incarnation. A learner restarted on that address (``--resume``)
thus takes its actors back; when the learner ends a run in order (its queues closed) the actors leave.
"""

from __future__ import annotations

import os
import pickle
import queue
import sys
import threading
import time
from concurrent import futures
from typing import Any, Callable, Iterator, TextIO

import grpc

from harness.execution.processes import ProcessActorsMixin, watch_parent
from harness.execution.transport import (
    InProcessRecordQueue, InProcessWeightStore, QueueClosed, RecordQueue, RecordSpec, WeightStore, Transport)

METHOD = "/spacegraph.Transport/Stream"
_ERRORS = {"QueueClosed": QueueClosed, "TimeoutError": TimeoutError, "ValueError": ValueError}


class ConnectionLost(QueueClosed):
    """The stream to the learner broke (its process ended, or the network failed): not an orderly close.
    A `QueueClosed`, so that an actor body leaves as it does when the learner closes its queues."""


class _Stream:
    """An actor's one stream to the learner: operations go out in order, each waits for its answer.

    Raises:
        grpc.FutureTimeoutError: when no learner answers at ``address`` within ``ready_timeout`` seconds.
    """

    def __init__(self, address: str, ready_timeout: float = 60.0) -> None:
        # retry a lost connection every 0.5-2 s (grpc's default backoff grows to 2 minutes)
        self.channel = grpc.insecure_channel(address, options=[("grpc.initial_reconnect_backoff_ms", 500),
                                                               ("grpc.min_reconnect_backoff_ms", 500),
                                                               ("grpc.max_reconnect_backoff_ms", 2000)])
        try:
            grpc.channel_ready_future(self.channel).result(timeout=ready_timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise
        call = self.channel.stream_stream(METHOD, request_serializer=pickle.dumps,
                                          response_deserializer=pickle.loads)
        self._out: queue.Queue = queue.Queue()
        self._answers = call(iter(self._out.get, None))
        self._lock = threading.Lock()
        self.lost = False   # the stream broke (ConnectionLost was raised), as opposed to an orderly close

    def call(self, *operation: Any) -> Any:
        with self._lock:
            self._out.put(operation)
            try:
                status, value = next(self._answers)
            except (grpc.RpcError, StopIteration) as exc:
                self.lost = True
                raise ConnectionLost(f"the learner's gRPC service is gone: {exc}") from None
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


def run_remote_actor(address: str, index: int, reconnect_s: float = 60.0, stream: TextIO | None = None) -> int:
    """An actor started apart from the learner (``spawn=False``): joins the learner at ``address`` as actor
    ``index``, runs the body the learner names, and after a broken stream reconnects (within ``reconnect_s``
    seconds) and runs it again as its next incarnation. Returns the exit status: 0 when the learner ended the
    run (its queues closed), 1 when no learner came back within ``reconnect_s``, 2 when the learner refused
    the actor (an index out of range or already connected)."""
    out = stream if stream is not None else sys.stderr
    incarnation, connected_once = 0, False
    while True:
        try:
            link = _Stream(address, ready_timeout=reconnect_s)
        except grpc.FutureTimeoutError:
            out.write(f"actor {index}: no learner at {address} within {reconnect_s:g} s; leaving\n")
            return 1
        try:
            try:
                specs, body, args, env = link.call("hello", index, incarnation)
            except ValueError as refused:
                out.write(f"actor {index}: the learner at {address} refused it: {refused}\n")
                return 2
            except ConnectionLost:
                time.sleep(0.5)   # the service went away between readiness and the greeting: try again
                continue
            except QueueClosed:
                return 0          # the learner is ending its run
            os.environ.update(env)
            if connected_once:
                out.write(f"actor {index}: reconnected to {address} as incarnation {incarnation}\n")
            connected_once = True
            try:
                body(Transport({n: GrpcRecordQueue(link, n, s) for n, s in specs.items()}, GrpcWeightStore(link)),
                     index, incarnation, *args)
            except QueueClosed:
                pass              # a body that lets the close through: the stream says which kind it was
            if not link.lost:
                return 0          # the body returned on an orderly close
            out.write(f"actor {index}: lost the learner at {address}; reconnecting for up to {reconnect_s:g} s\n")
            out.flush()
            incarnation += 1
        finally:
            link.close()


class GrpcActorLearnerExecutor(ProcessActorsMixin):
    """Queues and weights served by a gRPC streaming service in this process; actors as spawned processes,
    or (``spawn=False``) actors started elsewhere that join with `run_remote_actor`.

    Args:
        num_actors: actor processes.
        queues: ``{name: (record spec, capacity)}``.
        weights: the spec of the published weights (the in-process store takes any arrays).
        host: the address the service binds (127.0.0.1 by default; a private network address for real
            machines, whose actors are then started there with the same body).
        port: the port (0: a free one).
        restarts: how often each actor may be restarted after a crash.
        env: environment variables for the actor processes.
        spawn: start the actors as child processes (else serve ``num_actors`` actors started elsewhere, which
            may come and go: ``connected()`` lists those with a live stream).
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 host: str = "127.0.0.1", port: int = 0, restarts: int = 3, env: dict[str, str] | None = None,
                 spawn: bool = True) -> None:
        self.num_actors, self.restarts, self.cluster = int(num_actors), int(restarts), None
        self._closed = False
        self.spawn = bool(spawn)
        self._body: tuple[Callable[..., Any], tuple] | None = None
        self._body_set = threading.Event()
        self._connected: dict[int, int] = {}    # actor index -> incarnation, while its stream is open
        self._connected_lock = threading.Lock()
        self.queues = {name: InProcessRecordQueue(spec, capacity) for name, (spec, capacity) in queues.items()}
        self.weights = InProcessWeightStore()
        self._specs = {name: spec for name, (spec, _) in queues.items()}
        self.env = {"OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
        stream = grpc.stream_stream_rpc_method_handler(self._serve, request_deserializer=pickle.loads,
                                                       response_serializer=pickle.dumps)
        handler = grpc.method_handlers_generic_handler("spacegraph.Transport", {"Stream": stream})
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2 * self.num_actors + 4))
        self._server.add_generic_rpc_handlers((handler,))
        try:
            self.port = self._server.add_insecure_port(f"{host}:{int(port)}")
        except RuntimeError as exc:   # grpcio raises RuntimeError when it cannot bind
            raise RuntimeError(f"GrpcActorLearnerExecutor: cannot serve at {host}:{port}: {exc}") from None
        if self.port == 0:
            raise RuntimeError(f"GrpcActorLearnerExecutor: cannot serve at {host}:{port} (address in use?)")
        self.address = f"{host}:{self.port}"
        self._server.start()
        self._actors = None

    def _hello(self, index: Any, incarnation: Any) -> tuple:
        """A remote actor's greeting: what it runs (the queue specs, the body and its arguments, the env)."""
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.num_actors:
            raise ValueError(f"actor index must be an int in [0, {self.num_actors}); got {index!r}")
        if self.spawn:
            raise ValueError("this learner spawns its own actors; it takes none from elsewhere")
        while not self._closed and not self._body_set.wait(0.5):
            pass                     # the learner has not started its actors' body yet
        if self._closed:
            raise QueueClosed("the learner is shutting down")
        with self._connected_lock:
            if index in self._connected:
                raise ValueError(f"actor {index} is already connected (incarnation {self._connected[index]})")
            self._connected[index] = int(incarnation)
        assert self._body is not None
        body, args = self._body
        return self._specs, body, args, self.env

    def _serve(self, operations: Iterator[tuple], context: Any) -> Iterator[tuple]:
        greeted: int | None = None
        try:
            for op, *args in operations:
                try:
                    if op == "hello":
                        value: Any = self._hello(*args)
                        greeted = args[0]
                    elif op == "read":
                        value = self.weights.read()
                    elif op == "version":
                        value = self.weights.version()
                    elif op == "publish":
                        value = self.weights.publish(args[0])
                    elif args and args[0] in self.queues:
                        value = getattr(self.queues[args[0]], op)(*args[1:])
                    else:
                        raise ValueError(f"unknown operation {op!r} on {args[:1]}")
                    yield "ok", value
                except (QueueClosed, TimeoutError, ValueError) as exc:
                    yield "error", (type(exc).__name__, str(exc))
        finally:
            if greeted is not None:
                with self._connected_lock:
                    self._connected.pop(greeted, None)

    def connected(self) -> dict[int, int]:
        """``{actor index: incarnation}`` of the actors started elsewhere whose stream is open now."""
        with self._connected_lock:
            return dict(self._connected)

    def start_actors(self, body: Callable[..., Any], *args: Any) -> None:
        """Starts every actor process running ``body(transport, index, incarnation, *args)`` (with
        ``spawn=False``: hands ``body`` and ``args`` to the actors that join, now and later)."""
        if not self.spawn:
            self._body = (body, args)
            self._body_set.set()
            return
        self._start_processes(_actor_main, lambda index, incarnation: (
            self.address, index, incarnation, os.getpid(), self._specs, self.env, body, args))

    def shutdown(self, timeout: float = 10.0) -> None:
        """Closes the queues (actors' next operation fails: they return), stops the actors and the service."""
        if self._closed:
            return
        self._closed = True
        self._close_and_stop(timeout)
        deadline = time.monotonic() + timeout
        while self.connected() and time.monotonic() < deadline:   # remote actors see the close and leave
            time.sleep(0.05)
        self._server.stop(grace=1.0).wait(5)

    def __enter__(self) -> "GrpcActorLearnerExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
