"""Hypothesis strategies for spaces (`spaces`) and for the values a space contains (`from_space`)."""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays, from_dtype

from harness.spaces.base import Space
from harness.spaces.boxes import FLOAT_DTYPES, INT_DTYPES, BoolBox, FloatBox, IntBox
from harness.spaces.containers import Dict, Tuple

__all__ = ["ALL_DTYPES", "DICT_KEYS", "from_space", "spaces"]

#: Every leaf dtype name, in shrinking order (hypothesis shrinks towards the first).
ALL_DTYPES: tuple[str, ...] = (
    "float32", "int64", "bool", "float64", "float16",
    "int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64",
)
assert set(ALL_DTYPES) == set(FLOAT_DTYPES + INT_DTYPES + ("bool",))

#: Dict keys: identifiers, and keys that only the quoted text form can carry.
DICT_KEYS: st.SearchStrategy[str] = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True),
    st.sampled_from(["a b", "x-1", "0", "B", "T", "inf", "info", "é", "a.b", 'say "hi"',
                     "back\\slash", "new\nline", "trail\n", " ", "{}", "(,)", "[B]"]),
    st.text(min_size=1, max_size=6).filter(lambda key: "/" not in key),
)

# (batch, time, time_major); the first shrinks best.
_RANKS = ((False, False, False), (True, False, False), (False, True, False),
          (True, True, False), (True, True, True))
_DRAWN_SIZES = st.integers(1, 4)


# Building and validating a strategy costs more than drawing from it; examples repeat the
# same leaves, shapes and dtypes, so the factories below are memoised on their (hashable) args.
_memo = functools.lru_cache(maxsize=4096)
_arrays = _memo(arrays)
_from_dtype = _memo(from_dtype)


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}; got {value!r}")


# ---- values of a space -----------------------------------------------------------


def from_space(space: Space, batch_size: int | None = None, time_size: int | None = None, *,
               float_limit: float = 1e6) -> st.SearchStrategy[Any]:
    """A strategy for values that ``space`` contains.

    Leaves are `numpy.ndarray` of exactly the leaf's dtype (0-d arrays for shape
    ``()``); `Dict` spaces give dicts and `Tuple` spaces tuples. Values reach the
    bounds exactly and shrink towards zero, or towards the bound nearest to zero.
    Subnormal floats are not drawn (unless a bound is one): TensorFlow's CPU
    kernels flush them to zero and PyTorch's do not, so they would fail parity
    checks on framework behaviour rather than on the component.

    Args:
        space: the space whose values to generate.
        batch_size: size of the batch rank; None draws one (1 to 4) per value,
            shared by every leaf. Ignored where no leaf has a batch rank.
        time_size: size of the time rank, like ``batch_size``.
        float_limit: largest magnitude drawn where a float bound is infinite
            (values are always finite unless a bound pins them to an infinity).

    Raises:
        ValueError: for a non-space, a negative or non-int size, or a
            non-positive ``float_limit``.
    """
    if not isinstance(space, Space):
        raise ValueError(f"from_space: space must be a Space; got {space!r}")
    for name, size in (("batch_size", batch_size), ("time_size", time_size)):
        if size is not None:
            _check_int(f"from_space: {name}", size, 0)
    if not (isinstance(float_limit, (int, float)) and 0 < float_limit < math.inf):
        raise ValueError(f"from_space: float_limit must be a positive finite number; got {float_limit!r}")
    ranks = {r for _, leaf in space.leaves() for r in leaf.extra_ranks}

    def size_strategy(symbol: str, given: int | None) -> st.SearchStrategy[int | None]:
        if symbol not in ranks:
            return st.none()
        return _DRAWN_SIZES if given is None else st.just(int(given))

    return st.tuples(size_strategy("B", batch_size), size_strategy("T", time_size)).flatmap(
        lambda bt: _space_values(space, bt[0], bt[1], float(float_limit))
    )


@_memo
def _space_values(space: Space, batch: int | None, time: int | None, float_limit: float) -> st.SearchStrategy:
    return _values(space, {"B": batch, "T": time}, float_limit)


@functools.singledispatch
def _values(space: Space, sizes: dict[str, int | None], float_limit: float) -> st.SearchStrategy[Any]:
    raise ValueError(f"from_space: no strategy for spaces of type {type(space).__name__} ({space!r})")


def _full_shape(space: Any, sizes: dict[str, int | None]) -> tuple[int, ...]:
    return tuple(sizes[r] for r in space.extra_ranks) + space.shape


