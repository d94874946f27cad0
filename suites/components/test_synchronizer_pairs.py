"""`Synchronizer` refuses a source and target whose variables do not pair up (what a spec cannot express).

A spec builds from input spaces, and the pair's variables come from the layers' configs, so the
fixture `SyncedPair` (a layer and its copy) always pairs up; here the layers differ on purpose.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import BuildError, Component, forward
from harness.testing.plugin import selected_backends
from reference_agents.components.common import Dense, Synchronizer

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.common.synchronizer",)


class Pair(Component):
    """Two layers built on the same inputs and a synchronizer from the first into the second."""

    def __init__(self, source: Component, target: Component) -> None:
        self.first, self.second = source, target
        self.synchronizer = Synchronizer(source, target, scope="synchronizer")
        super().__init__(source, target, self.synchronizer, scope="pair")

    source = forward("first", Dense.apply)
    target = forward("second", Dense.apply)
    sync = forward("synchronizer", Synchronizer.sync)


def build(source: Component, target: Component, backend: str) -> Any:
    return GraphExecutor(Pair(source, target), {"inputs": "float32[B,4]"}, backend=backend, seed=0)


@pytest.mark.parametrize("backend", selected_backends())
def test_differing_variables_are_named(backend: str) -> None:
    with pytest.raises(BuildError, match=r"shapes/dtypes differ \{'bias': 'float32\[2\] vs float32\[3\]', "
                                         r"'kernel': 'float32\[4, 2\] vs float32\[4, 3\]'\}"):
        build(Dense(2, scope="source"), Dense(3, scope="target"), backend)
    with pytest.raises(BuildError, match=r"only in source \['bias'\], only in target \[\]"):
        build(Dense(2, scope="source"), Dense(2, use_bias=False, scope="target"), backend)
    ok = build(Dense(2, scope="source"), Dense(2, scope="target"), backend)  # the same layout pairs up
    ok.execute("sync")


@pytest.mark.parametrize("backend", selected_backends())
def test_a_hard_sync_copies_even_over_a_diverged_target(backend: str) -> None:
    """``tau = 1`` copies: a target whose weights went non-finite equals the source after one sync (a blend
    ``1 * source + 0 * target`` would keep the NaN and inf)."""
    from reference_agents.oracles.fixtures import SyncedPair

    ex = GraphExecutor(SyncedPair(3), {"inputs": "float32[B,4]"}, backend=backend, seed=0)
    weights = ex.get_weights()
    broken = {k: np.full_like(v, np.nan if k.endswith("kernel") else np.inf) for k, v in weights.items()
              if "/target/" in f"/{k}"}
    assert len(broken) == 2
    ex.set_weights(broken, strict=False)
    ex.execute("sync")
    after = ex.get_weights()
    for key in broken:
        np.testing.assert_array_equal(after[key], weights[key.replace("target", "source")], err_msg=key)
