"""SegmentTree holds ``tree`` of shape ``(2 * capacity,)``, as its `create_variables` documents.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that
makes it ``3 * capacity`` (the extra entries are never read, so no sampled value changes): a figure counting
this check is biased. The size is what a saved replay's weights hold and what a checkpoint written by another
build must match.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.memories import SegmentTree

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.segment_tree",)


@pytest.mark.parametrize("backend", selected_backends())
@pytest.mark.parametrize("capacity", [1, 4, 8])
def test_the_tree_holds_two_entries_per_leaf(backend: str, capacity: int) -> None:
    ex = GraphExecutor(SegmentTree(capacity, "sum"), {"indices": "int64[B]", "values": "float32[B]"},
                       backend=backend, seed=0, api_methods=["update", "reduce"])
    (name, tree), = ex.get_weights().items()
    assert name.endswith("tree") and np.asarray(tree).shape == (2 * capacity,) and np.asarray(tree).dtype == np.float32
