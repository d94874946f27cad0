"""`ProcessReplicas`: synchronous data-parallel replicas of a root's update methods, one per process.

What runs where: the process that builds the `GraphExecutor` is replica 0 (the trainer's own process: it acts,
holds replay, and is left with its own threads and cores). At build, the strategy spawns replicas 1..N-1
(daemon processes; `harness.execution.strategies.process_worker`), each of which builds the replicated methods
of the same root (handed over pickled by the spawn, with the same seed) on its own device (with one thread,
pinned to core ``r % cores`` when the machine has at least N cores) and serves updates. The replicas and
replica 0 form a ``torch.distributed`` group (gloo bound to 127.0.0.1 over a file store in a private folder, or
NCCL for CUDA devices).

A replicated call on replica 0 (e.g. ``update_from_batch`` with the whole batch):

1. checks the inputs against their spaces (as the executor does) and splits every batched input into N
   contiguous shards (``n_i = B // N + (i < B % N)`` rows, as `BatchSharder` does);
2. sends shards 1..N-1 to the replicas over their pipes (a JSON header and raw array bytes, nothing pickled);
3. broadcasts the variables replica 0 changed since the last replicated step (on PyTorch, those whose
   tensor version moved; on TF, those whose values differ) so every replica holds replica 0's exact
   weights, target network and optimizer slots (also after ``set_weights``, a checkpoint load or a target
   sync); the first call broadcasts all of them;
4. every replica runs the method on its shard; its optimizer's step all-reduces the gradients weighted by
   ``n_i / B`` (batch-mean losses) or 1 (batch sums) (`harness.execution.strategies.process_comm`: on
   PyTorch bucketed and launched while the backward pass still runs; on TF one flat buffer through
   ``tf.numpy_function``) and applies the same step;
5. replica 0 merges the outputs into the unreplicated form: scalars as the shard-weighted sum (the whole
   batch's value), per-row outputs concatenated along their batch axis in row order.

Why torch.distributed for TensorFlow too: TF's own cross-process collectives (``MultiWorkerMirroredStrategy``)
need a TF gRPC server per process, which binds every interface and authenticates nothing (docs/security.md);
the loopback-only gloo group gives the same sum all-reduce for a flat buffer. PyTorch must be installed for
processes mode on either backend (a clear error otherwise).

A replica that dies (or fails) makes the call raise `ReplicaFailure` naming the replica, its pid, its exit
code or signal and the method; the other replicas are then ended. `shutdown` (the executor's ``close``) is
idempotent and runs at interpreter exit too.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import weakref
from typing import Any, Sequence

from harness.execution.strategies.base import DeviceStrategy
from harness.execution.strategies.process_calls import ReplicatedCall
from harness.execution.strategies.process_comm import BUCKET_BYTES, ReplicaComm, install_allreduce, send_arrays
from harness.execution.strategies.process_worker import replica_main
from harness.execution.strategies.replicas import REDUCTIONS

GROUP_BACKENDS = ("auto", "gloo", "nccl")


def _group_backend(backend: str, devices: Sequence[str]) -> str:
    if backend != "auto":
        return backend
    return "nccl" if devices and all(str(d).startswith("cuda") for d in devices) else "gloo"


class ProcessReplicas(DeviceStrategy):
    """Synchronous replicas of the update methods, one per process (see the module docstring).

    Args:
        replicas: the number of replicas N (>= 2), replica 0 included.
        methods: the root API methods to replicate (each ending in ``<optimizer>.step(loss)``, batched inputs).
        reduction: ``"mean"`` (batch-mean loss: row-weighted gradients) or ``"sum"`` (batch-sum loss).
        devices: one device per replica (``"cpu"``, ``"cuda:1"``, ``"/gpu:0"``, ...); default: the backend's
            default device everywhere (CPU here), each replica process one thread.
        backend: the all-reduce's group: ``"gloo"``, ``"nccl"`` or ``"auto"`` (NCCL when every device is CUDA).
        optimizer: the root's attribute that holds its optimizer.
        bucket_bytes: the PyTorch all-reduce's bucket size.
        timeout_s: how long a replica may take to start, and a collective to complete.
        pin: pin replica r >= 1 to core ``r % cores`` when the machine has at least N usable cores.

    Raises:
        ValueError: naming the argument and what came for a bad count, device list, backend or reduction;
            naming the missing package when PyTorch is not installed.
    """

    name = "sync-replicas"
    mode = "processes"

    def __init__(self, replicas: int, methods: Sequence[str], reduction: str = "mean",
                 devices: Sequence[str] | None = None, backend: str = "auto", optimizer: str = "optimizer",
                 bucket_bytes: int = BUCKET_BYTES, timeout_s: float = 300.0, pin: bool = True) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
            raise ValueError(f"ProcessReplicas: replicas must be an int >= 2; got {replicas!r}")
        if isinstance(methods, str) or not methods:
            raise ValueError(f"ProcessReplicas: methods must be a non-empty list of API method names; got {methods!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"ProcessReplicas: reduction must be one of {REDUCTIONS}; got {reduction!r}")
        if backend not in GROUP_BACKENDS:
            raise ValueError(f"ProcessReplicas: backend must be one of {GROUP_BACKENDS}; got {backend!r}")
        if devices is not None and (isinstance(devices, str) or len(devices) != replicas
                                    or not all(isinstance(d, str) and d for d in devices)):
            raise ValueError(f"ProcessReplicas: devices must list one device name per replica ({replicas}); "
                             f"got {devices!r}")
        if importlib.util.find_spec("torch") is None:
            raise ValueError("ProcessReplicas: processes mode all-reduces through torch.distributed on both "
                             "backends, and PyTorch is not installed (pip install 'spacegraph[torch]')")
        self.replicas, self.methods, self.reduction = replicas, list(methods), reduction
        self.devices = list(devices) if devices is not None else None
        self.backend = _group_backend(backend, self.devices or [])
        self.optimizer_attr, self.bucket_bytes, self.timeout_s, self.pin = optimizer, bucket_bytes, timeout_s, pin
        self.comm = ReplicaComm(0, replicas, self._comm_device(0), bucket_bytes)
        self._blueprint: dict[str, Any] | None = None
        self.procs: list[Any] = []  # replicas 1..N-1
        self.conns: list[Any] = []  # replica 0's end of each one's pipe
        self._folder: str | None = None
        self.store = ""
        self._finalizer: Any = None
        self._runner: Any = None
        self.closed = False  # ended by close(), not by a failure

    def _comm_device(self, rank: int) -> str:
        if self.backend != "nccl":
            return "cpu"
        device = (self.devices or ["cuda:0"] * self.replicas)[rank]
        return device if device.startswith("cuda") else "cuda:0"

    def describe(self) -> dict[str, Any]:
        """``{"type", "mode", "replicas", "backend", "devices"}`` for results and logs."""
        return {"type": self.name, "mode": self.mode, "replicas": self.replicas, "backend": self.backend,
                "devices": list(self.devices) if self.devices else ["cpu"] * self.replicas}

    # ---- executor hooks ------------------------------------------------------------------------------------
    def attach(self, executor: Any) -> None:
        """Records what the replicas need to build the same graph (the root before expansion, input spaces,
        backend, seed, device map).

        Raises:
            ValueError: for a TF graph with NCCL, or methods the executor does not build (a root that cannot
                be handed to a process, not picklable, is refused by `expand`).
        """
        if self._blueprint is not None:
            raise RuntimeError("ProcessReplicas: one strategy serves one executor; make a new one")
        if executor.backend_name == "tf" and self.backend == "nccl":
            raise ValueError("ProcessReplicas: backend 'nccl' all-reduces CUDA tensors of PyTorch graphs; a TF graph "
                             "uses 'gloo' (or 'auto')")
        missing = [m for m in self.methods if executor.api_methods is not None and m not in executor.api_methods]
        if missing:
            raise ValueError(f"ProcessReplicas: method(s) {missing} to replicate are not among the executor's "
                             f"api_methods {executor.api_methods}")
        self._blueprint = {"executor": type(executor), "root": executor.root, "input_spaces": executor.input_spaces,
                           "backend": executor.backend_name, "seed": executor.seed, "device_map": executor.device_map}

    def expand(self, root: Any) -> Any:
        """Starts the replica processes (which get the root as it is and join the group while this one builds),
        then gives the root's optimizer the all-reducing step and places it on replica 0's device."""
        if self._blueprint is not None and not self.procs:
            self._start()
        install_allreduce(root, self.optimizer_attr, self.comm, "ProcessReplicas")
        if self.devices:
            root.device = self.devices[0]
        return root

    def wrap_call(self, executor: Any, method: str, call: Any) -> Any:
        """The executor's call of ``method``: replicated for the strategy's methods, else ``call`` itself."""
        if method not in self.methods:
            return call
        if self._runner is None:
            self._runner = ReplicatedCall(self, executor)
        return self._runner.call_for(method, call)

    # ---- processes ------------------------------------------------------------------------------------------
    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self._folder = tempfile.mkdtemp(prefix="spacegraph-replicas-")  # mode 0700: only this user reaches it
        self.store = os.path.join(self._folder, "store")
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        for rank in range(1, self.replicas):
            mine, theirs = ctx.Pipe(duplex=True)
            spec = {"rank": rank, "world": self.replicas, "store": self.store,
                    "group_backend": self.backend, "comm_device": self._comm_device(rank),
                    "device": self.devices[rank] if self.devices else None,
                    "core": cores[rank % len(cores)] if self.pin and len(cores) >= self.replicas else None,
                    "parent_pid": os.getpid(), "timeout_s": self.timeout_s, "bucket_bytes": self.bucket_bytes,
                    "optimizer": self.optimizer_attr, "methods": self.methods}
            proc = ctx.Process(target=replica_main, args=(spec, self._blueprint, theirs), daemon=True,
                               name=f"spacegraph-replica-{rank}")
            try:
                proc.start()  # the spawn pickles the arguments here, the root before expansion among them
            except Exception as exc:
                mine.close()
                _stop(self.procs, self.conns, self._folder)
                root = self._blueprint["root"]
                raise ValueError(f"ProcessReplicas: the root {type(root).__name__} {root.global_scope!r} cannot be "
                                 f"handed to replica processes (pickling it failed: {type(exc).__name__}: "
                                 f"{exc})") from exc
            finally:
                theirs.close()
            self.procs.append(proc)
            self.conns.append(mine)
        self._finalizer = weakref.finalize(self, _stop, list(self.procs), list(self.conns), self._folder)

    def replica_weights(self, index: int) -> dict[str, Any]:
        """Replica ``index``'s (>= 1) copy of the variables it keeps equal to replica 0's, keyed by scope path
        (NumPy; for checks: it asks the replica process)."""
        if self._runner is None:
            raise RuntimeError("ProcessReplicas: the executor is not built yet")
        return self._runner.replica_weights(index)

    @property
    def pids(self) -> list[int]:
        """The replica processes' pids (replicas 1..N-1; empty before the build)."""
        return [p.pid for p in self.procs]

    def exit_status(self, index: int) -> str | None:
        """How replica ``index`` (>= 1) ended (``"exit code 1"``, ``"signal SIGKILL"``), None while it runs."""
        code = self.procs[index - 1].exitcode
        if code is None:
            return None
        return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"

    def shutdown(self, grace_s: float = 5.0, failed: bool = False) -> None:
        """Ends the replica processes: asks them to stop, kills those still running after ``grace_s`` seconds
        (idempotent; also runs at interpreter exit). Later replicated calls raise: `ReplicaFailure` after a
        failure (``failed``), else a RuntimeError saying the executor was closed."""
        if not failed and self._finalizer is not None and self._finalizer.alive:
            self.closed = True
        if self._finalizer is not None and self._finalizer.alive:
            self._finalizer.detach()
            _stop(self.procs, self.conns, self._folder, grace_s)
        self.comm.group = None


def _stop(procs: list[Any], conns: list[Any], folder: str | None, grace_s: float = 5.0) -> None:
    """Asks every replica to stop, then ends those still running (SIGKILL after ``grace_s``), and removes the
    store."""
    for conn in conns:
        try:
            send_arrays(conn, {"op": "stop"}, [])
        except (OSError, ValueError):
            pass
    for p in procs:
        p.join(timeout=grace_s)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    for conn in conns:
        conn.close()
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
