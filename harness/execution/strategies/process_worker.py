"""The body of a replica process of `ProcessReplicas` (replicas 1..N-1): build the graph, then serve updates.

A replica runs one thread (torch and TensorFlow intra/inter-op threads 1), pinned to its own core when the
strategy gives it one, and exits when replica 0 (its parent) is gone: a watch thread checks the parent's pid
twice a second, and the pipe from the parent reads end-of-file when the parent's end closes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from typing import Any

import numpy as np
import optree

from harness.execution.strategies.base import DeviceStrategy
from harness.execution.strategies.process_comm import (ReplicaComm, install_allreduce, make_group, recv_arrays,
                                                       send_arrays, synced_variables)

#: Environment a replica process sets before it imports a framework: one thread each.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
              "TF_NUM_INTEROP_THREADS": "1"}


def watch_parent(parent_pid: int, every_s: float = 0.5) -> threading.Thread:
    """A daemon thread that ends this process (exit code 3) once ``parent_pid`` is no longer its parent."""

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(3)
            time.sleep(every_s)

    thread = threading.Thread(target=watch, name="replica-parent-watch", daemon=True)
    thread.start()
    return thread


class ReplicaSide(DeviceStrategy):
    """The strategy inside a replica process: the root's optimizer takes the all-reducing step of
    `harness.execution.strategies.processes` and the root goes on the replica's device."""

    name = "sync-replicas"

    def __init__(self, comm: ReplicaComm, optimizer: str, device: str | None) -> None:
        self.comm, self.optimizer_attr, self.device = comm, optimizer, device

    def expand(self, root: Any) -> Any:
        install_allreduce(root, self.optimizer_attr, self.comm, "replica process")
        if self.device is not None:
            root.device = self.device
        return root


def _threads(backend: str) -> None:
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (torch allows it once, before any inter-op work)
        pass
    if backend == "tf":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)


def replica_main(spec: dict[str, Any], bp: dict[str, Any], conn: Any) -> None:
    """Replica ``spec["rank"]``: joins the group, builds the graph from ``bp``, then serves calls.

    ``spec`` (from `ProcessReplicas`): rank, world, store, group_backend, comm_device, device, core,
    parent_pid, timeout_s, bucket_bytes, optimizer, methods. ``bp``: the executor's arguments (executor class,
    root before expansion, input spaces, backend, seed, device map), handed over by the spawn as its process
    arguments (from the parent that started this process, never from a socket).
    """
    os.environ.update(ONE_THREAD)
    # A terminal's Ctrl-C reaches the whole process group: the replica ignores it, so replica 0's trainer can
    # finish its step and checkpoint; the replica ends when replica 0 closes it or dies (`watch_parent`).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if spec["core"] is not None:
        os.sched_setaffinity(0, {spec["core"]})
    watch_parent(spec["parent_pid"])
    comm = ReplicaComm(spec["rank"], spec["world"], spec["comm_device"], spec["bucket_bytes"])
    try:
        _threads(bp["backend"])
        specs = bp["root"].api_specs()
        used = {a for m in spec["methods"] for a in specs[m].arg_names}
        spaces = {a: s for a, s in bp["input_spaces"].items() if a in used}  # only the replicated methods build
        executor = bp["executor"](bp["root"], spaces, backend=bp["backend"], seed=bp["seed"],
                                 device_map=bp["device_map"], api_methods=spec["methods"],
                                 strategy=ReplicaSide(comm, spec["optimizer"], spec["device"]),
                                 compile="first_call", validate=False, replay=False)
        names, variables = synced_variables(executor)
        backend = executor.backend
        shapes = [[n, list(np.shape(backend.variable_value(v)))] for n, v in zip(names, variables)]
        send_arrays(conn, {"op": "ready", "variables": shapes, "pid": os.getpid()}, [])
        comm.group = make_group(spec["group_backend"], spec["store"], spec["rank"], spec["world"], spec["timeout_s"])
    except BaseException:  # noqa: BLE001 - reported to replica 0, which raises ReplicaFailure
        _report(conn, traceback.format_exc())
        os._exit(1)
    _serve(conn, comm, executor, variables)


def _report(conn: Any, text: str) -> None:
    try:
        send_arrays(conn, {"op": "error", "text": text}, [])
    except OSError:
        pass


def _serve(conn: Any, comm: ReplicaComm, executor: Any, variables: list[Any]) -> None:
    backend = executor.backend
    while True:
        try:
            header, arrays = recv_arrays(conn)
        except (EOFError, OSError):
            os._exit(3)  # replica 0 is gone
        if header["op"] == "stop":
            conn.close()
            os._exit(0)
        if header["op"] == "weights":  # this replica's synced variables, for checks
            send_arrays(conn, {"op": "weights"}, [backend.variable_value(v) for v in variables])
            continue
        try:
            changed = header["changed"]
            if changed:
                fresh = comm.broadcast([backend.variable_value(variables[i]) for i in changed])
                for i, value in zip(changed, fresh):
                    backend.assign_variable(variables[i], value)
            comm.scale, comm.norm_scale = header["scale"], header["norm_scale"]
            args = _unflatten_args(executor, header, arrays)
            comm.active = True
            try:
                out = executor.execute(header["method"], *args)
            finally:
                comm.active = False
            send_arrays(conn, {"op": "out"}, [np.asarray(x) for x in optree.tree_leaves(out)])
        except BaseException:  # noqa: BLE001 - reported; the process then ends so the group fails everywhere
            _report(conn, traceback.format_exc())
            os._exit(1)


def _unflatten_args(executor: Any, header: dict[str, Any], arrays: list[np.ndarray]) -> list[Any]:
    """The method's arguments from the flat arrays: ``header["leaves"]`` gives each array's argument index and
    leaf path within it ("" for an argument that is one array)."""
    spaces = list(executor.apis[header["method"]].arg_spaces.values())
    parts: list[dict[str, np.ndarray]] = [{} for _ in spaces]
    for (arg, path), value in zip(header["leaves"], arrays):
        parts[arg][path] = value
    return [part[""] if list(part) == [""] else space.unflatten(part) for part, space in zip(parts, spaces)]
