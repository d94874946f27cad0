"""GaussianAdapter clips its actions into half-open bounds too: only ``low`` given, or only ``high``.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that counts
the adapter as bounded only when both sides are finite (`or` made `and`), so a half-bounded adapter returned its
means unclipped: a figure counting this check is biased.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.policies import GaussianAdapter

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.policies.gaussian",)


@pytest.mark.parametrize("backend", selected_backends())
@pytest.mark.parametrize("bounds, expected", [({"low": -1.0}, [-1.0, 0.5, 3.0]), ({"high": 1.0}, [-3.0, 0.5, 1.0])])
def test_greedy_actions_are_clipped_on_the_bounded_side_only(backend: str, bounds: dict, expected: list) -> None:
    ex = GraphExecutor(GaussianAdapter(1, **bounds), {"parameters": "[B](float32[1], float32[1])"}, backend=backend,
                       seed=0, api_methods=["greedy_action"])
    mean = np.array([[-3.0], [0.5], [3.0]], np.float32)
    got = np.asarray(ex.execute("greedy_action", (mean, np.zeros_like(mean))))[:, 0]
    np.testing.assert_array_equal(got, np.array(expected, np.float32))
