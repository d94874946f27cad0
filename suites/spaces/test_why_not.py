"""`why_not` names the key path and the dimension, index or bound that a bad value gets wrong."""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from harness.spaces import BoolBox, BoxSpace, Dict, FloatBox, IntBox, Space, Tuple
from harness.spaces.boxes import FLOAT_DTYPES, INT_DTYPES
from harness.testing.strategies import DICT_KEYS, from_space, spaces

NUMERIC = FLOAT_DTYPES + INT_DTYPES


def nodes(space: Space, parts: tuple = ()) -> Iterator[tuple[tuple, Space]]:
    """Every sub-space (containers too) with the keys leading to it."""
    yield parts, space
    if isinstance(space, Dict):
        for key, sub in space.items():
            yield from nodes(sub, parts + (key,))
    elif isinstance(space, Tuple):
        for index, sub in enumerate(space):
            yield from nodes(sub, parts + (index,))


def replaced(value: Any, parts: tuple, fn: Callable[[Any], Any]) -> Any:
    """A copy of ``value`` with the sub-value at ``parts`` replaced by ``fn(sub_value)``."""
    if not parts:
        return fn(value)
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, fn)}
    return tuple(replaced(v, rest, fn) if i == head else v for i, v in enumerate(value))


def where(parts: tuple) -> str:
    return f"at '{'/'.join(map(str, parts))}'" if parts else "at the root"


# Each mutation turns a valid sub-value of a node into a bad one: ``applies(node, value)``
# says whether it can; ``mutate(node, value, data)`` returns the bad sub-value and a regex
# that the message must match after the key path.


def bound_room(node: Space, value: Any, side: str) -> np.ndarray | None:
    """Where an element can step past the ``side`` ("low"/"high") bound and stay in the dtype."""
    if not isinstance(node, (FloatBox, IntBox)) or value.size == 0:
        return None
    bound = np.broadcast_to(getattr(node, side), value.shape)
    if node.dtype.kind == "f":
        room = np.isfinite(bound)
    else:
        info = np.iinfo(node.dtype)
        room = bound > info.min if side == "low" else bound < info.max
    return room if room.any() else None


def step_past(node: Space, value: Any, data: st.DataObject, side: str):
    room = bound_room(node, value, side)
    idx = tuple(int(i) for i in data.draw(st.sampled_from(np.argwhere(room).tolist()), label="index"))
    bound = np.broadcast_to(getattr(node, side), value.shape)[idx]
    bad = value.copy()
    if node.dtype.kind == "f":  # the next float outwards (an infinity past the largest float)
        with np.errstate(over="ignore"):
            bad[idx] = np.nextafter(bound, node.dtype.type(-np.inf if side == "low" else np.inf))
    else:
        bad[idx] = int(bound) - 1 if side == "low" else int(bound) + 1
    words = "below the lower" if side == "low" else "above the upper"
    return bad, rf"at index {re.escape(str(idx))} is {words} bound {re.escape(repr(bound.item()))}"


def is_box(node: Space, value: Any) -> bool:
    return isinstance(node, BoxSpace)


def wrong_dtype(node: Space, value: Any, data: st.DataObject):
    other = data.draw(st.sampled_from([d for d in ("float32", "float64", "int64", "uint8", "bool")
                                       if d != node.dtype.name]), label="other dtype")
    with np.errstate(over="ignore", invalid="ignore"):  # only the dtype matters here
        bad = value.astype(other)
    return bad, rf"dtype {other}, expected {node.dtype}"


def wrong_rank(node: Space, value: Any, data: st.DataObject):
    add = value.ndim == 0 or data.draw(st.booleans(), label="add a dimension")
    bad = np.zeros(value.shape + (1,) if add else value.shape[:-1], node.dtype)
    want = len(node.extra_ranks) + node.rank
    return bad, rf"{bad.ndim} dimension\(s\) .*expected {want}"


def wrong_size(node: Space, value: Any, data: st.DataObject):
    axis = len(node.extra_ranks) + data.draw(st.integers(0, node.rank - 1), label="core axis")
    shape = list(value.shape)
    want = shape[axis]
    shape[axis] = data.draw(st.integers(0, 5).filter(lambda n: n != want), label="size")
    return np.zeros(shape, node.dtype), rf"dimension {axis} has size {shape[axis]}, expected {want}\b"


