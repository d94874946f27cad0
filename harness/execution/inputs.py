"""How `GraphExecutor` turns the values an API method is called with into backend feeds.

Off validate mode, each leaf is cast (same dtype kind, or int/bool to float) and shape-checked; in validate
mode (`default_validate`, ``$SPACEGRAPH_VALIDATE``) it is checked against its space first: dtype kind, shape,
NaN and bounds, with an `InputValidationError` naming the method, argument, key path, value and space.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from harness.graph.errors import ExecutionError, InputValidationError
from harness.spaces import Dict, Space


#: The environment variable naming the process default of `GraphExecutor`'s ``validate`` (read when an
#: executor is made with ``validate=None``): "1"/"true"/"yes"/"on" turn validation on. suites/conftest.py and
#: the `spacegraph` command set it; benchmarks (asv_bench, `spacegraph report`) leave it unset.
VALIDATE_ENV = "SPACEGRAPH_VALIDATE"


def default_validate() -> bool:
    """The process default of ``validate``: whether ``$SPACEGRAPH_VALIDATE`` is set to a true value."""
    return os.environ.get(VALIDATE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _fmt_value(value: Any) -> str:
    return repr(value.item() if isinstance(value, np.generic) else value)


def _leaf_checker(space: Any) -> Callable[[Any], tuple[np.ndarray, str | None]]:
    """Validate mode: ``value -> (array to feed, None)`` or ``(_, why the value is not in space)``.

    NumPy values must have the space's dtype kind: an integer or boolean array for a float space, a float
    or boolean one for an integer space and a non-boolean one for a BoolBox are errors (no silent casts).
    Within a kind, widths are converted after the value check: int32 into an int64 space, int64 into an
    int32 space whose bounds it fits, and float64 into a float32 space (a documented cast: NumPy and the
    environments produce float64 by default; the values are range- and NaN-checked first). Python scalars
    and lists are judged by kind as `Space.why_not` does (a Python int fits a float space).
    Then shape, NaN (float spaces) and the bounds (FloatBox low/high, IntBox range, i.e. discrete actions).
    """
    dtype, core, n_extra, kind = space.dtype, space.shape, len(space.extra_ranks), space.dtype.kind
    low, high = space.low, space.high
    check_low = bool(np.any(low != space._default_bounds()[0]))
    check_high = bool(np.any(high != space._default_bounds()[1]))
    ok_kinds = {"f": "f", "i": "iu", "u": "iu", "b": "b"}[kind]
    py_kinds = {"f": "iuf", "i": "iu", "u": "iu", "b": "b"}[kind]

    def check(value: Any) -> tuple[Any, str | None]:
        if isinstance(value, dict) or value is None:
            return None, f"expected an array for space {space!r}, got {type(value).__name__}"
        strict = isinstance(value, (np.ndarray, np.generic))
        try:
            arr = value if type(value) is np.ndarray else np.asarray(value)
        except (ValueError, TypeError) as exc:
            return None, f"value is not array-like for space {space!r} ({exc})"
        if arr.dtype != dtype and arr.dtype.kind not in (ok_kinds if strict else py_kinds):
            return None, (f"dtype {arr.dtype} cannot be cast to {dtype} of space {space!r} (validate mode: "
                          f"{'NumPy' if strict else 'Python'} {arr.dtype} values are not cast to {dtype})")
        if arr.ndim != n_extra + len(core) or arr.shape[n_extra:] != core:
            return None, f"shape {arr.shape} does not fit space {space!r} (expected {space.full_shape()})"
        if arr.dtype.kind == "f":
            nan = np.isnan(arr)
            if nan.any():
                return None, f"NaN at index {tuple(int(i) for i in np.argwhere(nan)[0])} is outside space {space!r}"
        if arr.dtype != dtype or check_low or check_high:
            below = arr < np.broadcast_to(low, arr.shape) if (check_low or arr.dtype != dtype) else None
            if below is not None and below.any():
                idx = tuple(int(i) for i in np.argwhere(below)[0])
                return None, (f"value {_fmt_value(arr[idx])} at index {idx} is below the lower bound "
                              f"{_fmt_value(np.broadcast_to(low, arr.shape)[idx])} of space {space!r}")
            above = arr > np.broadcast_to(high, arr.shape) if (check_high or arr.dtype != dtype) else None
            if above is not None and above.any():
                idx = tuple(int(i) for i in np.argwhere(above)[0])
                return None, (f"value {_fmt_value(arr[idx])} at index {idx} is above the upper bound "
                              f"{_fmt_value(np.broadcast_to(high, arr.shape)[idx])} of space {space!r}")
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
        return arr, None

    return check


def _leaf_converter(where: str, method: str, arg: str, path: str, space: Any, feed: Callable,
                    validate: bool = False) -> Callable[[Any], Any]:
    dtype, core, n_extra = space.dtype, space.shape, len(space.extra_ranks)
    at = f"{where}: {method}({arg}{'/' + path if path else ''})"

    if validate:
        check = _leaf_checker(space)

        def validated(value: Any) -> Any:
            arr, why = check(value)
            if why is not None:
                raise InputValidationError(f"{at}: {why}", method=method, argument=arg,
                                           path=path, space=space)
            return feed(arr)

        return validated

    def convert(value: Any) -> np.ndarray:
        arr = value if type(value) is np.ndarray else np.asarray(value)
        if arr.dtype != dtype:
            if not np.can_cast(arr.dtype, dtype, "same_kind"):
                raise ExecutionError(f"{at}: dtype {arr.dtype} cannot be cast to {dtype} of space {space!r}")
            arr = arr.astype(dtype)
        if arr.ndim != n_extra + len(core) or arr.shape[n_extra:] != core:
            raise ExecutionError(f"{at}: shape {arr.shape} does not fit space {space!r} "
                                 f"(expected {space.full_shape()})")
        return feed(arr)

    return convert


def arg_converter(where: str, method: str, arg: str, space: Space, feed: Callable,
                  validate: bool = False) -> Callable[[Any], Any]:
    """The converter of argument ``arg`` of API method ``method`` (``where`` names the root component):
    value in, feed (or a dict/tuple structure of feeds) out; raises naming the argument and key path."""
    leaves = list(space.leaves())
    if len(leaves) == 1 and leaves[0][0] == "":
        return _leaf_converter(where, method, arg, "", space, feed, validate)
    convs = {p: _leaf_converter(where, method, arg, p, s, feed, validate) for p, s in leaves}
    error = InputValidationError if validate else ExecutionError
    # A dict of leaves (replay records, the common case): its leaf paths are its keys, so a plain dict with
    # exactly those keys is converted key by key, without flattening and unflattening it; any other value
    # takes the general path below (and its errors).
    flat_keys = ([p for p, _ in leaves] == list(space)) if isinstance(space, Dict) else False
    key_set = frozenset(convs)

    def convert(value: Any) -> Any:
        if flat_keys and type(value) is dict and value.keys() == key_set:
            return {p: c(value[p]) for p, c in convs.items()}
        try:
            flat = space.flatten_value(value)
        except ValueError as exc:
            raise error(f"{where}: {method}({arg}): {exc}",
                        **({"method": method, "argument": arg, "path": "", "space": space} if validate else {})
                        ) from None
        return space.unflatten({p: convs[p](v) for p, v in flat.items()})

    return convert
