"""The central-inference wire format without a server: arrays of every allowed dtype and shape come back
exactly; pickles, objects, malformed headers and frames, lying sizes, oversized messages and arrays that do
not fit a spec are refused with one `WireError` naming what is wrong; the handshake proofs are bound to
their side, nonces and actor."""

from __future__ import annotations

import json
import os
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.execution import auth
from harness.execution.grpc_protocol import REQUESTS, expect
from harness.execution.wire import (
    DTYPES, HEADER_LIMIT, MAGIC, Message, WireError, check_arrays, decode, encode, spec_from_data, spec_to_data)

LIMIT = 1 << 20
SPEC = {"obs": ("float32", (2, 3)), "done": ("bool", (2,))}


def frame(header: object, payload: bytes = b"", raw_header: bytes | None = None) -> bytes:
    """A message built by hand: the prefix, ``header`` as JSON (or ``raw_header``) and ``payload``."""
    data = raw_header if raw_header is not None else json.dumps(header).encode()
    return MAGIC + struct.pack(">I", len(data)) + data + payload


def header(kind="put", fields=None, arrays=()) -> dict:
    return {"kind": kind, "fields": fields if fields is not None else {}, "arrays": list(arrays)}


@given(arrays=st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.sampled_from(sorted(DTYPES)).flatmap(lambda d: hnp.arrays(np.dtype(d), hnp.array_shapes(min_dims=0, max_dims=4,
                                                                                              min_side=0, max_side=5))),
    max_size=4),
    fields=st.dictionaries(st.text(max_size=8), st.none() | st.booleans() | st.integers(-2 ** 53, 2 ** 53)
                           | st.text(max_size=20) | st.floats(allow_nan=False, allow_infinity=False), max_size=4))
def test_messages_round_trip_every_allowed_dtype_and_shape(arrays, fields):
    got = decode(encode("put", fields, arrays), LIMIT)
    assert got.kind == "put" and got.fields == fields and list(got.arrays) == list(arrays)
    for name, arr in arrays.items():
        back = got.arrays[name]
        assert back.dtype == arr.dtype and back.shape == arr.shape and back.flags.writeable
        np.testing.assert_array_equal(back, arr)


def test_big_endian_and_strided_arrays_arrive_as_their_values():
    big = np.arange(6, dtype=">i4").reshape(2, 3)
    got = decode(encode("ok", {}, {"a": big, "t": big.T}), LIMIT).arrays
    np.testing.assert_array_equal(got["a"], big)
    np.testing.assert_array_equal(got["t"], big.T)


@pytest.mark.parametrize("value", [np.array([object()]), np.zeros(2, [("a", "i4")]), np.zeros(2, "V4"),
                                   np.array(["text"]), np.zeros(2, "complex64"), np.zeros(2, "datetime64[s]")])
def test_encode_refuses_arrays_the_wire_does_not_carry(value):
    with pytest.raises(WireError, match="which the wire does not carry"):
        encode("put", {}, {"x": value})


def test_encode_refuses_fields_that_are_not_plain_data():
    with pytest.raises(WireError, match="not plain JSON data"):
        encode("put", {"f": object()})
    with pytest.raises(WireError, match="not plain JSON data"):
        encode("put", {"f": float("nan")})


def test_a_pickle_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    for data in (pickle.dumps(("put", Payload())), MAGIC + pickle.dumps(Payload())):
        with pytest.raises(WireError):
            decode(data, LIMIT)
    assert not marker.exists()


good = encode("put", {"queue": "q"}, {"obs": np.zeros((2, 3), np.float32)})


