"""The actor's side of the central-inference gRPC stream: its link to the learner, the handshake that proves
both sides hold the token, and the queue and weight clients an actor body uses.

An actor started elsewhere (`run_remote_actor`, ``spacegraph actor``) runs only bodies of its own registry
(``{name: RemoteBody}``): the learner names one and sends its arguments as plain data, which the body's
``check`` validates before anything runs. It never receives code or environment variables.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Mapping, NamedTuple, TextIO

import grpc
import numpy as np

from harness.execution.auth import new_nonce, proof, proof_matches
from harness.execution.grpc_protocol import (
    ANSWERS, METHOD, PROTOCOL, SMALL_LIMIT, ConnectionLost, Refused, RemoteBody, expect, raise_error)
from harness.execution.processes import watch_parent
from harness.execution.transport import (
    QueueClosed, RecordQueue, RecordSpec, Transport, WeightStore, check_record)
from harness.execution.wire import (
    HEADER_LIMIT, Message, WireError, check_arrays, decode, encode, spec_from_data, spec_nbytes)

#: The most bytes an actor accepts in one answer when no spec bounds it (a read of undeclared weights).
DEFAULT_ACTOR_LIMIT = 256 * 1024 * 1024


class UntrustedLearner(RuntimeError):
    """The peer at the learner's address did not prove it holds the token, or asked for what this actor does
    not run: the actor runs nothing."""


class Welcome(NamedTuple):
    """What the learner answers a completed handshake: the queue specs, the weights spec, a body name and its
    arguments (both None for an actor the learner spawned, which was handed its body locally)."""

    queues: dict[str, RecordSpec]
    weights: RecordSpec
    body: str | None
    args: list | None


class _Link:
    """An actor's one stream to the learner: messages go out in order, each waits for its answer.

    Raises:
        grpc.FutureTimeoutError: when no learner answers at ``address`` within ``ready_timeout`` seconds.
    """

    def __init__(self, address: str, ready_timeout: float = 60.0, credentials: Any = None,
                 max_message_bytes: int = DEFAULT_ACTOR_LIMIT) -> None:
        # retry a lost connection every 0.5-2 s (grpc's default backoff grows to 2 minutes)
        options = [("grpc.initial_reconnect_backoff_ms", 500), ("grpc.min_reconnect_backoff_ms", 500),
                   ("grpc.max_reconnect_backoff_ms", 2000), ("grpc.max_receive_message_length", max_message_bytes)]
        self.channel = (grpc.secure_channel(address, credentials, options=options) if credentials is not None
                        else grpc.insecure_channel(address, options=options))
        self.max_message_bytes = max_message_bytes
        try:
            grpc.channel_ready_future(self.channel).result(timeout=ready_timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise
        self._out: queue.Queue = queue.Queue()
        self._answers = self.channel.stream_stream(METHOD)(iter(self._out.get, None))
        self._lock = threading.Lock()
        self.lost = False   # the stream broke (ConnectionLost was raised), as opposed to an orderly close

    def exchange(self, kind: str, fields: dict[str, Any] | None = None, arrays: dict[str, Any] | None = None,
                 limit: int = SMALL_LIMIT) -> Message:
        """Sends one message and returns the decoded answer (at most ``limit`` bytes).

        Raises:
            ConnectionLost: the stream broke. WireError: the answer is not a well-formed message.
        """
        data = encode(kind, fields, arrays)
        with self._lock:
            self._out.put(data)
            try:
                answer = next(self._answers)
            except (grpc.RpcError, StopIteration) as exc:
                self.lost = True
                detail = exc.details() if isinstance(exc, grpc.RpcError) else "the stream ended"
                raise ConnectionLost(f"the learner's gRPC service is gone: {detail}") from None
        return decode(answer, min(limit, self.max_message_bytes))

    def call(self, kind: str, fields: dict[str, Any] | None = None, arrays: dict[str, Any] | None = None,
             limit: int = SMALL_LIMIT) -> Message:
        """One operation: its ``ok`` answer (fields checked), or the error the learner named, raised."""
        answer = self.exchange(kind, fields, arrays, limit)
        if answer.kind == "error":
            raise_error(answer)
        expect(answer, ("ok",), ANSWERS, arrays=True)
        return answer

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


def _refusal(answer: Message) -> None:
    """Raises the error a learner answered to a handshake message: `QueueClosed` (it is ending its run) as
    such, anything else as `Refused`."""
    try:
        raise_error(answer)
    except QueueClosed:
        raise
    except (ValueError, TimeoutError) as exc:
        raise Refused(str(exc)) from None


def handshake(link: _Link, token: bytes, index: int, incarnation: int) -> Welcome:
    """Proves to the learner that this actor holds ``token`` once the learner proved it; returns its welcome.

    Raises:
        UntrustedLearner: the learner's proof does not match ``token`` or its answers are malformed.
        Refused: the learner refused the actor. QueueClosed: the learner is ending its run.
        ConnectionLost: the stream broke.
    """
    mine = new_nonce()
    try:
        answer = link.exchange("hello", {"protocol": PROTOCOL, "index": index, "incarnation": incarnation,
                                         "nonce": mine})
        if answer.kind == "error":
            _refusal(answer)
        theirs = expect(answer, ("challenge",), ANSWERS)
        if not proof_matches(proof(token, "learner", mine, theirs["nonce"], index, incarnation), theirs["proof"]):
            raise UntrustedLearner("it did not prove that it holds this actor's token (the tokens differ, or it is "
                                   "not your learner)")
        answer = link.exchange("proof", {"proof": proof(token, "actor", mine, theirs["nonce"], index, incarnation)})
        if answer.kind == "error":
            _refusal(answer)
        fields = expect(answer, ("welcome",), ANSWERS)
        queues = {str(name): spec_from_data(spec, f"welcome: queue {name!r}")
                  for name, spec in fields["queues"].items()}
        return Welcome(queues, spec_from_data(fields["weights"], "welcome: weights"), fields["body"], fields["args"])
    except WireError as exc:
        raise UntrustedLearner(f"its handshake is malformed: {exc}") from None


class GrpcRecordQueue(RecordQueue):
    """A client of one of the learner's queues, over the actor's stream."""

    def __init__(self, link: _Link, name: str, spec: RecordSpec) -> None:
        self.link, self.name, self.spec = link, name, dict(spec)

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        checked = check_record(self.spec, record, f"queue {self.name!r}: put")
        self.link.call("put", {"queue": self.name, "timeout": timeout}, checked)

    def take(self, count: int, timeout: float | None = None) -> dict[str, np.ndarray]:
        answer = self.link.call("take", {"queue": self.name, "count": int(count), "timeout": timeout},
                                limit=int(count) * spec_nbytes(self.spec) + SMALL_LIMIT)
        return check_arrays(answer, self.spec, f"of queue {self.name!r}", leading=(int(count),))

    def size(self) -> int:
        return self._value("size")

    def close(self) -> None:
        self.link.call("close", {"queue": self.name})

    def _value(self, kind: str) -> int:
        value = self.link.call(kind, {"queue": self.name}).fields["value"]
        if value is None:
            raise WireError(f"{kind}: the learner answered no value")
        return value


class GrpcWeightStore(WeightStore):
    """The learner's weight store, over the actor's stream (read only: only the learner publishes)."""

    def __init__(self, link: _Link, spec: RecordSpec) -> None:
        self.link, self.spec = link, dict(spec)

    def publish(self, weights: dict[str, Any]) -> int:
        raise PermissionError("GrpcWeightStore.publish: only the learner publishes weights (in its own process); "
                              "the stream does not carry publications")

    def read(self) -> tuple[int, dict[str, np.ndarray]]:
        limit = spec_nbytes(self.spec) + HEADER_LIMIT + 8 if self.spec else self.link.max_message_bytes
        answer = self.link.call("read", limit=limit)
        weights = check_arrays(answer, self.spec, "weights") if self.spec else dict(answer.arrays)
        return int(answer.fields["value"] or 0), weights

    def version(self) -> int:
        return int(self.link.call("version").fields["value"] or 0)


def _transport(link: _Link, welcome: Welcome) -> Transport:
    return Transport({n: GrpcRecordQueue(link, n, s) for n, s in welcome.queues.items()},
                     GrpcWeightStore(link, welcome.weights))


def join(address: str, token: bytes, index: int, incarnation: int = 0, credentials: Any = None,
         ready_timeout: float = 60.0) -> tuple[Transport, Welcome, Callable[[], None]]:
    """Opens a stream to the learner at ``address`` as actor ``index`` and completes the handshake.

    Returns:
        ``(transport, welcome, close)``: the queues and weights over the stream, the learner's welcome, and
        the function that closes the stream.

    Raises:
        grpc.FutureTimeoutError: no learner within ``ready_timeout``; and what `handshake` raises.
    """
    link = _Link(address, ready_timeout, credentials)
    try:
        welcome = handshake(link, token, index, incarnation)
    except BaseException:
        link.close()
        raise
    return _transport(link, welcome), welcome, link.close


def actor_main(address: str, index: int, incarnation: int, parent: int, token: bytes, env: dict[str, str],
               body: Callable[..., Any], args: tuple) -> None:
    """A spawned actor process (its body and environment handed over locally by multiprocessing): joins the
    learner's stream with the handshake and runs ``body``."""
    os.environ.update(env)
    threading.Thread(target=watch_parent, args=(parent,), daemon=True).start()
    transport, _, close = join(address, token, index, incarnation)
    try:
        body(transport, index, incarnation, *args)
    finally:
        close()


