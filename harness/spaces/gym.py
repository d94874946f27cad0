"""Conversion between gymnasium spaces and spacegraph spaces."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.spaces.base import Space
from harness.spaces.boxes import BoolBox, FloatBox, IntBox
from harness.spaces.containers import Dict, Tuple


def from_gymnasium(space: Any) -> Space:
    """The spacegraph space holding exactly the values a gymnasium space samples.

    Box (float, int or bool dtype), Discrete, MultiDiscrete, MultiBinary, Dict and
    Tuple are supported.

    Raises:
        ValueError: for other gymnasium spaces, naming the type.
    """
    import gymnasium.spaces as gs

    if isinstance(space, gs.Box):
        kind = space.dtype.kind
        if kind == "f":
            return FloatBox(space.shape, space.low, space.high, space.dtype)
        if kind in "iu":
            return IntBox(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
        if kind == "b":
            return BoolBox(space.shape)
        raise ValueError(f"from_gymnasium: Box of dtype {space.dtype} is not supported")
    if isinstance(space, gs.Discrete):
        start = int(space.start)
        return IntBox(low=start, high=start + int(space.n) - 1, dtype=space.dtype)
    if isinstance(space, gs.MultiDiscrete):
        start = np.asarray(space.start)
        return IntBox(low=start, high=start + np.asarray(space.nvec) - 1, shape=space.shape, dtype=space.dtype)
    if isinstance(space, gs.MultiBinary):
        return IntBox(low=0, high=1, shape=space.shape, dtype=space.dtype)
    if isinstance(space, gs.Dict):
        return Dict({k: from_gymnasium(v) for k, v in space.spaces.items()})
    if isinstance(space, gs.Tuple):
        return Tuple([from_gymnasium(v) for v in space.spaces])
    raise ValueError(f"from_gymnasium: unsupported gymnasium space {type(space).__name__} ({space})")


def to_gymnasium(space: Space) -> Any:
    """A gymnasium space for the core of a spacegraph space (extra ranks dropped)."""
    import gymnasium.spaces as gs

    if isinstance(space, FloatBox):
        return gs.Box(space.low, space.high, space.shape, space.dtype)
    if isinstance(space, IntBox):
        return gs.Box(space.low, space.high, space.shape, space.dtype)
    if isinstance(space, BoolBox):
        return gs.Box(0, 1, space.shape, bool)  # gymnasium rejects Python bools as bounds
    if isinstance(space, Dict):
        return gs.Dict({k: to_gymnasium(v) for k, v in space.items()})
    if isinstance(space, Tuple):
        return gs.Tuple([to_gymnasium(v) for v in space])
    raise ValueError(f"to_gymnasium: unsupported space {space!r}")
