"""The strategies themselves: values reach the bounds and shrink well; spaces cover every feature."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings, strategies as st

from harness.spaces import BoolBox, BoxSpace, Dict, FloatBox, IntBox, Space, Tuple
from harness.spaces.containers import is_identifier
from harness.testing.strategies import ALL_DTYPES, from_space, spaces

# find() searches up to max_examples; `reaches` only needs one hit, so it skips shrinking.
SEARCH = settings(max_examples=2000, database=None, phases=[Phase.generate])
SHRINK = settings(max_examples=2000, database=None)


def reaches(strategy: st.SearchStrategy, condition) -> None:
    find(strategy, condition, settings=SEARCH)  # raises NoSuchExample when never reached


def shrunk(strategy: st.SearchStrategy, condition=lambda _: True):
    return find(strategy, condition, settings=SHRINK)


# ---- from_space ---------------------------------------------------------------------------


@pytest.mark.parametrize("space, condition", [
    (FloatBox(low=-1.5, high=2.0), lambda v: v == 2.0),
    (FloatBox(low=-1.5, high=2.0), lambda v: v == -1.5),
    (FloatBox(low=-1.5, high=2.0, dtype="float16"), lambda v: v == -1.5),
    (FloatBox(2, low=[0.0, -3.0], high=[1.0, 5.0]), lambda v: v[1] == 5.0),
    (FloatBox(2, low=[0.0, -3.0], high=[1.0, 5.0]), lambda v: v[0] == 0.0 and v[1] == -3.0),
    (FloatBox(2, low=[0.0, -np.inf], high=[1.0, 4.0], dtype="float16"), lambda v: v[1] == 4.0),
    (FloatBox(2, low=[-np.inf, 1.0], high=[np.inf, np.inf], dtype="float64"), lambda v: v[1] == 1.0),
    (FloatBox(low=-np.inf, high=np.inf), lambda v: abs(v) > 1000),
    (FloatBox(low=-65504.0, high=65504.0, dtype="float16"), lambda v: v == 65504.0),
    (FloatBox(low=0.0, high=1.0), lambda v: 0.0 < v < 1e-30),  # subnormals and tiny values
    (IntBox(low=[0, 10], high=[5, 2**40], shape=(2,)), lambda v: v[1] == 2**40),
    (IntBox(low=[0, 10], high=[5, 2**40], shape=(2,)), lambda v: v[0] == 0 and v[1] == 10),
    (IntBox(dtype="uint64"), lambda v: v == 2**64 - 1),
    (IntBox(dtype="int64"), lambda v: v == -2**63),
    (IntBox(low=[0, 0], high=[1, 2**64 - 1], dtype="uint64"), lambda v: v[1] == 2**64 - 1),
    (IntBox(3), lambda v: v == 2),
    (BoolBox(), lambda v: bool(v)),
    (FloatBox(3, batch_rank=True), lambda v: v.shape[0] == 4),
])
def test_values_reach_the_bounds(space, condition):
    reaches(from_space(space), condition)


@pytest.mark.parametrize("space, expected", [
    (FloatBox(3, low=-5.0, high=5.0), np.zeros(3, np.float32)),
    (FloatBox(3), np.zeros(3, np.float32)),
    (FloatBox(2, low=[2.0, -4.0], high=[3.0, -1.0]), np.array([2.0, -1.0], np.float32)),
    (FloatBox(2, low=[2.0, -np.inf], high=[np.inf, -1.0], dtype="float16"), np.array([2.0, -1.0], np.float16)),
    (IntBox(low=3, high=9), np.array(3)),
    (IntBox(low=[2, -9], high=[5, -3], shape=(2,), dtype="int16"), np.array([2, -3], np.int16)),
    (BoolBox(2), np.zeros(2, bool)),
    (Dict(a=FloatBox(2, batch_rank=True), b=IntBox(4, batch_rank=True)),
     {"a": np.zeros((1, 2), np.float32), "b": np.zeros((1,), np.int64)}),
])
def test_values_shrink_towards_zero_or_the_nearest_bound(space, expected):
    flat = space.flatten_value(shrunk(from_space(space)))
    for key, want in space.flatten_value(expected).items():
        np.testing.assert_array_equal(flat[key], want)


@given(spaces(), st.data())
def test_values_have_exactly_the_leaf_dtype(space, data):
    value = data.draw(from_space(space), label="value")
    for key, leaf in space.flatten().items():
        leaf_value = space.flatten_value(value)[key]
        assert type(leaf_value) is np.ndarray
        assert leaf_value.dtype == leaf.dtype


@given(st.data())
def test_drawn_sizes_are_shared_by_every_leaf(data):
    space = Dict(a=FloatBox(2), b=Tuple(IntBox(3), BoolBox((1, 2)))).with_ranks(True, True, time_major=True)
    value = data.draw(from_space(space), label="value")
    leading = {v.shape[:2] for v in space.flatten_value(value).values()}
    assert len(leading) == 1
    time, batch = leading.pop()
    assert 1 <= time <= 4 and 1 <= batch <= 4


@given(st.integers(0, 3), st.integers(0, 3), st.data())
def test_given_sizes_are_used(batch, time, data):
    space = Tuple(FloatBox(2, batch_rank=True), IntBox(3, batch_rank=True, time_rank=True), BoolBox())
    value = data.draw(from_space(space, batch_size=batch, time_size=time), label="value")
    assert value[0].shape == (batch, 2) and value[1].shape == (batch, time) and value[2].shape == ()


@given(st.data())
def test_float_limit_bounds_open_floats(data):
    value = data.draw(from_space(FloatBox(5, low=[-np.inf, 0, -np.inf, 1, 2], high=np.inf, dtype="float64"),
                                 float_limit=10.0), label="value")
    assert np.all(np.isfinite(value))
    assert np.all(np.abs(value) <= 12.0)


def test_pinned_infinite_bounds_give_the_infinity():
    assert shrunk(from_space(FloatBox(2, low=np.inf, high=np.inf))).tolist() == [np.inf, np.inf]
    assert shrunk(from_space(FloatBox(2, low=[-np.inf, 0], high=[-np.inf, 1]))).tolist() == [-np.inf, 0.0]


# ---- spaces ----------------------------------------------------------------------------------


def leaves(space: Space) -> list[BoxSpace]:
    return list(space.flatten().values())


def containers(space: Space) -> list[Space]:
    out = []
    if isinstance(space, (Dict, Tuple)):
        out.append(space)
        for sub in space.values() if isinstance(space, Dict) else space:
            out += containers(sub)
    return out


def depth(space: Space) -> int:
    if isinstance(space, Dict):
        return 1 + max((depth(s) for s in space.values()), default=0)
    if isinstance(space, Tuple):
        return 1 + max((depth(s) for s in space), default=0)
    return 0


FEATURES = {
    "a zero dimension": lambda s: any(0 in leaf.shape for leaf in leaves(s)),
    "a rank-3 leaf": lambda s: any(leaf.rank == 3 for leaf in leaves(s)),
    "per-element bounds": lambda s: any(leaf.low.size > 1 and len(np.unique(leaf.low)) > 1 for leaf in leaves(s)),
    "pinned float bounds": lambda s: any(isinstance(leaf, FloatBox) and leaf.low.size and np.all(leaf.low == leaf.high)
                                         for leaf in leaves(s)),
    "pinned int bounds": lambda s: any(isinstance(leaf, IntBox) and leaf.low.size > 1 and np.all(leaf.low == leaf.high)
                                       and len(np.unique(leaf.low)) > 1 for leaf in leaves(s)),
    "an unbounded float": lambda s: any(isinstance(leaf, FloatBox) and not leaf.bounded for leaf in leaves(s)),
    "a half-open float": lambda s: any(isinstance(leaf, FloatBox) and leaf.low.size and np.all(np.isfinite(leaf.low))
                                       and np.all(np.isinf(leaf.high)) for leaf in leaves(s)),
    "some open float elements": lambda s: any(isinstance(leaf, FloatBox) and np.any(np.isinf(leaf.low))
                                              and np.any(np.isfinite(leaf.low)) for leaf in leaves(s)),
    "a full-range int": lambda s: any(isinstance(leaf, IntBox) and leaf.low.size and not leaf.bounded for leaf in leaves(s)),
    "an IntBox(n)": lambda s: any(isinstance(leaf, IntBox) and (leaf.num_categories or 0) > 1 for leaf in leaves(s)),
    "a non-identifier key": lambda s: any(not is_identifier(k) for c in containers(s) if isinstance(c, Dict) for k in c),
    "an empty tuple": lambda s: any(isinstance(c, Tuple) and len(c) == 0 for c in containers(s)),
    "a one-element tuple": lambda s: any(isinstance(c, Tuple) and len(c) == 1 for c in containers(s)),
    "an empty dict": lambda s: any(isinstance(c, Dict) and len(c) == 0 for c in containers(s)),
    "two levels of nesting": lambda s: depth(s) == 2,
    "a batch rank only": lambda s: bool(leaves(s)) and s.extra_ranks == ("B",),
    "a time rank only": lambda s: bool(leaves(s)) and s.extra_ranks == ("T",),
    "batch-major ranks": lambda s: bool(leaves(s)) and s.extra_ranks == ("B", "T"),
    "time-major ranks": lambda s: bool(leaves(s)) and s.extra_ranks == ("T", "B"),
    **{f"a {name} leaf": (lambda name: lambda s: any(leaf.dtype.name == name for leaf in leaves(s)))(name)
       for name in ALL_DTYPES},
}


@pytest.mark.parametrize("feature", list(FEATURES))
def test_spaces_cover_every_feature(feature):
    reaches(spaces(), FEATURES[feature])


@given(spaces(max_depth=1, max_leaves=3, allow_ranks=False, dtypes=("bool", "uint8"), max_rank=2, max_dim=2))
def test_spaces_respect_their_limits(space):
    assert depth(space) <= 1
    assert len(leaves(space)) <= 3
    for leaf in leaves(space):
        assert leaf.dtype.name in ("bool", "uint8")
        assert leaf.rank <= 2 and all(d <= 2 for d in leaf.shape)
        assert leaf.extra_ranks == ()


@given(spaces())
def test_spaces_have_uniform_ranks_and_ordered_bounds(space):
    assert len({leaf.extra_ranks for leaf in leaves(space)}) <= 1
    for leaf in leaves(space):
        assert np.all(leaf.low <= leaf.high)


def test_spaces_shrink_to_small_spaces():
    # Shrinking is a search, not a proof: ask only that the result is small, not one exact space.
    space = shrunk(spaces(), lambda s: bool(leaves(s)))
    assert len(leaves(space)) == 1 and depth(space) <= 1


@given(st.data())
def test_from_space_draws_no_subnormal_floats(data):
    from harness.spaces import FloatBox

    space = data.draw(st.sampled_from([FloatBox((3,)), FloatBox((3,), low=[-1.0, 0.0, -2.0], high=[1.0, 1.0, 0.0]),
                                       FloatBox((2,), dtype="float64")]).map(lambda s: s.with_batch_rank()))
    value = data.draw(from_space(space, batch_size=4))
    tiny = np.finfo(space.dtype).tiny
    assert not np.any((value != 0) & (np.abs(value) < tiny)), value


# ---- Dict values: keys in a drawn order --------------------------------------------------------


def test_dict_values_come_with_their_keys_out_of_sorted_order():
    space = Dict({"a": FloatBox(shape=(1,)), "b": IntBox(3), "c": BoolBox()})
    reaches(from_space(space), lambda v: list(v) != sorted(v))
    reaches(from_space(space), lambda v: list(v) == sorted(v))
    assert all(sorted(v) == ["a", "b", "c"] for v in [shrunk(from_space(space))])


def test_a_flatten_that_reads_a_dict_by_position_is_caught():
    """Planted bug: pairing the space's keys with a value's entries by position. With values always in sorted
    key order (what `st.fixed_dictionaries` over the space gave before) no example could show it."""
    space = Dict({"x": FloatBox(low=0.0, high=1.0), "y": FloatBox(low=2.0, high=3.0)})

    def by_position(value):
        return dict(zip(space.keys(), value.values()))

    bad = find(from_space(space), lambda v: by_position(v) != {k: v[k] for k in space.keys()}, settings=SEARCH)
    assert list(bad) == ["y", "x"]
    assert all(by_position(v) == v for v in [dict(sorted(bad.items()))])