def _chosen_body(welcome: Welcome, bodies: Mapping[str, RemoteBody]) -> tuple[Callable[..., Any], tuple]:
    """The registered body the learner names, with its checked arguments.

    Raises:
        UntrustedLearner: an unknown name or arguments its check refuses.
    """
    if welcome.body not in bodies:
        raise UntrustedLearner(f"it asks for the body {welcome.body!r}; this actor runs only {sorted(bodies)}")
    chosen = bodies[welcome.body]
    try:
        return chosen.run, chosen.check(welcome.args or [])
    except ValueError as exc:
        raise UntrustedLearner(f"its arguments for {welcome.body!r} are refused: {exc}") from None


def run_remote_actor(address: str, index: int, token: bytes, bodies: Mapping[str, RemoteBody],
                     reconnect_s: float = 60.0, stream: TextIO | None = None, credentials: Any = None,
                     max_message_bytes: int = DEFAULT_ACTOR_LIMIT) -> int:
    """An actor started apart from the learner (``spawn=False``): joins the learner at ``address`` as actor
    ``index`` (a handshake with ``token``; ``credentials``: grpcio channel credentials for TLS), runs the body
    of ``bodies`` the learner names, and after a broken stream reconnects (within ``reconnect_s`` seconds) and
    runs it again as its next incarnation.

    Returns:
        The exit status: 0 when the learner ended the run (its queues closed), 1 when no learner came back
        within ``reconnect_s``, 2 when the learner refused the actor (an index out of range or already
        connected), 3 when the actor refused the learner (it did not prove it holds the token, or named a body
        or arguments this actor does not run): nothing was run then.
    """
    out = stream if stream is not None else sys.stderr
    incarnation, connected_once = 0, False
    while True:
        try:
            link = _Link(address, ready_timeout=reconnect_s, credentials=credentials,
                         max_message_bytes=max_message_bytes)
        except grpc.FutureTimeoutError:
            tls = " (does the learner serve TLS, as --tls-ca says?)" if credentials is not None else \
                " (a learner serving TLS needs --tls-ca)"
            out.write(f"actor {index}: no learner at {address} within {reconnect_s:g} s{tls}; leaving\n")
            return 1
        try:
            try:
                welcome = handshake(link, token, index, incarnation)
                body, args = _chosen_body(welcome, bodies)
            except UntrustedLearner as exc:
                out.write(f"actor {index}: refusing the learner at {address}: {exc}; nothing was run\n")
                return 3
            except Refused as refused:
                out.write(f"actor {index}: the learner at {address} refused it: {refused}\n")
                return 2
            except ConnectionLost:
                time.sleep(0.5)   # the service went away between readiness and the greeting: try again
                continue
            except QueueClosed:
                return 0          # the learner is ending its run
            if connected_once:
                out.write(f"actor {index}: reconnected to {address} as incarnation {incarnation}\n")
            connected_once = True
            try:
                body(_transport(link, welcome), index, incarnation, *args)
            except QueueClosed:
                pass              # a body that lets the close through: the stream says which kind it was
            except WireError as exc:
                out.write(f"actor {index}: the learner at {address} sent a malformed answer: {exc}; leaving\n")
                return 3
            if not link.lost:
                return 0          # the body returned on an orderly close
            out.write(f"actor {index}: lost the learner at {address}; reconnecting for up to {reconnect_s:g} s\n")
            out.flush()
            incarnation += 1
        finally:
            link.close()
