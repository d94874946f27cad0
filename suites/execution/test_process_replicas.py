"""`ProcessReplicas` (processes mode): N replica processes on shards of a batch equal one device on the whole
batch, on both backends, for the DQN loss with importance weights and the IMPALA v-trace loss; the replicas
hold replica 0's variables; PyTorch's all-reduce starts while the backward pass runs (issue 43)."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from harness.execution.strategies import ProcessReplicas
from spacegraph.reports import multi_device_graphs as mdg

pytestmark = pytest.mark.distributed


def processes(loss: str, backend: str, replicas: int = 2, **kwargs) -> mdg.GraphExecutor:
    method, reduction = mdg.UPDATES[loss]
    return mdg.build(loss, backend, None, strategy=ProcessReplicas(replicas, [method], reduction=reduction, **kwargs))


def max_diff(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


def assert_same_dqn_updates(single, multi, rows: int, seeds) -> None:
    """DQN updates on the same batches (one per seed): loss and TD errors, then the weights, equal to 1e-5."""
    for seed in seeds:
        args = mdg.batch("dqn", rows, seed=seed)
        a, b = single.execute("update_from_batch", *args), multi.execute("update_from_batch", *args)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a[2], b[2], rtol=1e-5, atol=1e-5)
    assert max_diff(mdg.main_weights(single), mdg.main_weights(multi)) < 1e-5


@pytest.mark.parametrize("backend", ["torch", "tf"])
@pytest.mark.parametrize("loss,size", [("dqn", 7), ("impala", 5)])
def test_two_processes_equal_one_device_on_the_whole_batch(backend, loss, size):
    """Uneven shards (7 rows: 4 + 3; 5 rollouts: 3 + 2), several steps, a target sync and weights set on replica 0
    in between: outputs, weights and optimizer slots stay equal to one device's, and replica 1 holds replica 0's
    variables exactly."""
    method = mdg.UPDATES[loss][0]
    single, multi = mdg.build(loss, backend, None), processes(loss, backend)
    try:
        assert multi.strategy.describe() == {"type": "sync-replicas", "mode": "processes", "replicas": 2,
                                             "backend": "gloo", "devices": ["cpu", "cpu"]}
        for step in range(4):
            if step == 2:  # replica 0's variables change outside the replicated method: the replicas must follow
                if loss == "dqn":
                    single.execute("sync_target")
                    multi.execute("sync_target")
                weights = {k: v * 0.5 if v.dtype.kind == "f" else v for k, v in mdg.main_weights(single).items()}
                single.set_weights(weights, strict=False)
                multi.set_weights(weights, strict=False)
            args = mdg.batch(loss, size, seed=step)
            want, got = single.execute(method, *args), multi.execute(method, *args)
            assert len(want) == len(got)
            for a, b in zip(want, got):  # losses over the whole batch, the gradient norm, TD errors in row order
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        slots = [k for k in mdg.main_weights(single) if "optimizer" in k]
        assert slots  # the optimizer's slots are among the compared variables
        assert max_diff(mdg.main_weights(single), mdg.main_weights(multi)) < 1e-5
        mine, theirs = multi.get_weights(), multi.strategy.replica_weights(1)
        assert set(slots) <= set(theirs)
        assert all(np.array_equal(theirs[k], mine[k]) for k in theirs)
    finally:
        multi.close()
    assert multiprocessing.active_children() == []


def test_three_replicas_odd_batch_torch():
    """Three processes on 7 rows (3 + 2 + 2) with importance weights (the suite's listener watch, on for every
    distributed test, fails it if the group listens anywhere but loopback)."""
    single, multi = mdg.build("dqn", "torch", None), processes("dqn", "torch", replicas=3)
    try:
        assert_same_dqn_updates(single, multi, 7, seeds=[10, 11])
    finally:
        multi.close()
    assert multiprocessing.active_children() == []


def test_torch_all_reduce_starts_before_the_backward_pass_ends():
    """Small buckets: replica 0 hands its first bucket to the all-reduce while the backward pass still produces
    gradients, and launches the buckets in order (the order every replica launches them in)."""
    strategy = ProcessReplicas(2, ["update_from_batch"], bucket_bytes=64)
    multi = mdg.build("dqn", "torch", None, hidden=(16, 16), strategy=strategy)
    try:
        strategy.comm.events = []
        multi.execute("update_from_batch", *mdg.batch("dqn", 6))
        events = strategy.comm.events
        grads = [i for i, (kind, _) in enumerate(events) if kind == "grad"]
        launches = [i for i, (kind, _) in enumerate(events) if kind == "launch"]
        end = events.index(("backward_end", -1))
        assert len(grads) == 6 and len(launches) >= 3, events  # 3 dense layers: 6 variables
        assert launches[0] < grads[-1] < end, events  # a bucket launched before the last gradient came
        assert [events[i][1] for i in launches] == list(range(len(launches)))
    finally:
        multi.close()


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_cuda_devices() == 0, reason="NCCL needs a CUDA GPU (torch.cuda.is_available() is False here)")
def test_nccl_processes_equal_one_device():
    """Two replica processes on CUDA (one GPU each where there are two) all-reduce with NCCL."""
    devices = [f"cuda:{i % _cuda_devices()}" for i in range(2)]
    single = mdg.build("dqn", "torch", None, device_map={"dqn": "cuda:0"})
    multi = processes("dqn", "torch", devices=devices)
    try:
        assert multi.strategy.describe()["backend"] == "nccl"
        assert_same_dqn_updates(single, multi, 7, seeds=[0, 1, 2])
    finally:
        multi.close()
    assert multiprocessing.active_children() == []


def test_replicas_are_pinned_to_their_own_cores_when_there_are_enough():
    import os

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip(f"one usable core ({cores}): nothing to pin to")
    pinned, free = processes("dqn", "torch"), processes("dqn", "torch", pin=False)
    try:
        for multi in (pinned, free):  # an update: the replicas have started and reported ready
            multi.execute("update_from_batch", *mdg.batch("dqn", 4))
        assert os.sched_getaffinity(pinned.strategy.pids[0]) == {cores[1]}  # replica 1 on core 1 % cores
        assert os.sched_getaffinity(free.strategy.pids[0]) == set(cores)
        assert os.sched_getaffinity(0) == set(cores)  # replica 0 (this process) keeps its cores
    finally:
        pinned.close()
        free.close()
