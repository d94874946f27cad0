"""`atari_preprocessing` maps uint8 Atari frames into ``[0, 1]``: a white frame becomes 1, a black one 0.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that
divides by 256 instead of 255 (white then becomes 0.996): a figure counting this check is biased.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.preprocessors.stack import PreprocessorStack, atari_preprocessing

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.preprocessors.stack",)


@pytest.mark.parametrize("backend", selected_backends())
def test_white_and_black_frames_reach_the_ends_of_the_unit_range(backend: str) -> None:
    stack = PreprocessorStack(atari_preprocessing(batch_size=2, num_frames=2, size=8))
    ex = GraphExecutor(stack, {"inputs": "uint8[B,12,10,3]"}, backend=backend, seed=0)
    frames = np.stack([np.full((12, 10, 3), 255, np.uint8), np.zeros((12, 10, 3), np.uint8)])
    got = np.asarray(ex.execute("preprocess", frames))
    assert got.shape == (2, 8, 8, 2)
    np.testing.assert_allclose(got[0], 1.0, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(got[1], 0.0)
