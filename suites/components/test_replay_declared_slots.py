"""ReplayMemory declares the slots `insert_records` returns as ``int64[B](0, capacity - 1)``.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that
declares ``capacity + 1``: a figure counting this check is biased. A consumer sizing a one-hot or a gather by
the declared space relies on the bound, and spec build checks compare spaces without their bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.memories import ReplayMemory

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.replay_memory",)


@pytest.mark.parametrize("backend", selected_backends())
def test_the_slots_written_are_declared_within_the_capacity(backend: str) -> None:
    ex = GraphExecutor(ReplayMemory(6), {"records": "[B]{a: int64[]}", "num_records": "int64[]"},
                       backend=backend, seed=0, api_methods=["insert_records", "get_records"])
    space = ex.apis["insert_records"].output_space
    assert (int(np.min(space.low)), int(np.max(space.high))) == (0, 5)
    slots = np.asarray(ex.execute("insert_records", {"a": np.arange(8, dtype=np.int64)}))
    assert slots.min() >= 0 and slots.max() == 5  # 8 records into 6 slots: the last slot is reached
