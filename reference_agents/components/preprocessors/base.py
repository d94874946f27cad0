"""`Preprocessor`: the base of components that map a batch of observations to preprocessed ones."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.graph import Component, api
from harness.spaces import BoxSpace, FloatBox, IntBox, Space


def check_number(owner: str, argument: str, value: Any, nonzero: bool = False) -> float:
    """``value`` as a float; raises ValueError naming ``argument`` unless it is a finite real number.

    Args:
        owner: the class name for the message.
        argument: the constructor argument's name.
        value: the value given.
        nonzero: whether it must differ from 0.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)):
        raise ValueError(f"{owner}: {argument} must be a finite number; got {value!r}")
    if nonzero and value == 0:
        raise ValueError(f"{owner}: {argument} must not be 0; got {value!r}")
    return float(value)


def check_size(owner: str, argument: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int; raises ValueError naming ``argument`` unless it is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{owner}: {argument} must be an int >= {minimum}; got {value!r}")
    return int(value)


def is_numeric_box(space: Space) -> bool:
    """Whether ``space`` is a single float or integer box (not bool, not a container)."""
    return isinstance(space, (FloatBox, IntBox))


def is_batched_image(space: Space, time_rank_ok: bool = True) -> bool:
    """Whether ``space`` is a numeric box ``[B,H,W,C]`` (with ``time_rank_ok``, also ``[B,T,...]``/``[T,B,...]``)."""
    return (is_numeric_box(space) and space.has_batch_rank and space.rank == 3
            and (time_rank_ok or not space.has_time_rank))


def box_like(space: BoxSpace, shape: tuple[int, ...], low: Any, high: Any, dtype: Any = None) -> BoxSpace:
    """A box with ``space``'s extra ranks and the given core shape, bounds and dtype (default ``space``'s)."""
    dtype = np.dtype(space.dtype if dtype is None else dtype)
    ranks = dict(batch_rank=space.has_batch_rank, time_rank=space.has_time_rank, time_major=space.time_major)
    if dtype.kind == "f":
        return FloatBox(shape, low=low, high=high, dtype=dtype, **ranks)
    return IntBox(low=low, high=high, shape=shape, dtype=dtype, **ranks)


class Preprocessor(Component):
    """A component with one API method ``preprocess(inputs)`` that maps a batch of observations.

    Subclasses implement the graph function ``_graph_fn_preprocess(F, inputs)``.
    Stateful ones (`FrameStack`) set ``stateful = True`` and add an API method
    ``reset()``; `PreprocessorStack` resets exactly those.

    Args:
        scope: the component's name.
    """

    spec_exempt = "an abstract base: each preprocessor has its own specs"

    #: Whether ``preprocess`` reads and writes state that ``reset()`` clears.
    stateful: bool = False

    def __init__(self, scope: str) -> None:
        super().__init__(scope=scope)

    @api
    def preprocess(self, inputs: Any) -> Any:
        """The preprocessed batch (see the subclass for spaces)."""
        return self._graph_fn_preprocess(inputs)

    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError
