"""`FIFOQueue`: a bounded first-in-first-out queue of records held in variables, for actor-learner hand-off."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import IntBox, Space

from reference_agents.components.common.arguments import check_positive_int
from reference_agents.components.memories.replay_memory import is_count
from reference_agents.components.memories.record_buffers import check_records_space, create_record_buffers


class FIFOQueue(Component):
    """A ring buffer of up to ``capacity`` records, taken out in the order they were put in.

    Records are any space (a box, or a Dict/Tuple of boxes) whose every leaf has a
    batch rank and no time rank. Both API calls are non-blocking (graph functions
    are traced, so they must never wait): `enqueue_records` takes the first
    ``min(B, capacity - size)`` records of a batch of ``B`` and returns how many it
    took; the records after those are NOT taken and stay with the caller (nothing
    in the queue is ever overwritten). `dequeue_records` removes up to
    ``num_records`` records from the front and returns them with the count actually
    removed; rows past that count are zeros. Blocking with timeouts lives outside the
    graph, in `reference_agents.components.queues.BlockingQueue`.

    Dequeuing moves ``head`` on without clearing the buffer rows it read (they are
    overwritten by later enqueues), so the buffers keep stale records past the live ones.

    Variables (all ``trainable=False``): one buffer per record leaf,
    ``records/<key path>`` (``records`` for a box) of shape ``(capacity, *leaf)`` in
    the leaf's dtype, zeros at first; ``head`` (int64, the slot of the oldest record)
    and ``size`` (int64, the records held). The next free slot is
    ``(head + size) mod capacity``.

    Args:
        capacity: the most records held, a positive int.
        scope: the component's name.

    Raises:
        ValueError: naming ``capacity`` when it is not a positive int.
    """

    def __init__(self, capacity: int, scope: str = "fifo_queue") -> None:
        self.capacity = check_positive_int("FIFOQueue", "capacity", capacity)
        super().__init__(scope=scope)
        self.record_space: Space | None = None
        self.buffers: dict[str, Any] = {}
        self.head: Any = None
        self.size: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """``records``: every leaf with a batch rank and no time rank; ``num_records``: ``int*[]``."""
        check_records_space(self, input_spaces)
        if "num_records" in input_spaces and not is_count(input_spaces["num_records"]):
            raise self.space_mismatch("num_records", "a scalar int without extra ranks (int64[])",
                                      input_spaces["num_records"])

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """One buffer ``(capacity, *leaf)`` per record leaf, and ``head`` and ``size``."""
        self.record_space, self.buffers = create_record_buffers(self, input_spaces, self.capacity, "enqueue_records")
        self.head = self.get_variable("head", (), "int64", "zeros", trainable=False)
        self.size = self.get_variable("size", (), "int64", "zeros", trainable=False)

    def _count_space(self, *spaces: Space) -> Space:
        return IntBox(low=0, high=self.capacity)

    def _dequeued_spaces(self, *spaces: Space) -> tuple[Space, Space]:
        return self.record_space.with_ranks(True, False).without_bounds(), self._count_space()

    @api
    def enqueue_records(self, records: Any) -> Any:
        """Appends the first ``min(B, capacity - size)`` records of the batch; returns that number (``int64[]``)."""
        return self._graph_fn_enqueue(records)

    @api(must_be_complete=False)
    def dequeue_records(self, num_records: Any) -> Any:
        """Removes up to ``num_records`` records from the front.

        Returns:
            ``(records, count)``: ``num_records`` rows (``max(num_records, 0)``) in FIFO
            order, of which the first ``count = min(num_records, size)`` are the removed
            records and the rest zeros; ``count`` is ``int64[]``.
        """
        return self._graph_fn_dequeue(num_records)

    @api
    def get_size(self) -> Any:
        """The number of records held, ``int64[]``."""
        return self._graph_fn_get_size()

    @graph_fn(output_spaces=_count_space)
    def _graph_fn_enqueue(self, F: Any, records: Any) -> Any:
        flat = self.record_space.flatten_value(records)
        n = F.cast(F.dim(next(iter(flat.values())), 0), "int64")
        accepted = F.minimum(n, self.capacity - self.size)
        rows = (self.head + self.size + F.arange(accepted)) % self.capacity  # distinct: accepted <= free slots
        for path, var in self.buffers.items():
            F.scatter_update(var, rows, flat[path][:accepted], unique=True)
        F.assign(self.size, self.size + accepted)
        return accepted

    def _front(self, F: Any, positions: Any, count: Any) -> Any:
        """The records at ``head + positions`` (mod capacity), zeros where ``positions >= count``."""
        rows = (self.head + positions) % self.capacity
        live = positions < count
        out = {}
        for path, var in self.buffers.items():
            taken = F.gather(var, rows)
            mask = F.reshape(live, [-1] + [1] * (len(var.shape) - 1))
            out[path] = F.where(mask, taken, F.zeros_like(taken))
        return self.record_space.unflatten(out)

    @graph_fn(returns=2, output_spaces=_dequeued_spaces)
    def _graph_fn_dequeue(self, F: Any, num_records: Any) -> Any:
        n = F.maximum(F.cast(num_records, "int64"), 0)
        count = F.minimum(n, self.size)
        records = self._front(F, F.arange(n), count)
        F.assign(self.head, (self.head + count) % self.capacity)
        F.assign(self.size, self.size - count)
        return records, count

    @graph_fn
    def _graph_fn_get_size(self, F: Any) -> Any:
        return self.size + 0  # a new tensor: torch would hand out the variable's own memory
