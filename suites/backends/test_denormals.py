"""Denormal (subnormal) float results are flushed to zero on both backends, in every thread that calls an API
method (`TorchBackend.compile_api`; TensorFlow's compute threads flush by themselves).

A CPU takes 20-100x longer on denormal operands; an optimizer's moments decay into them (RMSProp's mean
square of a weight whose gradient stays zero), which made a fifth of a MinAtar Freeway DQN update on PyTorch.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.spaces import parse

#: Float32's smallest normal number is 1.1755e-38: 0.25 of this is denormal (3.4e-39), 0.25 of 1 is not.
TINY = np.float32(1.36e-38)


class Quarter(Component):
    """``x * w`` with ``w`` a variable at 0.25, without (``scale``) and with (``scale_grad``) gradient recording."""

    def __init__(self):
        super().__init__(scope="quarter")

    def create_variables(self, input_spaces):
        self.w = self.get_variable("w", (), initializer=np.float32(0.25))

    @api
    def scale(self, x):
        return self._graph_fn_scale(x)

    @api
    def scale_grad(self, x):
        return self._graph_fn_scale_grad(x)

    @graph_fn
    def _graph_fn_scale(self, F, x):
        return x * self.w

    @graph_fn(gradients=True)
    def _graph_fn_scale_grad(self, F, x):
        y = x * self.w
        return y, F.gradients(F.reduce_sum(y), [self.w])[0]


def _calls(executor: GraphExecutor, x: np.ndarray) -> list[np.ndarray]:
    # Four plain calls: on PyTorch the first two run the eager chain and record it, the later ones replay it.
    return [np.asarray(executor.execute("scale", x)) for _ in range(4)] + [
        np.asarray(executor.execute("scale_grad", x)[0])]


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_denormal_results_are_zero_in_the_thread_that_built_and_in_a_new_thread(backend):
    pytest.importorskip("tensorflow" if backend == "tf" else "torch")
    executor = GraphExecutor(Quarter(), {"x": parse("float32[B,2]")}, backend=backend, seed=0)
    x = np.array([[TINY, 1.0]], np.float32)
    for out in _calls(executor, x):
        np.testing.assert_array_equal(out, [[0.0, 0.25]])

    seen: list[list[np.ndarray]] = []
    thread = threading.Thread(target=lambda: seen.append(_calls(executor, x)))
    thread.start()
    thread.join(timeout=60)
    assert len(seen) == 1, "the calls in a new thread did not finish"
    for out in seen[0]:
        np.testing.assert_array_equal(out, [[0.0, 0.25]])


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_the_callers_own_numpy_keeps_its_denormals_after_a_call(backend):
    pytest.importorskip("tensorflow" if backend == "tf" else "torch")
    executor = GraphExecutor(Quarter(), {"x": parse("float32[B,2]")}, backend=backend, seed=0)
    _calls(executor, np.array([[TINY, 1.0]], np.float32))
    assert np.float32(TINY) * np.float32(0.25) > 0.0