def nan_element(node: Space, value: Any, data: st.DataObject):
    idx = tuple(data.draw(st.integers(0, n - 1), label="index") for n in value.shape)
    bad = value.copy()
    bad[idx] = np.nan
    return bad, rf"NaN at index {re.escape(str(idx))}"


def missing_key(node: Space, value: Any, data: st.DataObject):
    key = data.draw(st.sampled_from(list(node.keys())), label="missing key")
    return {k: v for k, v in value.items() if k != key}, rf"missing key\(s\) {re.escape(repr([key]))}"


def extra_key(node: Space, value: Any, data: st.DataObject):
    key = data.draw(st.text(min_size=1, max_size=4).filter(lambda k: k not in node.keys()), label="extra key")
    return {**value, key: np.zeros(())}, rf"unexpected key\(s\) {re.escape(repr([key]))}"


def wrong_length(node: Space, value: Any, data: st.DataObject):
    shorter = len(value) > 0 and data.draw(st.booleans(), label="drop the last")
    bad = value[:-1] if shorter else value + (np.zeros(()),)
    return bad, rf"expected a tuple of length {len(node)}, got length {len(bad)}"


def wrong_container(node: Space, value: Any, data: st.DataObject):
    if isinstance(node, Dict):
        return tuple(value.values()), r"expected a dict with keys .*, got tuple"
    return dict(enumerate(value)), rf"expected a tuple of length {len(node)}, got dict"


def not_an_array(node: Space, value: Any, data: st.DataObject):
    bad = data.draw(st.sampled_from([{"a": value}, (value,), None]), label="non-array")
    return bad, rf"expected an array for .*, got {type(bad).__name__}"


def in_dict(inner: st.SearchStrategy[Space]) -> st.SearchStrategy[Space]:
    """Spaces with a Dict at the root (so dict faults always apply), another space inside."""
    return st.builds(lambda key, space: Dict({key: space}), DICT_KEYS, inner)


def in_tuple(inner: st.SearchStrategy[Space]) -> st.SearchStrategy[Space]:
    return st.builds(lambda space, more: Tuple(space, *more), inner, st.lists(inner, max_size=1))


