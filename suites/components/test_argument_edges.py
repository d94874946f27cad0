"""Constructor arguments at the edges of what components document: probabilities just above 1, nesterov without
momentum.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutants that let
an epsilon of up to 1.2 through (`<= 1.0` made `<= 1.2`) and that check nesterov against ``momentum == 1.0``
instead of 0: a figure counting these checks is biased. The specs' bad configs used values far outside.
"""

from __future__ import annotations

import pytest

from reference_agents.components.common import Dense
from reference_agents.components.explorations import EpsilonGreedy
from reference_agents.components.optimizers import SGD

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.explorations.epsilon_greedy",
                   "reference_agents.components.optimizers.sgd")


@pytest.mark.parametrize("schedule, key", [({"type": "constant", "value": 1.1}, "value"),
                                           ({"type": "linear", "from": 1.1, "to": 0.1, "steps": 10}, "from"),
                                           ({"type": "exponential", "from": 1.0, "to": 1.1, "half_life": 5}, "to")])
def test_an_epsilon_just_above_one_is_refused_by_name(schedule: dict, key: str) -> None:
    with pytest.raises(ValueError, match=rf"EpsilonGreedy: schedule\['{key}'\] must be a number in \[0, 1\]"):
        EpsilonGreedy(3, schedule)
    EpsilonGreedy(3, {**schedule, key: 1.0})  # the edge itself is a probability


def test_nesterov_needs_momentum() -> None:
    with pytest.raises(ValueError, match="SGD: nesterov=True needs momentum > 0"):
        SGD(0.1, Dense(2), nesterov=True, momentum=0.0)
    SGD(0.1, Dense(2), nesterov=True, momentum=0.5)
