"""Primitive spaces: `FloatBox`, `IntBox` and `BoolBox`."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from harness.spaces.base import ROOT, Space, as_rng

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPE_ALIASES = {"float": "float32", "int": "int64", "bool": "bool"}


def _where(path: str) -> str:
    return f"at '{path}'" if path else "at the root"


def _check_shape(cls_name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ValueError(f"{cls_name}: shape must be a tuple of non-negative ints; got {shape!r}")
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ValueError(
                f"{cls_name}: shape must be a tuple of non-negative ints; got {tuple(shape)!r} "
                f"(entry {d!r} is not an int)"
            )
        if d < 0:
            raise ValueError(
                f"{cls_name}: shape must be a tuple of non-negative ints; got {tuple(shape)!r} "
                f"(entry {d} is negative)"
            )
    return tuple(int(d) for d in shape)


def _check_dtype(cls_name: str, dtype: Any, allowed: tuple[str, ...]) -> np.dtype:
    name = dtype if isinstance(dtype, str) else None
    if name is None:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    name = DTYPE_ALIASES.get(name, name)
    if name not in allowed:
        raise ValueError(f"{cls_name}: dtype must be one of {', '.join(allowed)}; got {dtype!r}")
    return np.dtype(name)


class BoxSpace(Space):
    """A primitive space: an n-d array of one dtype with element-wise bounds (inclusive)."""

    __slots__ = ("_shape", "_dtype", "_low", "_high", "_batch", "_time", "_time_major", "_hash", "_bounded")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, low: np.ndarray, high: np.ndarray,
                 batch_rank: bool, time_rank: bool, time_major: bool) -> None:
        self._shape = shape
        self._dtype = dtype
        low.flags.writeable = False
        high.flags.writeable = False
        self._low, self._high = low, high
        self._batch, self._time = bool(batch_rank), bool(time_rank)
        # A lone time rank is trivially "time-major"; without a time rank there is no layout.
        self._time_major = bool(time_major) if (self._batch and self._time) else self._time and not self._batch
        self._hash = None
        self._bounded: bool | None = None  # `bounded`, computed when first asked

    # ---- properties ----------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The core shape, without batch/time ranks."""
        return self._shape

    @property
    def rank(self) -> int:
        """Number of core dimensions."""
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of values."""
        return self._dtype

    @property
    def low(self) -> np.ndarray:
        """Inclusive lower bounds, one per element of the core shape (read-only)."""
        return self._low

    @property
    def high(self) -> np.ndarray:
        """Inclusive upper bounds, one per element of the core shape (read-only)."""
        return self._high

    @property
    def has_batch_rank(self) -> bool:
        return self._batch

    @property
    def has_time_rank(self) -> bool:
        return self._time

    @property
    def time_major(self) -> bool:
        return self._time_major

    @property
    def flat_dim(self) -> int:
        """Number of elements in one value of the core shape."""
        return int(np.prod(self._shape, dtype=np.int64))

    def full_shape(self, batch_size: int | None = None, time_size: int | None = None) -> tuple:
        """The shape of values including extra ranks (unknown sizes as None)."""
        sizes = {"B": batch_size, "T": time_size}
        return tuple(sizes[r] for r in self.extra_ranks) + self._shape

    @property
    def bounded(self) -> bool:
        """Whether any bound differs from the dtype's default range."""
        if self._bounded is None:
            dlow, dhigh = self._default_bounds()
            self._bounded = bool(np.any(self._low != dlow) or np.any(self._high != dhigh))
        return self._bounded

    def _default_bounds(self) -> tuple[Any, Any]:
        raise NotImplementedError

    # ---- copying ---------------------------------------------------------------
    def _copy(self, **changes: Any) -> "BoxSpace":
        new = object.__new__(type(self))
        BoxSpace.__init__(
            new, changes.get("shape", self._shape), self._dtype,
            changes.get("low", self._low), changes.get("high", self._high),
            changes.get("batch_rank", self._batch), changes.get("time_rank", self._time),
            changes.get("time_major", self._time_major),
        )
        return new

    def without_bounds(self) -> "BoxSpace":
        """A copy spanning the dtype's whole range (dtype, shape and ranks kept)."""
        low, high = self._default_bounds()
        return self._copy(low=np.full(self._shape, low, self._dtype), high=np.full(self._shape, high, self._dtype))

    def with_ranks(self, batch: bool, time: bool, time_major: bool = False) -> "BoxSpace":
        return self._copy(batch_rank=batch, time_rank=time, time_major=time_major)

    # ---- structure --------------------------------------------------------------
    def leaves(self, path: str = ROOT) -> Iterator[tuple[str, Space]]:
        yield path, self

    def flatten_value(self, value: Any, path: str = ROOT) -> dict[str, Any]:
        return {path: value}

    def _unflatten(self, flat: dict[str, Any], path: str, as_space: bool) -> Any:
        return flat[path]

    def map(self, fn: Callable[[str, Space], Space], path: str = ROOT) -> Space:
        return fn(path, self)

    # ---- values -------------------------------------------------------------------
    def zeros(self, size: int | tuple[int, ...] | None = None) -> np.ndarray:
        dims = self.extra_dims(size)
        base = np.clip(np.zeros(self._shape, dtype=self._dtype), self._low, self._high)
        return np.broadcast_to(base, dims + self._shape).astype(self._dtype, copy=True)

    def sample(self, size: int | tuple[int, ...] | None = None,
               rng: int | np.random.Generator | None = None) -> np.ndarray:
        dims = self.extra_dims(size)
        # NumPy reductions/comparisons give scalars for shape (); values are always arrays (like zeros()).
        return np.asarray(self._sample(dims + self._shape, as_rng(rng)), dtype=self._dtype)

    def _sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _kind_ok(self, value: np.ndarray) -> bool:
        raise NotImplementedError

    def why_not(self, value: Any, path: str = ROOT) -> str | None:
        where = _where(path)
        if isinstance(value, (dict, tuple)) or value is None:
            return f"{where}: expected an array for {self}, got {type(value).__name__}"
        strict = isinstance(value, (np.ndarray, np.generic))
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as exc:
            return f"{where}: value is not array-like ({exc})"
        if strict and arr.dtype != self._dtype:
            return f"{where}: dtype {arr.dtype}, expected {self._dtype} for {self}"
        if not strict and not self._kind_ok(arr):
            return f"{where}: Python value of dtype {arr.dtype} does not fit {self._dtype} for {self}"
        n_extra = len(self.extra_ranks)
        if arr.ndim != n_extra + self.rank:
            return (f"{where}: {arr.ndim} dimension(s) {arr.shape}, expected {n_extra + self.rank} "
                    f"({self.full_shape()}) for {self}")
        if arr.shape[n_extra:] != self._shape:
            for i, (got, want) in enumerate(zip(arr.shape[n_extra:], self._shape)):
                if got != want:
                    return (f"{where}: dimension {n_extra + i} has size {got}, expected {want} "
                            f"(shape {arr.shape} vs {self.full_shape()}) for {self}")
        if arr.dtype.kind == "f":
            nan = np.isnan(arr)
            if nan.any():
                return f"{where}: NaN at index {tuple(int(i) for i in np.argwhere(nan)[0])} for {self}"
        if arr.dtype == self._dtype and not self.bounded:
            return None  # bounds are the dtype's whole range: every value of that dtype (NaN aside) is inside
        low = np.broadcast_to(self._low, arr.shape)
        high = np.broadcast_to(self._high, arr.shape)
        below = arr < low
        if below.any():
            idx = tuple(int(i) for i in np.argwhere(below)[0])
            return f"{where}: value {arr[idx].item()!r} at index {idx} is below the lower bound {low[idx].item()!r} of {self}"
        above = arr > high
        if above.any():
            idx = tuple(int(i) for i in np.argwhere(above)[0])
            return f"{where}: value {arr[idx].item()!r} at index {idx} is above the upper bound {high[idx].item()!r} of {self}"
        return None

    # ---- equality -------------------------------------------------------------------
    def _key(self) -> tuple:
        return (type(self).__name__, self._shape, self._dtype.name, self._batch, self._time,
                self._time_major, self._low.tobytes(), self._high.tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BoxSpace) and self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def to_text(self, with_ranks: bool = True) -> str:
        dims = list(self.extra_ranks) if with_ranks else []
        dims += [str(d) for d in self.shape]
        text = f"{self.dtype.name}[{','.join(dims)}]"
        if not isinstance(self, BoolBox) and self.bounded:
            text += f"({_fmt_bound(self.low)},{_fmt_bound(self.high)})"
        return text


