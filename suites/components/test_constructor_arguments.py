"""Constructor arguments a spec's ``bad_configs`` cannot write (components, empty lists, sets) or values that
must be accepted (the spec harness checks refusals only).

Each check states what the class documents: an optimizer needs at least one component to train, a policy a
network with an ``apply`` method, an exponential schedule any positive half-life, `atari_preprocessing` refuses
bad sizes when called (not later, when the stack is built).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.common import Dense
from reference_agents.components.explorations import EpsilonGreedy
from reference_agents.components.memories import ReplayMemory
from reference_agents.components.optimizers import SGD
from reference_agents.components.policies.policy import Policy
from reference_agents.components.preprocessors.stack import atari_preprocessing

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.optimizers.base",
                   "reference_agents.components.policies.policy",
                   "reference_agents.components.explorations.epsilon_greedy",
                   "reference_agents.components.preprocessors.stack")


@pytest.mark.parametrize("variables_of", [[], (), {Dense(2)}, "dense"], ids=["empty-list", "empty-tuple", "set",
                                                                             "string"])
def test_an_optimizer_needs_components_to_train(variables_of):
    with pytest.raises(ValueError, match="variables_of must be a Component or a non-empty list"):
        SGD(0.1, variables_of)


@pytest.mark.parametrize("network", [ReplayMemory(4), {"type": "dense", "units": 2}], ids=["no-apply", "a-dict"])
def test_a_policy_needs_a_network_with_an_apply_method(network):
    with pytest.raises(ValueError, match="network must be a Component with an API method 'apply'"):
        Policy(network, "int64[](0,2)")


@pytest.mark.parametrize("backend", selected_backends())
def test_a_half_life_below_one_step_is_a_fast_decay(backend):
    """``epsilon(t) = to + (from - to) 2^(-t / half_life)``: half-life 0.5 quarters the excess each step."""
    greedy = EpsilonGreedy(3, {"type": "exponential", "from": 0.9, "to": 0.1, "half_life": 0.5})
    ex = GraphExecutor(greedy, {"time_step": "int64[]"}, backend=backend, seed=0, api_methods=["epsilon"])
    got = [float(ex.execute("epsilon", np.int64(t))) for t in range(3)]
    np.testing.assert_allclose(got, [0.9, 0.1 + 0.8 / 4, 0.1 + 0.8 / 16], rtol=1e-6)


@pytest.mark.parametrize("name", ["batch_size", "num_frames", "size"])
def test_atari_preprocessing_refuses_bad_sizes_when_called(name):
    args = {"batch_size": 2, "num_frames": 4, "size": 84, name: 0}
    with pytest.raises(ValueError, match=f"atari_preprocessing: {name} must be"):
        atari_preprocessing(**args)
