"""Sampling semantics: sizes per extra rank, layouts, dtypes, seeds and coverage of the bounds."""

from __future__ import annotations

import numpy as np
import pytest

from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple

BATCH = dict(batch_rank=True)
TIME = dict(time_rank=True)
BATCH_TIME = dict(batch_rank=True, time_rank=True)
TIME_BATCH = dict(batch_rank=True, time_rank=True, time_major=True)


@pytest.mark.parametrize("ranks, size, extra", [
    ({}, None, ()),
    ({}, (), ()),
    (BATCH, None, (1,)),
    (BATCH, 5, (5,)),
    (BATCH, (5,), (5,)),
    (BATCH, 0, (0,)),
    (BATCH, np.int64(2), (2,)),
    (TIME, None, (1,)),
    (TIME, 7, (7,)),
    (BATCH_TIME, None, (1, 1)),
    (BATCH_TIME, (4, 6), (4, 6)),    # [B, T, ...]
    (TIME_BATCH, (6, 4), (6, 4)),    # [T, B, ...]: sizes come in layout order
    (BATCH_TIME, [2, 0], (2, 0)),
])
@pytest.mark.parametrize("make", [
    lambda **r: FloatBox((2, 3), -1.0, 1.0, **r),
    lambda **r: IntBox(4, shape=(2, 3), dtype="uint8", **r),
    lambda **r: BoolBox((2, 3), **r),
], ids=["float", "int", "bool"])
def test_sample_and_zeros_shapes(make, ranks, size, extra):
    space = make(**ranks)
    assert space.extra_dims(size) == extra
    for value in (space.sample(size, rng=0), space.zeros(size)):
        assert isinstance(value, np.ndarray)
        assert value.dtype == space.dtype
        assert value.shape == extra + (2, 3)
        assert space.contains(value)


@pytest.mark.parametrize("space", [FloatBox(), IntBox(3, dtype="int8"), BoolBox(), FloatBox(low=0.0, high=1.0, dtype="float16")],
                         ids=repr)
def test_zero_d_values_are_arrays(space):
    for value in (space.sample(rng=1), space.zeros()):
        assert isinstance(value, np.ndarray) and value.shape == () and value.dtype == space.dtype


@pytest.mark.parametrize("space, size", [
    (FloatBox(2), 1),
    (FloatBox(2), (1,)),
    (FloatBox(2, **BATCH), (1, 2)),
    (FloatBox(2, **BATCH), ()),
    (FloatBox(2, **BATCH_TIME), 3),
    (FloatBox(2, **TIME_BATCH), (1, 2, 3)),
    (Dict(a=BoolBox(**BATCH)), (2, 2)),
    (Tuple(IntBox(2, **BATCH_TIME)), 4),
])
def test_wrong_size_arity_raises(space, size):
    with pytest.raises(ValueError, match=r"does not fit the space's extra ranks"):
        space.sample(size)
    with pytest.raises(ValueError, match=r"does not fit the space's extra ranks"):
        space.zeros(size)


def test_layouts_put_ranks_in_order():
    batch_major = FloatBox(3, **BATCH_TIME)
    time_major = FloatBox(3, **TIME_BATCH)
    assert batch_major.extra_ranks == ("B", "T") and time_major.extra_ranks == ("T", "B")
    assert batch_major.full_shape(batch_size=4, time_size=6) == (4, 6, 3)
    assert time_major.full_shape(batch_size=4, time_size=6) == (6, 4, 3)
    assert time_major.full_shape() == (None, None, 3)
    assert FloatBox(3, **TIME).time_major and FloatBox(3, **TIME).extra_ranks == ("T",)
    assert not FloatBox(3, **BATCH).time_major
    space = Dict(x=FloatBox(3), y=Tuple(IntBox(2))).with_ranks(True, True, time_major=True)
    value = space.sample((6, 4), rng=0)
    assert value["x"].shape == (6, 4, 3) and value["y"][0].shape == (6, 4)
    assert space.extra_ranks == ("T", "B")


def test_dict_sample_with_a_seed_is_reproducible():
    space = Dict(obs=FloatBox((3, 2), **BATCH), act=IntBox(5, **BATCH),
                 aux=Tuple(BoolBox(4, **BATCH), FloatBox(low=-1.0, high=2.0, **BATCH)))
    first, second = space.sample(8, rng=123), space.sample(8, rng=123)
    other = space.sample(8, rng=124)
    flat1, flat2, flat3 = (space.flatten_value(v) for v in (first, second, other))
    assert list(flat1) == ["act", "aux/0", "aux/1", "obs"]
    for key in flat1:
        np.testing.assert_array_equal(flat1[key], flat2[key])
    assert any(not np.array_equal(flat1[k], flat3[k]) for k in flat1)
    # One generator feeds the leaves in key-path order: the stream continues across leaves.
    gen = np.random.default_rng(123)
    for key, leaf in space.flatten().items():
        np.testing.assert_array_equal(leaf.sample(8, gen), flat1[key])


def test_a_generator_is_advanced_not_reset():
    gen = np.random.default_rng(0)
    space = FloatBox(4)
    assert not np.array_equal(space.sample(rng=gen), space.sample(rng=gen))


@pytest.mark.parametrize("space, expected", [
    (IntBox(3), {0, 1, 2}),
    (IntBox(low=-2, high=1, dtype="int8"), {-2, -1, 0, 1}),
    (IntBox(low=[0, 10], high=[1, 11]), {0, 1, 10, 11}),
    (BoolBox(), {False, True}),
    (IntBox(low=7, high=7), {7}),
])
def test_int_and_bool_samples_cover_the_range(space, expected):
    values = space.with_batch_rank().sample(500, rng=0)
    assert set(np.unique(values).tolist()) == expected


@pytest.mark.parametrize("space", [
    FloatBox(low=-1.0, high=3.0),
    FloatBox(low=-1.0, high=3.0, dtype="float16"),
    FloatBox(low=[0.0, -5.0], high=[1e-3, 5.0], dtype="float64"),
    FloatBox(low=-3.4e38, high=3.4e38),
    FloatBox(low=2.5, high=2.5),
], ids=repr)
def test_bounded_float_samples_spread_over_the_bounds(space):
    values = space.with_batch_rank().sample(2000, rng=0).astype(np.float64)
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    assert np.all(values >= low) and np.all(values <= high)
    span = high - low
    # Uniform draws: the extremes come within 1% of the bounds.
    assert np.all(values.min(axis=0) <= low + 0.01 * span)
    assert np.all(values.max(axis=0) >= high - 0.01 * span)


@pytest.mark.parametrize("space", [
    FloatBox(3),
    FloatBox(3, low=0.0),
    FloatBox(3, high=-1e30),
    FloatBox(3, low=60000.0, dtype="float16"),
    FloatBox(3, low=[-np.inf, 0.0, 1.0], high=[0.0, np.inf, 1.0]),
], ids=repr)
def test_unbounded_float_samples_are_finite_and_contained(space):
    values = space.with_batch_rank().sample(500, rng=0)
    assert np.all(np.isfinite(values))
    assert space.with_batch_rank().contains(values)


def test_size_zero_gives_empty_values():
    space = Dict(a=FloatBox(2, **BATCH), b=IntBox(3, **BATCH))
    value = space.sample(0, rng=0)
    assert value["a"].shape == (0, 2) and value["b"].shape == (0,)
    assert space.contains(value)
