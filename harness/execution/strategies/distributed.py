"""`DistributedReplicas`: synchronous replicas across processes with ``torch.distributed`` (gloo or NCCL).

Each process builds the same graph (the same seed gives the same initial weights) and learns on its own
shard of the global batch. The root's update methods are expanded as by `SyncReplicas` with one local
replica; its optimizer's ``sync_step`` all-reduces the row-weighted gradients (``sum_p n_p g_p /
sum_p n_p`` for batch-mean losses, ``sum_p g_p`` for batch sums) and applies the same step in every
process, so the weights stay identical everywhere. The outputs of an update are the process's own
(its shard's loss and per-row values).

`launch` starts the processes on this machine, runs a function in each with the process group initialized
(a file store, gloo on 127.0.0.1: nothing listens on another interface), and tears everything down, within a
time limit.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as _queue
import shutil
import tempfile
import time
import traceback
from typing import Any, Callable, Sequence

from harness.execution.strategies.process_comm import loopback_gloo_group
from harness.execution.strategies.replicas import SyncReplicas, TowerStepMixin
from harness.graph import api, graph_fn
from harness.spaces import FloatBox


def _distributed_optimizer_class(base: type, reduction: str) -> type:
    """``base`` with ``sync_step(weights)`` that all-reduces the process's gradients before one step."""

    class DistributedOptimizer(TowerStepMixin, base):  # type: ignore[misc, valid-type]
        @api(must_be_complete=False)
        def sync_step(self, weights: Any) -> Any:
            """All-reduces this process's gradients with the others' and applies them; returns their norm."""
            return self._graph_fn_sync_step(weights)

        @graph_fn(output_spaces=lambda self, weights: FloatBox(()))
        def _graph_fn_sync_step(self, F: Any, weights: Any) -> Any:
            import torch.distributed as dist

            rows = weights[0]
            grads = list(self.gradient_towers[0].slots["grad"])
            if reduction == "mean":
                total = rows.detach().clone()
                dist.all_reduce(total)
                grads = [g * rows for g in grads]
            grads = [g.detach().clone() for g in grads]
            for g in grads:
                dist.all_reduce(g)
            if reduction == "mean":
                grads = [g / total for g in grads]
            return self._clip_and_apply(F, grads)

    DistributedOptimizer.__name__ = DistributedOptimizer.__qualname__ = base.__name__
    DistributedOptimizer.__module__ = base.__module__
    return DistributedOptimizer


class DistributedReplicas(SyncReplicas):
    """One replica per process, gradients all-reduced with ``torch.distributed`` (PyTorch backend only).

    The process group must be initialized before the executor runs an update (`launch` does it); the
    graph's ops must be PyTorch's (the all-reduce is ``torch.distributed``'s).

    Args:
        device: this process's device (``"cpu"``, ``"cuda:0"``, ...).
        methods: the root API methods to replicate.
        optimizer: the attribute of the root that holds its optimizer.
        reduction: ``"mean"`` (batch-mean loss: row-weighted average) or ``"sum"``.
    """

    name = "torch-distributed"

    def __init__(self, device: str, methods: Sequence[str], optimizer: str = "optimizer",
                 reduction: str = "mean") -> None:
        super().__init__([device], methods, optimizer, reduction)

    def _sync_class(self, base: type) -> type:
        return _distributed_optimizer_class(base, self.reduction)

    def _shard_weights(self) -> str:
        return "rows"


#: The gloo backend `launch` registers: gloo with its one device on 127.0.0.1 (torch's own "gloo" binds the
#: address this machine's hostname resolves to, or the interface GLOO_SOCKET_IFNAME names).
LOOPBACK_GLOO = "gloo_loopback"


def _loopback_gloo(store: Any, rank: int, size: int, timeout: Any) -> Any:
    """A gloo process group whose only device is bound to 127.0.0.1 (the creator `LOOPBACK_GLOO` names)."""
    return loopback_gloo_group(store, rank, size, timeout)


def _init_process_group(backend: str, store_file: str, rank: int, world: int) -> None:
    """``init_process_group`` over a file store (no rendezvous listener), gloo's connections on 127.0.0.1."""
    import torch.distributed as dist

    if backend == "gloo":
        if LOOPBACK_GLOO not in dist.Backend.backend_list:
            dist.Backend.register_backend(LOOPBACK_GLOO, _loopback_gloo, devices=["cpu"])
        backend = LOOPBACK_GLOO
    dist.init_process_group(backend, init_method=f"file://{store_file}", rank=rank, world_size=world)


def _worker(rank: int, world: int, store_file: str, backend: str, fn: Callable, args: tuple, out: Any) -> None:
    import torch.distributed as dist

    try:
        _init_process_group(backend, store_file, rank, world)
        try:
            out.put((rank, "ok", fn(rank, world, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException:  # reported to the parent, which raises
        out.put((rank, "error", traceback.format_exc()))


def launch(fn: Callable, world: int, args: tuple = (), backend: str = "gloo", timeout: float = 120.0) -> list[Any]:
    """Runs ``fn(rank, world, *args)`` in ``world`` fresh processes with a process group; their results by rank.

    ``fn`` must be importable by module path (processes are spawned). Every process is ended before this
    returns or raises, also on a timeout. The processes meet through a file store in a private temporary
    folder (no rendezvous server listens anywhere), and gloo's own connections use one device bound to
    127.0.0.1 (`LOOPBACK_GLOO`), so nothing of the group listens on another interface.

    Raises:
        ValueError: for ``world < 1``.
        RuntimeError: naming the rank and its traceback when a process fails, or the ranks that had not
            answered within ``timeout`` seconds.
    """
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"launch: world must be a positive int; got {world!r}")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    folder = tempfile.mkdtemp(prefix="spacegraph-launch-")  # mode 0700: only this user reaches the store
    store_file = os.path.join(folder, "store")
    procs = [ctx.Process(target=_worker, args=(r, world, store_file, backend, fn, args, out), daemon=True)
             for r in range(world)]
    results: dict[int, Any] = {}
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"launch: ranks {sorted(set(range(world)) - set(results))} of {world} did not "
                                   f"finish within {timeout:g} s ({backend}, store {store_file})")
            try:
                rank, status, value = out.get(timeout=min(left, 1.0))
            except _queue.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in results]
                if dead:
                    raise RuntimeError(f"launch: rank(s) {dead} died (exit codes "
                                       f"{[procs[r].exitcode for r in dead]}) without a result") from None
                continue
            if status == "error":
                raise RuntimeError(f"launch: rank {rank} of {world} failed:\n{value}")
            results[rank] = value
        return [results[r] for r in range(world)]
    finally:
        for p in procs:
            p.join(timeout=5)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        out.close()
        shutil.rmtree(folder, ignore_errors=True)