NESTED = spaces(max_depth=1, max_leaves=3)
MUTATIONS = {  # fault: (spaces to draw from, whether it applies to a node and its value, mutation)
    "wrong dtype": (spaces(), is_box, wrong_dtype),
    "wrong rank": (spaces(), is_box, wrong_rank),
    "wrong size": (spaces(), lambda node, value: isinstance(node, BoxSpace) and node.rank > 0, wrong_size),
    "below low": (spaces(dtypes=NUMERIC), lambda node, value: bound_room(node, value, "low") is not None,
                  lambda node, value, data: step_past(node, value, data, "low")),
    "above high": (spaces(dtypes=NUMERIC), lambda node, value: bound_room(node, value, "high") is not None,
                   lambda node, value, data: step_past(node, value, data, "high")),
    "NaN": (spaces(dtypes=FLOAT_DTYPES), lambda node, value: isinstance(node, FloatBox) and value.size > 0, nan_element),
    "missing key": (in_dict(NESTED), lambda node, value: isinstance(node, Dict) and len(node) > 0, missing_key),
    "extra key": (in_dict(NESTED), lambda node, value: isinstance(node, Dict), extra_key),
    "wrong length": (in_tuple(NESTED), lambda node, value: isinstance(node, Tuple), wrong_length),
    "wrong container": (st.one_of(in_dict(NESTED), in_tuple(NESTED)),
                        lambda node, value: isinstance(node, (Dict, Tuple)), wrong_container),
    "not an array": (spaces(), is_box, not_an_array),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@given(data=st.data())
def test_why_not_names_the_path_and_the_fault(mutation, data):
    space_strategy, applies, mutate = MUTATIONS[mutation]
    space = data.draw(space_strategy, label="space")
    value = data.draw(from_space(space), label="valid value")
    candidates = []
    for parts, node in nodes(space):
        sub_value = value
        for part in parts:
            sub_value = sub_value[part]
        if applies(node, sub_value):
            candidates.append((parts, node, sub_value))
    assume(candidates)
    parts, node, sub_value = data.draw(st.sampled_from(candidates), label="node")
    bad_node_value, pattern = mutate(node, sub_value, data)
    bad = replaced(value, parts, lambda _: bad_node_value)

    message = space.why_not(bad)
    assert message is not None
    assert message.startswith(where(parts) + ": "), message
    assert re.search(pattern, message, re.DOTALL), (pattern, message)
    assert not space.contains(bad)
    assert bad not in space
    # The node alone says the same, given its key path.
    assert node.why_not(bad_node_value, "/".join(map(str, parts))) == message


@given(spaces(), st.data())
def test_a_valid_value_has_no_reason(space, data):
    assert space.why_not(data.draw(from_space(space), label="value")) is None


@pytest.mark.parametrize("space, value, pattern", [
    (FloatBox(3, low=0.0, high=1.0), [0.5, 1.5, 0.0], r"^at the root: value 1.5 at index \(1,\) is above the upper bound 1.0"),
    (FloatBox(3, low=0.0, high=1.0), np.array([0.5, 1.0, 0.0], np.float64), r"^at the root: dtype float64, expected float32"),
    (FloatBox(3), [1, 2, 3], None),  # Python ints fit a float box
    (IntBox(3), 2.0, r"Python value of dtype float64 does not fit int64"),
    (IntBox(3), True, r"does not fit int64"),
    (BoolBox(), 1, r"does not fit bool"),
    (IntBox(3, dtype="uint64"), 2**64, r"does not fit uint64"),
    (Dict(a=Dict(b=IntBox(2, shape=(2,)))), {"a": {"b": np.array([0, 2])}},
     r"^at 'a/b': value 2 at index \(1,\) is above the upper bound 1"),
    (Tuple(BoolBox(), Dict(x=FloatBox(2, batch_rank=True))), (np.array(True), {"x": np.zeros((3, 4), np.float32)}),
     r"^at '1/x': dimension 1 has size 4, expected 2"),
    (FloatBox((2,), time_rank=True, batch_rank=True), np.zeros((2,), np.float32),
     r"^at the root: 1 dimension\(s\) \(2,\), expected 3"),
    (IntBox(low=[0, 5], high=[1, 9]), np.array([1, 4]), r"value 4 at index \(1,\) is below the lower bound 5"),
    (FloatBox(low=-np.inf, high=np.inf), np.float32(np.inf), None),
    (FloatBox(low=-1.0, high=1.0), np.float32(np.nan), r"^at the root: NaN at index \(\)"),
])
def test_why_not_examples(space, value, pattern):
    message = space.why_not(value)
    if pattern is None:
        assert message is None and space.contains(value)
    else:
        assert message is not None and re.search(pattern, message), message
        assert not space.contains(value)


def test_unbounded_spaces_skip_the_bound_comparisons_without_letting_anything_new_through():
    ints = IntBox(low=0, high=5, dtype="int32")
    assert ints.why_not(np.int32(7)) is not None and ints.bounded  # bounded: compared
    wide = ints.without_bounds()
    assert not wide.bounded and ints.bounded  # each copy answers for its own bounds
    info = np.iinfo(np.int32)
    assert wide.why_not(np.int32(info.max)) is None and wide.why_not(np.int32(info.min)) is None
    assert "above the upper bound" in wide.why_not(2 ** 40)  # a Python int past the dtype's range: still refused
    assert wide.with_batch_rank().why_not(np.array([info.min, 0, info.max], np.int32)) is None
    floats = FloatBox((2,), batch_rank=True)
    assert not floats.bounded
    assert floats.why_not(np.array([[-np.inf, np.inf], [3e38, -3e38]], np.float32)) is None
    assert "NaN at index (1, 0)" in floats.why_not(np.array([[0, 0], [np.nan, 0]], np.float32))
    assert "dtype float64" in floats.why_not(np.zeros((1, 2)))
    boxed = FloatBox((2,), low=-1.0, high=1.0, batch_rank=True)
    assert boxed.bounded and "above the upper bound" in boxed.why_not(np.array([[0.5, 1.5]], np.float32))
