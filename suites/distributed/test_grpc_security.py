"""Hostile peers of the central-inference gRPC stream, at 127.0.0.1: raw gRPC clients sending bytes crafted by
hand (a pickle, an operation before the handshake, a wrong token, a malformed header, a record of the wrong
dtype or shape, an oversized message, ``publish`` and unknown kinds) are refused, logged, and execute nothing,
while an authenticated actor on the same learner goes on; an actor facing an impostor learner runs nothing;
TLS through grpcio's credentials."""

from __future__ import annotations

import io
import logging
import pickle
import queue
import shutil
import subprocess
import threading
from concurrent import futures

import grpc
import numpy as np
import pytest

from harness.execution import auth
from harness.execution.grpc_actor import join
from harness.execution.grpc_protocol import METHOD, PROTOCOL
from harness.execution.grpc_stream import GrpcActorLearnerExecutor, RemoteBody, run_remote_actor
from harness.execution.wire import MAGIC, Message, decode, encode
from spacegraph.cli import main

pytestmark = pytest.mark.distributed

TOKEN = b"the-learner-token-0123456789"
SPEC = {"obs": ("float32", (2, 3)), "n": ("int64", ())}
GOOD = {"obs": np.ones((2, 3), np.float32), "n": np.int64(7)}


def _wait(transport, index, incarnation):
    transport.queues[f"actions-{index}"].take(1)   # until the learner closes its queues


def _check(args):
    if args != []:
        raise ValueError(f"expected no arguments; got {args!r}")
    return ()


BODIES = {"wait": RemoteBody(_wait, _check)}


@pytest.fixture
def learner():
    executor = GrpcActorLearnerExecutor(2, {"requests": (SPEC, 4), "actions-0": (SPEC, 2), "actions-1": (SPEC, 2)},
                                        {}, spawn=False, token=TOKEN, bodies=BODIES)
    executor.start_actors(_wait)
    try:
        yield executor
    finally:
        executor.shutdown(timeout=5)


class Raw:
    """A plain gRPC client of the stream: sends bytes, returns the decoded answer, None when the stream ended,
    or the grpc.RpcError that broke it."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.out: queue.Queue = queue.Queue()
        self.answers = self.channel.stream_stream(METHOD)(iter(self.out.get, None))

    def send(self, data: bytes):
        self.out.put(data)
        try:
            return decode(next(self.answers), 1 << 30)
        except StopIteration:
            return None
        except grpc.RpcError as exc:
            return exc

    def hello(self, index: int, nonce: str) -> Message:
        return self.send(encode("hello", {"protocol": PROTOCOL, "index": index, "incarnation": 0, "nonce": nonce}))

    def authenticate(self, token: bytes, index: int) -> Message:
        mine = auth.new_nonce()
        challenge = self.hello(index, mine)
        theirs = challenge.fields["nonce"]
        return self.send(encode("proof", {"proof": auth.proof(token, "actor", mine, theirs, index, 0)}))

    def close(self) -> None:
        self.out.put(None)
        self.channel.close()


class Payload:
    """A pickle that creates a file when it is unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def refused(answer, text: str) -> bool:
    return isinstance(answer, Message) and answer.kind == "error" and text in answer.fields["message"]


