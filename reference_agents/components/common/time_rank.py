"""`FoldTimeRank` and `UnfoldTimeRank`: merge batch and time ranks into one, and split them again."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import Space


def _leaf_ranks(space: Space) -> set[tuple[str, ...]]:
    return {leaf.extra_ranks for _, leaf in space.leaves()}


def _core_dims(F: Any, x: Any, first: int) -> list[Any]:
    return [F.dim(x, i) for i in range(first, len(x.shape))]


class FoldTimeRank(Component):
    """Folds the batch and time ranks of a value into one batch rank.

    Accepts ``inputs`` whose every leaf has a batch and a time rank, in either
    layout: ``[B,T,...]`` or ``[T,B,...]`` (containers are folded leaf by leaf).
    Returns values of the same spaces with only a batch rank, ``[B*T,...]``,
    bounds kept. The folded rank keeps the input's order (``b*T + t`` for
    batch-major, ``t*B + b`` for time-major); `UnfoldTimeRank` with the original
    value as ``like`` restores it exactly.

    Args:
        scope: the component's name.
    """

    def __init__(self, scope: str = "fold_time_rank") -> None:
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires a batch and a time rank on every leaf of ``inputs``."""
        space = input_spaces["inputs"]
        if any(set(ranks) != {"B", "T"} for ranks in _leaf_ranks(space)):
            raise self.space_mismatch("inputs", "a batch and a time rank on every leaf ([B,T,...] or [T,B,...])",
                                      space)

    @api
    def fold(self, inputs: Any) -> Any:
        """``inputs`` with batch and time ranks folded into one batch rank."""
        return self._graph_fn_fold(inputs)

    @graph_fn(split=True, output_spaces=lambda self, inputs: inputs.with_ranks(True, False))
    def _graph_fn_fold(self, F: Any, inputs: Any) -> Any:
        return F.reshape(inputs, [-1] + _core_dims(F, inputs, 2))


class UnfoldTimeRank(Component):
    """Splits a folded batch rank into the batch and time ranks of a reference value.

    Accepts ``inputs`` whose every leaf has a batch rank and no time rank,
    ``[B*T,...]``, and ``like``: a value (or container) whose leaves all have a
    batch and a time rank in one layout; its first leaf gives the dynamic sizes.
    Returns ``inputs`` reshaped to ``like``'s layout, ``[B,T,...]`` or
    ``[T,B,...]``: the spaces of ``inputs`` (bounds kept) with ``like``'s ranks.

    Args:
        scope: the component's name.
    """

    def __init__(self, scope: str = "unfold_time_rank") -> None:
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires a lone batch rank on ``inputs`` and one batch-and-time layout on ``like``."""
        inputs, like = input_spaces["inputs"], input_spaces["like"]
        if _leaf_ranks(inputs) != {("B",)}:
            raise self.space_mismatch("inputs", "a batch rank and no time rank on every leaf ([B*T,...])", inputs)
        layouts = _leaf_ranks(like)
        if len(layouts) != 1 or set(next(iter(layouts))) != {"B", "T"}:
            raise self.space_mismatch("like", "one layout with a batch and a time rank on every leaf "
                                      "([B,T,...] or [T,B,...])", like)

    @api
    def unfold(self, inputs: Any, like: Any) -> Any:
        """``inputs`` with its batch rank split into ``like``'s batch and time ranks."""
        return self._graph_fn_unfold(inputs, like)

    def _unfolded_spaces(self, inputs: Space, like: Space) -> Space:
        return inputs.with_ranks(True, True, time_major=like.time_major)

    # flatten=True hands containers over as flat dicts keyed by key path, and re-nests
    # the dict returned for the keys of ``inputs``; ``like`` may have any structure.
    @graph_fn(flatten=True, output_spaces=_unfolded_spaces)
    def _graph_fn_unfold(self, F: Any, inputs: Any, like: Any) -> Any:
        ref = next(iter(like.values())) if isinstance(like, dict) else like
        lead = [F.dim(ref, 0), F.dim(ref, 1)]
        if isinstance(inputs, dict):
            return {k: F.reshape(v, lead + _core_dims(F, v, 1)) for k, v in inputs.items()}
        return F.reshape(inputs, lead + _core_dims(F, inputs, 1))

