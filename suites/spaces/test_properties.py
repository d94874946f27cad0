"""Properties every space has: sampling, containment, key paths, text form, ranks, equality."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from harness.spaces import BoolBox, BoxSpace, ContainerSpace, Dict, FloatBox, IntBox, Space, Tuple, parse
from harness.testing.strategies import from_space, spaces

RANKS = [(False, False, False), (True, False, False), (False, True, False),
         (True, True, False), (True, True, True)]


def sizes_for(space: Space) -> st.SearchStrategy:
    """Every accepted form of a sample ``size`` for ``space``: None, an int, a tuple."""
    n = len(space.extra_ranks)
    forms = [st.none(), st.tuples(*[st.integers(0, 3)] * n)]
    if n == 1:
        forms.append(st.integers(0, 3))
    return st.one_of(forms)


def nonempty(space: Space) -> bool:
    return bool(space.flatten())


def rebuilt(leaf: BoxSpace) -> BoxSpace:
    """An equal leaf built anew from its public properties (fresh arrays, no shared state)."""
    ranks = dict(batch_rank=leaf.has_batch_rank, time_rank=leaf.has_time_rank, time_major=leaf.time_major)
    if isinstance(leaf, BoolBox):
        return BoolBox(list(leaf.shape), **ranks)
    if isinstance(leaf, FloatBox):
        return FloatBox(leaf.shape, leaf.low.copy(), leaf.high.copy(), leaf.dtype.name, **ranks)
    return IntBox(low=as_python(leaf.low), high=as_python(leaf.high), shape=leaf.shape, dtype=leaf.dtype, **ranks)


def as_python(bound: np.ndarray):
    """Nested lists of Python ints (as a spec file gives them); empty bounds stay arrays to keep their shape."""
    return bound.tolist() if bound.size else bound.copy()


# ---- sampling and containment --------------------------------------------------------


@given(spaces(), st.data())
def test_samples_are_contained(space, data):
    size = data.draw(sizes_for(space), label="size")
    value = space.sample(size, rng=data.draw(st.integers(0, 2**32 - 1), label="seed"))
    assert space.why_not(value) is None
    assert space.contains(value) and value in space


@given(spaces(), st.data(), st.integers(0, 2**32 - 1))
def test_same_seed_gives_the_same_sample(space, data, seed):
    size = data.draw(sizes_for(space), label="size")
    first, second = space.flatten_value(space.sample(size, seed)), space.flatten_value(space.sample(size, seed))
    assert first.keys() == second.keys()
    for key in first:
        assert first[key].dtype == second[key].dtype
        np.testing.assert_array_equal(first[key], second[key])
    # A Generator continues its stream; the same seed through a Generator replays it.
    again = space.flatten_value(space.sample(size, np.random.default_rng(seed)))
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])


@given(spaces(), st.data())
def test_from_space_values_are_contained(space, data):
    value = data.draw(from_space(space), label="value")
    assert space.why_not(value) is None


@given(spaces(), st.data())
def test_zeros_are_contained(space, data):
    size = data.draw(sizes_for(space), label="size")
    value = space.zeros(size)
    assert space.why_not(value) is None
    for key, leaf in space.flatten().items():
        leaf_value = space.flatten_value(value)[key]
        # Zero wherever zero is allowed; else the bound nearest to it.
        expected = np.clip(np.zeros(leaf.shape, leaf.dtype), leaf.low, leaf.high)
        np.testing.assert_array_equal(leaf_value, np.broadcast_to(expected, leaf_value.shape))


# ---- key paths -------------------------------------------------------------------------


@given(spaces(), st.data())
def test_flatten_value_round_trips(space, data):
    value = data.draw(from_space(space), label="value")
    flat = space.flatten_value(value)
    assert list(flat) == list(space.flatten())
    again = space.unflatten(flat)
    assert space.why_not(again) is None
    assert space.flatten_value(again).keys() == flat.keys()
    for key in flat:
        assert space.flatten_value(again)[key] is flat[key]


@given(spaces())
def test_unflatten_of_flatten_is_the_space(space):
    flat = space.flatten()
    assert all("//" not in key and not key.startswith("/") for key in flat)
    if nonempty(space):
        assert space.unflatten(flat) == space
    else:  # without leaves there are no spaces to re-nest: the result is the (only) value
        assert space.why_not(space.unflatten(flat)) is None


@given(spaces())
def test_key_paths_lead_to_their_leaves(space):
    for path, leaf in space.flatten().items():
        node = space
        for part in path.split("/") if path else []:
            node = node[int(part)] if isinstance(node, Tuple) else node[part]
        assert node is leaf


@given(spaces())
def test_map_identity_gives_an_equal_space(space):
    seen = []
    mapped = space.map(lambda path, leaf: seen.append(path) or leaf)
    assert mapped == space and hash(mapped) == hash(space)
    assert seen == list(space.flatten())


@given(spaces(), st.data())
def test_map_value_visits_every_leaf_with_its_value(space, data):
    value = data.draw(from_space(space), label="value")
    flat = space.flatten_value(value)
    shapes = space.map_value(lambda path, leaf, leaf_value: (path, leaf_value.shape), value)
    if nonempty(space):
        assert space.flatten_value(shapes) == {k: (k, v.shape) for k, v in flat.items()}


# ---- text form --------------------------------------------------------------------------


@given(spaces())
def test_text_form_round_trips(space):
    again = parse(repr(space))
    assert again == space
    assert hash(again) == hash(space)
    assert repr(again) == repr(space) == str(space)


# ---- ranks ---------------------------------------------------------------------------------


def leaf_ranks(space: Space) -> set[tuple[bool, bool, bool]]:
    return {(leaf.has_batch_rank, leaf.has_time_rank, leaf.time_major) for leaf in space.flatten().values()}


@given(spaces(allow_ranks=False), st.sampled_from(RANKS))
def test_with_ranks_reaches_every_leaf(space, ranks):
    batch, time, major = ranks
    ranked = space.with_ranks(batch, time, major)
    expected_major = major if (batch and time) else (time and not batch)
    assert leaf_ranks(ranked) <= {(batch, time, expected_major)}
    if nonempty(space):
        assert (ranked.has_batch_rank, ranked.has_time_rank, ranked.time_major) == (batch, time, expected_major)
        symbols = {(False, False): (), (True, False): ("B",), (False, True): ("T",),
                   (True, True): ("T", "B") if major else ("B", "T")}[batch, time]
        assert ranked.extra_ranks == symbols
        assert all(leaf.extra_ranks == symbols for leaf in ranked.flatten().values())
    assert ranked.strip_ranks() == space
    assert ranked.flatten().keys() == space.flatten().keys()


@given(spaces())
def test_with_batch_rank_keeps_the_time_rank(space):
    batched = space.with_batch_rank()
    unbatched = space.with_batch_rank(False)
    for leaf, b, u in zip(space.flatten().values(), batched.flatten().values(), unbatched.flatten().values()):
        assert b.has_batch_rank and not u.has_batch_rank
        assert b.has_time_rank == u.has_time_rank == leaf.has_time_rank
        assert b.shape == u.shape == leaf.shape and b.dtype == leaf.dtype
        if leaf.has_batch_rank and leaf.has_time_rank:
            assert b.time_major == leaf.time_major
    assert batched.with_batch_rank(False) == unbatched
    if nonempty(space):
        assert batched != unbatched


@given(spaces(), st.booleans())
def test_with_time_rank_keeps_the_batch_rank(space, major):
    timed = space.with_time_rank(time_major=major)
    untimed = space.with_time_rank(False)
    for leaf, t, u in zip(space.flatten().values(), timed.flatten().values(), untimed.flatten().values()):
        assert t.has_time_rank and not u.has_time_rank
        assert t.has_batch_rank == u.has_batch_rank == leaf.has_batch_rank
        if leaf.has_batch_rank:
            assert t.time_major == major
            assert t.extra_ranks == (("T", "B") if major else ("B", "T"))
        else:
            assert t.extra_ranks == ("T",)
    assert timed.with_time_rank(False) == untimed


@given(spaces())
def test_strip_ranks_removes_every_rank(space):
    stripped = space.strip_ranks()
    assert leaf_ranks(stripped) <= {(False, False, False)}
    assert stripped.extra_ranks == ()
    assert stripped.strip_ranks() == stripped
    assert stripped.with_ranks(space.has_batch_rank, space.has_time_rank, space.time_major) == space


@given(spaces(), st.data())
def test_values_carry_the_extra_ranks_in_front(space, data):
    sizes = {"B": data.draw(st.integers(0, 3), label="batch"), "T": data.draw(st.integers(0, 3), label="time")}
    value = data.draw(from_space(space, batch_size=sizes["B"], time_size=sizes["T"]), label="value")
    for key, leaf in space.flatten().items():
        leaf_value = space.flatten_value(value)[key]
        assert leaf_value.shape == tuple(sizes[r] for r in leaf.extra_ranks) + leaf.shape
        assert leaf.full_shape(sizes["B"], sizes["T"]) == leaf_value.shape


# ---- equality and hashing -------------------------------------------------------------------


@given(spaces())
def test_equal_spaces_built_apart_are_equal_and_hash_alike(space):
    twin = space.map(lambda path, leaf: rebuilt(leaf))
    assert twin == space and not (twin != space)
    assert hash(twin) == hash(space)
    assert len({space, twin}) == 1


def changed_bounds(leaf: BoxSpace) -> tuple[np.ndarray, np.ndarray]:
    """Bounds that differ from the leaf's at the first element and still satisfy low <= high."""
    low, high = leaf.low.copy(), leaf.high.copy()
    i = (0,) * leaf.rank
    lo, hi = low[i], high[i]
    if leaf.dtype.kind == "f":
        if lo < hi:
            if np.isfinite(hi):
                low[i] = hi
            elif np.isfinite(lo):
                high[i] = lo
            else:
                low[i] = 0
        elif np.isposinf(lo):
            low[i] = -np.inf
        else:
            high[i] = np.inf
    elif lo < hi:
        low[i] = hi
    elif hi < np.iinfo(leaf.dtype).max:
        high[i] = hi + 1
    else:
        low[i] = lo - 1
    return low, high


