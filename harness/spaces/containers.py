"""Container spaces: `Dict` (string keys, sorted) and `Tuple`; ranks live on their leaves."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from harness.spaces.base import ROOT, SEP, Space, as_rng, join_path, rank_symbols

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ContainerSpace(Space):
    """A space made of named or indexed sub-spaces.

    A container has a batch (time) rank when all its leaves have one;
    `with_ranks` and friends apply to every leaf.
    """

    __slots__ = ("_children", "_hash")

    def _items(self) -> list[tuple[str | int, Space]]:
        raise NotImplementedError

    def _rebuild(self, children: list[Space]) -> "ContainerSpace":
        raise NotImplementedError

    def _leaf_ranks(self) -> set[tuple[bool, bool, bool]]:
        return {(s.has_batch_rank, s.has_time_rank, s.time_major) for _, s in self.leaves()}

    @property
    def has_batch_rank(self) -> bool:
        ranks = self._leaf_ranks()
        return bool(ranks) and all(b for b, _, _ in ranks)

    @property
    def has_time_rank(self) -> bool:
        ranks = self._leaf_ranks()
        return bool(ranks) and all(t for _, t, _ in ranks)

    @property
    def time_major(self) -> bool:
        ranks = self._leaf_ranks()
        return bool(ranks) and all(m for _, _, m in ranks)

    @property
    def uniform_ranks(self) -> tuple[str, ...] | None:
        """The extra ranks shared by every leaf, or None if leaves differ (or there are none)."""
        ranks = self._leaf_ranks()
        if len(ranks) != 1:
            return None
        return rank_symbols(*ranks.pop())

    def with_ranks(self, batch: bool, time: bool, time_major: bool = False) -> "ContainerSpace":
        return self._rebuild([s.with_ranks(batch, time, time_major) for _, s in self._items()])

    def with_batch_rank(self, add: bool = True) -> "ContainerSpace":
        """A copy whose every leaf has (or lacks) a batch rank, each keeping its own time rank."""
        return self._rebuild([s.with_batch_rank(add) for _, s in self._items()])

    def with_time_rank(self, add: bool = True, time_major: bool | None = None) -> "ContainerSpace":
        """A copy whose every leaf has (or lacks) a time rank, each keeping its own batch rank."""
        return self._rebuild([s.with_time_rank(add, time_major) for _, s in self._items()])

    def map(self, fn: Callable[[str, Space], Space], path: str = ROOT) -> "ContainerSpace":
        return self._rebuild([s.map(fn, join_path(path, k)) for k, s in self._items()])

    def leaves(self, path: str = ROOT) -> Iterator[tuple[str, Space]]:
        for k, s in self._items():
            yield from s.leaves(join_path(path, k))

    def __len__(self) -> int:
        return len(self._children)

    @property
    def shape(self) -> Any:
        """The core shapes of the leaves, nested like values."""
        return self.unflatten({k: s.shape for k, s in self.leaves()})

    @property
    def dtype(self) -> Any:
        """The dtypes of the leaves, nested like values."""
        return self.unflatten({k: s.dtype for k, s in self.leaves()})

    @property
    def flat_dim(self) -> int:
        """Total number of elements over all leaves."""
        return sum(s.flat_dim for _, s in self.leaves())

    def sample(self, size: int | tuple[int, ...] | None = None,
               rng: int | np.random.Generator | None = None) -> Any:
        gen = as_rng(rng)
        return self.unflatten({k: s.sample(size, gen) for k, s in self.leaves()})

    def zeros(self, size: int | tuple[int, ...] | None = None) -> Any:
        return self.unflatten({k: s.zeros(size) for k, s in self.leaves()})

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._items() == other._items()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((type(self).__name__, tuple(self._items())))
        return self._hash

    def to_text(self, with_ranks: bool = True) -> str:
        prefix = ""
        if with_ranks:
            ranks = self.uniform_ranks
            if ranks:
                prefix, with_ranks = "[" + ",".join(ranks) + "]", False
        return prefix + self._body_text(with_ranks)

    def _body_text(self, with_ranks: bool) -> str:
        raise NotImplementedError


class Dict(ContainerSpace):
    """A mapping of string keys to sub-spaces; values are dicts. Keys are kept sorted.

    ``Dict({"a": FloatBox(2)}, b=IntBox(3))``; nested Python dicts and tuples of
    spaces become `Dict`/`Tuple`. Keys must be non-empty and free of ``/``.
    """

    __slots__ = ()

    def __init__(self, spaces: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged: dict[str, Any] = {}
        for src in (spaces or {}), kwargs:
            if not isinstance(src, Mapping):
                raise ValueError(f"Dict: spaces must be a mapping of str to Space; got {type(src).__name__}")
            for key, sub in src.items():
                if not isinstance(key, str) or not key or SEP in key:
                    raise ValueError(f"Dict: keys must be non-empty strings without '/'; got key {key!r}")
                if key in merged:
                    raise ValueError(f"Dict: key {key!r} given twice")
                merged[key] = _as_space(sub, f"Dict key {key!r}")
        self._children = {k: merged[k] for k in sorted(merged)}
        self._hash = None

    def _items(self) -> list[tuple[str | int, Space]]:
        return list(self._children.items())

    def _rebuild(self, children: list[Space]) -> "Dict":
        return Dict(dict(zip(self._children, children)))

    def __getitem__(self, key: str) -> Space:
        return self._children[key]

    def keys(self):
        """The keys, sorted."""
        return self._children.keys()

    def _body_text(self, with_ranks: bool) -> str:
        body = ", ".join(f"{k if is_identifier(k) else json.dumps(k)}: {s.to_text(with_ranks)}" for k, s in self.items())
        return "{" + body + "}"

    def items(self):
        """``(key, sub_space)`` pairs, sorted by key."""
        return self._children.items()

    def values(self):
        """Sub-spaces, sorted by key."""
        return self._children.values()

    def __iter__(self):
        return iter(self._children)

    def flatten_value(self, value: Any, path: str = ROOT) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            where = f"at '{path}'" if path else "at the root"
            raise ValueError(f"{where}: expected a dict with keys {list(self._children)}, got {type(value).__name__}")
        missing = [k for k in self._children if k not in value]
        extra = [k for k in value if k not in self._children]
        if missing or extra:
            where = f"at '{path}'" if path else "at the root"
            raise ValueError(f"{where}: dict keys differ from the space's: missing {missing}, unexpected {extra}")
        out: dict[str, Any] = {}
        for k, s in self._children.items():
            out.update(s.flatten_value(value[k], join_path(path, k)))
        return out

    def _unflatten(self, flat: dict[str, Any], path: str, as_space: bool) -> Any:
        parts = {k: s._unflatten(flat, join_path(path, k), as_space) for k, s in self._children.items()}
        return Dict(parts) if as_space else parts

    def why_not(self, value: Any, path: str = ROOT) -> str | None:
        where = f"at '{path}'" if path else "at the root"
        if not isinstance(value, Mapping):
            return f"{where}: expected a dict with keys {list(self._children)}, got {type(value).__name__}"
        missing = [k for k in self._children if k not in value]
        if missing:
            return f"{where}: missing key(s) {missing}"
        extra = [k for k in value if k not in self._children]
        if extra:
            return f"{where}: unexpected key(s) {extra}"
        for k, s in self._children.items():
            reason = s.why_not(value[k], join_path(path, k))
            if reason:
                return reason
        return None


class Tuple(ContainerSpace):
    """An ordered sequence of sub-spaces; values are tuples.

    ``Tuple(FloatBox(2), IntBox(3))`` or ``Tuple([FloatBox(2), IntBox(3)])``.
    """

    __slots__ = ()

    def __init__(self, *spaces: Any) -> None:
        if len(spaces) == 1 and isinstance(spaces[0], (list, tuple)) and not isinstance(spaces[0], Space):
            spaces = tuple(spaces[0])
        self._children = tuple(_as_space(s, f"Tuple index {i}") for i, s in enumerate(spaces))
        self._hash = None

    def _items(self) -> list[tuple[str | int, Space]]:
        return list(enumerate(self._children))

    def _rebuild(self, children: list[Space]) -> "Tuple":
        return Tuple(children)

    def __getitem__(self, index: int) -> Space:
        return self._children[index]

    def _body_text(self, with_ranks: bool) -> str:
        parts = [s.to_text(with_ranks) for s in self]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def __iter__(self):
        return iter(self._children)

    def flatten_value(self, value: Any, path: str = ROOT) -> dict[str, Any]:
        if not isinstance(value, (tuple, list)) or len(value) != len(self._children):
            where = f"at '{path}'" if path else "at the root"
            got = f"{type(value).__name__} of length {len(value)}" if isinstance(value, (tuple, list)) else type(value).__name__
            raise ValueError(f"{where}: expected a tuple of length {len(self._children)}, got {got}")
        out: dict[str, Any] = {}
        for i, s in enumerate(self._children):
            out.update(s.flatten_value(value[i], join_path(path, i)))
        return out

    def _unflatten(self, flat: dict[str, Any], path: str, as_space: bool) -> Any:
        parts = tuple(s._unflatten(flat, join_path(path, i), as_space) for i, s in enumerate(self._children))
        return Tuple(parts) if as_space else parts

    def why_not(self, value: Any, path: str = ROOT) -> str | None:
        where = f"at '{path}'" if path else "at the root"
        if not isinstance(value, (tuple, list)):
            return f"{where}: expected a tuple of length {len(self._children)}, got {type(value).__name__}"
        if len(value) != len(self._children):
            return f"{where}: expected a tuple of length {len(self._children)}, got length {len(value)}"
        for i, s in enumerate(self._children):
            reason = s.why_not(value[i], join_path(path, i))
            if reason:
                return reason
        return None


def _as_space(value: Any, what: str) -> Space:
    if isinstance(value, Space):
        return value
    if isinstance(value, Mapping):
        return Dict(value)
    if isinstance(value, (tuple, list)):
        return Tuple(value)
    if isinstance(value, str):
        if _TEXT_PARSER is None:
            raise ValueError(f"{what}: space text {value!r} needs harness.spaces.text (import harness.spaces)")
        return _TEXT_PARSER(value)
    raise ValueError(f"{what}: expected a Space (or a dict/tuple of spaces, or space text); got {value!r}")


_TEXT_PARSER: Callable[[str], Space] | None = None


def set_text_parser(parser: Callable[[str], Space]) -> None:
    """Registers the parser of space texts (`harness.spaces.text.parse` registers itself on import)."""
    global _TEXT_PARSER
    _TEXT_PARSER = parser


def is_identifier(key: str) -> bool:
    """Whether a Dict key can appear unquoted in the text form."""
    return bool(_IDENT.fullmatch(key))  # `$` alone would accept a trailing newline
