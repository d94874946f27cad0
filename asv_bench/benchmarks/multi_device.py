"""Synchronous replicas (issue 43): one update of the DQN and IMPALA learners as towers (`SyncReplicas`, towers run
concurrently) at 0 (the plain graph), 1, 2, 4 replicas, and the scaling of processes mode.

``SyncReplicasUpdate`` times one update of 64 rows in all (the batch split over the towers, an MLP
of 64, 64). ``ProcessScaling.track_processes_2_over_1`` is the issue's figure: samples/s of 2 replica processes
over 1 (the plain graph), the per-replica batch fixed (DQN 32 rows, IMPALA 8 rollouts of 5 steps), the Nature CNN,
one thread per replica, both measured in the same benchmark process in interleaved rounds
(`spacegraph.reports.multi_device.result`; the goal on a 2-core machine is >= 1.7).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from .common import grid, installed_backends, quick, require_module  # noqa: E402

BATCH = 64


def _devices(backend, count):
    if backend == "tf":
        from harness.backends.tf.devices import logical_cpus

        cpus = logical_cpus(4)
        return [cpus[i % len(cpus)] for i in range(count)]
    return ["cpu"] * count


class SyncReplicasUpdate:
    """One update call (NumPy batch in, NumPy outputs) of the plain graph (0) or N towers."""

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


class ProcessScaling:
    """Samples/s of 2 replica processes over 1 (see the module docstring); a smoke run takes the MLP, briefly."""

    params = (installed_backends(), grid(["dqn", "impala"], ["dqn"]))
    param_names = ["backend", "loss"]
    timeout = 600
    number, repeat = 1, 1

    def setup(self, backend, loss):
        require_module("harness.execution.strategies.processes")

    def track_processes_2_over_1(self, backend, loss):
        """Samples/s of processes 2 / single, per-replica batch fixed, taken in one run."""
        from spacegraph.reports.multi_device import over_single, result

        measured = result(backend, losses=[loss], modes=["processes"], replicas=[2],
                          network="mlp" if quick() else "nature", seconds=0.05 if quick() else 2.0,
                          repeats=1 if quick() else 3)
        return over_single(measured["rows"], loss, "processes 2")

    track_processes_2_over_1.unit = "ratio"