def changed_leaves(leaf: BoxSpace) -> list[BoxSpace]:
    """Leaves that differ from ``leaf`` in one way: a rank, the layout, the shape, the dtype or a bound."""
    ranks = dict(batch_rank=leaf.has_batch_rank, time_rank=leaf.has_time_rank, time_major=leaf.time_major)
    out = [leaf.with_batch_rank(not leaf.has_batch_rank), leaf.with_time_rank(not leaf.has_time_rank)]
    if leaf.has_batch_rank and leaf.has_time_rank:
        out.append(leaf.with_time_rank(True, time_major=not leaf.time_major))
    if isinstance(leaf, BoolBox):
        return out + [BoolBox(leaf.shape + (1,), **ranks),
                      IntBox(low=0, high=1, shape=leaf.shape, dtype="uint8", **ranks)]
    low, high = leaf.low, leaf.high
    if isinstance(leaf, FloatBox):
        out.append(FloatBox(leaf.shape + (1,), low[..., None], high[..., None], leaf.dtype, **ranks))
        if leaf.dtype != np.float64:  # every float16/float32 bound is exact in float64
            out.append(FloatBox(leaf.shape, low, high, "float64", **ranks))
        if low.size:
            out.append(FloatBox(leaf.shape, *changed_bounds(leaf), leaf.dtype, **ranks))
        return out
    out.append(IntBox(low=low[..., None], high=high[..., None], shape=leaf.shape + (1,), dtype=leaf.dtype, **ranks))
    fits = [d for d in ("int64", "uint64", "int32", "uint8") if d != leaf.dtype.name and
            (not low.size or (np.iinfo(d).min <= int(low.min()) and int(high.max()) <= np.iinfo(d).max))]
    if fits:
        out.append(IntBox(low=as_python(low), high=as_python(high), shape=leaf.shape, dtype=fits[0], **ranks))
    if low.size:
        new_low, new_high = changed_bounds(leaf)
        out.append(IntBox(low=new_low, high=new_high, shape=leaf.shape, dtype=leaf.dtype, **ranks))
    return out


