"""`DistributedReplicas`: two processes (gloo on 127.0.0.1) take the single-process update on the whole batch;
nothing of the process group listens on another interface than loopback (the suite's listener watch)."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from harness.execution.strategies.distributed import launch
from spacegraph.reports import multi_device_graphs as mdg

pytestmark = pytest.mark.distributed


@pytest.mark.parametrize("loss,size", [("dqn", 7), ("impala", 5)])
def test_two_processes_equal_one_process_on_the_whole_batch(loss, size, loopback_listeners):
    steps = 4
    loopback_listeners.record_all = True
    ranks = launch(mdg.distributed_run, 2, args=(loss, size, steps), timeout=150)
    assert multiprocessing.active_children() == []
    # the suite's listener watch saw the ranks' gloo listeners (so it would have seen one on another interface)
    ours = {item.pid for item in loopback_listeners.everything if item.pid != os.getpid()}
    assert len(ours) == 2, loopback_listeners.everything
    single = mdg.build(loss, "torch", None)
    method = mdg.UPDATES[loss][0]
    for step in range(steps):
        single.execute(method, *mdg.batch(loss, size, seed=step))
    want = mdg.main_weights(single)
    for weights in ranks:
        assert sorted(weights) == sorted(want)
    assert all(np.array_equal(ranks[0][k], ranks[1][k]) for k in want)  # identical in every process
    assert max(float(np.max(np.abs(ranks[0][k] - want[k]))) for k in want) < 2e-5


def test_a_failing_rank_is_reported_and_every_process_ends():
    with pytest.raises(RuntimeError, match=r"rank [01] of 2 failed:(.|\n)*KeyError: 'no-such-loss'"):
        launch(mdg.distributed_run, 2, args=("no-such-loss", 4, 1), timeout=60)
    assert multiprocessing.active_children() == []