def _fmt_number(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    return str(int(x))


def _fmt_bound(arr: np.ndarray, top: bool = True) -> str:
    # Only the whole bound may collapse to one number: a collapsed row would not broadcast back.
    if top and arr.size and np.all(arr == arr.flat[0]) and arr.ndim > 0:
        return _fmt_number(arr.flat[0])
    if arr.ndim == 0:
        return _fmt_number(arr[()])
    return "[" + ",".join(_fmt_bound(a, top=False) for a in arr) + "]"


def _bounds_array(cls_name: str, name: str, value: Any, shape: tuple[int, ...] | None,
                  dtype: np.dtype) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise ValueError(f"{cls_name}: {name} must be a number or an array of numbers; got {value!r}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{cls_name}: {name} must be a number or an array of numbers; got {value!r}")
    if arr.dtype.kind == "f" and dtype.kind in "iu" and not isinstance(value, (np.ndarray, np.generic)):
        # NumPy turns a list holding ints beyond int64 into float64, losing digits: keep Python ints.
        exact = np.array(value, dtype=object)
        if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in exact.flat):
            arr = exact
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{cls_name}: {name} must not contain NaN; got {value!r}")
    if shape is not None:
        try:
            arr = np.broadcast_to(arr, shape)
        except ValueError:
            raise ValueError(
                f"{cls_name}: {name} of shape {arr.shape} does not broadcast to shape {shape}; got {value!r}"
            ) from None
    return arr


