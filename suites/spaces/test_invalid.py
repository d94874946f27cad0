"""Argument validation: one table of invalid calls and the messages they raise."""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple, parse
from harness.testing.strategies import from_space, spaces


def bad_text(text: str, position: int, message: str) -> str:
    """The regex of a parse error: the text, where in it, and what went wrong (``message``, literal)."""
    return rf"^bad space text {re.escape(repr(text))} at position {position}: {re.escape(message)}"


INVALID = [
    # bounds out of order
    (lambda: FloatBox(2, low=1.0, high=0.0), r"FloatBox: low must be <= high everywhere; got low=\[1.0, 1.0\], high=\[0.0, 0.0\]"),
    (lambda: FloatBox(low=[0.0, 2.0], high=1.0), r"FloatBox: low must be <= high .*\(low 2.0 > high 1.0 at index \(1,\)\)"),
    (lambda: IntBox(low=3, high=1), r"IntBox: low must be <= high everywhere; got low=3, high=1"),
    # shapes
    (lambda: FloatBox((-1, 2)), r"FloatBox: shape must be a tuple of non-negative ints; got \(-1, 2\) \(entry -1 is negative\)"),
    (lambda: IntBox(shape=-3), r"IntBox: shape must be .*; got \(-3,\) \(entry -3 is negative\)"),
    (lambda: BoolBox((2, -2)), r"BoolBox: shape must be .*; got \(2, -2\) \(entry -2 is negative\)"),
    (lambda: IntBox(shape=(2, 1.5)), r"IntBox: shape must be .*; got \(2, 1.5\) \(entry 1.5 is not an int\)"),
    (lambda: FloatBox((True,)), r"FloatBox: shape must be .*; got \(True,\) \(entry True is not an int\)"),
    (lambda: BoolBox("x"), r"BoolBox: shape must be a tuple of non-negative ints; got 'x'"),
    (lambda: FloatBox(shape=(3,), low=[0, 1]), r"FloatBox: low of shape \(2,\) does not broadcast to shape \(3,\); got \[0, 1\]"),
    (lambda: FloatBox(low=[0, 1], high=[1, 2, 3]), r"FloatBox: low of shape \(2,\) and high of shape \(3,\) do not broadcast"),
    # n
    (lambda: IntBox(0), r"IntBox: n must be a positive int; got 0"),
    (lambda: IntBox(-3), r"IntBox: n must be a positive int; got -3"),
    (lambda: IntBox(2.0), r"IntBox: n must be a positive int; got 2.0"),
    (lambda: IntBox(True), r"IntBox: n must be a positive int; got True"),
    (lambda: IntBox(300, dtype="uint8"), r"IntBox: n=300 does not fit dtype uint8"),
    (lambda: IntBox(5, low=0, high=3), r"IntBox: give either n or low/high, not both; got n=5, low=0, high=3"),
    (lambda: IntBox(5, high=3), r"IntBox: give either n or low/high, not both; got n=5, low=None, high=3"),
    # dtypes
    (lambda: FloatBox(dtype="float8"), r"FloatBox: dtype must be one of float16, float32, float64; got 'float8'"),
    (lambda: FloatBox(dtype=np.int32), r"FloatBox: dtype must be one of float16, float32, float64; got <class 'numpy.int32'>"),
    (lambda: IntBox(dtype="int128"), r"IntBox: dtype must be one of int8, .*, uint64; got 'int128'"),
    (lambda: IntBox(dtype="float32"), r"IntBox: dtype must be one of int8, .*; got 'float32'"),
    (lambda: IntBox(dtype=bool), r"IntBox: dtype must be one of int8, .*; got <class 'bool'>"),
    # bound values
    (lambda: FloatBox(low=np.nan), r"FloatBox: low must not contain NaN; got nan"),
    (lambda: FloatBox(low=0.0, high=[1.0, np.nan]), r"FloatBox: high must not contain NaN; got \[1.0, nan\]"),
    (lambda: FloatBox(low="a"), r"FloatBox: low must be a number or an array of numbers; got 'a'"),
    (lambda: FloatBox(high=70000.0, dtype="float16"), r"FloatBox: high must be finite in float16 \(max 65504.0\) or inf; got 70000.0"),
    (lambda: FloatBox(low=-1e39), r"FloatBox: low must be finite in float32 .* or inf; got -1e\+39"),
    (lambda: IntBox(low=-1, high=3, dtype="uint8"), r"IntBox: low must lie within the range of uint8 \[0, 255\]; got -1"),
    (lambda: IntBox(low=0, high=[1, 200], dtype="int8"), r"IntBox: high must lie within the range of int8 \[-128, 127\]; got \[1, 200\]"),
    (lambda: IntBox(low=0, high=2**64), r"IntBox: high must be a number or an array of numbers; got 18446744073709551616"),
    (lambda: IntBox(low=0.5, high=3), r"IntBox: low must be integers; got 0.5"),
    # containers
    (lambda: Dict({"a/b": BoolBox()}), r"Dict: keys must be non-empty strings without '/'; got key 'a/b'"),
    (lambda: Dict({"": BoolBox()}), r"Dict: keys must be non-empty strings without '/'; got key ''"),
    (lambda: Dict({3: BoolBox()}), r"Dict: keys must be non-empty strings without '/'; got key 3"),
    (lambda: Dict({"a": BoolBox()}, a=IntBox(2)), r"Dict: key 'a' given twice"),
    (lambda: Dict({"a": 3}), r"Dict key 'a': expected a Space .*; got 3"),
    (lambda: Dict([("a", BoolBox())]), r"Dict: spaces must be a mapping of str to Space; got list"),
    (lambda: Tuple(BoolBox(), None), r"Tuple index 1: expected a Space .*; got None"),
    (lambda: Dict(a="float8[]"), r"bad space text 'float8\[\]' at position 0: unknown dtype 'float8'"),
    # text
    (lambda: parse("float8[2]"), bad_text("float8[2]", 0, "unknown dtype 'float8'; expected one of float, int, bool")),
    (lambda: parse("float32[2"), bad_text("float32[2", 9, "expected ',', got the end of the text")),
    (lambda: parse("float32 2]"), bad_text("float32 2]", 8, "expected '[', got '2'")),
    (lambda: parse("{a: bool[]"), bad_text("{a: bool[]", 10, "expected ',', got the end of the text")),
    (lambda: parse("float32[-1]"), bad_text("float32[-1]", 8, "expected a non-negative int dimension or B/T, got '-1'")),
    (lambda: parse("float32[2.5]"), bad_text("float32[2.5]", 8, "expected a non-negative int dimension or B/T, got '2.5'")),
    (lambda: parse("float32[2] x"), bad_text("float32[2] x", 11, "unexpected 'x' after a complete space")),
    (lambda: parse("(int64[])"), bad_text("(int64[])", 0, "a one-element tuple needs a trailing comma")),
    (lambda: parse("{a: bool[], a: int[]}"), bad_text("{a: bool[], a: int[]}", 12, "duplicate dict key 'a'")),
    (lambda: parse("[B]{a: int[B]}"), bad_text("[B]{a: int[B]}", 0, "ranks given on the container and on a leaf")),
    (lambda: parse("[B]bool[]"), bad_text("[B]bool[]", 3, "a rank prefix like [B] must be followed by a dict")),
    (lambda: parse("[X]{a: bool[]}"), bad_text("[X]{a: bool[]}", 1, "expected a rank symbol B or T, got 'X'")),
    (lambda: parse("[B,B]{a: bool[]}"), bad_text("[B,B]{a: bool[]}", 0, "rank symbols given twice in ['B', 'B']")),
    (lambda: parse("float32[B,2,T]"), bad_text("float32[B,2,T]", 12, "rank symbol T must come before the core dimensions")),
    (lambda: parse("float32[B,B]"), bad_text("float32[B,B]", 10, "rank symbol B given twice")),
    (lambda: parse("bool[](0,1)"), bad_text("bool[](0,1)", 6, "bool spaces take no bounds")),
    (lambda: parse("float32[2](1.0,0.0)"), bad_text("float32[2](1.0,0.0)", 0, "FloatBox: low must be <= high")),
    (lambda: parse("int8[](0,x)"), bad_text("int8[](0,x)", 9, "expected a number or a list of numbers, got 'x'")),
    (lambda: parse("{a/b: bool[]}"), bad_text("{a/b: bool[]}", 2, "unexpected character '/'")),
    (lambda: parse('{"a/b": bool[]}'), bad_text('{"a/b": bool[]}', 0, "Dict: keys must be non-empty strings without '/'; got key 'a/b'")),
    (lambda: parse(""), bad_text("", 0, "expected a space")),
    (lambda: parse(3), r"cannot parse a space from int 3: expected space text, a dict or a list"),
    # values and sampling
    (lambda: BoolBox().sample(size=3), r"size 3 does not fit the space's extra ranks \(no batch or time rank\): expected 0"),
    (lambda: FloatBox(2, batch_rank=True, time_rank=True).sample(size=3), r"size 3 does not fit the space's extra ranks \(\[B,T\]\): expected 2"),
    (lambda: FloatBox(2, batch_rank=True).zeros(size=(2, 3)), r"size \(2, 3\) does not fit the space's extra ranks \(\[B\]\): expected 1"),
    (lambda: FloatBox(2, batch_rank=True).sample(size=-1), r"size entries must be non-negative ints; got -1"),
    (lambda: IntBox(2, time_rank=True).sample(size=1.5), r"size must be None, an int or a tuple of ints; got 1.5"),
    (lambda: IntBox(2, time_rank=True).sample(size="3"), r"size must be None, an int or a tuple of ints; got '3'"),
    (lambda: IntBox(2, time_rank=True).sample(size=(True,)), r"size entries must be non-negative ints; got \(True,\)"),
    (lambda: FloatBox(2).sample(rng="x"), r"rng must be an int seed, a numpy Generator or None; got 'x'"),
    (lambda: FloatBox(2).unflatten([1]), r"unflatten: expected a dict keyed by key paths, got list"),
    (lambda: Dict(a=BoolBox()).unflatten({"b": 1}), r"unflatten: key paths differ from the space's: missing \['a'\], unexpected \['b'\]"),
    (lambda: Dict(a=BoolBox()).flatten_value({"b": 1}), r"at the root: dict keys differ from the space's: missing \['a'\], unexpected \['b'\]"),
    (lambda: Tuple(Tuple(BoolBox())).flatten_value(((),)), r"at '0': expected a tuple of length 1, got tuple of length 0"),
    # the strategies
    (lambda: from_space(FloatBox(2, batch_rank=True), batch_size=-1), r"from_space: batch_size must be an int >= 0; got -1"),
    (lambda: from_space(FloatBox(2, time_rank=True), time_size=2.0), r"from_space: time_size must be an int >= 0; got 2.0"),
    (lambda: from_space("float32[2]"), r"from_space: space must be a Space; got 'float32\[2\]'"),
    (lambda: from_space(FloatBox(2), float_limit=float("inf")), r"from_space: float_limit must be a positive finite number; got inf"),
    (lambda: spaces(max_leaves=0), r"spaces: max_leaves must be an int >= 1; got 0"),
    (lambda: spaces(max_depth=-1), r"spaces: max_depth must be an int >= 0; got -1"),
    (lambda: spaces(dtypes=["float8"]), r"spaces: dtypes must be a non-empty selection of .*; got \['float8'\]"),
]


def case_id(message: str) -> str:
    return re.sub(r"\\(.)", r"\1", message).removeprefix("^")[:70]


@pytest.mark.parametrize("call, message", INVALID, ids=[case_id(m) for _, m in INVALID])
def test_invalid_calls_raise_naming_the_argument_and_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()