@pytest.mark.parametrize("data, message", [
    (b"", "not a spacegraph wire message"),
    (b"GIF89a" + bytes(20), "not a spacegraph wire message"),
    (MAGIC + struct.pack(">I", 10 ** 6), "a header of 1,000,000 bytes"),
    (good[:-1], "needs 24 bytes; the message has 23 left"),
    (good + b"x", "1 bytes after the last array"),
    (frame(None, raw_header=b"{not json"), "the header is not JSON"),
    (frame(None, raw_header=b"\xff\xfe"), "the header is not JSON"),
    (frame(None, raw_header=b"[" * 5000 + b"]" * 5000), "the header is not JSON"),
    (frame(None, raw_header=b'{"kind": "put", "fields": {"t": NaN}, "arrays": []}'), "the header is not JSON"),
    (frame(None, raw_header=b'{"kind": "put", "fields": {"t": 1e999}, "arrays": []}'), "the header is not JSON"),
    (frame([1, 2]), "must be an object with keys kind, fields, arrays"),
    (frame({"kind": "put", "fields": {}, "arrays": [], "code": "x"}), "must be an object with keys"),
    (frame({"kind": 3, "fields": {}, "arrays": []}), "kind must be a string"),
    (frame(header(arrays=[["x", "float32", [2]]])), "must be described as [name, dtype, shape, nbytes]"),
    (frame(header(arrays=[["x", "object", [1], 8]]), bytes(8)), "has dtype 'object'"),
    (frame(header(arrays=[["x", "|V8", [1], 8]]), bytes(8)), "has dtype '|V8'"),
    (frame(header(arrays=[["x", ["float32"], [1], 4]]), bytes(4)), "got ['x', ['float32'], [1], 4]"),
    (frame(header(arrays=[["x", "float32", [-1], 4]]), bytes(4)), "has shape [-1]"),
    (frame(header(arrays=[["x", "float32", [True], 4]]), bytes(4)), "has shape [True]"),
    (frame(header(arrays=[["x", "float32", [1] * 33, 4]]), bytes(4)), "at most 32 non-negative ints"),
    (frame(header(arrays=[["x", "float32", [3], 8]]), bytes(8)), "says 8 bytes; its shape and dtype make 12"),
    (frame(header(arrays=[["x", "float32", [2 ** 39, 2 ** 39], 2 ** 80]])), "needs 1208925819614629174706176 bytes"),
    (frame(header(arrays=[["x", "bool", [2], 2]]), b"\x01\x07"), "holds bytes other than 0 and 1"),
    (frame(header(arrays=[["x", "int8", [1], 1], ["x", "int8", [1], 1]]), b"\x01\x02"), "appears twice"),
])
def test_malformed_messages_are_refused_with_what_is_wrong(data, message):
    with pytest.raises(WireError) as info:
        decode(data, LIMIT)
    assert message in str(info.value)


def test_messages_over_the_limit_are_refused_before_parsing():
    data = encode("put", {}, {"x": np.zeros(1000, np.uint8)})
    assert decode(data, len(data)).arrays["x"].shape == (1000,)
    with pytest.raises(WireError, match=f"a message of {len(data):,} bytes; at most {len(data) - 1:,}"):
        decode(data, len(data) - 1)
    with pytest.raises(WireError, match="the header has"):
        encode("put", {"f": "x" * HEADER_LIMIT})


def test_arrays_must_match_the_spec_exactly():
    ok = {"obs": np.zeros((2, 3), np.float32), "done": np.zeros(2, bool)}
    assert set(check_arrays(decode(encode("put", {}, ok), LIMIT), SPEC, "q")) == {"obs", "done"}
    cases = [({**ok, "obs": np.zeros((2, 3), np.float64)}, "'obs' must be float32[2, 3]; got float64[2, 3]"),
             ({**ok, "obs": np.zeros((3, 2), np.float32)}, "'obs' must be float32[2, 3]; got float32[3, 2]"),
             ({"obs": ok["obs"]}, "missing ['done']"),
             ({**ok, "extra": np.zeros(1)}, "unexpected ['extra']")]
    for arrays, message in cases:
        with pytest.raises(WireError) as info:
            check_arrays(decode(encode("put", {}, arrays), LIMIT), SPEC, "to queue 'q'")
        assert message in str(info.value) and "put to queue 'q'" in str(info.value)
    stacked = {"obs": np.zeros((4, 2, 3), np.float32), "done": np.zeros((4, 2), bool)}
    assert check_arrays(decode(encode("ok", {}, stacked), LIMIT), SPEC, "q", leading=(4,))


def test_specs_travel_as_data_and_are_checked():
    assert spec_from_data(spec_to_data(SPEC), "w") == SPEC
    for bad in ([1], {"x": ["object", [1]]}, {"x": ["float32", [-2]]}, {"x": [["float32"], [1]]}, {"x": "float32"}):
        with pytest.raises(WireError, match="w: "):
            spec_from_data(bad, "w")