def _single(arr: np.ndarray) -> Any:
    """The one value every element of a non-empty bound array shares, else None."""
    if arr.size and np.all(arr == arr.flat[0]):
        return arr.flat[0]
    return None


@_values.register(BoolBox)
def _bool_values(space: BoolBox, sizes: dict[str, int | None], float_limit: float) -> st.SearchStrategy:
    return _arrays(np.dtype(bool), _full_shape(space, sizes), elements=st.booleans())


@_values.register(IntBox)
def _int_values(space: IntBox, sizes: dict[str, int | None], float_limit: float) -> st.SearchStrategy:
    shape, dtype = _full_shape(space, sizes), space.dtype
    if space.low.size == 0:
        return _arrays(dtype, shape, elements=st.just(dtype.type(0)))
    lo, hi = _single(space.low), _single(space.high)
    if lo is not None and hi is not None:
        return _arrays(dtype, shape, elements=_from_dtype(dtype, min_value=int(lo), max_value=int(hi)))
    return _int_per_element(shape, dtype, space.low, space.high)


@st.composite
def _int_per_element(draw: Any, shape: tuple[int, ...], dtype: np.dtype, low: np.ndarray,
                     high: np.ndarray) -> np.ndarray:
    # Exact integer arithmetic on Python ints: spans reach 2**64 - 1.
    lo = np.broadcast_to(low, shape).astype(object)
    hi = np.broadcast_to(high, shape).astype(object)
    anchor = np.where(lo > 0, lo, np.where(hi < 0, hi, 0))
    unit = draw(_arrays(np.dtype(np.uint64), shape)).astype(object)
    downward = draw(_arrays(np.dtype(bool), shape, elements=st.booleans()))
    edge = draw(_arrays(np.dtype(np.int8), shape, elements=st.integers(0, 2)))  # 1: exactly low, 2: exactly high
    value = np.where(downward, anchor - unit % (anchor - lo + 1), anchor + unit % (hi - anchor + 1))
    value = np.where(edge == 1, lo, np.where(edge == 2, hi, value))
    return np.asarray(np.asarray(value).astype(dtype), dtype=dtype)


def _finite_bounds(space: FloatBox, float_limit: float) -> tuple[np.ndarray, np.ndarray]:
    """Finite stand-ins for the bounds, in the space's dtype and inside the bounds."""
    dtype = space.dtype
    fmax = float(np.finfo(dtype).max)
    limit = min(float_limit, fmax)
    lo, hi = space.low.astype(np.float64), space.high.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite; masked below
        lo_f = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), np.maximum(hi - limit, -fmax), -limit))
        hi_f = np.where(np.isfinite(hi), hi, np.where(np.isfinite(lo), np.minimum(lo + limit, fmax), limit))
    return _round_inward(lo_f, dtype, up=True), _round_inward(hi_f, dtype, up=False)


