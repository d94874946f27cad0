"""DQNLoss's Huber loss with a threshold other than 1: ``0.5 e^2`` inside ``|e| <= d``, ``d (|e| - 0.5 d)`` outside.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that computes
``d (|e| - 0.5 / d)``: every spec uses ``huber_delta`` 1 (or None), where the two agree. A figure counting this
check is biased.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.losses import DQNLoss

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.losses.dqn_loss",)


@pytest.mark.parametrize("backend", selected_backends())
@pytest.mark.parametrize("delta", [0.5, 2.0])
def test_per_item_loss_on_both_sides_of_the_threshold(backend: str, delta: float) -> None:
    loss = DQNLoss(gamma=0.5, double_q=False, huber_delta=delta, importance_weights=False)
    spaces = {"q_values": "float32[B,2]", "actions": "int64[B](0,1)", "rewards": "float32[B]",
              "terminals": "bool[B]", "next_q_values_target": "float32[B,2]", "next_q_values_online": "float32[B,2]"}
    ex = GraphExecutor(loss, spaces, backend=backend, seed=0, api_methods=["loss_per_item"])
    errors = np.array([0.25, -0.4, 3.0, -5.0], np.float32)  # terminal steps: the TD error is reward - Q
    q = np.zeros((4, 2), np.float32)
    per_item = np.asarray(ex.execute("loss_per_item", q, np.zeros(4, np.int64), errors, np.ones(4, bool), q, q))
    e = np.abs(errors.astype(np.float64))
    expected = np.where(e <= delta, 0.5 * e ** 2, delta * (e - 0.5 * delta))
    np.testing.assert_allclose(per_item, expected, rtol=1e-6)