@given(spaces(), st.data())
def test_a_changed_leaf_makes_spaces_unequal(space, data):
    paths = list(space.flatten())
    if not paths:
        assert space != Tuple(BoolBox()) and space != Dict(a=BoolBox())
        return
    path = data.draw(st.sampled_from(paths), label="path")
    leaf = space.flatten()[path]
    changed = data.draw(st.sampled_from(changed_leaves(leaf)), label="changed leaf")
    other = space.map(lambda p, s: changed if p == path else s)
    assert changed != leaf
    assert other != space and not (other == space)
    # Unequal spaces may collide in hash; the same space never hashes two ways.
    assert hash(other) == hash(other.map(lambda p, s: s))


@pytest.mark.parametrize("left, right, equal", [
    (Dict(a=BoolBox()), Tuple(BoolBox()), False),
    (Tuple(), Dict(), False),
    (Dict(), Dict({}), True),
    (IntBox(2, dtype="uint8"), IntBox(low=0, high=1, dtype="uint8"), True),
    (IntBox(2), IntBox(low=0, high=1, dtype="int32"), False),
    (FloatBox(low=-0.0, high=1.0), FloatBox(low=0.0, high=1.0), True),
    (FloatBox(2, low=0.0, high=1.0), FloatBox(low=[0.0, 0.0], high=[1.0, 1.0]), True),
    (FloatBox(2), FloatBox((1, 2)), False),
    (BoolBox(), BoolBox(()), True),
    (BoolBox(), IntBox(low=0, high=1, dtype="uint8"), False),
    (FloatBox(batch_rank=True, time_rank=True), FloatBox(batch_rank=True, time_rank=True, time_major=True), False),
    (FloatBox(time_rank=True), FloatBox(time_rank=True, time_major=True), True),
    (Dict(a=BoolBox(), b=IntBox(2)), Dict(b=IntBox(2), a=BoolBox()), True),
])
def test_equality_examples(left, right, equal):
    assert (left == right) is equal and (left != right) is not equal
    if equal:
        assert hash(left) == hash(right)