def test_hostile_peers_are_refused_and_an_authenticated_actor_goes_on(learner, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="harness.execution.grpc_stream")
    actor, welcome, close = join(learner.address, TOKEN, 0)
    assert (welcome.body, welcome.args, welcome.queues["requests"]) == ("wait", [], SPEC)
    requests = learner.queues["requests"]
    actor.queues["requests"].put(GOOD)
    assert requests.take(1, timeout=10)["n"].tolist() == [7]
    marker = tmp_path / "pwned"
    put = encode("put", {"queue": "requests", "timeout": 1.0}, GOOD)

    # before the handshake: a pickle, an operation, a malformed header each end the stream
    for data, text in [(pickle.dumps(("put", Payload(marker))), "not a spacegraph wire message"),
                       (MAGIC + pickle.dumps(Payload(marker)), "a header of"),
                       (put, "expected a message of kind hello; got 'put'"),
                       (encode("publish", {}, {"w": np.ones(3)}), "got 'publish'"),
                       (MAGIC + b"\x00\x00\x00\x05{bad}", "the header is not JSON")]:
        raw = Raw(learner.address)
        assert refused(raw.send(data), text), text
        assert raw.send(put) is None            # the stream ended: nothing more is read from it
        raw.close()
    # a wrong token: the learner proves itself first, then refuses the actor's proof and ends the stream
    raw = Raw(learner.address)
    assert refused(raw.authenticate(b"a-wrong-token-0123456789", 1), "authentication failed")
    assert raw.send(put) is None
    raw.close()
    assert learner.connected() == {0: 0} and requests.size() == 0

    # after a handshake: each refused with an error answer, the stream stays up
    raw = Raw(learner.address)
    assert raw.authenticate(TOKEN, 1).kind == "welcome"
    big = encode("put", {"queue": "requests", "timeout": 1.0}, {"obs": np.ones((2, 3), np.float32),
                                                                "n": np.int64(1), "pad": np.zeros(70_000, np.uint8)})
    for data, text in [
        (pickle.dumps(("publish", Payload(marker))), "not a spacegraph wire message"),
        (MAGIC + b"\x00\x00\x00\x05{bad}", "the header is not JSON"),
        (encode("put", {"queue": "requests", "timeout": 1.0}, {**GOOD, "obs": np.ones((2, 3), np.float64)}),
         "'obs' must be float32[2, 3]; got float64[2, 3]"),
        (encode("put", {"queue": "requests", "timeout": 1.0}, {**GOOD, "obs": np.ones((3, 2), np.float32)}),
         "'obs' must be float32[2, 3]; got float32[3, 2]"),
        (encode("put", {"queue": "__init__", "timeout": 1.0}, GOOD), "no queue '__init__'"),
        (encode("take", {"queue": "requests", "count": 10 ** 6, "timeout": 1.0}), "count must be in [1, 4]"),
        (encode("take", {"queue": "requests", "count": 1, "timeout": "soon"}), "'timeout' must be null or a number"),
        (big, f"a message of {len(big):,} bytes; at most {learner.max_message_bytes:,}"),
        (encode("publish", {}, {"w": np.ones(3)}), "got 'publish'"),
        (encode("__class__", {"queue": "requests"}), "got '__class__'"),
        (encode("hello", {"protocol": PROTOCOL, "index": 1, "incarnation": 0, "nonce": auth.new_nonce()}),
         "got 'hello'"),
    ]:
        assert refused(raw.send(data), text), text
    assert raw.send(encode("size", {"queue": "requests"})).fields == {"value": 0}   # still served
    assert not marker.exists() and learner.weights.version() == 0 and requests.size() == 0
    beyond = raw.send(encode("put", {"queue": "requests", "timeout": 1.0},
                             {**GOOD, "pad": np.zeros(2 * learner.max_message_bytes, np.uint8)}))
    assert isinstance(beyond, grpc.RpcError) and beyond.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    raw.close()

    # the good actor was served all along and still is
    actor.queues["requests"].put({**GOOD, "n": np.int64(8)})
    assert requests.take(1, timeout=10)["n"].tolist() == [8]
    learner.queues["actions-0"].put(GOOD)
    assert actor.queues["actions-0"].take(1)["n"].tolist() == [7]
    with pytest.raises(PermissionError, match="only the learner publishes"):
        actor.weights.publish({"w": np.ones(2)})
    close()
    logged = [r.getMessage() for r in caplog.records]
    assert any("refused a message from ipv4:127.0.0.1:" in m and "not a spacegraph wire message" in m for m in logged)
    assert any("(unproven, says actor 1): authentication failed" in m for m in logged)
    assert any("(actor 1): put to queue 'requests': 'obs' must be float32[2, 3]" in m for m in logged)


def test_a_peer_that_stalls_in_the_handshake_is_cut_off(caplog):
    caplog.set_level(logging.WARNING, logger="harness.execution.grpc_stream")
    executor = GrpcActorLearnerExecutor(1, {"requests": (SPEC, 4), "actions-0": (SPEC, 2)}, {}, spawn=False,
                                        token=TOKEN, bodies=BODIES, handshake_s=0.5)
    executor.start_actors(_wait)
    try:
        raw = Raw(executor.address)
        assert raw.hello(0, auth.new_nonce()).kind == "challenge"
        threading.Event().wait(1.0)                       # no proof comes
        answer = raw.send(encode("proof", {"proof": "00" * 32}))
        assert isinstance(answer, grpc.RpcError) and answer.code() == grpc.StatusCode.CANCELLED
        raw.close()
        assert executor.connected() == {}
        assert any("did not complete the handshake within 0.5 s" in r.getMessage() for r in caplog.records)
    finally:
        executor.shutdown(timeout=5)


