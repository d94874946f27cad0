"""The byte format of the central-inference gRPC stream: plain data and raw NumPy buffers, never code.

A message is ``MAGIC``, a 4-byte big-endian header length, a UTF-8 JSON header and the raw bytes of its
arrays, one after the other::

    {"kind": "put", "fields": {"queue": "requests", "timeout": null},
     "arrays": [["obs", "float32", [4, 4], 64], ...]}

``fields`` holds JSON values only (numbers, strings, booleans, null, lists, objects); every array is
described by its name, a dtype from `DTYPES` (plain numbers and booleans: no objects, no structured or
void types), its shape and its size in bytes, which must equal ``prod(shape) * itemsize``; the buffers
are little-endian and fill the rest of the message exactly. Nothing is ever unpickled or imported:
`decode` only parses JSON and copies bytes into arrays, and refuses anything else with a `WireError`
that names the message kind, what was expected and what came. What the fields mean and which arrays a
message kind may carry is checked by the protocol on top (`expect_fields`, `check_arrays`).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from harness.execution.transport import RecordSpec

MAGIC = b"SGW1"
#: The dtypes an array on the wire may have.
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64"})
#: The largest JSON header a message may carry (bytes).
HEADER_LIMIT = 64 * 1024
_PREFIX = struct.Struct(">4sI")
_MAX_NDIM = 32
_NATIVE = {name: np.dtype(name) for name in DTYPES}
_LITTLE = {name: dtype.newbyteorder("<") for name, dtype in _NATIVE.items()}
_NAMES = {dtype: name for name, dtypes in ((n, (_NATIVE[n], _LITTLE[n], _NATIVE[n].newbyteorder(">"))) for n in DTYPES)
          for dtype in dtypes}   # every byte order of every allowed dtype -> its name (dtype.name is slow)


class WireError(ValueError):
    """A message that is not well-formed, or not what the protocol expects at this point."""


@dataclass(frozen=True)
class Message:
    """A decoded message: its kind, its plain-data fields and its arrays by name."""

    kind: str
    fields: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def _shown(value: Any, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters (what a peer sent may be long)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def encode(kind: str, fields: Mapping[str, Any] | None = None,
           arrays: Mapping[str, np.ndarray] | None = None) -> bytes:
    """One message as bytes.

    Raises:
        WireError: an array whose dtype is not in `DTYPES`, or fields that are not plain JSON data.
    """
    described, buffers = [], []
    for name, value in (arrays or {}).items():
        arr = np.asarray(value)
        dtype = _NAMES.get(arr.dtype)
        if dtype is None:
            raise WireError(f"{kind}: array {name!r} has dtype {arr.dtype}, which the wire does not carry "
                            f"(expected one of {sorted(DTYPES)})")
        data = np.ascontiguousarray(arr, dtype=_LITTLE[dtype]).tobytes()
        described.append([str(name), dtype, list(arr.shape), len(data)])
        buffers.append(data)
    try:
        header = json.dumps({"kind": kind, "fields": dict(fields or {}), "arrays": described}, allow_nan=False,
                            separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise WireError(f"{kind}: the fields are not plain JSON data: {exc}") from None
    if len(header) > HEADER_LIMIT:
        raise WireError(f"{kind}: the header has {len(header):,} bytes; at most {HEADER_LIMIT:,} are allowed")
    return b"".join([_PREFIX.pack(MAGIC, len(header)), header, *buffers])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _parse_header(data: bytes, limit: int) -> tuple[dict[str, Any], int]:
    if len(data) > limit:
        raise WireError(f"a message of {len(data):,} bytes; at most {limit:,} are accepted here")
    if len(data) < _PREFIX.size or data[:4] != MAGIC:
        raise WireError(f"not a spacegraph wire message: expected it to start with {MAGIC!r}; got "
                        f"{bytes(data[:8])!r}")
    _, size = _PREFIX.unpack_from(data)
    end = _PREFIX.size + size
    if size > HEADER_LIMIT or end > len(data):
        raise WireError(f"a header of {size:,} bytes in a message of {len(data):,} (at most {HEADER_LIMIT:,})")
    try:
        header = json.loads(bytes(data[_PREFIX.size:end]).decode("utf-8"), parse_constant=_refuse_constant,
                            parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"the header is not JSON: {_shown(str(exc))}") from None
    if not isinstance(header, dict) or set(header) != {"kind", "fields", "arrays"}:
        raise WireError(f"the header must be an object with keys kind, fields, arrays; got {_shown(header)}")
    if not isinstance(header["kind"], str) or not isinstance(header["fields"], dict) \
            or not isinstance(header["arrays"], list):
        raise WireError(f"header: kind must be a string, fields an object, arrays a list; got {_shown(header)}")
    return header, end


def _shape_of(value: Any) -> tuple[int, ...] | None:
    """``value`` as a shape (a short list of non-negative ints), or None if it is not one."""
    if not isinstance(value, list) or len(value) > _MAX_NDIM:
        return None
    if not all(type(d) is int and 0 <= d < 2 ** 40 for d in value):
        return None
    return tuple(value)


def _array(kind: str, item: Any, data: bytes, start: int) -> tuple[str, np.ndarray, int]:
    """One described array of a message: ``(name, array, end of its buffer)``."""
    if not (isinstance(item, list) and len(item) == 4 and isinstance(item[0], str) and isinstance(item[1], str)
            and type(item[3]) is int):
        raise WireError(f"{kind}: an array must be described as [name, dtype, shape, nbytes]; got {_shown(item)}")
    name, dtype, shape, nbytes = item[0], item[1], _shape_of(item[2]), item[3]
    if dtype not in DTYPES:
        raise WireError(f"{kind}: array {name!r} has dtype {_shown(dtype)}; expected one of {sorted(DTYPES)}")
    if shape is None:
        raise WireError(f"{kind}: array {name!r} has shape {_shown(item[2])}; expected a list of at most "
                        f"{_MAX_NDIM} non-negative ints")
    itemsize = _NATIVE[dtype].itemsize
    if nbytes != math.prod(shape) * itemsize:
        raise WireError(f"{kind}: array {name!r} ({dtype}{list(shape)}) says {nbytes} bytes; its shape and "
                        f"dtype make {math.prod(shape) * itemsize}")
    end = start + nbytes
    if end > len(data):
        raise WireError(f"{kind}: array {name!r} needs {nbytes} bytes; the message has {len(data) - start} left")
    arr = np.frombuffer(data, dtype=_LITTLE[dtype], count=math.prod(shape), offset=start)
    if dtype == "bool" and arr.view(np.uint8).max(initial=0) > 1:
        raise WireError(f"{kind}: bool array {name!r} holds bytes other than 0 and 1")
    return name, arr.astype(_NATIVE[dtype]).reshape(shape), end   # a native-order, writable copy


def decode(data: bytes, limit: int) -> Message:
    """The message in ``data`` (at most ``limit`` bytes).

    Raises:
        WireError: naming what is wrong (size, framing, header, an array's description or bytes).
    """
    header, offset = _parse_header(data, limit)
    kind, arrays = header["kind"], {}
    for item in header["arrays"]:
        name, arr, offset = _array(kind, item, data, offset)
        if name in arrays:
            raise WireError(f"{kind}: array {name!r} appears twice")
        arrays[name] = arr
    if offset != len(data):
        raise WireError(f"{kind}: {len(data) - offset} bytes after the last array")
    return Message(kind, header["fields"], arrays)


#: A field check: a description of what is expected and a predicate.
FieldCheck = tuple[str, Callable[[Any], bool]]


def expect_fields(message: Message, checks: Mapping[str, FieldCheck], arrays: bool = False) -> dict[str, Any]:
    """``message.fields``, checked to hold exactly the keys of ``checks``, each passing its predicate.

    Args:
        message: a decoded message.
        checks: ``{key: (what is expected, predicate)}``.
        arrays: whether the message may carry arrays.

    Raises:
        WireError: naming the kind, the key, what was expected and what came.
    """
    kind, fields = message.kind, message.fields
    if set(fields) != set(checks):
        raise WireError(f"{kind}: expected the fields {sorted(checks)}; got {_shown(sorted(fields))}")
    for key, (expected, ok) in checks.items():
        if not ok(fields[key]):
            raise WireError(f"{kind}: field {key!r} must be {expected}; got {_shown(fields[key])}")
    if message.arrays and not arrays:
        raise WireError(f"{kind}: carries no arrays; got {sorted(message.arrays)}")
    return fields


def check_arrays(message: Message, spec: RecordSpec, what: str, leading: tuple[int, ...] = ()) -> dict[str, Any]:
    """``message.arrays``, checked to be exactly ``spec``'s keys, dtypes and shapes (after ``leading`` axes).

    Raises:
        WireError: naming the message kind, ``what`` (e.g. the queue), the key, what was expected and what came.
    """
    got = message.arrays
    missing, extra = sorted(set(spec) - set(got)), sorted(set(got) - set(spec))
    if missing or extra:
        raise WireError(f"{message.kind} {what}: the arrays differ from the spec: missing {missing}, "
                        f"unexpected {_shown(extra)}")
    for name, (dtype, shape) in spec.items():
        arr, want = got[name], (*leading, *shape)
        if arr.dtype != dtype or arr.shape != want:
            raise WireError(f"{message.kind} {what}: {name!r} must be {np.dtype(dtype).name}{list(want)}; got "
                            f"{arr.dtype.name}{list(arr.shape)}")
    return dict(got)


def spec_to_data(spec: RecordSpec) -> dict[str, list]:
    """A `RecordSpec` as plain data for a header: ``{name: [dtype, [shape]]}``."""
    return {name: [np.dtype(dtype).name, [int(d) for d in shape]] for name, (dtype, shape) in spec.items()}


def spec_from_data(data: Any, what: str) -> RecordSpec:
    """The `RecordSpec` that `spec_to_data` made, checked (dtypes from `DTYPES`, shapes of ints).

    Raises:
        WireError: naming ``what`` and the entry at fault.
    """
    if not isinstance(data, dict):
        raise WireError(f"{what}: a record spec must be an object; got {_shown(data)}")
    spec = {}
    for name, entry in data.items():
        ok = (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and entry[0] in DTYPES
              and _shape_of(entry[1]) is not None)
        if not ok:
            raise WireError(f"{what}: spec entry {name!r} must be [dtype, [shape]] with a dtype of "
                            f"{sorted(DTYPES)}; got {_shown(entry)}")
        spec[name] = (entry[0], _shape_of(entry[1]))
    return spec


def spec_nbytes(spec: RecordSpec) -> int:
    """The bytes of one record of ``spec``."""
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for dtype, shape in spec.values())