def test_spaces_are_hashable_dict_keys():
    table = {FloatBox(2): "a", Dict(x=IntBox(3)): "b"}
    assert table[FloatBox((2,))] == "a"
    assert table[parse("{x: int64[](0,2)}")] == "b"


def test_container_shape_and_dtype_nest_like_values():
    space = Dict(a=FloatBox(2), b=Tuple(IntBox(3), BoolBox((1, 2))))
    assert space.shape == {"a": (2,), "b": ((), (1, 2))}
    assert space.dtype == {"a": np.float32, "b": (np.int64, np.bool_)}
    assert space.flat_dim == 2 + 1 + 2
    assert isinstance(space, ContainerSpace) and len(space) == 2


def test_container_rank_helpers_keep_each_leafs_other_rank():
    mixed = Dict(a=FloatBox(2, batch_rank=True), b=IntBox(3))
    assert mixed.with_time_rank() == Dict(a=FloatBox(2, batch_rank=True, time_rank=True),
                                          b=IntBox(3, time_rank=True))
    timed = Dict(a=FloatBox(2, time_rank=True), b=IntBox(3))
    assert timed.with_batch_rank() == Dict(a=FloatBox(2, batch_rank=True, time_rank=True, time_major=True),
                                           b=IntBox(3, batch_rank=True))


@given(spaces())
def test_without_bounds_keeps_all_but_the_bounds(space):
    free = space.without_bounds()
    assert list(free.flatten()) == list(space.flatten())
    for (_, a), (_, b) in zip(free.leaves(), space.leaves()):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        assert a.extra_ranks == b.extra_ranks and not a.bounded