def _infer_shape(cls_name: str, shape: Any, low: Any, high: Any) -> tuple[int, ...]:
    if shape is not None:
        return _check_shape(cls_name, shape)
    shapes = [np.shape(b) for b in (low, high) if b is not None]
    try:
        return tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    except ValueError:
        raise ValueError(f"{cls_name}: low of shape {shapes[0]} and high of shape {shapes[1]} do not broadcast") from None


def _finalise_bounds(cls_name: str, low: np.ndarray, high: np.ndarray, dtype: np.dtype,
                     dmin: Any, dmax: Any) -> tuple[np.ndarray, np.ndarray]:
    for name, arr in (("low", low), ("high", high)):
        if arr.size and (np.any(arr < dmin) or np.any(arr > dmax)):
            raise ValueError(f"{cls_name}: {name} must lie within the range of {dtype} [{dmin}, {dmax}]; got {arr.tolist()!r}")
    bad = low > high
    if np.any(bad):
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{cls_name}: low must be <= high everywhere; got low={low.tolist()!r}, high={high.tolist()!r} "
            f"(low {low[idx].item()!r} > high {high[idx].item()!r} at index {idx})"
        )
    with np.errstate(over="ignore"):  # float overflow is reported by FloatBox itself
        low = np.array(low, dtype=dtype)
        high = np.array(high, dtype=dtype)
    if dtype.kind == "f":  # -0.0 and 0.0 compare equal: store one so hashes agree with equality
        low += 0
        high += 0
    return low, high


class FloatBox(BoxSpace):
    """Floating-point arrays with inclusive element-wise bounds (default unbounded).

    Args:
        shape: core shape; inferred from array bounds when None.
        low, high: inclusive bounds, scalars or arrays broadcastable to ``shape``.
        dtype: float16, float32 (default) or float64.
        batch_rank, time_rank, time_major: extra leading ranks (see `Space`).
    """

    __slots__ = ()

    def __init__(self, shape: int | tuple[int, ...] | None = None, low: Any = -np.inf,
                 high: Any = np.inf, dtype: Any = "float32", *, batch_rank: bool = False,
                 time_rank: bool = False, time_major: bool = False) -> None:
        dt = _check_dtype("FloatBox", dtype, FLOAT_DTYPES)
        shp = _infer_shape("FloatBox", shape, low, high)
        lo = _bounds_array("FloatBox", "low", low, shp, dt)
        hi = _bounds_array("FloatBox", "high", high, shp, dt)
        info = np.finfo(dt)
        # Bounds beyond the dtype's finite range are only allowed as infinities.
        lo_c = np.where(np.isinf(lo), lo, lo.astype(np.float64))
        hi_c = np.where(np.isinf(hi), hi, hi.astype(np.float64))
        lo, hi = _finalise_bounds("FloatBox", lo_c, hi_c, dt, -np.inf, np.inf)
        for name, orig, cast in (("low", lo_c, lo), ("high", hi_c, hi)):
            overflow = np.isinf(cast) & ~np.isinf(orig)
            if overflow.any():
                raise ValueError(f"FloatBox: {name} must be finite in {dt} (max {info.max}) or inf; got {orig.tolist()!r}")
        super().__init__(shp, dt, lo, hi, batch_rank, time_rank, time_major)

    def _default_bounds(self) -> tuple[Any, Any]:
        return -np.inf, np.inf

    def _kind_ok(self, value: np.ndarray) -> bool:
        return value.dtype.kind in "iuf"

    def _sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        low = np.broadcast_to(self._low.astype(np.float64), shape)
        high = np.broadcast_to(self._high.astype(np.float64), shape)
        lo_inf, hi_inf = np.isinf(low), np.isinf(high)
        u = rng.random(shape)
        # low*(1-u) + high*u cannot overflow where low + (high-low)*u can.
        out = np.where(lo_inf | hi_inf, 0.0, np.nan_to_num(low) * (1.0 - u) + np.nan_to_num(high) * u)
        normal = rng.standard_normal(shape)
        expo = rng.exponential(size=shape)
        out = np.where(lo_inf & hi_inf, normal, out)
        out = np.where(~lo_inf & hi_inf, np.nan_to_num(low) + expo, out)
        out = np.where(lo_inf & ~hi_inf, np.nan_to_num(high) - expo, out)
        info = np.finfo(self._dtype)
        out = np.clip(out, np.maximum(low, -info.max), np.minimum(high, info.max))
        return np.clip(out.astype(self._dtype), self._low, self._high)


