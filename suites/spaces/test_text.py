"""The text form of spaces used in spec files: examples, nested YAML-like specs, formatting."""

from __future__ import annotations

import numpy as np
import pytest

from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple, format_space, parse

B = dict(batch_rank=True)

EXAMPLES = [
    ("float32[84,84,4]", FloatBox((84, 84, 4))),
    ("uint8[B,84,84,4]", IntBox(shape=(84, 84, 4), dtype="uint8", batch_rank=True)),
    ("float32[T,B,2](-1.0,1.0)", FloatBox(2, -1.0, 1.0, batch_rank=True, time_rank=True, time_major=True)),
    ("float32[B,T,2](-1.0,1.0)", FloatBox(2, -1.0, 1.0, batch_rank=True, time_rank=True)),
    ("float[T]", FloatBox((), time_rank=True)),
    ("int64[](0,5)", IntBox(low=0, high=5)),
    ("int64[](0,5)", IntBox(6)),
    ("int[2]", IntBox(shape=(2,), dtype="int64")),
    ("bool[]", BoolBox()),
    ("bool[0,3]", BoolBox((0, 3))),
    ("float64[2]([-1.0,0.0],[1.0,inf])", FloatBox(2, [-1.0, 0.0], [1.0, np.inf], "float64")),
    ("float16[](-inf, 2.5)", FloatBox((), -np.inf, 2.5, "float16")),
    ("float32[2,2]([[0,1],[2,3]], 5)", FloatBox((2, 2), [[0, 1], [2, 3]], 5)),
    ("uint64[](0,18446744073709551615)", IntBox(dtype="uint64")),
    ("[B]{obs: float32[4], mask: bool[2]}", Dict(obs=FloatBox(4, **B), mask=BoolBox(2, **B))),
    ("{obs: float32[B,4], mask: bool[B,2]}", Dict(obs=FloatBox(4, **B), mask=BoolBox(2, **B))),
    ("[T,B]{a: (int64[], bool[])}", Dict(a=Tuple(IntBox(), BoolBox())).with_ranks(True, True, True)),
    ("(int64[], float32[3])", Tuple(IntBox(), FloatBox(3))),
    ("(int64[], float32[3],)", Tuple(IntBox(), FloatBox(3))),
    ("(bool[],)", Tuple(BoolBox())),
    ("()", Tuple()),
    ("{}", Dict()),
    ('{"a b": bool[]}', Dict({"a b": BoolBox()})),
    ("{'x-1': bool[], info: int8[]}", Dict({"x-1": BoolBox(), "info": IntBox(dtype="int8")})),
    ("{a: {b: (bool[], {c: int[](1,3)})}}", Dict(a=Dict(b=Tuple(BoolBox(), Dict(c=IntBox(low=1, high=3)))))),
    ("  float32 [ 2 , 3 ] ( -1e3 , 1E+3 )  ", FloatBox((2, 3), -1000.0, 1000.0)),
]


@pytest.mark.parametrize("text, expected", EXAMPLES, ids=[t for t, _ in EXAMPLES])
def test_text_examples_parse(text, expected):
    space = parse(text)
    assert space == expected
    assert parse(repr(space)) == space


@pytest.mark.parametrize("space, text", [
    (FloatBox((84, 84, 4)), "float32[84,84,4]"),
    (IntBox(6), "int64[](0,5)"),
    (FloatBox(2, -1.0, 1.0, batch_rank=True, time_rank=True, time_major=True), "float32[T,B,2](-1.0,1.0)"),
    (Dict(obs=FloatBox(4, **B), mask=BoolBox(2, **B)), "[B]{mask: bool[2], obs: float32[4]}"),
    (Dict(obs=FloatBox(4, **B), mask=BoolBox(2)), "{mask: bool[2], obs: float32[B,4]}"),
    (Tuple(BoolBox()), "(bool[],)"),
    (Dict({"a b": BoolBox(), "inf": BoolBox()}), '{"a b": bool[], inf: bool[]}'),
    (Dict({"a\n": BoolBox(), "é": BoolBox(), 'say "hi"': BoolBox()}), '{"a\\n": bool[], "say \\"hi\\"": bool[], "\\u00e9": bool[]}'),
    (IntBox(low=[[0], [1]], high=3, shape=(2, 1)), "int64[2,1]([[0],[1]],3)"),
])
def test_format_examples(space, text):
    assert repr(space) == str(space) == format_space(space) == text
    assert parse(text) == space


def test_format_without_ranks():
    space = Dict(a=FloatBox(2, batch_rank=True, time_rank=True))
    assert format_space(space, with_ranks=False) == "{a: float32[2]}"
    assert parse(format_space(space, with_ranks=False)) == space.strip_ranks()


def test_nested_python_specs_parse():
    spec = {  # what yaml.safe_load gives for a nested spec file entry
        "obs": {"image": "uint8[B,84,84,3]", "state": "float32[B,7](-1.0,1.0)"},
        "actions": ["int64[B](0,3)", "float32[B,2]"],
        "extra": [],
        "pair": ("bool[]", {"x": "int[]"}),
    }
    expected = Dict(
        obs=Dict(image=IntBox(shape=(84, 84, 3), dtype="uint8", **B), state=FloatBox(7, -1.0, 1.0, **B)),
        actions=Tuple(IntBox(low=0, high=3, **B), FloatBox(2, **B)),
        extra=Tuple(),
        pair=Tuple(BoolBox(), Dict(x=IntBox())),
    )
    assert parse(spec) == expected


def test_parse_from_yaml_text():
    import yaml

    loaded = yaml.safe_load("""
    obs:
      pos: float32[B,3]
      "a b": bool[B]
    act:
      - int64[B](0,3)
      - "(bool[],)"
    """)
    assert parse(loaded) == Dict({
        "obs": Dict({"pos": FloatBox(3, **B), "a b": BoolBox((), **B)}),
        "act": Tuple(IntBox(low=0, high=3, **B), Tuple(BoolBox())),
    })


def test_parse_passes_spaces_through():
    space = FloatBox(3)
    assert parse(space) is space
    assert parse({"a": space})["a"] is space


def test_dict_and_tuple_accept_text_for_sub_spaces():
    assert Dict(a="float32[2]", b=("bool[]", "int[]")) == parse("{a: float32[2], b: (bool[], int64[])}")
