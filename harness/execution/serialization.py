"""Model export/import: weights plus metadata in one ``.npz``, written atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

import harness

if TYPE_CHECKING:
    from harness.execution.executor import GraphExecutor

FORMAT = "spacegraph-model"
META_KEY = "__spacegraph_meta__"


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
    meta = {
        "format": FORMAT, "format_version": 1, "spacegraph": harness.__version__,
        "backend": executor.backend_name, "root_class": f"{type(executor.root).__module__}.{type(executor.root).__qualname__}",
        "root_scope": executor.root.global_scope,
        "input_spaces": {a: repr(s) for api in executor.apis.values() for a, s in api.arg_spaces.items()},
        "variables": {k: [list(v.shape), v.dtype.name] for k, v in weights.items()},
    }
    with atomic_file(path, suffix=".npz") as fh:
        np.savez(fh, **{META_KEY: np.array(json.dumps(meta))}, **{f"w:{k}": v for k, v in weights.items()})
    return path


def _read_model_file(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and weights of a model file; ValueError naming ``path`` for anything else."""
    unreadable = (OSError, EOFError, ValueError, zipfile.BadZipFile)
    try:
        data = np.load(path, allow_pickle=False)
    except unreadable as exc:
        raise ValueError(f"import_model: cannot read {path} as a spacegraph model: {exc}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"import_model: {path} is not a spacegraph model (a single .npy array, not an .npz archive)")
    with data:
        if META_KEY not in data.files:
            raise ValueError(f"import_model: {path} is not a spacegraph model (no {META_KEY} entry)")
        try:
            meta = json.loads(str(data[META_KEY]))
            weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        except unreadable as exc:
            raise ValueError(f"import_model: cannot read {path}: {exc}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"import_model: {path} has malformed metadata {meta!r}")
    return meta, weights


def import_model(executor: "GraphExecutor", path: str) -> None:
    """Loads a file written by `export_model` into ``executor`` (either backend).

    Raises:
        ValueError: naming the file and what does not fit (format, root class,
            variable keys or shapes); the executor's weights are unchanged then.
    """
    path = os.fspath(path)
    meta, weights = _read_model_file(path)
    if meta.get("format") != FORMAT:
        raise ValueError(f"import_model: {path} has format {meta.get('format')!r}, expected {FORMAT!r}")
    root_class = f"{type(executor.root).__module__}.{type(executor.root).__qualname__}"
    if meta.get("root_class") != root_class:
        raise ValueError(f"import_model: {path} holds a model of {meta.get('root_class')}, this executor's root is {root_class}")
    try:
        executor.set_weights(weights)
    except ValueError as exc:
        raise ValueError(f"import_model: {path}: {exc}") from None
