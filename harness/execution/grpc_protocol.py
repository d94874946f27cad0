"""The messages of the central-inference gRPC stream (``/spacegraph.Transport/Stream``): which kinds exist,
which fields each carries, and in which order they may come.

An actor opens the stream with a handshake, then sends operations, one answer each::

    actor -> learner   hello {protocol, index, incarnation, nonce}
    learner -> actor   challenge {nonce, proof}            (the learner proves it holds the token)
    actor -> learner   proof {proof}                        (the actor proves it, after checking the learner)
    learner -> actor   welcome {queues, weights, body, args} (specs as data; a body NAME and plain arguments)
    actor -> learner   put {queue, timeout} + the record's arrays | take {queue, count, timeout} | size {queue}
                       | close {queue} | version {} | read {}
    learner -> actor   ok {value} (+ arrays: a take's records, a read's weights) | error {error, message}

Nothing else is ever accepted: there is no ``publish`` (only the learner publishes, in its own process) and
no operation named by the peer is looked up. Messages are `harness.execution.wire` messages.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from harness.execution.auth import is_nonce
from harness.execution.transport import QueueClosed
from harness.execution.wire import HEADER_LIMIT, FieldCheck, Message, WireError, encode, expect_fields

METHOD = "/spacegraph.Transport/Stream"
PROTOCOL = 1
#: The most bytes a handshake message (and any answer without arrays) may have.
SMALL_LIMIT = HEADER_LIMIT + 8
#: How long a stream may take to complete its handshake before the learner ends it (seconds).
HANDSHAKE_SECONDS = 10.0


class RemoteBody(NamedTuple):
    """An actor body that a learner may name: ``run(transport, index, incarnation, *args)`` with the args
    that ``check(args from the wire) -> tuple`` validated (raising ValueError with what is wrong)."""

    run: Callable[..., Any]
    check: Callable[[list], tuple]


class Refused(ValueError):
    """The learner refused the actor: a failed handshake, an index out of range or already connected."""


class ConnectionLost(QueueClosed):
    """The stream to the learner broke (its process ended, or the network failed): not an orderly close.
    A `QueueClosed`, so that an actor body leaves as it does when the learner closes its queues."""


#: The errors an ``error`` answer may name, and what the actor raises for each.
ERRORS: dict[str, type[Exception]] = {"QueueClosed": QueueClosed, "TimeoutError": TimeoutError,
                                      "ValueError": ValueError, "Refused": Refused}


def _int_in(low: int, high: int) -> FieldCheck:
    return f"an int in [{low}, {high}]", lambda v: type(v) is int and low <= v <= high


_TIMEOUT: FieldCheck = ("null or a number of seconds in [0, 86400]",
                        lambda v: v is None or (type(v) in (int, float) and 0 <= v <= 86400))
_QUEUE: FieldCheck = ("a queue name (a string)", lambda v: isinstance(v, str))
_HEX: FieldCheck = ("64 hex digits", is_nonce)
_INDEX = _int_in(0, 2 ** 31 - 1)

#: What the learner accepts: ``{kind: {field: check}}``.
REQUESTS: dict[str, dict[str, FieldCheck]] = {
    "hello": {"protocol": (f"the protocol version {PROTOCOL}", lambda v: type(v) is int and v == PROTOCOL),
              "index": _INDEX, "incarnation": _int_in(0, 2 ** 62), "nonce": _HEX},
    "proof": {"proof": _HEX},
    "put": {"queue": _QUEUE, "timeout": _TIMEOUT},
    "take": {"queue": _QUEUE, "count": _INDEX, "timeout": _TIMEOUT},
    "size": {"queue": _QUEUE},
    "close": {"queue": _QUEUE},
    "version": {},
    "read": {},
}
OPERATIONS = ("put", "take", "size", "close", "version", "read")

#: What the actor accepts.
ANSWERS: dict[str, dict[str, FieldCheck]] = {
    "challenge": {"nonce": _HEX, "proof": _HEX},
    "welcome": {"queues": ("an object of record specs", lambda v: isinstance(v, dict)),
                "weights": ("a record spec", lambda v: isinstance(v, dict)),
                "body": ("null or a body name", lambda v: v is None or isinstance(v, str)),
                "args": ("null or a list of arguments", lambda v: v is None or isinstance(v, list))},
    "ok": {"value": ("null or an int", lambda v: v is None or type(v) is int)},
    "error": {"error": (f"one of {sorted(ERRORS)}", lambda v: v in ERRORS if isinstance(v, str) else False),
              "message": ("a string", lambda v: isinstance(v, str))},
}


def expect(message: Message, kinds: tuple[str, ...], table: dict[str, dict[str, FieldCheck]],
           arrays: bool = False) -> dict[str, Any]:
    """The fields of ``message``, which must be of one of ``kinds`` and hold what ``table`` says.

    Raises:
        WireError: naming the kind that came and what was expected.
    """
    if message.kind not in kinds:
        raise WireError(f"expected a message of kind {' or '.join(kinds)}; got {message.kind!r}")
    return expect_fields(message, table[message.kind], arrays=arrays)


def error_answer(exc: BaseException) -> bytes:
    """The ``error`` answer for ``exc`` (its class by name if the actor knows it, else ValueError)."""
    name = type(exc).__name__
    return encode("error", {"error": name if name in ERRORS else "ValueError", "message": str(exc)})


def raise_error(message: Message) -> None:
    """Raises what an ``error`` answer names (``Refused``, ``QueueClosed``, ...)."""
    fields = expect(message, ("error",), ANSWERS)
    raise ERRORS[fields["error"]](fields["message"])
