"""The `Space` base class: extra (batch/time) ranks, sampling, containment and key paths."""

from __future__ import annotations

import abc
from typing import Any, Callable, Iterator

import numpy as np

#: Key path of the root of a space (a leaf space flattens to ``{ROOT: leaf}``).
ROOT = ""
#: Separator between the parts of a key path (``"obs/0/pos"``).
SEP = "/"


def join_path(path: str, key: str | int) -> str:
    """Appends one key to a key path."""
    return f"{path}{SEP}{key}" if path else str(key)


def as_rng(rng: int | np.random.Generator | None) -> np.random.Generator:
    """Turns a seed, a generator or None into a `numpy.random.Generator`."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise ValueError(f"rng must be an int seed, a numpy Generator or None; got {rng!r}")


class Space(abc.ABC):
    """What values may flow along one edge of a component graph.

    Every space may carry a batch rank and a time rank: leading dimensions of
    unknown size in front of its core ``shape``. With both, ``time_major`` says
    whether the layout is ``[T, B, ...]`` (True) or ``[B, T, ...]`` (False).
    Spaces are immutable; equality and hashing are by value.
    """

    __slots__ = ()

    # ---- ranks -------------------------------------------------------------
    @property
    @abc.abstractmethod
    def has_batch_rank(self) -> bool:
        """Whether values carry a leading batch dimension."""

    @property
    @abc.abstractmethod
    def has_time_rank(self) -> bool:
        """Whether values carry a time dimension."""

    @property
    @abc.abstractmethod
    def time_major(self) -> bool:
        """With both ranks: True for ``[T, B, ...]``, False for ``[B, T, ...]``."""

    @abc.abstractmethod
    def with_ranks(self, batch: bool, time: bool, time_major: bool = False) -> "Space":
        """A copy of this space (all leaves, for containers) with the given extra ranks."""

    def with_batch_rank(self, add: bool = True) -> "Space":
        """A copy with (or without) a batch rank, keeping the time rank."""
        return self.with_ranks(add, self.has_time_rank, self.time_major)

    def with_time_rank(self, add: bool = True, time_major: bool | None = None) -> "Space":
        """A copy with (or without) a time rank, keeping the batch rank."""
        major = self.time_major if time_major is None else time_major
        return self.with_ranks(self.has_batch_rank, add, major)

    def strip_ranks(self) -> "Space":
        """A copy with neither batch nor time rank."""
        return self.with_ranks(False, False)

    @property
    def extra_ranks(self) -> tuple[str, ...]:
        """The extra ranks in layout order, as ``"B"``/``"T"`` symbols."""
        return rank_symbols(self.has_batch_rank, self.has_time_rank, self.time_major)

    def extra_dims(self, size: int | tuple[int, ...] | None) -> tuple[int, ...]:
        """The leading dimensions a value of this space has for a sample ``size``.

        Args:
            size: None (1 for every extra rank), an int (the only extra rank), or
                a tuple with one entry per extra rank in layout order.
        """
        ranks = self.extra_ranks
        if size is None:
            return (1,) * len(ranks)
        if isinstance(size, (int, np.integer)):
            dims = (size,)
        elif isinstance(size, (tuple, list)):
            dims = tuple(size)
        else:  # tuple() of a float or a string would fail with a TypeError, or split the string
            raise ValueError(f"size must be None, an int or a tuple of ints; got {size!r}")
        if len(dims) != len(ranks):
            layout = "[" + ",".join(ranks) + "]" if ranks else "no batch or time rank"
            raise ValueError(
                f"size {size!r} does not fit the space's extra ranks ({layout}): "
                f"expected {len(ranks)} dimension(s)"
            )
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
                raise ValueError(f"size entries must be non-negative ints; got {size!r}")
        return tuple(int(d) for d in dims)

    # ---- structure ---------------------------------------------------------
    @abc.abstractmethod
    def leaves(self, path: str = ROOT) -> Iterator[tuple[str, "Space"]]:
        """Yields ``(key_path, leaf_space)`` pairs in stable order."""

    def flatten(self) -> dict[str, "Space"]:
        """The leaf spaces keyed by their key paths (``"a/0/b"``), in stable order."""
        return dict(self.leaves())

    @abc.abstractmethod
    def flatten_value(self, value: Any, path: str = ROOT) -> dict[str, Any]:
        """A value of this space as a flat dict keyed by key paths."""

    def unflatten(self, flat: dict[str, Any]) -> Any:
        """Re-nests a flat dict keyed by key paths into this space's structure.

        Where the dict is non-empty and every entry is a `Space`, the result is a
        `Space` (so ``space.unflatten(space.flatten()) == space``); else it is a value
        made of dicts and tuples (an empty container gives an empty value).

        Raises:
            ValueError: naming the missing and unexpected key paths.
        """
        if not isinstance(flat, dict):
            raise ValueError(f"unflatten: expected a dict keyed by key paths, got {type(flat).__name__}")
        want = [k for k, _ in self.leaves()]
        missing = [k for k in want if k not in flat]
        extra = sorted(set(flat) - set(want))
        if missing or extra:
            raise ValueError(f"unflatten: key paths differ from the space's: missing {missing}, unexpected {extra}")
        as_space = bool(flat) and all(isinstance(v, Space) for v in flat.values())
        return self._unflatten(flat, ROOT, as_space)

    @abc.abstractmethod
    def _unflatten(self, flat: dict[str, Any], path: str, as_space: bool) -> Any:
        """Re-nests ``flat`` below ``path`` (keys already checked)."""

    def without_bounds(self) -> "Space":
        """A copy whose every leaf spans its dtype's whole range (dtype, shape and ranks kept)."""
        return self.map(lambda _, leaf: leaf.without_bounds())

    @abc.abstractmethod
    def map(self, fn: Callable[[str, "Space"], "Space"]) -> "Space":
        """A space of the same structure whose leaves are ``fn(key_path, leaf)``."""

    def map_value(self, fn: Callable[[str, "Space", Any], Any], value: Any) -> Any:
        """Applies ``fn(key_path, leaf_space, leaf_value)`` over a value, re-nesting results."""
        flat = self.flatten_value(value)
        return self.unflatten({k: fn(k, s, flat[k]) for k, s in self.leaves()})

    # ---- values ------------------------------------------------------------
    @abc.abstractmethod
    def sample(self, size: int | tuple[int, ...] | None = None,
               rng: int | np.random.Generator | None = None) -> Any:
        """A random value of this space (seeded and reproducible when ``rng`` is).

        Args:
            size: sizes of the extra ranks (see `extra_dims`); None gives 1 for each.
            rng: an int seed, a `numpy.random.Generator`, or None for fresh entropy.
        """

    @abc.abstractmethod
    def zeros(self, size: int | tuple[int, ...] | None = None) -> Any:
        """A value filled with zeros, clipped into the bounds so it is always contained."""

    @abc.abstractmethod
    def why_not(self, value: Any, path: str = ROOT) -> str | None:
        """None if ``value`` is in this space, else why not (key path, dimension or bound)."""

    def contains(self, value: Any) -> bool:
        """Whether ``value`` lies in this space."""
        return self.why_not(value) is None

    def __contains__(self, value: Any) -> bool:
        return self.contains(value)

    # ---- text form ---------------------------------------------------------
    @abc.abstractmethod
    def to_text(self, with_ranks: bool = True) -> str:
        """The spec-file text form; ``parse(space.to_text()) == space``.

        Without ``with_ranks`` the batch/time rank symbols are left out (a container's leaves inside a
        ``[B]{...}`` prefix are written that way).
        """

    def __repr__(self) -> str:
        return self.to_text()

    __str__ = __repr__


def rank_symbols(batch: bool, time: bool, time_major: bool) -> tuple[str, ...]:
    """Extra-rank symbols in layout order."""
    if batch and time:
        return ("T", "B") if time_major else ("B", "T")
    if batch:
        return ("B",)
    if time:
        return ("T",)
    return ()
