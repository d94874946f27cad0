"""`GaussianAdapter` inside a root that scores its own draws (the log-probability of a sampled action, as
policy-gradient and soft actor-critic learners take it). Here ``actions`` come from the adapter's own graph
function, so the adapter must create its variables without their space (``log_prob`` is declared
``must_be_complete=False``); a spec feeds ``actions`` from outside and cannot tell."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api
from harness.testing.plugin import selected_backends
from reference_agents.components.policies import GaussianAdapter

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.policies.gaussian",)


class ScoredDraw(Component):
    def __init__(self, adapter: GaussianAdapter) -> None:
        self.adapter = adapter
        super().__init__(adapter, scope="scored_draw")

    @api
    def act(self, features: Any) -> Any:
        parameters = self.adapter.parameters(features)
        actions = self.adapter.sample_action(parameters)
        return parameters, actions, self.adapter.log_prob(parameters, actions)


@pytest.mark.parametrize("backend", selected_backends())
def test_the_log_probability_of_a_sampled_action_is_the_gaussian_density(backend: str) -> None:
    ex = GraphExecutor(ScoredDraw(GaussianAdapter(2)), {"features": "float32[B,3]"}, backend=backend, seed=0)
    features = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    (mean, log_std), actions, log_prob = (np.asarray(x) if not isinstance(x, tuple) else tuple(map(np.asarray, x))
                                          for x in ex.execute("act", features))
    z = (actions - mean) / np.exp(log_std)
    want = np.sum(-0.5 * z ** 2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    assert log_prob.shape == (5,)
    np.testing.assert_allclose(log_prob, want, rtol=1e-5, atol=1e-5)
