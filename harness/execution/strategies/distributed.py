"""`DistributedReplicas`: synchronous replicas across processes with ``torch.distributed`` (gloo or NCCL).

Each process builds the same graph (the same seed gives the same initial weights) and learns on its own
shard of the global batch. The root's update methods are expanded as by `SyncReplicas` with one local
replica; its optimizer's ``sync_step`` all-reduces the row-weighted gradients (``sum_p n_p g_p /
sum_p n_p`` for batch-mean losses, ``sum_p g_p`` for batch sums) and applies the same step in every
process, so the weights stay identical everywhere. The outputs of an update are the process's own
(its shard's loss and per-row values).

`launch` starts the processes on this machine (``127.0.0.1``), runs a function in each with the
process group initialized, and tears everything down, within a time limit.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as _queue
import socket
import time
import traceback
from typing import Any, Callable, Sequence

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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: int, port: int, backend: str, fn: Callable, args: tuple, out: Any) -> None:
    import torch.distributed as dist

    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        try:
            out.put((rank, "ok", fn(rank, world, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException:  # reported to the parent, which raises
        out.put((rank, "error", traceback.format_exc()))


def launch(fn: Callable, world: int, args: tuple = (), backend: str = "gloo", timeout: float = 120.0) -> list[Any]:
    """Runs ``fn(rank, world, *args)`` in ``world`` fresh processes with a process group; their results by rank.

    ``fn`` must be importable by module path (processes are spawned). Every process is ended before this
    returns or raises, also on a timeout.

    Raises:
        ValueError: for ``world < 1``.
        RuntimeError: naming the rank and its traceback when a process fails, or the ranks that had not
            answered within ``timeout`` seconds.
    """
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"launch: world must be a positive int; got {world!r}")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, backend, fn, args, out), daemon=True)
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
                                   f"finish within {timeout:g} s ({backend} on 127.0.0.1:{port})")
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
