"""`SegmentTree`: a binary tree of sums (or minima) over a power-of-two number of leaves."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import AssemblyError, Component, api, graph_fn
from harness.spaces import FloatBox, IntBox, Space

from reference_agents.components.common.arguments import check_positive_int
from reference_agents.components.memories.replay_memory import is_index_batch

OPERATIONS = ("sum", "min")


class SegmentTree(Component):
    """A segment tree over ``capacity`` float32 leaves whose inner nodes hold sums or minima.

    The tree lives in one variable ``tree`` of shape ``(2 * capacity,)``: node 1 is
    the root, node ``k`` has children ``2k`` and ``2k + 1``, and leaf ``i`` is node
    ``capacity + i`` (node 0 is unused). Leaves start at the operation's neutral
    value (0 for ``"sum"``, +inf for ``"min"``). `update` sets leaves and recomputes
    their ancestors one level at a time (``log2(capacity)`` vectorised steps); of
    repeated indices in one update the last value wins. Indices are taken modulo
    ``capacity``. Subnormal values may act as 0 (TF on CPU flushes them to zero).

    Args:
        capacity: the number of leaves, a power of two.
        operation: ``"sum"`` or ``"min"``.
        scope: the component's name (default ``"<operation>_tree"``).

    Raises:
        ValueError: naming the argument when ``capacity`` is not a power of two or
            ``operation`` is unknown.
    """

    def __init__(self, capacity: int, operation: str = "sum", scope: str | None = None) -> None:
        capacity = check_positive_int("SegmentTree", "capacity", capacity)
        if capacity & (capacity - 1):
            raise ValueError(f"SegmentTree: capacity must be a power of two; got {capacity!r}")
        if operation not in OPERATIONS:
            raise ValueError(f"SegmentTree: operation must be one of {OPERATIONS}; got {operation!r}")
        super().__init__(scope=scope or f"{operation}_tree")
        self.capacity = capacity
        self.operation = operation
        self.depth = capacity.bit_length() - 1
        self.neutral = 0.0 if operation == "sum" else float("inf")
        self.tree: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """``indices`` ``int*[B]``; ``values`` and ``masses`` ``float32[B]``."""
        if "indices" in input_spaces and not is_index_batch(input_spaces["indices"]):
            raise self.space_mismatch("indices", "a batch of scalar ints (int64[B])", input_spaces["indices"])
        for arg in ("values", "masses"):
            space = input_spaces.get(arg)
            if space is not None and not (isinstance(space, FloatBox) and space.dtype == np.float32
                                          and space.has_batch_rank and not space.has_time_rank and space.shape == ()):
                raise self.space_mismatch(arg, "a batch of float32 scalars (float32[B])", space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Creates ``tree`` ``(2 * capacity,)`` float32, all at the neutral value."""
        self.tree = self.get_variable("tree", (2 * self.capacity,), "float32", self.neutral, trainable=False)

    @api(must_be_complete=False)
    def update(self, indices: Any, values: Any) -> None:
        """Sets leaves ``indices`` to ``values`` and recomputes their ancestors."""
        return self._graph_fn_update(indices, values)

    @api
    def reduce(self) -> Any:
        """The sum (or minimum) of all leaves, ``float32[]``."""
        return self._graph_fn_reduce()

    @api(must_be_complete=False)
    def get(self, indices: Any) -> Any:
        """The leaf values at ``indices``, ``float32[B]``."""
        return self._graph_fn_get(indices)

    @api(must_be_complete=False)
    def prefix_sum_index(self, masses: Any) -> Any:
        """For each mass ``m``, the first leaf ``j`` with ``leaf_0 + ... + leaf_j > m`` (sum trees only).

        Masses at or above the total give the last leaf, ``capacity - 1``;
        zero-valued leaves are never returned for masses in ``[0, total)``.
        """
        if self.operation != "sum":
            raise AssemblyError(f"SegmentTree {self.global_scope!r}: prefix_sum_index needs operation 'sum'; "
                                f"this tree's is {self.operation!r}")
        return self._graph_fn_prefix_sum_index(masses)

    @graph_fn(returns=0)
    def _graph_fn_update(self, F: Any, indices: Any, values: Any) -> None:
        nodes = F.cast(indices, "int64") % self.capacity + self.capacity
        F.scatter_update(self.tree, nodes, values)  # of repeated leaves the last value wins
        for _ in range(self.depth):
            nodes = nodes // 2  # siblings give one parent twice, with one value: unique=True holds
            # Two gathers of the variable (not a read of all of it: TF would copy the tree per level).
            first = nodes * 2
            left, right = F.gather(self.tree, first), F.gather(self.tree, first + 1)
            combined = left + right if self.operation == "sum" else F.minimum(left, right)
            F.scatter_update(self.tree, nodes, combined, unique=True)

    @graph_fn
    def _graph_fn_reduce(self, F: Any) -> Any:
        return self.tree[1] + 0.0  # a new tensor: torch would hand out the variable's own memory

    @graph_fn
    def _graph_fn_get(self, F: Any, indices: Any) -> Any:
        return F.gather(self.tree, F.cast(indices, "int64") % self.capacity + self.capacity)

    def _leaf_space(self, masses_space: Space) -> Space:
        return IntBox(low=0, high=self.capacity - 1, batch_rank=True)

    @graph_fn(output_spaces=_leaf_space)
    def _graph_fn_prefix_sum_index(self, F: Any, masses: Any) -> Any:
        node = F.ones_like(F.cast(masses, "int64"))
        mass = masses
        for _ in range(self.depth):
            left = F.gather(self.tree, 2 * node)
            right = mass >= left
            mass = F.where(right, mass - left, mass)
            node = 2 * node + F.cast(right, "int64")
        return node - self.capacity
