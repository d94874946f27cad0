"""What components hold right after the build, as documented (the stateful specs' models start from the built
weights, so they cannot tell a wrong initial value from a right one)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.memories import SegmentTree

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.segment_tree",)


@pytest.mark.parametrize("backend", selected_backends())
@pytest.mark.parametrize("operation, neutral", [("sum", 0.0), ("min", np.inf)])
def test_segment_tree_leaves_start_at_the_operations_neutral(backend: str, operation: str, neutral: float) -> None:
    """"Leaves start at the operation's neutral" (0 for sum, +inf for min): a fresh tree reduces to it."""
    ex = GraphExecutor(SegmentTree(4, operation), {"indices": "int64[B]", "values": "float32[B]"}, backend=backend,
                       seed=0, api_methods=["update", "reduce", "get"])
    assert float(ex.execute("reduce")) == neutral
    np.testing.assert_array_equal(np.asarray(ex.execute("get", np.arange(4))), np.full(4, neutral, np.float32))
    ex.execute("update", np.array([2]), np.array([3.0], np.float32))
    assert float(ex.execute("reduce")) == 3.0  # 0 + 0 + 3 + 0, or min(inf, inf, 3, inf)
