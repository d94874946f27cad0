"""Synchronous replicas (`SyncReplicas`): one update step of the DQN and IMPALA learners at 1, 2, 4 replicas.

Replicas are logical devices here (TF logical CPUs ``/cpu:0``-``/cpu:3``, PyTorch replicas on ``cpu``):
the timings measure the strategy's overhead against the plain graph (``replicas=0``), not a speed-up
(see reports/multi_device/report.md). samples/s = batch (DQN rows, IMPALA 5 x batch rollout steps) / time.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from .common import grid, installed_backends  # noqa: E402

BATCH = 64


def _devices(backend, count):
    if backend == "tf":
        from harness.backends.tf.devices import logical_cpus

        cpus = logical_cpus(4)
        return [cpus[i % len(cpus)] for i in range(count)]
    return ["cpu"] * count


class SyncReplicasUpdate:
    """One update call (NumPy batch in, NumPy outputs) of the plain graph (0) or N replicas."""

    params = (installed_backends(), ["dqn", "impala"], grid([0, 1, 2, 4], [0, 2]))
    param_names = ["backend", "loss", "replicas"]
    timeout = 300

    def setup(self, backend, loss, replicas):
        from spacegraph.reports import multi_device_graphs as mdg

        self.method = mdg.UPDATES[loss][0]
        self.args = mdg.batch(loss, BATCH)
        self.executor = mdg.build(loss, backend, _devices(backend, replicas) if replicas else None, hidden=(64, 64))
        for _ in range(3):
            self.executor.execute(self.method, *self.args)

    def time_update(self, backend, loss, replicas):
        self.executor.execute(self.method, *self.args)
