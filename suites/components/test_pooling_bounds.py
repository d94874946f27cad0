"""MaxPool2D's output space keeps each channel's own bounds (a spec's space text gives one bound for all
channels, so this is checked here; ``MUTATION_COVERS``: a mutant of the module runs this file)."""

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.spaces import FloatBox
from harness.testing.plugin import selected_backends
from reference_agents.components.nn import MaxPool2D

MUTATION_COVERS = ("reference_agents.components.nn.pooling",)


@pytest.mark.parametrize("backend", selected_backends())
def test_each_channel_keeps_its_own_bounds(backend):
    low = np.stack([np.full((4, 5), -1.0), np.full((4, 5), -5.0), np.full((4, 5), 0.0)], -1)
    high = np.stack([np.full((4, 5), 2.0), np.full((4, 5), 7.0), np.full((4, 5), 0.5)], -1)
    low[0, 0, 0], high[3, 4, 2] = -3.0, 9.0  # one element's wider bound widens its whole channel
    space = FloatBox((4, 5, 3), low=low, high=high, batch_rank=True)
    out = GraphExecutor(MaxPool2D(2, padding="same"), {"inputs": space}, backend).apis["apply"].output_space
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.low, np.broadcast_to([-3.0, -5.0, 0.0], (2, 3, 3)))
    np.testing.assert_array_equal(out.high, np.broadcast_to([2.0, 7.0, 9.0], (2, 3, 3)))
