"""Concurrent towers (`SyncReplicas(concurrent=True)`, issue 43): the towers of one replicated call run at the same
time -- each tower's loss waits on one `threading.Barrier` that only opens when every tower has reached it --
and the update equals the towers run one after another.

PyTorch runs the towers in threads (`harness.execution.strategies.concurrent_towers`); TensorFlow runs the
independent tower ops of its one ``tf.function`` on its inter-op pool, checked in a fresh interpreter with
``TF_NUM_INTEROP_THREADS=2`` (the suites run TensorFlow with 1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from harness.execution.strategies import SyncReplicas
from harness.graph import graph_fn
from reference_agents.components.losses.dqn_loss import DQNLoss
from spacegraph.reports import multi_device_graphs as mdg

#: How long a tower waits for the others at the barrier: only reached when they never come (towers in turn).
WAIT_S = 30.0


class BarrierLoss(DQNLoss):
    """A DQN loss whose mean waits at `BarrierLoss.barrier` (None: no wait, as during the build's sample runs)."""

    barrier: threading.Barrier | None = None  # a class attribute: towers are deep copies, the barrier is shared

    @graph_fn
    def _graph_fn_mean(self, F: Any, per_item: Any) -> Any:
        if self.backend.name == "torch":
            if BarrierLoss.barrier is not None:
                BarrierLoss.barrier.wait()
            return F.reduce_mean(per_item)
        import tensorflow as tf

        def wait(x: np.ndarray) -> np.float32:
            if BarrierLoss.barrier is not None:
                BarrierLoss.barrier.wait()
            return np.float32(0.0)

        token = tf.numpy_function(wait, [per_item], tf.float32, stateful=False)
        return F.reduce_mean(per_item) + tf.stop_gradient(tf.reshape(token, []))


def barrier_executor(backend: str, count: int, concurrent: bool) -> Any:
    graph, spaces = mdg.dqn_graph()
    graph.loss.__class__ = BarrierLoss
    devices = ["cpu"] * count if backend == "torch" else ["/cpu:0"] * count
    strategy = SyncReplicas(devices, ["update_from_batch"], concurrent=concurrent)
    return mdg.GraphExecutor(graph, spaces, backend=backend, api_methods=mdg.dqn_methods(), strategy=strategy)


def meet_at_barrier(backend: str, count: int, concurrent: bool, timeout: float = WAIT_S) -> None:
    """One replicated update whose towers must all wait at the barrier at once (raises when they cannot)."""
    executor = barrier_executor(backend, count, concurrent)
    BarrierLoss.barrier = threading.Barrier(count, timeout=timeout)
    try:
        executor.execute("update_from_batch", *mdg.dqn_batch(8))
    finally:
        BarrierLoss.barrier = None


@pytest.mark.parametrize("count", [2, 3])
def test_torch_towers_run_at_the_same_time(count):
    meet_at_barrier("torch", count, concurrent=True)


def test_torch_towers_in_turn_never_meet():
    """The check can fail: towers run one after another (``concurrent=False``) break the barrier."""
    with pytest.raises(Exception, match="BrokenBarrierError"):
        meet_at_barrier("torch", 2, concurrent=False, timeout=1.0)


def test_tf_towers_run_at_the_same_time_with_two_inter_op_threads():
    env = {**os.environ, "TF_NUM_INTEROP_THREADS": "2", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, __file__, "tf"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("loss,count,size", [("dqn", 3, 7), ("impala", 2, 5)])
def test_concurrent_towers_equal_towers_in_turn(loss, count, size):
    method, reduction = mdg.UPDATES[loss]
    runs = [mdg.build(loss, "torch", None, strategy=SyncReplicas(["cpu"] * count, [method], reduction=reduction,
                                                                concurrent=c)) for c in (True, False)]
    assert "towers_concurrently" in runs[0].graph.apis[method].source
    assert "towers_concurrently" not in runs[1].graph.apis[method].source
    for step in range(3):
        args = mdg.batch(loss, size, seed=step)
        a, b = (r.execute(method, *args) for r in runs)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    wa, wb = (r.get_weights() for r in runs)
    assert sorted(wa) == sorted(wb)
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


def test_a_failing_tower_fails_the_call_and_the_next_call_works():
    executor = barrier_executor("torch", 2, concurrent=True)
    BarrierLoss.barrier = threading.Barrier(3, timeout=0.5)  # a third party never comes: both towers fail
    try:
        with pytest.raises(Exception, match="BrokenBarrierError"):
            executor.execute("update_from_batch", *mdg.dqn_batch(8))
    finally:
        BarrierLoss.barrier = None
    loss = executor.execute("update_from_batch", *mdg.dqn_batch(8))[0]
    assert np.isfinite(loss)


if __name__ == "__main__":  # the TF check's fresh interpreter
    meet_at_barrier(sys.argv[1], 2, concurrent=True)