@pytest.mark.parametrize("kind, fields, message", [
    ("put", {"queue": "q"}, "expected the fields ['queue', 'timeout']"),
    ("put", {"queue": 3, "timeout": None}, "field 'queue' must be a queue name"),
    ("take", {"queue": "q", "count": True, "timeout": None}, "field 'count' must be an int"),
    ("take", {"queue": "q", "count": 1, "timeout": -1}, "field 'timeout' must be null or a number of seconds"),
    ("take", {"queue": "q", "count": 1, "timeout": "1"}, "field 'timeout' must be null or a number of seconds"),
    ("hello", {"protocol": 2, "index": 0, "incarnation": 0, "nonce": "00" * 32}, "the protocol version 1"),
    ("hello", {"protocol": 1, "index": 0, "incarnation": 0, "nonce": "zz" * 32}, "field 'nonce' must be 64 hex"),
    ("publish", {}, "expected a message of kind put or take or size or close or version or read; got 'publish'"),
    ("getattr", {}, "got 'getattr'"),
])
def test_request_fields_are_checked_per_kind(kind, fields, message):
    kinds = ("hello",) if kind == "hello" else ("put", "take", "size", "close", "version", "read")
    with pytest.raises(WireError) as info:
        expect(Message(kind, fields), kinds, REQUESTS)
    assert message in str(info.value)


def test_proofs_are_bound_to_the_side_the_nonces_and_the_actor():
    token, a, b = b"k" * 32, auth.new_nonce(), auth.new_nonce()
    mine = auth.proof(token, "actor", a, b, 0, 0)
    assert auth.proof_matches(mine, auth.proof(token, "actor", a, b, 0, 0))
    for other in (auth.proof(token, "learner", a, b, 0, 0), auth.proof(token, "actor", b, a, 0, 0),
                  auth.proof(token, "actor", a, b, 1, 0), auth.proof(token, "actor", a, b, 0, 1),
                  auth.proof(b"j" * 32, "actor", a, b, 0, 0), None, 7):
        assert not auth.proof_matches(mine, other)
    assert a != b and auth.is_nonce(a) and not auth.is_nonce(a[:-1]) and not auth.is_nonce(a[:-1] + "g")


def test_tokens_from_files_and_the_environment(tmp_path):
    good, short, binary = tmp_path / "good", tmp_path / "short", tmp_path / "binary"
    good.write_text("  s3cret-s3cret-s3cret \n")
    short.write_text("abc\n")
    binary.write_bytes(b"\xff" * 20)
    assert auth.token_from(str(good), {}) == b"s3cret-s3cret-s3cret"
    assert auth.token_from(None, {auth.TOKEN_ENV: "e" * 16}) == b"e" * 16
    assert auth.token_from(None, {}) is None
    for path, message in [(short, "the token must have at least 16 characters; it has 3"),
                          (binary, "the token must be UTF-8 text"),
                          (tmp_path / "missing", "cannot read the token: No such file")]:
        with pytest.raises(ValueError) as info:
            auth.token_from(str(path), {})
        assert f"--token-file {path}: {message}" in str(info.value)
    with pytest.raises(ValueError, match=f"{auth.TOKEN_ENV}: the token must have at least 16"):
        auth.token_from(None, {auth.TOKEN_ENV: "short"})


def test_a_made_token_is_readable_by_its_owner_only_and_read_back(tmp_path):
    path = str(tmp_path / "actor-token")
    token, created = auth.load_or_create_token(path)
    assert created and len(token) == 64 and os.stat(path).st_mode & 0o777 == 0o600
    assert auth.load_or_create_token(path) == (token, False)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "example.org"])
def test_serving_off_loopback_needs_a_token(host):
    with pytest.raises(ValueError, match=f"{host} is not a loopback address.*--token-file"):
        auth.require_token(host, None, "--serve")
    auth.require_token(host, b"t" * 16, "--serve")
    for loopback in ("127.0.0.1", "127.3.2.1", "::1", "localhost"):
        auth.require_token(loopback, None, "--serve")
