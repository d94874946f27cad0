"""A FIFOQueue drained by its own size: `dequeue_records(get_size())` in one graph.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that
declares `dequeue_records` ``must_be_complete=True``: a figure counting this check is biased. A spec feeds
``num_records`` from outside, so it never builds a queue whose ``num_records`` comes from the queue itself;
with ``must_be_complete=True`` such a build waits for a space only the queue's own variables can give.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api
from harness.testing.plugin import selected_backends
from reference_agents.components.queues import FIFOQueue

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.queues.fifo_queue",)


class Drainer(Component):
    """Fills a queue, and takes out everything it holds."""

    def __init__(self, queue: FIFOQueue) -> None:
        self.queue = queue
        super().__init__(queue, scope="drainer")

    @api
    def fill(self, records: Any) -> Any:
        return self.queue.enqueue_records(records)

    @api
    def drain(self) -> Any:
        return self.queue.dequeue_records(self.queue.get_size())


@pytest.mark.parametrize("backend", selected_backends())
def test_a_queue_drained_by_its_own_size_builds_and_empties(backend: str) -> None:
    ex = GraphExecutor(Drainer(FIFOQueue(4)), {"records": "[B]{x: int64[]}"}, backend=backend, seed=0)
    assert int(ex.execute("fill", {"x": np.array([7, 8, 9])})) == 3
    records, count = ex.execute("drain")
    assert int(count) == 3 and np.asarray(records["x"]).tolist() == [7, 8, 9]
    assert int(ex.execute("drain")[1]) == 0
