"""Files: model export/import (weights plus metadata in one ``.npz``), atomic writes, the readers that turn a
damaged or foreign file into one `BadFileError`, and `check_out_dir` for a folder a command will write into."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tempfile
import zipfile
import zlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from harness.execution.bad_file import BadFileError, FormatVersionError
from harness.execution.formats import declare_format, stamp, upgrade

if TYPE_CHECKING:
    from harness.execution.executor import GraphExecutor

FORMAT = "spacegraph-model"
META_KEY = "__spacegraph_meta__"
# Format 1: what `export_model` wrote before formats carried versions (it recorded format_version 1 already).
declare_format(FORMAT, 1, "a spacegraph model file")

__all__ = ["BadFileError", "FORMAT", "FormatVersionError", "META_KEY", "READ_ERRORS", "atomic_file", "check_out_dir",
           "describe_read_error", "export_model", "fields", "import_model", "npz_members", "read_json", "read_npz",
           "verify_npz", "write_stamped_npz"]


#: Everything reading a damaged file can raise: zipfile (a truncated or flipped archive, an unknown compression
#: method), zlib, NumPy's ``.npy`` parser (ValueError, also for the pickles ``allow_pickle=False`` refuses), json,
#: text decoding (UnicodeDecodeError is a ValueError) and an absurd array size in a damaged header.
READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, OSError, ValueError, KeyError,
               IndexError, TypeError, NotImplementedError, struct.error, OverflowError, MemoryError)


def describe_read_error(exc: BaseException) -> str:
    """What a `READ_ERRORS` exception says about the file it came from, in words (the exception appended)."""
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, FileNotFoundError):
        return "is missing"
    if isinstance(exc, IsADirectoryError):
        return "is a folder, not a file"
    if isinstance(exc, PermissionError):
        return f"cannot be read ({detail})"
    if isinstance(exc, (zipfile.BadZipFile, EOFError, struct.error)):
        return f"is damaged: truncated, corrupted or not an .npz archive ({detail})"
    if isinstance(exc, zlib.error):
        return f"is damaged: its compressed data does not decompress ({detail})"
    if isinstance(exc, UnicodeDecodeError):
        return f"is not UTF-8 text ({detail})"
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON ({exc})"
    if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
        return "holds pickled Python objects, which are never loaded (allow_pickle=False)"
    return f"is damaged or not the file expected ({detail})"


def _check_formats(path: str, found: Any, formats: str | Iterable[str] | None, kind: str) -> None:
    if formats is None:
        return
    allowed = (formats,) if isinstance(formats, str) else tuple(formats)
    if found not in allowed:
        raise BadFileError(path, f"is not {kind}: its format is {found!r}, expected "
                                 f"{' or '.join(repr(f) for f in allowed)}")


def _check_zip_start(path: str, kind: str) -> None:
    """Refuses a file that does not start like a zip archive (NumPy would try a pickle or an ``.npy`` next)."""
    with open(path, "rb") as fh:
        start = fh.read(6)
    if not start:
        raise BadFileError(path, "is empty (0 bytes)")
    if start.startswith(b"\x93NUMPY"):
        raise BadFileError(path, f"is not {kind}: it is a single .npy array, not an .npz archive")
    if not start.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise BadFileError(path, f"is damaged: truncated, corrupted or not an .npz archive (it starts with "
                                 f"{start!r}, not a zip archive's signature)")


def read_npz(path: str | os.PathLike, kind: str = "the archive expected", *, meta_key: str | None = None,
             formats: str | Iterable[str] | None = None, required: Iterable[str] = (), versions: bool = True,
             assume_format: str | None = None) -> tuple[dict[str, Any] | None, dict[str, np.ndarray]]:
    """Every array of an ``.npz`` archive, read in full now (NumPy reads members lazily, and a damaged member
    would fail later, anywhere), and its JSON metadata.

    Args:
        path: the archive.
        kind: what it should be, for messages (``"a spacegraph model"``).
        meta_key: the member holding the metadata as a JSON string (a 0-d text array); None: no metadata.
        formats: the metadata's ``format`` must be this (or one of these).
        required: members that must be present (besides ``meta_key``).
        versions: check the metadata's format version (`harness.execution.formats.upgrade`: an older declared
            format is migrated or refused, a newer one refused); False: the metadata as saved.
        assume_format: an archive without the ``meta_key`` member (written before it had one) is taken as this
            format, at version 1: its metadata is ``{"format": assume_format}``.

    Returns:
        ``(metadata or None, {member: array})``, the metadata member left out of the arrays.

    Raises:
        BadFileError: naming the file and what is wrong (missing, empty, truncated or corrupted, a single
            ``.npy``, pickled objects, a missing member, metadata that is not a JSON object, another format, a
            format version this code does not read).
    """
    path = os.fspath(path)
    try:
        _check_zip_start(path, kind)
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except BadFileError:
        raise
    except READ_ERRORS as exc:
        raise BadFileError(path, describe_read_error(exc)) from None
    if meta_key is not None and meta_key not in arrays and assume_format is not None:
        arrays[meta_key] = np.array(json.dumps({"format": assume_format}))
    missing = [k for k in (*([meta_key] if meta_key else []), *required) if k not in arrays]
    if missing:
        held = sorted(arrays)
        raise BadFileError(path, f"is not {kind}: it lacks the member(s) {missing} (it holds "
                                 f"{held[:6]}{' and more' if len(held) > 6 else ''})")
    meta = None
    if meta_key is not None:
        raw = arrays.pop(meta_key)
        if raw.ndim != 0 or raw.dtype.kind != "U":
            raise BadFileError(path, f"is not {kind}: its metadata {meta_key!r} is a {raw.dtype} array of shape "
                                     f"{raw.shape}, not a JSON text")
        try:
            meta = json.loads(str(raw))
        except ValueError as exc:
            raise BadFileError(path, f"is not {kind}: its metadata {meta_key!r} is not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise BadFileError(path, f"is not {kind}: its metadata {meta_key!r} is a JSON {type(meta).__name__}, "
                                     f"not an object")
        _check_formats(path, meta.get("format"), formats, kind)
        if versions:
            meta, arrays = upgrade(path, meta, arrays)
    return meta, arrays


def read_json(path: str | os.PathLike, kind: str = "the JSON file expected",
              formats: str | Iterable[str] | None = None, versions: bool = True,
              assume_format: str | None = None) -> dict[str, Any]:
    """The JSON object in a file; with ``formats``, its ``format`` key must be this (or one of these). With
    ``versions``, a declared format's version is checked as `read_npz` does. With ``assume_format``, an object
    without a ``format`` key (written before it had one) is taken as that format, at version 1.

    Raises:
        BadFileError: naming the file and what is wrong (missing, empty, not UTF-8, not JSON, not an object,
            another format, a format version this code does not read).
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if not raw:
            raise BadFileError(path, "is empty (0 bytes)")
        data = json.loads(raw.decode("utf-8"))
    except BadFileError:
        raise
    except READ_ERRORS as exc:
        raise BadFileError(path, describe_read_error(exc)) from None
    if not isinstance(data, dict):
        raise BadFileError(path, f"is not {kind}: it holds a JSON {type(data).__name__}, not an object")
    if assume_format is not None and "format" not in data:
        data = {"format": assume_format, **data}
    _check_formats(path, data.get("format"), formats, kind)
    return upgrade(path, data, {})[0] if versions else data


