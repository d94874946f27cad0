"""`PrioritizedReplay`: proportional prioritized experience replay (Schaul et al. 2016)."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, forward, graph_fn
from harness.spaces import FloatBox, IntBox, Space

from reference_agents.components.memories.replay_memory import (
    ReplayMemory, check_positive_int, is_count, is_index_batch,
)
from reference_agents.components.memories.segment_tree import SegmentTree


def checked_number(owner: str, argument: str, value: Any, low: float, high: float | None, closed_low: bool) -> float:
    """``value`` as a float in ``(low, high]`` (``[low, high]`` with ``closed_low``); ValueError naming ``owner``
    and ``argument`` otherwise."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok:
        ok = (value >= low if closed_low else value > low) and (high is None or value <= high)
    if not ok:
        bracket = "[" if closed_low else "("
        raise ValueError(f"{owner}: {argument} must be a number in {bracket}{low}, {high if high is not None else 'inf'}"
                         f"{']' if high is not None else ')'}; got {value!r}")
    return float(value)


class PrioritizedReplay(Component):
    """A replay memory sampled in proportion to priorities: ``P(i) = p_i^alpha / sum_k p_k^alpha``.

    Records live in a `ReplayMemory` sub-component (``memory``); ``p_i^alpha`` in a
    sum `SegmentTree` (``sum_tree``, for sampling) and a min `SegmentTree`
    (``min_tree``, for the largest importance weight), both over the next power of
    two at or above ``capacity`` (the spare leaves stay 0 and +inf and are never
    drawn). A new record gets the largest priority seen so far (1.0 at first), so
    it is likely to be replayed once.

    `get_records` samples proportionally and stratified, as in the paper: the
    total mass ``S`` is cut into ``n`` equal ranges, one mass is drawn uniformly
    in each, and the tree's prefix-sum search maps it to a record (a mass at the
    very top falls back to the last filled slot). Pooled over the strata each
    draw is record ``i`` with probability ``P(i)``. It returns the records, their
    slots and importance weights ``w_i = (N P(i))^-beta / max_j (N P(j))^-beta``
    ``= (min_j p_j^alpha / p_i^alpha)^beta`` with ``N`` the filled slots, so the
    largest possible weight is 1. From an empty memory it returns zeros records,
    slot 0 and weight 1.

    `update_records` sets ``p_i = |priority_i| + epsilon`` for the given slots (e.g.
    absolute TD errors of records just sampled); of repeated slots the last
    priority wins.

    Variables: the memory's (``memory/records/...``, ``memory/index``,
    ``memory/size``), ``sum_tree/tree``, ``min_tree/tree`` and ``max_priority``
    (float32, the largest ``p`` so far), all ``trainable=False``.

    Args:
        capacity: the most records held, a positive int.
        alpha: how much priorities count, ``alpha >= 0`` (0 samples uniformly).
        beta: the importance-sampling exponent, ``0 <= beta <= 1``.
        epsilon: added to ``|priority|`` so no record becomes unreachable, ``> 0``.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, capacity: int, alpha: float = 0.6, beta: float = 0.4, epsilon: float = 1e-6,
                 scope: str = "prioritized_replay") -> None:
        capacity = check_positive_int("PrioritizedReplay", "capacity", capacity)
        alpha = checked_number("PrioritizedReplay", "alpha", alpha, 0.0, None, True)
        beta = checked_number("PrioritizedReplay", "beta", beta, 0.0, 1.0, True)
        epsilon = checked_number("PrioritizedReplay", "epsilon", epsilon, 0.0, None, False)
        leaves = 1 << (capacity - 1).bit_length()
        self.memory = ReplayMemory(capacity, scope="memory")
        self.sum_tree = SegmentTree(leaves, "sum", scope="sum_tree")
        self.min_tree = SegmentTree(leaves, "min", scope="min_tree")
        super().__init__(self.memory, self.sum_tree, self.min_tree, scope=scope)
        self.capacity, self.alpha, self.beta, self.epsilon = capacity, alpha, beta, epsilon
        self.max_priority: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """``num_records`` ``int*[]``; ``indices`` ``int*[B]``; ``priorities`` ``float*[B]`` (records: see `ReplayMemory`)."""
        if "num_records" in input_spaces and not is_count(input_spaces["num_records"]):
            raise self.space_mismatch("num_records", "a scalar int without extra ranks (int64[])",
                                      input_spaces["num_records"])
        if "indices" in input_spaces and not is_index_batch(input_spaces["indices"]):
            raise self.space_mismatch("indices", "a batch of scalar ints (int64[B])", input_spaces["indices"])
        space = input_spaces.get("priorities")
        if space is not None and not (isinstance(space, FloatBox) and space.has_batch_rank
                                      and not space.has_time_rank and space.shape == ()):
            raise self.space_mismatch("priorities", "a batch of float scalars (float32[B])", space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Creates ``max_priority`` (float32, 1.0)."""
        self.max_priority = self.get_variable("max_priority", (), "float32", "ones", trainable=False)

    @api
    def insert_records(self, records: Any) -> Any:
        """Writes a batch of records at the largest priority so far; returns the slots written."""
        slots = self.memory.insert_records(records)
        weighted = self._graph_fn_new_priorities(slots)
        self.sum_tree.update(slots, weighted)
        self.min_tree.update(slots, weighted)
        return slots

    @api(must_be_complete=False)
    def get_records(self, num_records: Any) -> Any:
        """``(records, slots int64[B], weights float32[B])`` for ``num_records`` prioritized draws."""
        masses = self._graph_fn_masses(num_records, self.sum_tree.reduce())
        slots = self._graph_fn_clip_slots(self.sum_tree.prefix_sum_index(masses), self.memory.get_size())
        records = self.memory.get_records_at(slots)
        weights = self._graph_fn_weights(self.sum_tree.get(slots), self.min_tree.reduce())
        return records, slots, weights

    @api(must_be_complete=False)
    def update_records(self, indices: Any, priorities: Any) -> None:
        """Sets the priorities of slots ``indices`` to ``|priorities| + epsilon``."""
        weighted = self._graph_fn_update_max(priorities)
        self.sum_tree.update(indices, weighted)
        self.min_tree.update(indices, weighted)

    get_size = forward("memory", ReplayMemory.get_size)

    def _power(self, F: Any, x: Any, exponent: float) -> Any:
        return F.exp(exponent * F.log(x))

    @graph_fn
    def _graph_fn_new_priorities(self, F: Any, slots: Any) -> Any:
        return F.ones_like(F.cast(slots, "float32")) * self._power(F, self.max_priority, self.alpha)

    @graph_fn
    def _graph_fn_update_max(self, F: Any, priorities: Any) -> Any:
        p = F.abs(F.cast(priorities, "float32")) + self.epsilon
        F.assign(self.max_priority, F.maximum(self.max_priority, F.reduce_max(p)))
        return self._power(F, p, self.alpha)

    def _masses_space(self, num_space: Space, total_space: Space) -> Space:
        return FloatBox((), batch_rank=True)

    @graph_fn(output_spaces=_masses_space)
    def _graph_fn_masses(self, F: Any, num_records: Any, total: Any) -> Any:
        # Stratified: the k-th of n masses is uniform in [k S / n, (k + 1) S / n).
        u = F.random_uniform(F.reshape(num_records, [1]), dtype="float32")
        strata = F.maximum(F.cast(num_records, "float32"), 1.0)
        return F.minimum((F.cast(F.arange(num_records), "float32") + u) / strata, 1.0) * total

    def _slots_space(self, slots_space: Space, size_space: Space) -> Space:
        return IntBox(low=0, high=self.capacity - 1, batch_rank=True)

    @graph_fn(output_spaces=_slots_space)
    def _graph_fn_clip_slots(self, F: Any, slots: Any, size: Any) -> Any:
        return F.minimum(slots, F.maximum(size - 1, 0))

    @graph_fn
    def _graph_fn_weights(self, F: Any, weighted: Any, min_weighted: Any) -> Any:
        safe = F.maximum(weighted, 1e-30)
        ratio = F.minimum(min_weighted / safe, 1.0)
        return F.where(weighted > 0.0, self._power(F, ratio, self.beta), F.ones_like(weighted))
