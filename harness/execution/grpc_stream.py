"""`GrpcActorLearnerExecutor`: the actor-learner executor interface over a streaming gRPC service (grpcio).

For actors on machines without Ray or TensorFlow: the learner's process serves its queues and weight store
through one bidirectional-streaming gRPC method (``/spacegraph.Transport/Stream``, a generic handler:
grpcio's own HTTP/2 transport). Each actor process opens one stream to the learner's address, completes a
handshake in which both sides prove they hold a shared token (HMAC-SHA256 over fresh nonces), and then sends
its queue operations, one answer each (`harness.execution.grpc_protocol`). Every message is plain data and
raw NumPy buffers (`harness.execution.wire`), checked against the specs of the queues before it is used:
nothing from the socket is ever unpickled or imported, a peer cannot publish weights nor name a method.
A message that is refused is logged (``logging`` warning of this module, naming the peer, the message kind,
what was expected and what came); before the handshake is complete a refused message ends the stream,
after it the actor gets an error answer. Other peers' streams go on.

The learner's side uses its queues in process (`InProcessRecordQueue`); a stream whose actor is gone ends,
and nothing waits for it. Actor processes are `ActorProcesses` (spawned, watched, restarted after a crash;
they receive their body and a fresh token through multiprocessing and use the same handshake).

With ``spawn=False`` the learner starts no actors: it serves at a fixed address, and actors started
elsewhere (another machine, or processes that outlive the learner) join with `run_remote_actor`
(``spacegraph actor --address HOST:PORT --index I``). Such an actor runs a body of its own registry that
the learner names, with arguments it validates; when its stream breaks (the learner died or the network
failed: `ConnectionLost`) it reconnects to the same address for up to ``reconnect_s`` seconds and starts the
body again as its next incarnation. A learner restarted on that address with the same token (``--resume``)
thus takes its actors back; when the learner ends a run in order (its queues closed) the actors leave.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import grpc

from harness.execution import grpc_actor
from harness.execution.auth import new_nonce, proof, proof_matches, require_token
from harness.execution.grpc_actor import run_remote_actor  # noqa: F401 - the actor's entry point
from harness.execution.grpc_protocol import (
    HANDSHAKE_SECONDS, OPERATIONS, REQUESTS, SMALL_LIMIT, ConnectionLost, Refused, RemoteBody, error_answer, expect)
from harness.execution.processes import ProcessActorsMixin
from harness.execution.transport import InProcessRecordQueue, InProcessWeightStore, QueueClosed, RecordSpec
from harness.execution.wire import Message, WireError, check_arrays, decode, encode, spec_nbytes, spec_to_data

__all__ = ["ConnectionLost", "GrpcActorLearnerExecutor", "RemoteBody", "run_remote_actor"]
_log = logging.getLogger(__name__)


@dataclass
class _Peer:
    """One stream's state on the learner's side."""

    address: str
    stage: str = "new"              # new -> challenged -> joined
    index: int | None = None
    incarnation: int = 0
    nonces: tuple[str, str] = ("", "")
    registered: bool = False         # counted in connected()

    def __str__(self) -> str:
        if self.index is None:
            return self.address
        return f"{self.address} ({'actor' if self.stage == 'joined' else 'unproven, says actor'} {self.index})"


class GrpcActorLearnerExecutor(ProcessActorsMixin):
    """Queues and weights served by a gRPC streaming service in this process; actors as spawned processes,
    or (``spawn=False``) actors started elsewhere that join with `run_remote_actor`.

    Args:
        num_actors: actor processes.
        queues: ``{name: (record spec, capacity)}``.
        weights: the spec of the published weights (actors check what they read against it; ``{}``: any).
        host: the address the service binds (127.0.0.1 by default; a private network address for real
            machines, which needs a ``token``).
        port: the port (0: a free one).
        restarts: how often each actor may be restarted after a crash.
        env: environment variables for the spawned actor processes (never sent over the stream).
        spawn: start the actors as child processes (else serve ``num_actors`` actors started elsewhere, which
            may come and go: ``connected()`` lists those with a live stream).
        token: the shared secret actors must prove they hold (None: a fresh one, ``self.token``; refused for a
            non-loopback ``host``).
        bodies: ``{name: RemoteBody}`` the body given to `start_actors` is looked up in when ``spawn=False``
            (actors started elsewhere are told its name, never sent code).
        credentials: grpcio server credentials (TLS, e.g. `harness.execution.auth.server_credentials`) for
            ``spawn=False``; None serves without TLS.
        max_message_bytes: the largest message the learner accepts (default: the largest record of the queues
            plus a header's allowance); gRPC's own limit is twice this, so that a message just over it is
            refused with a logged reason rather than by the transport alone.
        handshake_s: how long a stream may take to complete its handshake before the learner ends it.

    Raises:
        ValueError: a non-loopback host without a token, TLS with spawned actors, or a message limit smaller
            than a record. RuntimeError: the address cannot be bound.
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 host: str = "127.0.0.1", port: int = 0, restarts: int = 3, env: dict[str, str] | None = None,
                 spawn: bool = True, token: bytes | None = None, bodies: Mapping[str, RemoteBody] | None = None,
                 credentials: Any = None, max_message_bytes: int | None = None,
                 handshake_s: float = HANDSHAKE_SECONDS) -> None:
        require_token(host, token, "GrpcActorLearnerExecutor")
        if credentials is not None and spawn:
            raise ValueError("GrpcActorLearnerExecutor: TLS credentials are for actors started elsewhere "
                             "(spawn=False); spawned actors connect over loopback")
        self.num_actors, self.restarts, self.cluster = int(num_actors), int(restarts), None
        self._closed = False
        self.spawn = bool(spawn)
        self.token = token if token is not None else secrets.token_hex(32).encode()
        self.bodies = dict(bodies or {})
        self.handshake_s = float(handshake_s)
        self._body: tuple[str, list] | None = None
        self._body_set = threading.Event()
        self._connected: dict[int, int] = {}    # actor index -> incarnation, while its stream is open
        self._connected_lock = threading.Lock()
        self.queues = {name: InProcessRecordQueue(spec, capacity) for name, (spec, capacity) in queues.items()}
        self._capacity = {name: int(capacity) for name, (_, capacity) in queues.items()}
        self.weights = InProcessWeightStore()
        self._specs = {name: spec for name, (spec, _) in queues.items()}
        self._weights_spec = dict(weights)
        self.env = {"OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
        needed = max([spec_nbytes(spec) for spec in self._specs.values()], default=0) + SMALL_LIMIT
        self.max_message_bytes = int(max_message_bytes) if max_message_bytes is not None else needed
        if self.max_message_bytes < needed:
            raise ValueError(f"GrpcActorLearnerExecutor: max_message_bytes {self.max_message_bytes:,} is below "
                             f"the largest put of these queues ({needed:,} bytes with its header)")
        self._server = self._start_server(host, port, credentials)
        self._actors = None

    def _start_server(self, host: str, port: int, credentials: Any) -> grpc.Server:
        stream = grpc.stream_stream_rpc_method_handler(self._serve)   # bytes in, bytes out: no (de)serializer
        handler = grpc.method_handlers_generic_handler("spacegraph.Transport", {"Stream": stream})
        workers = 2 * self.num_actors + 4
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), maximum_concurrent_rpcs=workers,
                             options=[("grpc.max_receive_message_length", 2 * self.max_message_bytes)])
        server.add_generic_rpc_handlers((handler,))
        where = f"{host}:{int(port)}"
        try:   # grpcio raises RuntimeError when it cannot bind
            self.port = (server.add_secure_port(where, credentials) if credentials is not None
                         else server.add_insecure_port(where))
        except RuntimeError as exc:
            raise RuntimeError(f"GrpcActorLearnerExecutor: cannot serve at {where}: {exc}") from None
        if self.port == 0:
            raise RuntimeError(f"GrpcActorLearnerExecutor: cannot serve at {where} (address in use?)")
        self.address = f"{host}:{self.port}"
        server.start()
        return server

    # ---- the handshake ---------------------------------------------------------------------------------------
    def _challenge(self, peer: _Peer, message: Message) -> bytes:
        fields = expect(message, ("hello",), REQUESTS)
        peer.index, peer.incarnation = fields["index"], fields["incarnation"]
        peer.nonces = (fields["nonce"], new_nonce())
        peer.stage = "challenged"
        return encode("challenge", {"nonce": peer.nonces[1], "proof": proof(
            self.token, "learner", *peer.nonces, peer.index, peer.incarnation)})

    def _welcome(self, peer: _Peer, message: Message) -> bytes:
        fields = expect(message, ("proof",), REQUESTS)
        assert peer.index is not None
        if not proof_matches(proof(self.token, "actor", *peer.nonces, peer.index, peer.incarnation), fields["proof"]):
            raise Refused("authentication failed: the actor's proof does not match this learner's token")
        peer.stage = "joined"
        if not 0 <= peer.index < self.num_actors:
            raise Refused(f"actor index must be an int in [0, {self.num_actors}); got {peer.index}")
        body, args = None, None
        if not self.spawn:
            while not self._closed and not self._body_set.wait(0.5):
                pass                 # the learner has not started its actors' body yet
            if self._closed:
                raise QueueClosed("the learner is shutting down")
            with self._connected_lock:
                if peer.index in self._connected:
                    raise Refused(f"actor {peer.index} is already connected (incarnation "
                                  f"{self._connected[peer.index]})")
                self._connected[peer.index] = peer.incarnation
                peer.registered = True
            assert self._body is not None
            body, args = self._body
        queues = {name: spec_to_data(spec) for name, spec in self._specs.items()}
        return encode("welcome", {"queues": queues, "weights": spec_to_data(self._weights_spec), "body": body,
                                  "args": args})

    # ---- operations ------------------------------------------------------------------------------------------
    def _queue(self, kind: str, name: str) -> InProcessRecordQueue:
        if name not in self.queues:
            raise WireError(f"{kind}: no queue {name!r}; the queues are {sorted(self.queues)}")
        return self.queues[name]

    def _operate(self, message: Message) -> bytes:
        fields = expect(message, OPERATIONS, REQUESTS, arrays=message.kind == "put")
        kind = message.kind
        if kind == "version":
            return encode("ok", {"value": self.weights.version()})
        if kind == "read":
            version, weights = self.weights.read()
            return encode("ok", {"value": version}, weights)
        name = fields["queue"]
        queue = self._queue(kind, name)
        if kind == "put":
            queue.put(check_arrays(message, queue.spec, f"to queue {name!r}"), fields["timeout"])
            return encode("ok", {"value": None})
        if kind == "take":
            if fields["count"] > self._capacity[name] or fields["count"] < 1:
                raise WireError(f"take: count must be in [1, {self._capacity[name]}] (the capacity of queue "
                                f"{name!r}); got {fields['count']}")
            return encode("ok", {"value": None}, queue.take(fields["count"], fields["timeout"]))
        if kind == "size":
            return encode("ok", {"value": queue.size()})
        queue.close()
        return encode("ok", {"value": None})

    def _answer(self, peer: _Peer, data: bytes) -> bytes:
        """The answer to one message of ``peer`` (which may move it through the handshake)."""
        if peer.stage == "joined":
            return self._operate(decode(data, self.max_message_bytes))
        message = decode(data, SMALL_LIMIT)
        return self._challenge(peer, message) if peer.stage == "new" else self._welcome(peer, message)

    def _serve(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        peer = _Peer(context.peer())

        def end_if_not_joined() -> None:
            if peer.stage != "joined":
                _log.warning("gRPC learner %s: %s did not complete the handshake within %g s; its stream ends",
                             self.address, peer, self.handshake_s)
                context.cancel()

        overdue = threading.Timer(self.handshake_s, end_if_not_joined)
        overdue.daemon = True
        overdue.start()
        try:
            for data in requests:
                try:
                    answer = self._answer(peer, data)
                except (QueueClosed, TimeoutError) as exc:
                    answer = error_answer(exc)
                except (WireError, Refused) as exc:
                    _log.warning("gRPC learner %s: refused a message from %s: %s", self.address, peer, exc)
                    if peer.stage != "joined" or isinstance(exc, Refused):
                        yield error_answer(exc if isinstance(exc, Refused) else Refused(str(exc)))
                        return   # before (or at the failure of) the handshake: the stream ends
                    answer = error_answer(exc)
                except ValueError as exc:   # a queue's own check
                    answer = error_answer(exc)
                yield answer
        except grpc.RpcError:   # the peer left, or gRPC refused a message over twice max_message_bytes
            _log.info("gRPC learner %s: the stream of %s broke (the peer left, or sent a message over the "
                      "transport's limit of %d bytes)", self.address, peer, 2 * self.max_message_bytes)
        finally:
            overdue.cancel()
            if peer.registered:
                with self._connected_lock:
                    self._connected.pop(peer.index, None)

    def connected(self) -> dict[int, int]:
        """``{actor index: incarnation}`` of the actors started elsewhere whose stream is open now."""
        with self._connected_lock:
            return dict(self._connected)

    def start_actors(self, body: Callable[..., Any], *args: Any) -> None:
        """Starts every actor process running ``body(transport, index, incarnation, *args)`` (with
        ``spawn=False``: tells the actors that join, now and later, the name ``body`` has in ``bodies`` and
        ``args`` as plain data).

        Raises:
            ValueError: with ``spawn=False``, a body not in ``bodies`` or arguments that are not plain data or
                that its check refuses.
        """
        if not self.spawn:
            names = [name for name, known in self.bodies.items() if known.run is body]
            if not names:
                raise ValueError(f"start_actors: actors started elsewhere run only registered bodies "
                                 f"({sorted(self.bodies)}); {getattr(body, '__name__', body)!r} is not one")
            try:
                data = json.loads(json.dumps(list(args), allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"start_actors: the arguments of {names[0]!r} must be plain data (JSON): "
                                 f"{exc}") from None
            try:
                self.bodies[names[0]].check(data)
            except ValueError as exc:
                raise ValueError(f"start_actors: actors started elsewhere would refuse these arguments of "
                                 f"{names[0]!r}: {exc}") from None
            self._body = (names[0], data)
            self._body_set.set()
            return
        self._start_processes(grpc_actor.actor_main, lambda index, incarnation: (
            self.address, index, incarnation, os.getpid(), self.token, self.env, body, args))

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
