"""A `PreprocessorStack` resets its stateful members: the agents reset an environment's preprocessing through
the stack (``preprocessor.stateful``), and the stack passes ``reset`` on to the members that declare themselves
stateful (`FrameStack`). The spec ``preprocessor_stack_reset.yaml`` checks the same against a model, but it is
a spec of the stack, which a mutant of `FrameStack`'s module does not run."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.preprocessors import PreprocessorStack

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.preprocessors.frame_stack",)


@pytest.mark.parametrize("backend", selected_backends())
def test_a_stack_with_a_frame_stack_is_stateful_and_resets_it(backend: str) -> None:
    stack = PreprocessorStack([{"type": "divide", "divisor": 2}, {"type": "frame_stack", "num_frames": 3}])
    assert stack.stateful  # what the agents read to reset an environment's preprocessing
    ex = GraphExecutor(stack, {"inputs": "float32[B,2,2,1]"}, backend=backend, seed=0)
    frames = [np.full((1, 2, 2, 1), 2.0 * k, np.float32) for k in range(1, 5)]
    for f in frames[:3]:
        ex.execute("preprocess", f)
    ex.execute("reset")
    got = np.asarray(ex.execute("preprocess", frames[3]))
    np.testing.assert_array_equal(got, np.full((1, 2, 2, 3), 4.0, np.float32))  # the new frame in all places