def test_an_actor_refuses_an_impostor_learner_and_runs_nothing(tmp_path, capsys):
    called = []
    spy = {"wait": RemoteBody(lambda *a: called.append(a), _check)}
    impostor = GrpcActorLearnerExecutor(1, {"requests": (SPEC, 4), "actions-0": (SPEC, 2)}, {}, spawn=False,
                                        token=b"the-impostors-own-token-123", bodies=spy)
    impostor.start_actors(spy["wait"].run)
    try:
        text = io.StringIO()
        assert run_remote_actor(impostor.address, 0, TOKEN, spy, reconnect_s=5, stream=text) == 3
        assert "did not prove that it holds this actor's token" in text.getvalue() and "nothing was run" in \
            text.getvalue()
        token_file = tmp_path / "token"
        token_file.write_bytes(TOKEN)
        token_file.chmod(0o600)
        assert main(["actor", "--address", impostor.address, "--index", "0", "--token-file", str(token_file),
                     "--reconnect-seconds", "5"]) == 3
        assert "refusing the learner" in capsys.readouterr().err
        assert called == [] and impostor.connected() == {} and impostor.queues["requests"].size() == 0
    finally:
        impostor.shutdown(timeout=5)


@pytest.mark.parametrize("learner_bodies, args, message", [
    ({"other": RemoteBody(_wait, lambda a: tuple(a))}, (), "it asks for the body 'other'; this actor runs only ['wait']"),
    ({"wait": RemoteBody(_wait, lambda a: tuple(a))}, (5,), "its arguments for 'wait' are refused: expected no arguments"),
])
def test_an_actor_runs_only_its_own_bodies_with_arguments_it_accepts(learner_bodies, args, message):
    executor = GrpcActorLearnerExecutor(1, {"requests": (SPEC, 4), "actions-0": (SPEC, 2)}, {}, spawn=False,
                                        token=TOKEN, bodies=learner_bodies)
    executor.start_actors(_wait, *args)
    try:
        text = io.StringIO()
        assert run_remote_actor(executor.address, 0, TOKEN, BODIES, reconnect_s=5, stream=text) == 3
        assert message in text.getvalue() and "nothing was run" in text.getvalue()
    finally:
        executor.shutdown(timeout=5)


def test_an_actor_refuses_a_learner_that_answers_with_a_pickle(tmp_path):
    marker = tmp_path / "pwned"

    def answer_pickles(requests, context):
        for _ in requests:
            yield pickle.dumps(Payload(marker))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "spacegraph.Transport", {"Stream": grpc.stream_stream_rpc_method_handler(answer_pickles)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        text = io.StringIO()
        assert run_remote_actor(f"127.0.0.1:{port}", 0, TOKEN, BODIES, reconnect_s=5, stream=text) == 3
        assert "its handshake is malformed: not a spacegraph wire message" in text.getvalue()
        assert not marker.exists()
    finally:
        server.stop(None)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the test's certificate")
def test_tls_through_grpc_credentials(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    (tmp_path / "key.pem.der").write_bytes(b"\x30\x82" + bytes(40))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    executor = GrpcActorLearnerExecutor(1, {"requests": (SPEC, 4), "actions-0": (SPEC, 2)}, {}, spawn=False,
                                        token=TOKEN, bodies=BODIES,
                                        credentials=auth.server_credentials(str(cert), str(key)))
    executor.start_actors(_wait)
    try:
        codes = []
        thread = threading.Thread(target=lambda: codes.append(run_remote_actor(
            executor.address, 0, TOKEN, BODIES, reconnect_s=10, credentials=auth.channel_credentials(str(cert)))))
        thread.start()
        deadline = 100
        while executor.connected() != {0: 0} and deadline:
            threading.Event().wait(0.1)
            deadline -= 1
        assert executor.connected() == {0: 0}
        text = io.StringIO()   # a client without TLS never gets a stream
        assert run_remote_actor(executor.address, 1, TOKEN, BODIES, reconnect_s=2, stream=text) == 1
    finally:
        executor.shutdown(timeout=5)
    thread.join(30)
    assert codes == [0]
    with pytest.raises(ValueError, match="--tls-ca .*: expected a PEM file"):
        auth.channel_credentials(str(tmp_path / "key.pem.der"))
