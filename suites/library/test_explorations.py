"""Properties of epsilon-greedy exploration that the spec harness cannot express.

The Ape-X rates (`apex_epsilons`, host-side NumPy) are tested in ``suites/components/test_apex_epsilons.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api
from harness.testing.plugin import selected_backends
from reference_agents.components.explorations import EpsilonGreedy
from reference_agents.oracles.explorations import schedule_value
from reference_agents.oracles.policies import DensePolicy

BACKENDS = pytest.mark.parametrize("backend", selected_backends())
DRAWS = 20000
SIGMAS = 4.5

LINEAR = {"type": "linear", "from": 1.0, "to": 0.1, "steps": 100}
EXPONENTIAL = {"type": "exponential", "from": 0.9, "to": 0.1, "half_life": 50}


# ---- arguments --------------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    (lambda: EpsilonGreedy(0, {"type": "constant", "value": 0.1}), "num_actions must be a positive int; got 0"),
    (lambda: EpsilonGreedy(3, "linear"), "schedule must be a dict with type one of"),
    (lambda: EpsilonGreedy(3, {"type": "cosine"}), "schedule must be a dict with type one of"),
    (lambda: EpsilonGreedy(3, {"type": "constant", "value": 1.5}), "schedule['value'] must be a number in [0, 1]"),
    (lambda: EpsilonGreedy(3, {"type": "constant"}), "a constant schedule takes keys ['value']; got []"),
    (lambda: EpsilonGreedy(3, {**LINEAR, "steps": 0}), "schedule['steps'] must be a positive int; got 0"),
    (lambda: EpsilonGreedy(3, {**LINEAR, "half_life": 3}), "a linear schedule takes keys"),
    (lambda: EpsilonGreedy(3, {**EXPONENTIAL, "half_life": -1}), "schedule['half_life'] must be a positive number"),
    (lambda: EpsilonGreedy(3, {**EXPONENTIAL, "to": -0.1}), "schedule['to'] must be a number in [0, 1]"),
]


@pytest.mark.parametrize("make, message", BAD_ARGUMENTS, ids=[m for _, m in BAD_ARGUMENTS])
def test_bad_arguments_name_argument_and_value(make: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


# ---- schedules ------------------------------------------------------------------------------------------

SCHEDULE_POINTS = [
    (LINEAR, -5, 1.0), (LINEAR, 0, 1.0), (LINEAR, 50, 0.55), (LINEAR, 100, 0.1), (LINEAR, 10 ** 12, 0.1),
    (EXPONENTIAL, 0, 0.9), (EXPONENTIAL, 50, 0.5), (EXPONENTIAL, 100, 0.3), (EXPONENTIAL, 10 ** 6, 0.1),
    ({"type": "constant", "value": 0.25}, 7, 0.25),
]


@BACKENDS
@pytest.mark.parametrize("schedule, step, expected", SCHEDULE_POINTS)
def test_epsilon_at_known_points(backend: str, schedule: dict, step: int, expected: float) -> None:
    """Hand-computed values: the linear midpoint, one and two half-lives, the ends, negative steps.
    On PyTorch the schedule (scalars only) runs on the host (`harness.graph.steps.host_step`)."""
    assert float(schedule_value(schedule, step)) == pytest.approx(expected, rel=1e-12)
    ex = GraphExecutor(EpsilonGreedy(3, schedule), {"time_step": "int64[]"}, backend=backend,
                       api_methods=["epsilon"])
    assert ex.profile.host_steps == (1 if backend == "torch" else 0)
    assert float(ex.execute("epsilon", time_step=np.int64(step))) == pytest.approx(expected, rel=1e-6)


# ---- exploring ---------------------------------------------------------------------------------------------

@BACKENDS
@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_explore_changes_each_element_independently_with_epsilon(backend: str, epsilon: float) -> None:
    """A fraction eps (A-1)/A of elements leave the greedy action, uniformly over the other actions."""
    actions = 4
    ex = GraphExecutor(EpsilonGreedy(actions, {"type": "constant", "value": epsilon}),
                       {"greedy_actions": "int64[B](0,3)", "time_step": "int64[]"}, backend=backend, seed=2,
                       api_methods=["explore"])
    greedy = np.full(DRAWS, 2, np.int64)
    out = ex.execute("explore", greedy_actions=greedy, time_step=np.int64(0))
    changed = epsilon * (actions - 1) / actions
    se = math.sqrt(changed * (1 - changed) / DRAWS)
    assert abs((out != greedy).mean() - changed) <= SIGMAS * se + 1e-12
    for a in (0, 1, 3):  # each other action gets eps / A
        p = epsilon / actions
        assert abs((out == a).mean() - p) <= SIGMAS * math.sqrt(p * (1 - p) / DRAWS) + 1e-12
    # one coin per element, not one per batch: a small batch mixes explored and greedy elements
    if 0.0 < epsilon < 1.0:
        assert 0 < (out[:200] != 2).sum() < 200


@BACKENDS
def test_explore_follows_the_schedule_over_time(backend: str) -> None:
    """Late in a linear schedule to 0 nothing is explored; at step 0 (epsilon 1) almost everything is."""
    ex = GraphExecutor(EpsilonGreedy(10, {"type": "linear", "from": 1.0, "to": 0.0, "steps": 10}),
                       {"greedy_actions": "int64[B](0,9)", "time_step": "int64[]"}, backend=backend,
                       api_methods=["explore"])
    greedy = np.zeros(2000, np.int64)
    np.testing.assert_array_equal(ex.execute("explore", greedy_actions=greedy, time_step=np.int64(10)), greedy)
    early = ex.execute("explore", greedy_actions=greedy, time_step=np.int64(0))
    assert abs((early != 0).mean() - 0.9) < 0.05


@BACKENDS
def test_explore_is_reproducible_under_a_seed(backend: str) -> None:
    """Two builds with one seed explore identically, call after call; another seed differs."""
    def run(seed: int) -> list[np.ndarray]:
        ex = GraphExecutor(EpsilonGreedy(5, {"type": "constant", "value": 0.5}),
                           {"greedy_actions": "int64[B](0,4)", "time_step": "int64[]"}, backend=backend, seed=seed,
                           api_methods=["explore"])
        return [ex.execute("explore", greedy_actions=np.zeros(64, np.int64), time_step=np.int64(0))
                for _ in range(3)]

    a, b, c = run(4), run(4), run(5)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c))
    assert not np.array_equal(a[0], a[1])


class _Actor(Component):
    """A DQN-style actor: greedy actions from a policy's Q-values, then epsilon-greedy exploration."""

    def __init__(self) -> None:
        self.policy = DensePolicy(4, "int64[](0,2)", scope="q")
        self.exploration = EpsilonGreedy(3, LINEAR, scope="exploration")
        super().__init__(self.policy, self.exploration, scope="actor")

    @api
    def act(self, states: Any, time_step: Any) -> Any:
        return self.exploration.explore(self.policy.greedy_actions(states), time_step)


@BACKENDS
def test_exploration_composes_with_a_policy(backend: str) -> None:
    ex = GraphExecutor(_Actor(), {"states": "float32[B,2]", "time_step": "int64[]"}, backend=backend)
    assert repr(ex.apis["act"].output_space) == "int64[B](0,2)"
    out = ex.execute("act", states=np.zeros((7, 2), np.float32), time_step=np.int64(3))
    assert out.shape == (7,) and out.dtype == np.int64 and out.min() >= 0 and out.max() <= 2
