"""The text form of spaces used in spec files, and its parser.

Grammar (whitespace is free between tokens)::

    space   := prefix? container | leaf
    leaf    := DTYPE '[' dims? ']' bounds?
    dims    := dim (',' dim)*          # dim: an int, or the rank symbols B / T in front
    bounds  := '(' value ',' value ')' # inclusive low, high: a number or nested list
    prefix  := '[' rank (',' rank)* ']' # ranks applied to every leaf of the container
    container := '{' (key ':' space (',' key ':' space)* ','?)? '}'
              | '(' ')' | '(' space ',' ')' | '(' space (',' space)+ ','? ')'

Examples: ``float32[84,84,4]``, ``uint8[B,84,84,4]``, ``float32[T,B,2](-1.0,1.0)``,
``int64[](0,5)``, ``bool[]``, ``[B]{obs: float32[4], mask: bool[2]}``, ``(int64[], float32[3])``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from harness.spaces.base import Space
from harness.spaces.boxes import FLOAT_DTYPES, INT_DTYPES, DTYPE_ALIASES, BoolBox, FloatBox, IntBox
from harness.spaces.containers import Dict, Tuple, set_text_parser

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>[-+]?(?:inf|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<punct>[\[\](){},:])
""", re.VERBOSE)


def format_space(space: Space, with_ranks: bool = True) -> str:
    """The text form of a space (see the module docstring); each space class writes its own."""
    return space.to_text(with_ranks)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                self.fail(pos, f"unexpected character {text[pos]!r}")
            if m.lastgroup != "ws":
                self.tokens.append((m.lastgroup, m.group(), pos))
            pos = m.end()
        self.i = 0

    def fail(self, pos: int, msg: str) -> None:
        raise ValueError(f"bad space text {self.text!r} at position {pos}: {msg}\n  {self.text}\n  {' ' * pos}^")

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "", len(self.text))

    def take(self, value: str | None = None, kind: str | None = None) -> tuple[str, str, int]:
        tok = self.peek()
        if (value is not None and tok[1] != value) or (kind is not None and tok[0] != kind):
            want = repr(value) if value is not None else kind
            got = "the end of the text" if tok[0] == "end" else repr(tok[1])
            self.fail(tok[2], f"expected {want}, got {got}")
        self.i += 1
        return tok

    def parse(self) -> Space:
        space = self.space()
        if self.peek()[0] != "end":
            self.fail(self.peek()[2], f"unexpected {self.peek()[1]!r} after a complete space")
        return space

    def space(self) -> Space:
        kind, value, pos = self.peek()
        if value == "[":
            ranks, rpos = self.ranks()
            if self.peek()[1] not in ("{", "("):
                self.fail(self.peek()[2], "a rank prefix like [B] must be followed by a dict {...} or tuple (...)")
            inner = self.container()
            return _apply_ranks(inner, ranks, lambda m: self.fail(rpos, m))
        if value in ("{", "("):
            return self.container()
        if kind == "name":
            return self.leaf()
        self.fail(pos, f"expected a space (dtype[...], {{...}} or (...)), got {value or 'the end of the text'!r}")
        raise AssertionError  # unreachable

    def ranks(self) -> tuple[list[str], int]:
        _, _, pos = self.take("[")
        ranks = []
        while True:
            tok = self.take(kind="name")
            if tok[1] not in ("B", "T"):
                self.fail(tok[2], f"expected a rank symbol B or T, got {tok[1]!r}")
            ranks.append(tok[1])
            if self.peek()[1] == "]":
                self.take("]")
                return ranks, pos
            self.take(",")

    def container(self) -> Space:
        _, open_, pos = self.take()
        if open_ == "{":
            items: dict[str, Space] = {}
            while self.peek()[1] != "}":
                kind, key, kpos = self.take()
                if kind == "str":
                    key = json.loads(key) if key.startswith('"') else key[1:-1]
                elif kind != "name":
                    self.fail(kpos, f"expected a dict key, got {key!r}")
                if key in items:
                    self.fail(kpos, f"duplicate dict key {key!r}")
                self.take(":")
                items[key] = self.space()
                if self.peek()[1] != "}":
                    self.take(",")
            self.take("}")
            try:
                return Dict(items)
            except ValueError as exc:
                self.fail(pos, str(exc))
        parts: list[Space] = []
        trailing = False
        while self.peek()[1] != ")":
            parts.append(self.space())
            trailing = False
            if self.peek()[1] != ")":
                self.take(",")
                trailing = True
        if len(parts) == 1 and not trailing:
            self.fail(pos, "a one-element tuple needs a trailing comma: (space,)")
        self.take(")")
        return Tuple(parts)

    def leaf(self) -> Space:
        _, name, pos = self.take(kind="name")
        dtype = DTYPE_ALIASES.get(name, name)
        if dtype not in FLOAT_DTYPES + INT_DTYPES + ("bool",):
            self.fail(pos, f"unknown dtype {name!r}; expected one of float, int, bool, "
                           f"{', '.join(FLOAT_DTYPES + INT_DTYPES)}")
        self.take("[")
        ranks: list[str] = []
        dims: list[int] = []
        while self.peek()[1] != "]":
            kind, tok, tpos = self.take()
            if tok in ("B", "T"):
                if dims:
                    self.fail(tpos, f"rank symbol {tok} must come before the core dimensions")
                if tok in ranks:
                    self.fail(tpos, f"rank symbol {tok} given twice")
                ranks.append(tok)
            elif kind == "num" and re.fullmatch(r"\d+", tok):
                dims.append(int(tok))
            else:
                self.fail(tpos, f"expected a non-negative int dimension or B/T, got {tok!r}")
            if self.peek()[1] != "]":
                self.take(",")
        self.take("]")
        bounds = None
        if self.peek()[1] == "(":
            bpos = self.take("(")[2]
            low = self.value()
            self.take(",")
            high = self.value()
            self.take(")")
            bounds = (low, high, bpos)
        opts = dict(batch_rank="B" in ranks, time_rank="T" in ranks,
                    time_major=ranks[:1] == ["T"] and "B" in ranks)
        if dtype == "bool" and bounds:  # outside the try: fail() raises ValueError too
            self.fail(bounds[2], "bool spaces take no bounds")
        try:
            if dtype == "bool":
                return BoolBox(tuple(dims), **opts)
            if dtype in FLOAT_DTYPES:
                lo, hi = (bounds[0], bounds[1]) if bounds else (-np.inf, np.inf)
                return FloatBox(tuple(dims), lo, hi, dtype, **opts)
            lo, hi = (bounds[0], bounds[1]) if bounds else (None, None)
            return IntBox(low=lo, high=hi, shape=tuple(dims), dtype=dtype, **opts)
        except ValueError as exc:
            self.fail(pos, str(exc))
        raise AssertionError  # unreachable

    def value(self) -> Any:
        kind, tok, pos = self.take()
        if kind == "num" or (kind == "name" and tok == "inf"):  # names come first: keys like "info"
            if "inf" in tok:
                return float(tok)
            return float(tok) if re.search(r"[.eE]", tok) else int(tok)
        if tok == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.value())
                if self.peek()[1] != "]":
                    self.take(",")
            self.take("]")
            return items
        self.fail(pos, f"expected a number or a list of numbers, got {tok!r}")


def _apply_ranks(space: Space, ranks: list[str], fail) -> Space:
    if len(set(ranks)) != len(ranks):
        fail(f"rank symbols given twice in {ranks}")
    for _, leaf in space.leaves():
        if leaf.extra_ranks:
            fail(f"ranks given on the container and on a leaf ({leaf}); give them in one place")
    return space.with_ranks("B" in ranks, "T" in ranks, ranks[:1] == ["T"] and "B" in ranks)


def parse(spec: Any) -> Space:
    """A space from its text form, or from nested dicts/lists of such texts (YAML).

    Raises:
        ValueError: naming the position in the text and what was expected.
    """
    if isinstance(spec, Space):
        return spec
    if isinstance(spec, str):
        return _Parser(spec).parse()
    if isinstance(spec, dict):
        return Dict({k: parse(v) for k, v in spec.items()})
    if isinstance(spec, (list, tuple)):
        return Tuple([parse(v) for v in spec])
    raise ValueError(f"cannot parse a space from {type(spec).__name__} {spec!r}: expected space text, a dict or a list")


# `Dict({"a": "float32[2]"})` and friends accept space texts: the containers call this parser.
set_text_parser(parse)
