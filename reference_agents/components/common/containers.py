"""`ContainerSplitter` and `ContainerMerger`: take container values apart and put them together."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import Component, api, graph_fn
from harness.spaces import SEP, Dict, Space, Tuple


def _is_index(key: Any) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, bool)


def _check_dict_key(owner: str, key: Any) -> None:
    if not isinstance(key, str) or not key or SEP in key:
        raise ValueError(f"{owner}: keys must be non-empty strings without {SEP!r}; got key {key!r}")


def _gather_keys(owner: str, positional: tuple, keys: Any) -> tuple:
    """Keys given positionally (``Splitter("a", "b")``) or as ``keys=[...]`` (spec configs), not both."""
    if keys is None:
        return tuple(positional)
    if positional:
        raise ValueError(f"{owner}: give keys positionally or as keys=[...], not both; got {positional!r} and {keys!r}")
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (list, tuple)):
        raise ValueError(f"{owner}: keys must be a list of keys; got {keys!r}")
    return tuple(keys)


def _check_unique(owner: str, keys: tuple) -> None:
    if len(set(keys)) != len(keys):
        raise ValueError(f"{owner}: keys must be unique; got {keys!r}")


def _split_output_spaces(self: "ContainerSplitter", inputs: Space) -> Any:
    parts = tuple(inputs[k] for k in self.keys)  # type: ignore[index]
    return parts if len(parts) > 1 else parts[0]


class ContainerSplitter(Component):
    """Takes the values at some keys out of a `Dict` or `Tuple` value.

    Accepts ``inputs`` of a `Dict` space (keys are strings) or a `Tuple` space
    (keys are int indices). Returns a tuple with one value per key, in the order
    the keys were given; each has the space of its sub-space exactly (bounds
    included), and sub-containers pass through whole.

    Args:
        *positional: the keys (Dict) or indices (Tuple) to take, at least one.
        keys: the same as a list (the form spec configs use), instead of positional keys.
        scope: the component's name.

    Raises:
        ValueError: for no keys, duplicate keys, or keys that are neither all
            strings nor all non-negative ints.
    """

    def __init__(self, *positional: str | int, keys: list[str | int] | None = None,
                 scope: str = "splitter") -> None:
        keys = _gather_keys("ContainerSplitter", positional, keys)
        if not keys:
            raise ValueError("ContainerSplitter: keys must name at least one key or index; got none")
        if all(_is_index(k) for k in keys):
            bad = [k for k in keys if k < 0]
            if bad:
                raise ValueError(f"ContainerSplitter: indices must be >= 0; got {bad[0]!r}")
            keys = tuple(int(k) for k in keys)
        else:
            for key in keys:
                _check_dict_key("ContainerSplitter", key)
        _check_unique("ContainerSplitter", keys)
        super().__init__(scope=scope)
        self.keys: tuple[str | int, ...] = tuple(keys)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires a Dict (string keys) or Tuple (int keys) holding every key."""
        space = input_spaces["inputs"]
        by_index = _is_index(self.keys[0])
        kind = Tuple if by_index else Dict
        if not isinstance(space, kind):
            raise self.space_mismatch("inputs", f"a {kind.__name__} space with keys {list(self.keys)}", space)
        available = list(range(len(space))) if by_index else list(space.keys())
        for key in self.keys:
            if key not in available:
                raise self.space_mismatch(
                    "inputs", f"a {kind.__name__} space with key {key!r} (available keys: {available})", space,
                    f"key {key!r} is not among the available keys {available}")

    @api
    def split(self, inputs: Any) -> tuple:
        """The values of ``inputs`` at the keys, as a tuple in key order."""
        out = self._graph_fn_split(inputs)
        return out if len(self.keys) > 1 else (out,)

    @graph_fn(returns=lambda self: len(self.keys), output_spaces=_split_output_spaces)
    def _graph_fn_split(self, F: Any, inputs: Any) -> Any:
        parts = tuple(inputs[k] for k in self.keys)
        return parts if len(parts) > 1 else parts[0]


class ContainerMerger(Component):
    """Puts values together into a `Dict` (given keys) or a `Tuple` (given ``tuple_size``).

    Accepts ``values``: a tuple with one value per key (its space is a `Tuple`
    of that length). Returns a dict ``{key: value}`` whose space is the `Dict`
    of the values' spaces, or with ``tuple_size`` the tuple itself.

    Args:
        *positional: the Dict keys, one per value (non-empty strings without ``/``).
        keys: the same as a list (the form spec configs use), instead of positional keys.
        tuple_size: instead of keys, merge into a tuple of this many values.
        scope: the component's name.

    Raises:
        ValueError: unless exactly one of keys and ``tuple_size`` is given, for
            duplicate or bad keys, or a ``tuple_size`` below 1.
    """

    def __init__(self, *positional: str, keys: list[str] | None = None, tuple_size: int | None = None,
                 scope: str = "merger") -> None:
        keys = _gather_keys("ContainerMerger", positional, keys)
        if keys and tuple_size is not None:
            raise ValueError(f"ContainerMerger: give either keys or tuple_size, not both; got keys {keys!r} "
                             f"and tuple_size={tuple_size!r}")
        if tuple_size is not None:
            if not _is_index(tuple_size) or tuple_size < 1:
                raise ValueError(f"ContainerMerger: tuple_size must be a positive int; got {tuple_size!r}")
        elif not keys:
            raise ValueError("ContainerMerger: keys must name at least one key (or pass tuple_size); got none")
        for key in keys:
            _check_dict_key("ContainerMerger", key)
        _check_unique("ContainerMerger", keys)
        super().__init__(scope=scope)
        self.keys: tuple[str, ...] = tuple(keys)
        self.tuple_size = None if tuple_size is None else int(tuple_size)

    @property
    def arity(self) -> int:
        """How many values `merge` takes."""
        return self.tuple_size if self.tuple_size is not None else len(self.keys)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires ``values`` to be a Tuple of exactly `arity` values."""
        space = input_spaces["values"]
        if not isinstance(space, Tuple) or len(space) != self.arity:
            target = f"keys {list(self.keys)}" if self.tuple_size is None else f"tuple_size={self.tuple_size}"
            count = f"{self.arity} value{'s' if self.arity != 1 else ''}"
            raise self.space_mismatch("values", f"a Tuple of {count} (for {target})", space)

    @api
    def merge(self, values: tuple) -> Any:
        """A dict of ``values`` by key (or, with ``tuple_size``, the tuple of them)."""
        return self._graph_fn_merge(values)

    def _merged_spaces(self, values: Tuple) -> Space:
        if self.tuple_size is not None:
            return values
        return Dict(dict(zip(self.keys, values)))

    @graph_fn(output_spaces=_merged_spaces)
    def _graph_fn_merge(self, F: Any, values: tuple) -> Any:
        if self.tuple_size is not None:
            return tuple(values)
        return dict(zip(self.keys, values))

