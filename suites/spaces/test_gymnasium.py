"""Conversion from and to gymnasium spaces: every gymnasium sample fits the converted space."""

from __future__ import annotations

import warnings

import gymnasium.spaces as gs
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple, from_gymnasium, to_gymnasium
from harness.testing.strategies import spaces

SHAPES = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64")


def ordered(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # + 0 turns -0.0 into 0.0: numpy's uniform() rejects low=0.0, high=-0.0 as "high - low < 0".
    return np.minimum(a, b) + 0, np.maximum(a, b) + 0


@st.composite
def float_boxes(draw) -> gs.Box:
    dtype = draw(st.sampled_from((np.float32, np.float64, np.float16)))
    shape = draw(SHAPES)
    bound = st.floats(-100, 100, width=16)  # exact in every float width
    low, high = ordered(draw(arrays(dtype, shape, elements=bound)), draw(arrays(dtype, shape, elements=bound)))
    mode = draw(st.sampled_from(("finite", "unbounded", "low only", "high only", "scalar")))
    if mode == "unbounded":
        return gs.Box(-np.inf, np.inf, shape, dtype)
    if mode == "low only":
        return gs.Box(low, np.inf, shape, dtype)
    if mode == "high only":
        return gs.Box(-np.inf, high, shape, dtype)
    if mode == "scalar":
        lo, hi = sorted((draw(bound) + 0, draw(bound) + 0))
        return gs.Box(dtype(lo), dtype(hi), shape, dtype)
    return gs.Box(low, high, shape, dtype)


@st.composite
def int_boxes(draw) -> gs.Box:
    dtype = np.dtype(draw(st.sampled_from(INT_DTYPES)))
    shape = draw(SHAPES)
    info = np.iinfo(dtype)
    bound = st.integers(max(info.min, -100), min(info.max, 100))
    low, high = ordered(draw(arrays(np.int64, shape, elements=bound)), draw(arrays(np.int64, shape, elements=bound)))
    return gs.Box(low.astype(dtype), high.astype(dtype), shape, dtype)


@st.composite
def multi_discretes(draw) -> gs.MultiDiscrete:
    shape = draw(array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=3))
    nvec = draw(arrays(np.int64, shape, elements=st.integers(1, 5)))
    if draw(st.booleans()):
        return gs.MultiDiscrete(nvec)
    start = draw(arrays(np.int64, shape, elements=st.integers(-3, 3)))
    return gs.MultiDiscrete(nvec, start=start)


GYM_LEAVES = st.one_of(
    float_boxes(),
    int_boxes(),
    SHAPES.map(lambda shape: gs.Box(0, 1, shape, bool)),
    st.builds(gs.Discrete, st.integers(1, 10), start=st.integers(-5, 5)),
    multi_discretes(),
    st.one_of(st.integers(1, 4), st.lists(st.integers(1, 3), min_size=1, max_size=3)).map(gs.MultiBinary),
)
GYM_KEYS = st.text(min_size=1, max_size=5).filter(lambda key: "/" not in key)
GYM_SPACES = st.recursive(
    GYM_LEAVES,
    lambda children: st.one_of(
        st.dictionaries(GYM_KEYS, children, max_size=3).map(gs.Dict),
        st.lists(children, max_size=3).map(gs.Tuple),
    ),
    max_leaves=6,
)


def gym_contains(space: gs.Space, value) -> bool:
    with warnings.catch_warnings():  # gymnasium warns when it casts numpy scalars to arrays
        warnings.simplefilter("ignore", UserWarning)
        return space.contains(value)


@given(GYM_SPACES, st.integers(0, 2**32 - 1))
def test_gymnasium_samples_are_contained(gym_space, seed):
    space = from_gymnasium(gym_space)
    back = to_gymnasium(space)
    gym_space.seed(seed)
    for _ in range(3):
        value = gym_space.sample()
        assert space.why_not(value) is None
        assert gym_contains(back, value)
    assert from_gymnasium(back) == space


@given(spaces(allow_ranks=False))
def test_to_gymnasium_round_trips(space):
    gym_space = to_gymnasium(space)
    assert from_gymnasium(gym_space) == space
    assert gym_contains(gym_space, space.zeros())


@given(spaces())
def test_to_gymnasium_drops_extra_ranks(space):
    assert from_gymnasium(to_gymnasium(space)) == space.strip_ranks()


@pytest.mark.parametrize("gym_space, expected", [
    (gs.Discrete(5), IntBox(5)),
    (gs.Discrete(5, start=-2), IntBox(low=-2, high=2)),
    (gs.MultiDiscrete([3, 4]), IntBox(low=0, high=[2, 3])),
    (gs.MultiDiscrete([[2, 3], [4, 5]], start=[[1, 0], [-1, 2]]), IntBox(low=[[1, 0], [-1, 2]], high=[[2, 2], [2, 6]])),
    (gs.MultiBinary(3), IntBox(low=0, high=1, shape=(3,), dtype="int8")),
    (gs.MultiBinary([2, 3]), IntBox(low=0, high=1, shape=(2, 3), dtype="int8")),
    (gs.Box(0, 1, (2,), bool), BoolBox(2)),
    (gs.Box(0, 255, (84, 84, 3), np.uint8), IntBox(low=0, high=255, shape=(84, 84, 3), dtype="uint8")),
    (gs.Box(-1.0, 1.0, (3,)), FloatBox(3, -1.0, 1.0)),
    (gs.Box(-np.inf, np.inf, (2,), np.float64), FloatBox(2, dtype="float64")),
    (gs.Dict({"b": gs.Discrete(2), "a": gs.Box(0, 1, (), bool)}), Dict(a=BoolBox(), b=IntBox(2))),
    (gs.Tuple([gs.Discrete(2), gs.Tuple([])]), Tuple(IntBox(2), Tuple())),
])
def test_from_gymnasium_examples(gym_space, expected):
    assert from_gymnasium(gym_space) == expected


@pytest.mark.parametrize("gym_space, name", [
    (gs.Text(5), "Text"),
    (gs.Sequence(gs.Discrete(2)), "Sequence"),
    (gs.Graph(node_space=gs.Discrete(3), edge_space=None), "Graph"),
    (gs.OneOf([gs.Discrete(2), gs.Discrete(3)]), "OneOf"),
    (gs.Dict({"ok": gs.Discrete(2), "bad": gs.Text(3)}), "Text"),
    (gs.Tuple([gs.Discrete(2), gs.Sequence(gs.Discrete(2))]), "Sequence"),
])
def test_unsupported_gymnasium_spaces_are_named(gym_space, name):
    with pytest.raises(ValueError, match=rf"unsupported gymnasium space {name}\b"):
        from_gymnasium(gym_space)


@pytest.mark.parametrize("value", [None, 3, "float32[2]", np.zeros(2)])
def test_to_gymnasium_rejects_non_spaces(value):
    with pytest.raises(ValueError, match=r"to_gymnasium: unsupported space"):
        to_gymnasium(value)