class IntBox(BoxSpace):
    """Integer arrays with inclusive element-wise bounds.

    ``IntBox(n)`` holds ``0..n-1`` (a discrete choice); ``IntBox(low=a, high=b)``
    holds ``a..b`` inclusive; with neither the box spans the dtype's range.

    Args:
        n: number of categories (values ``0..n-1``); excludes ``low``/``high``.
        low, high: inclusive bounds, scalars or arrays broadcastable to ``shape``.
        shape: core shape; inferred from array bounds when None.
        dtype: a signed or unsigned integer dtype (default int64).
        batch_rank, time_rank, time_major: extra leading ranks (see `Space`).
    """

    __slots__ = ()

    def __init__(self, n: int | None = None, *, low: Any = None, high: Any = None,
                 shape: int | tuple[int, ...] | None = None, dtype: Any = "int64",
                 batch_rank: bool = False, time_rank: bool = False, time_major: bool = False) -> None:
        dt = _check_dtype("IntBox", dtype, INT_DTYPES)
        info = np.iinfo(dt)
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise ValueError(f"IntBox: n must be a positive int; got {n!r}")
            if n <= 0:
                raise ValueError(f"IntBox: n must be a positive int; got {n!r}")
            if low is not None or high is not None:
                raise ValueError(f"IntBox: give either n or low/high, not both; got n={n!r}, low={low!r}, high={high!r}")
            if n - 1 > info.max:
                raise ValueError(f"IntBox: n={n} does not fit dtype {dt}")
            low, high = 0, int(n) - 1
        shp = _infer_shape("IntBox", shape, low, high)
        lo = _bounds_array("IntBox", "low", info.min if low is None else low, shp, dt)
        hi = _bounds_array("IntBox", "high", info.max if high is None else high, shp, dt)
        for name, arr in (("low", lo), ("high", hi)):
            if arr.dtype.kind == "f" and np.any(arr != np.floor(arr)):
                raise ValueError(f"IntBox: {name} must be integers; got {arr.tolist()!r}")
        lo = lo.astype(object) if lo.dtype.kind == "f" else lo
        hi = hi.astype(object) if hi.dtype.kind == "f" else hi
        lo, hi = _finalise_bounds("IntBox", lo, hi, dt, int(info.min), int(info.max))
        super().__init__(shp, dt, lo, hi, batch_rank, time_rank, time_major)

    def _default_bounds(self) -> tuple[Any, Any]:
        info = np.iinfo(self._dtype)
        return info.min, info.max

    @property
    def num_categories(self) -> int | None:
        """``high + 1`` when every element is bounded by ``0..high`` with one global high, else None."""
        if self._low.size == 0 or np.any(self._low != 0) or np.any(self._high != self._high.flat[0]):
            return None
        return int(self._high.flat[0]) + 1

    def _kind_ok(self, value: np.ndarray) -> bool:
        return value.dtype.kind in "iu"

    def _sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        low = np.broadcast_to(self._low, shape)
        high = np.broadcast_to(self._high, shape)
        return rng.integers(low, high, endpoint=True, dtype=self._dtype, size=shape)


class BoolBox(BoxSpace):
    """Boolean arrays of a given shape."""

    __slots__ = ()

    def __init__(self, shape: int | tuple[int, ...] = (), *, batch_rank: bool = False,
                 time_rank: bool = False, time_major: bool = False) -> None:
        shp = _check_shape("BoolBox", shape)
        lo = np.zeros(shp, dtype=bool)
        hi = np.ones(shp, dtype=bool)
        super().__init__(shp, np.dtype(bool), lo, hi, batch_rank, time_rank, time_major)

    def _default_bounds(self) -> tuple[Any, Any]:
        return False, True

    def _kind_ok(self, value: np.ndarray) -> bool:
        return value.dtype.kind == "b"

    def _sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.random(shape) < 0.5