def _round_inward(x: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    cast = np.asarray(x).astype(dtype)
    outside = cast.astype(np.float64) < x if up else cast.astype(np.float64) > x
    with np.errstate(over="ignore"):  # stepping past the largest float; never selected then
        step = np.nextafter(cast, np.asarray(np.inf if up else -np.inf, dtype=dtype))
    return np.asarray(np.where(outside, step, cast), dtype=dtype)


@_values.register(FloatBox)
def _float_values(space: FloatBox, sizes: dict[str, int | None], float_limit: float) -> st.SearchStrategy:
    shape, dtype = _full_shape(space, sizes), space.dtype
    if space.low.size == 0:
        return _arrays(dtype, shape, elements=st.just(dtype.type(0)))
    lo_f, hi_f = _finite_bounds(space, float_limit)
    lo, hi = _single(space.low), _single(space.high)
    if lo is not None and hi is not None:
        if lo == hi:  # pinned, possibly to an infinity
            return _arrays(dtype, shape, elements=st.just(lo))
        tiny = float(np.finfo(dtype).tiny)
        subnormal_bound = any(0 < abs(float(b)) < tiny for b in (lo_f.flat[0], hi_f.flat[0]))
        elements = _from_dtype(dtype, min_value=float(lo_f.flat[0]), max_value=float(hi_f.flat[0]),
                               allow_nan=False, allow_infinity=False, allow_subnormal=subnormal_bound)
        return _arrays(dtype, shape, elements=elements)
    return _float_per_element(shape, dtype, lo_f, hi_f, space.low, space.low == space.high)


@st.composite
def _float_per_element(draw: Any, shape: tuple[int, ...], dtype: np.dtype, lo_f: np.ndarray,
                       hi_f: np.ndarray, low: np.ndarray, pinned: np.ndarray) -> np.ndarray:
    lo_t, hi_t = np.broadcast_to(lo_f, shape), np.broadcast_to(hi_f, shape)
    lo64, hi64 = lo_t.astype(np.float64), hi_t.astype(np.float64)
    anchor = np.clip(0.0, lo64, hi64)
    # t in [-1, 1] walks from the anchor towards low (t < 0) or high (t > 0); shrinks to the anchor.
    t = draw(_arrays(np.dtype(np.float64), shape, elements=st.floats(-1.0, 1.0)))
    edge = draw(_arrays(np.dtype(np.int8), shape, elements=st.integers(0, 2)))  # 1: exactly low, 2: exactly high
    side = np.where(t < 0, lo64, hi64)
    frac = np.abs(t)
    value = anchor * (1.0 - frac) + side * frac  # a convex combination cannot overflow
    value = np.where(edge == 1, lo64, np.where(edge == 2, hi64, value))
    value = np.clip(value.astype(dtype), lo_t, hi_t)  # rounding to the dtype may step outside
    subnormal = (value != 0) & (np.abs(value) < np.finfo(dtype).tiny)
    value = np.where(subnormal, np.clip(np.zeros((), dtype), lo_t, hi_t), value)  # see from_space
    value = np.where(np.broadcast_to(pinned, shape), np.broadcast_to(low, shape), value)
    return np.asarray(value, dtype=dtype)


@_values.register(Dict)
def _dict_values(space: Dict, sizes: dict[str, int | None], float_limit: float) -> st.SearchStrategy:
    """Dicts whose keys come in a drawn order, not the space's sorted one: code that reads a value dict by
    position instead of by key (a flatten over ``value.items()``) fails on them."""
    leaves = {k: _space_values(s, sizes["B"], sizes["T"], float_limit) for k, s in space.items()}
    if len(leaves) < 2:
        return st.fixed_dictionaries(leaves)
    return st.permutations(list(leaves)).flatmap(lambda order: st.fixed_dictionaries({k: leaves[k] for k in order}))


@_values.register(Tuple)
def _tuple_values(space: Tuple, sizes: dict[str, int | None], float_limit: float) -> st.SearchStrategy:
    return st.tuples(*(_space_values(s, sizes["B"], sizes["T"], float_limit) for s in space))


# ---- spaces --------------------------------------------------------------------------


def spaces(max_depth: int = 2, max_leaves: int = 5, allow_ranks: bool = True,
           dtypes: Sequence[str] | None = None, max_rank: int = 3,
           max_dim: int = 4) -> st.SearchStrategy[Space]:
    """A strategy for spaces: boxes of every dtype, nested in `Dict` and `Tuple`.

    Leaves get random shapes (dimensions are occasionally 0), and bounds that are
    scalar or per element, finite, half-open, unbounded or pinned (low == high).
    Dict keys include ones that are not identifiers. Extra ranks, when drawn, are
    the same on every leaf.

    Args:
        max_depth: most container levels above a leaf (0: leaves only).
        max_leaves: most leaves in one space (at least 1).
        allow_ranks: whether to draw batch/time ranks (both layouts).
        dtypes: leaf dtype names to draw from (default: all of `ALL_DTYPES`).
        max_rank: most core dimensions of a leaf.
        max_dim: largest size of a core dimension.

    Raises:
        ValueError: for negative limits, ``max_leaves < 1`` or an unknown dtype.
    """
    _check_int("spaces: max_depth", max_depth, 0)
    _check_int("spaces: max_leaves", max_leaves, 1)
    _check_int("spaces: max_rank", max_rank, 0)
    _check_int("spaces: max_dim", max_dim, 0)
    if dtypes is None:
        names = ALL_DTYPES
    else:
        names = tuple(dtypes)
        unknown = [d for d in names if d not in ALL_DTYPES]
        if unknown or not names:
            raise ValueError(f"spaces: dtypes must be a non-empty selection of {', '.join(ALL_DTYPES)}; "
                             f"got {dtypes!r}")
    return _spaces(max_depth, max_leaves, bool(allow_ranks), names, max_rank, max_dim)


@st.composite
def _spaces(draw: Any, max_depth: int, max_leaves: int, allow_ranks: bool, dtypes: tuple[str, ...],
            max_rank: int, max_dim: int) -> Space:
    batch, time, major = draw(st.sampled_from(_RANKS)) if allow_ranks else _RANKS[0]
    ranks = (batch, time, major)
    budget = [max_leaves]

    def tree(depth: int) -> Space:
        kind = draw(st.sampled_from(("leaf", "dict", "tuple"))) if depth > 0 else "leaf"
        if kind == "leaf":
            budget[0] -= 1
            return draw(_leaves(dtypes, max_rank, max_dim, ranks))
        n = draw(st.integers(0, 3))
        keys = draw(_key_lists(n)) if kind == "dict" else range(n)
        children = []
        for key in keys:
            if budget[0] <= 0:
                break
            children.append((key, tree(depth - 1)))
        return Dict(dict(children)) if kind == "dict" else Tuple([c for _, c in children])

    return tree(max_depth)


@_memo
def _key_lists(n: int) -> st.SearchStrategy[list[str]]:
    return st.lists(DICT_KEYS, min_size=n, max_size=n, unique=True)


@_memo
@st.composite
def _shapes(draw: Any, max_rank: int, max_dim: int) -> tuple[int, ...]:
    rank = draw(st.integers(0, max_rank))
    smallest = 0 if draw(st.integers(0, 7)) == 7 else min(1, max_dim)  # a zero dimension now and then
    return tuple(draw(st.lists(st.integers(smallest, max_dim), min_size=rank, max_size=rank)))


@_memo
@st.composite
def _leaves(draw: Any, dtypes: tuple[str, ...], max_rank: int, max_dim: int,
            rank_flags: tuple[bool, bool, bool]) -> Space:
    ranks = dict(zip(("batch_rank", "time_rank", "time_major"), rank_flags))
    # Kind first, then the dtype: else the eight int dtypes would crowd out floats and bools.
    kinds = [[d for d in dtypes if np.dtype(d).kind in k] for k in ("f", "iu", "b")]
    name = draw(st.sampled_from(draw(st.sampled_from([names for names in kinds if names]))))
    shape = draw(_shapes(max_rank, max_dim))
    if name == "bool":
        return BoolBox(shape, **ranks)
    dtype = np.dtype(name)
    if name in FLOAT_DTYPES:
        low, high = draw(_float_bounds(dtype, shape))
        if low is None:
            return FloatBox(shape, dtype=name, **ranks)
        return FloatBox(shape, low, high, name, **ranks)
    mode = draw(st.sampled_from(("range", "n", "full", "low only", "high only")))
    if mode == "n":
        n = draw(st.integers(1, min(16, int(np.iinfo(dtype).max) + 1)))
        return IntBox(n, shape=shape, dtype=name, **ranks)
    if mode == "full":
        return IntBox(shape=shape, dtype=name, **ranks)
    low, high = draw(_ordered_bounds(dtype, shape))
    if mode == "low only":
        return IntBox(low=low, shape=shape, dtype=name, **ranks)
    if mode == "high only":
        return IntBox(high=high, shape=shape, dtype=name, **ranks)
    return IntBox(low=low, high=high, shape=shape, dtype=name, **ranks)


@_memo
@st.composite
def _ordered_bounds(draw: Any, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """``low <= high`` of the dtype: Python scalars, or arrays of ``shape`` (per element)."""
    finite = _from_dtype(dtype, allow_nan=False, allow_infinity=False)
    if draw(st.sampled_from(("scalar", "per element"))) == "scalar":
        a, b = draw(finite).item(), draw(finite).item()
        low, high = min(a, b), max(a, b)
    else:
        a, b = draw(_arrays(dtype, shape, elements=finite)), draw(_arrays(dtype, shape, elements=finite))
        low, high = np.minimum(a, b), np.maximum(a, b)
    if draw(st.sampled_from(("range", "pinned"))) == "pinned":
        high = low
    return low, high


@_memo
@st.composite
def _float_bounds(draw: Any, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Float bounds, or ``(None, None)`` for an unbounded box; infinities only where open."""
    mode = draw(st.sampled_from(("unbounded", "finite", "low only", "high only", "some open")))
    if mode == "unbounded":
        return None, None
    low, high = draw(_ordered_bounds(dtype, shape))
    if mode == "low only":
        return low, np.inf
    if mode == "high only":
        return -np.inf, high
    if mode == "some open" and np.ndim(low) > 0:
        open_low = draw(_arrays(np.dtype(bool), shape, elements=st.booleans()))
        open_high = draw(_arrays(np.dtype(bool), shape, elements=st.booleans()))
        return np.where(open_low, -np.inf, low), np.where(open_high, np.inf, high)
    return low, high