def fields(path: str | os.PathLike, mapping: dict[str, Any], **types: type | tuple[type, ...]) -> list[Any]:
    """The values of ``mapping`` (a file's metadata) under the keys given, each checked against its type.

    ``int`` accepts no bool; ``float`` accepts an int too.

    Raises:
        BadFileError: naming the file and the key that is missing or of another type.
    """
    values = []
    for key, kind in types.items():
        if key not in mapping:
            raise BadFileError(path, f"has no {key!r} in its metadata")
        value = mapping[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        kinds = kinds + ((int,) if float in kinds else ())
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise BadFileError(path, f"has {key!r} = {str(value)[:80]!r} in its metadata, expected {names}")
        values.append(value)
    return values


def verify_npz(path: str | os.PathLike) -> list[str]:
    """Checks an ``.npz`` archive whole without loading its arrays (for large files read elsewhere): every
    member's checksum, and that each is an ``.npy`` array without pickled objects whose data fills it.

    Returns:
        The member names (without ``.npy``).

    Raises:
        BadFileError: naming the file and what is wrong.
    """
    return [name for name, _, _, _ in npz_members(path, checksums=True)]


def npz_members(path: str | os.PathLike, checksums: bool = False) -> list[tuple[str, tuple[int, ...], np.dtype, int]]:
    """The members of an ``.npz`` archive from their headers, without reading their data: ``(name, shape, dtype,
    bytes)`` each (name without ``.npy``; bytes: the array's data). Each is checked to be an ``.npy`` array without
    pickled objects whose size fits its header; with ``checksums``, every member's checksum too (reads it all).

    Raises:
        BadFileError: naming the file and what is wrong.
    """
    path = os.fspath(path)
    try:
        _check_zip_start(path, "an .npz archive")
        members = []
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip() if checksums else None
            if bad is not None:
                raise BadFileError(path, f"is damaged: member {bad!r} fails its checksum")
            for info in archive.infolist():
                with archive.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                        np.lib.format.read_array_header_2_0
                    shape, _, dtype = reader(fh)
                    header = fh.tell()
                if dtype.hasobject:
                    raise BadFileError(path, f"has a member {info.filename!r} holding pickled Python objects, "
                                             f"which are never loaded (allow_pickle=False)")
                data = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if header + data != info.file_size:
                    raise BadFileError(path, f"is damaged: member {info.filename!r} is {info.file_size} bytes, "
                                             f"its header says {shape} {dtype}")
                members.append((info.filename.removesuffix(".npy"), tuple(shape), dtype, data))
    except BadFileError:
        raise
    except READ_ERRORS as exc:
        raise BadFileError(path, describe_read_error(exc)) from None
    return members


def check_out_dir(path: str | os.PathLike, flag: str = "--out") -> str:
    """Checks, before any work, that ``path`` can be a folder to write into: an existing folder or one that
    can be made (no file in the way), where a file can be created. Nothing is left behind: a folder that does
    not exist yet is not made.

    Args:
        path: the folder.
        flag: the flag (or argument) that named it, for the message.

    Returns:
        ``path`` (as a string).

    Raises:
        ValueError: naming the flag, the path and what is wrong.
    """
    path = os.fspath(path)
    where = os.path.abspath(path)
    if os.path.exists(where) and not os.path.isdir(where):
        raise ValueError(f"{flag} {path}: is a file, not a folder; give a folder (it is created if needed)")
    probe_in = where
    while not os.path.exists(probe_in):
        parent = os.path.dirname(probe_in)
        if parent == probe_in:
            break
        probe_in = parent
    if not os.path.isdir(probe_in):
        raise ValueError(f"{flag} {path}: cannot be made: {probe_in} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".spacegraph-write-check-", dir=probe_in)
    except OSError as exc:
        verb = "is not writable" if probe_in == where else f"cannot be made in {probe_in}"
        raise ValueError(f"{flag} {path}: {verb} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    return path


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "wb", suffix: str = "", permissions: int | None = None) -> Iterator[Any]:
    """A file object to write ``path`` through: a temporary file beside it, renamed into place on success.

    An error (or an interrupt) while writing removes the temporary file and leaves an earlier
    ``path`` untouched, so nothing a user saved is lost to a failed write.

    Args:
        path: the file to (re)place; its folder is created if needed.
        mode: ``"wb"`` or ``"w"`` (text mode writes with ``newline=""``).
        suffix: the temporary file's suffix (some writers look at it).
        permissions: file mode bits for the result (default: ``mkstemp``'s 0o600).
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    try:
        with os.fdopen(fd, mode, **({"newline": ""} if "b" not in mode else {})) as fh:
            yield fh
        if permissions is not None:
            os.chmod(tmp, permissions)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def export_model(executor: "GraphExecutor", path: str) -> str:
    """Writes the executor's weights and metadata to ``path``; returns the path written.

    The file is written to a temporary name beside ``path`` and renamed into place,
    so an error never leaves a half-written file or destroys an earlier one.
    """
    path = os.fspath(path)
    if not path.endswith(".npz"):
        path += ".npz"
    weights = executor.get_weights()
    meta = stamp(FORMAT, {
        "backend": executor.backend_name, "root_class": f"{type(executor.root).__module__}.{type(executor.root).__qualname__}",
        "root_scope": executor.root.global_scope,
        "input_spaces": {a: repr(s) for api in executor.apis.values() for a, s in api.arg_spaces.items()},
        "variables": {k: [list(v.shape), v.dtype.name] for k, v in weights.items()},
    })
    return write_stamped_npz(path, meta, {f"w:{k}": v for k, v in weights.items()}, META_KEY)


def write_stamped_npz(path: str, meta: dict[str, Any], arrays: dict[str, np.ndarray], meta_key: str) -> str:
    """Writes ``arrays`` and the JSON ``meta`` (already `stamp`-ed) as the member ``meta_key`` of an ``.npz`` at
    ``path``, atomically (`atomic_file`: an error never leaves half a file). Returns the path."""
    with atomic_file(path, suffix=".npz") as fh:
        np.savez(fh, **{meta_key: np.array(json.dumps(meta))}, **arrays)
    return path


def _read_model_file(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and weights of a model file; `BadFileError` naming ``path`` for anything else."""
    meta, arrays = read_npz(path, "a spacegraph model", meta_key=META_KEY, formats=FORMAT)
    return meta, {k[2:]: v for k, v in arrays.items() if k.startswith("w:")}


def import_model(executor: "GraphExecutor", path: str) -> None:
    """Loads a file written by `export_model` into ``executor`` (either backend).

    Raises:
        BadFileError: (a ValueError) naming the file and what does not fit (damage, format, root class,
            variable keys, shapes or dtypes); the executor's weights are unchanged then.
    """
    path = os.fspath(path)
    try:
        meta, weights = _read_model_file(path)
    except BadFileError as exc:
        raise exc.within("import_model") from None
    root_class = f"{type(executor.root).__module__}.{type(executor.root).__qualname__}"
    if meta.get("root_class") != root_class:
        raise BadFileError(path, f"holds a model of {meta.get('root_class')}, this executor's root is {root_class}",
                           "import_model")
    try:
        executor.set_weights(weights)
    except ValueError as exc:
        raise BadFileError(path, f"does not fit this executor: {exc}", "import_model") from None
