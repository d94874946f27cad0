"""`ReplayMemory`: a ring buffer of records with uniform sampling."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import IntBox, Space

from reference_agents.components.common.arguments import check_positive_int
from reference_agents.components.memories.record_buffers import check_records_space, create_record_buffers


def is_index_batch(space: Space) -> bool:
    """Whether ``space`` is ``int*[B]``: a scalar IntBox with a batch rank and no time rank."""
    return isinstance(space, IntBox) and space.has_batch_rank and not space.has_time_rank and space.shape == ()


def is_count(space: Space) -> bool:
    """Whether ``space`` is ``int*[]``: a scalar IntBox without extra ranks."""
    return isinstance(space, IntBox) and not space.extra_ranks and space.shape == ()


class ReplayMemory(Component):
    """A ring buffer of up to ``capacity`` records, sampled uniformly with replacement.

    Records are any space (a box, or a Dict/Tuple of boxes) whose every leaf has a
    batch rank and no time rank; `insert_records` writes a batch at the insert
    position and moves it on, overwriting the oldest records once the memory is
    full (of a batch larger than the memory only the last ``capacity`` records
    stay). `get_records` draws ``num_records`` slots uniformly from the filled
    ones, with replacement; from an empty memory it returns records of zeros.

    Variables (all ``trainable=False``): one buffer per record leaf,
    ``records/<key path>`` (``records`` for a box) of shape ``(capacity, *leaf)``
    in the leaf's dtype, zeros at first; ``index`` (int64, the next slot to
    write) and ``size`` (int64, the filled slots).

    Args:
        capacity: the most records held, a positive int.
        scope: the component's name.

    Raises:
        ValueError: naming ``capacity`` when it is not a positive int.
    """

    def __init__(self, capacity: int, scope: str = "replay_memory") -> None:
        self.capacity = check_positive_int("ReplayMemory", "capacity", capacity)
        super().__init__(scope=scope)
        self.record_space: Space | None = None
        self.buffers: dict[str, Any] = {}
        self.index: Any = None
        self.size: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """``records``: every leaf with a batch rank and no time rank; ``num_records`` ``int*[]``; ``indices`` ``int*[B]``."""
        check_records_space(self, input_spaces)
        if "num_records" in input_spaces and not is_count(input_spaces["num_records"]):
            raise self.space_mismatch("num_records", "a scalar int without extra ranks (int64[])",
                                      input_spaces["num_records"])
        if "indices" in input_spaces and not is_index_batch(input_spaces["indices"]):
            raise self.space_mismatch("indices", "a batch of scalar ints (int64[B])", input_spaces["indices"])

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """One buffer ``(capacity, *leaf)`` per record leaf, and ``index`` and ``size``."""
        self.record_space, self.buffers = create_record_buffers(self, input_spaces, self.capacity, "insert_records")
        self.index = self.get_variable("index", (), "int64", "zeros", trainable=False)
        self.size = self.get_variable("size", (), "int64", "zeros", trainable=False)

    def _sampled_space(self, *spaces: Space) -> Space:
        return self.record_space.with_ranks(True, False).without_bounds()

    def _slots_space(self, records_space: Space) -> Space:
        return IntBox(low=0, high=self.capacity - 1, batch_rank=True)

    @api
    def insert_records(self, records: Any) -> Any:
        """Writes a batch of records; returns the slots written (``int64[B]``, ``min(B, capacity)`` of them)."""
        return self._graph_fn_insert(records)

    @api(must_be_complete=False)
    def get_records(self, num_records: Any) -> Any:
        """``num_records`` records drawn uniformly, with replacement, from the filled slots."""
        return self._graph_fn_get_records(num_records)

    @api(must_be_complete=False)
    def get_records_at(self, indices: Any) -> Any:
        """The records in slots ``indices`` (taken modulo ``capacity``), filled or not."""
        return self._graph_fn_get_records_at(indices)

    @api
    def get_size(self) -> Any:
        """The number of filled slots, ``int64[]``."""
        return self._graph_fn_get_size()

    @graph_fn(output_spaces=_slots_space)
    def _graph_fn_insert(self, F: Any, records: Any) -> Any:
        flat = self.record_space.flatten_value(records)
        n = F.cast(F.dim(next(iter(flat.values())), 0), "int64")
        keep = F.minimum(n, self.capacity)
        skip = n - keep
        rows = (self.index + skip + F.arange(keep)) % self.capacity  # distinct: keep <= capacity
        for path, var in self.buffers.items():
            F.scatter_update(var, rows, flat[path][skip:], unique=True)
        F.assign(self.index, (self.index + n) % self.capacity)
        F.assign(self.size, F.minimum(self.size + n, self.capacity))
        return rows

    def _gather(self, F: Any, slots: Any) -> Any:
        return self.record_space.unflatten({path: F.gather(var, slots) for path, var in self.buffers.items()})

    @graph_fn(output_spaces=_sampled_space)
    def _graph_fn_get_records(self, F: Any, num_records: Any) -> Any:
        u = F.random_uniform(F.reshape(num_records, [1]), dtype="float64")
        filled = F.maximum(self.size, 1)
        slots = F.cast(u * F.cast(filled, "float64"), "int64")
        return self._gather(F, F.minimum(slots, filled - 1))  # u * n can round up to n

    @graph_fn
    def _graph_fn_get_records_at(self, F: Any, indices: Any) -> Any:
        return self._gather(F, F.cast(indices, "int64") % self.capacity)

    @graph_fn
    def _graph_fn_get_size(self, F: Any) -> Any:
        return self.size + 0  # a new tensor: torch would hand out the variable's own memory
