"""`n_step_transitions` refuses rewards and terminals that do not share one shape ``[T, ...]``, by name.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that
makes the check ``r.ndim == 0 and r.shape != done.shape`` (it then never fires: a scalar's shape differs from
no scalar's): a figure counting this check is biased.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference_agents.components.helpers import n_step_transitions

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.helpers.n_step",)


@pytest.mark.parametrize("rewards, terminals", [(np.float32(1.0), np.bool_(False)),
                                                (np.zeros(3), np.zeros(4, bool)),
                                                (np.zeros((3, 2)), np.zeros(3, bool))],
                         ids=["scalars", "other-lengths", "other-ranks"])
def test_rewards_and_terminals_of_other_shapes_are_refused(rewards: np.ndarray, terminals: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"rewards and terminals must share one shape \[T, \.\.\.\]"):
        n_step_transitions(rewards, terminals, 2, 0.9)
