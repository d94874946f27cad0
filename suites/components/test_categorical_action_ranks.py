"""CategoricalAdapter refuses actions whose extra ranks differ from its logits' (`check_input_spaces`).

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that
skips this check whenever the logits' space is known (`params is not None` made `params is None`): a figure
counting this check is biased. The spec's bad spaces each change one argument, so none pairs batch-only logits
with time-major actions.
"""

from __future__ import annotations

import pytest

from harness.execution.executor import GraphExecutor
from harness.graph.errors import SpaceMismatchError
from harness.testing.plugin import selected_backends
from reference_agents.components.policies import CategoricalAdapter

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.policies.categorical",)


@pytest.mark.parametrize("backend", selected_backends())
@pytest.mark.parametrize("parameters, actions", [("float32[B,3]", "int64[T,B](0,2)"),
                                                 ("float32[T,B,3]", "int64[B](0,2)")])
def test_actions_with_other_extra_ranks_than_the_logits_are_refused(backend: str, parameters: str,
                                                                    actions: str) -> None:
    with pytest.raises(SpaceMismatchError, match="actions"):
        GraphExecutor(CategoricalAdapter(3), {"features": "float32[B,4]", "parameters": parameters,
                                              "actions": actions}, backend=backend, seed=0)


@pytest.mark.parametrize("backend", selected_backends())
def test_actions_with_the_logits_extra_ranks_build(backend: str) -> None:
    GraphExecutor(CategoricalAdapter(3), {"features": "float32[T,B,4]", "parameters": "float32[T,B,3]",
                                          "actions": "int64[T,B](0,2)"}, backend=backend, seed=0)
