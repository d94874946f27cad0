"""What the replica processes of `ProcessReplicas` exchange, and how: the gradient all-reduce, the weight
broadcast and the wire format of batches and outputs.

- **Gradients** (`ReplicaComm.gradients`, called by the optimizer's step in every replica): on PyTorch,
  tensor hooks on the variables collect each gradient as the backward pass (``torch.autograd.grad``) produces
  it; a bucket of gradients (about ``bucket_bytes``, in reverse variable order, the order backward produces
  them) is scaled by the replica's row weight and handed to an asynchronous ``all_reduce`` as soon as it is
  complete, in bucket order on every replica, and all buckets are waited for before the step. On TensorFlow
  the gradients are concatenated into one flat buffer per call and all-reduced through ``tf.numpy_function``
  over the same ``torch.distributed`` group (no overlap with the backward pass there).
- **Weights** (`ReplicaComm.broadcast`): variables replica 0 changed since the last replicated step are
  broadcast from it, one flat buffer per dtype.
- **Batches and outputs** go over each replica's pipe as a JSON header and the arrays' raw bytes (nothing
  that arrives is unpickled): `send_arrays` / `recv_arrays`.
- **What replica 0 and the replicas share**: `ReplicaFailure`, `install_allreduce` (the optimizer step that
  all-reduces; its returned gradient norm is scaled so that merging the replicas' outputs gives the whole
  batch's norm), `synced_variables`.

The process group is torch's gloo bound to 127.0.0.1 (or NCCL for CUDA tensors), made over a file store in a
private folder, as `harness.execution.strategies.distributed.launch` makes its own; it is a group object of its
own, not torch's default group, so several executors with replicas can live in one process.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Sequence

import numpy as np

from harness.execution.strategies.replicas import HOST_COMPONENTS
from harness.graph import graph_fn

#: Gradients per bucket of the PyTorch all-reduce, in bytes (PyTorch DDP's default is 25 MiB; smaller buckets
#: start the all-reduce earlier in the backward pass).
BUCKET_BYTES = 1 << 20


def make_group(backend: str, store_file: str, rank: int, world: int, timeout_s: float) -> Any:
    """A torch.distributed process group of ``world`` ranks meeting at ``store_file`` (gloo: on 127.0.0.1)."""
    import torch.distributed as dist

    store = dist.FileStore(store_file, world)
    timeout = timedelta(seconds=timeout_s)
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, world, options)
    return loopback_gloo_group(store, rank, world, timeout)


def loopback_gloo_group(store: Any, rank: int, size: int, timeout: timedelta) -> Any:
    """A gloo process group over ``store`` whose only device is bound to 127.0.0.1 (torch's own "gloo" binds
    the address the machine's hostname resolves to, or the interface ``GLOO_SOCKET_IFNAME`` names)."""
    import torch.distributed as dist

    from harness.execution.loopback import LOOPBACK

    options = dist.ProcessGroupGloo._Options()
    options._timeout = timeout
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=LOOPBACK)]
    return dist.ProcessGroupGloo(store, rank, size, options)


def _allreduce(group: Any, tensor: Any) -> Any:
    """Starts a sum all-reduce of ``tensor`` in place; returns its work handle."""
    import torch.distributed as dist

    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    return group.allreduce([tensor], opts)


class ReplicaComm:
    """One replica's side of the all-reduce and the weight broadcast (see the module docstring).

    ``scale`` (this replica's row weight), ``active`` (inside a replicated call) and ``norm_scale`` are set
    per call by the strategy; they are read when the graph runs (a Python hook on PyTorch, inside the
    ``tf.numpy_function`` on TF), so a traced TF step sees them too.

    Args:
        rank: this replica's index (0: the process that built the executor).
        world: the number of replicas.
        device: where the all-reduced buffers live (``"cpu"`` for gloo, ``"cuda:k"`` for NCCL).
        bucket_bytes: the size of a gradient bucket on PyTorch.
    """

    def __init__(self, rank: int, world: int, device: str = "cpu", bucket_bytes: int = BUCKET_BYTES) -> None:
        self.rank, self.world, self.device, self.bucket_bytes = rank, world, device, int(bucket_bytes)
        self.group: Any = None
        self.active = False
        self.scale = 1.0
        self.norm_scale = 1.0
        self.events: list[tuple[str, int]] | None = None  # set to [] to record hook and launch events (tests)
        self._buckets: list[list[int]] | None = None

    # ---- gradients -------------------------------------------------------------------------------------------
    def gradients(self, F: Any, backend: str, loss: Any, variables: Sequence[Any]) -> tuple[list[Any], Any]:
        """The gradients of ``loss`` summed over replicas (each replica's scaled by its ``scale``) and the factor
        the optimizer's returned norm takes; outside a replicated call the local gradients and 1."""
        if backend == "torch":
            if not self.active:
                return F.gradients(loss, variables), 1.0
            return self._torch_gradients(F, loss, list(variables)), self.norm_scale
        return self._tf_gradients(F.gradients(loss, variables))

    def _bucket_plan(self, variables: list[Any]) -> list[list[int]]:
        """Variable indices per bucket: reverse variable order, at most ``bucket_bytes`` (one dtype) each."""
        if self._buckets is None:
            buckets: list[list[int]] = [[]]
            size, dtype = 0, None
            for i in reversed(range(len(variables))):
                v = variables[i]
                nbytes = v.numel() * v.element_size()
                if buckets[-1] and (size + nbytes > self.bucket_bytes or v.dtype != dtype):
                    buckets.append([])
                    size = 0
                buckets[-1].append(i)
                size, dtype = size + nbytes, v.dtype
            self._buckets = buckets
        return self._buckets

    def _torch_gradients(self, F: Any, loss: Any, variables: list[Any]) -> list[Any]:
        import torch

        buckets = self._bucket_plan(variables)
        bucket_of = {i: b for b, idx in enumerate(buckets) for i in idx}
        grads: list[Any] = [None] * len(variables)
        missing = [len(idx) for idx in buckets]
        works: list[tuple[Any, Any]] = []
        events = self.events

        def launch_ready() -> None:
            while len(works) < len(buckets) and missing[len(works)] == 0:
                b = len(works)
                flat = torch.cat([grads[i].reshape(-1) for i in buckets[b]])
                if self.scale != 1.0:
                    flat.mul_(self.scale)
                works.append((_allreduce(self.group, flat), flat))
                if events is not None:
                    events.append(("launch", b))

        def hook_for(i: int) -> Any:
            def hook(grad: Any) -> None:
                grads[i] = grad.detach()
                missing[bucket_of[i]] -= 1
                if events is not None:
                    events.append(("grad", i))
                launch_ready()
            return hook

        handles = [v.register_hook(hook_for(i)) for i, v in enumerate(variables)]
        try:
            local = F.gradients(loss, variables)
        finally:
            for h in handles:
                h.remove()
        if events is not None:
            events.append(("backward_end", -1))
        for i, g in enumerate(local):  # a variable the loss does not use: its zeros (the same on every replica)
            if grads[i] is None:
                grads[i] = g
                missing[bucket_of[i]] -= 1
        launch_ready()
        out: list[Any] = [None] * len(variables)
        for (work, flat), idx in zip(works, buckets):
            work.wait()
            offset = 0
            for i in idx:
                n = variables[i].numel()
                out[i] = flat[offset:offset + n].view_as(variables[i])
                offset += n
        return out

    def _tf_gradients(self, grads: list[Any]) -> tuple[list[Any], Any]:
        import tensorflow as tf

        dtype = grads[0].dtype
        flat = tf.concat([tf.reshape(tf.cast(g, dtype), [-1]) for g in grads], axis=0)
        reduced, factor = tf.numpy_function(self._numpy_allreduce, [flat], [dtype, tf.float32], stateful=True)
        reduced.set_shape(flat.shape)
        factor.set_shape(())
        out, offset = [], 0
        for g in grads:
            n = int(np.prod(g.shape.as_list()))
            out.append(tf.cast(tf.reshape(reduced[offset:offset + n], tf.shape(g)), g.dtype))
            offset += n
        return out, factor

    def _numpy_allreduce(self, flat: np.ndarray) -> tuple[np.ndarray, np.float32]:
        """Inside TF's step: the flat gradients scaled and all-reduced (unchanged outside a replicated call)."""
        import torch

        if not self.active:
            return flat, np.float32(1.0)
        buf = np.array(flat, copy=True)  # TF's input buffer is not ours to write
        if self.scale != 1.0:
            buf *= buf.dtype.type(self.scale)
        tensor = torch.from_numpy(buf)
        if self.device != "cpu":
            reduced = tensor.to(self.device)
            _allreduce(self.group, reduced).wait()
            buf = reduced.cpu().numpy()
        else:
            _allreduce(self.group, tensor).wait()
        return buf, np.float32(self.norm_scale)

    # ---- weights ---------------------------------------------------------------------------------------------
    def broadcast(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Broadcasts ``arrays`` from rank 0 (other ranks pass arrays of the right shapes and dtypes to fill);
        one flat buffer per dtype. Returns the arrays as rank 0 holds them."""
        import torch
        import torch.distributed as dist

        by_dtype: dict[str, list[int]] = {}
        for i, a in enumerate(arrays):
            by_dtype.setdefault(a.dtype.str, []).append(i)
        out = list(arrays)
        for _, idx in sorted(by_dtype.items()):
            flat = np.concatenate([np.ascontiguousarray(arrays[i]).reshape(-1) for i in idx])
            tensor = torch.from_numpy(flat).to(self.device)
            opts = dist.BroadcastOptions()
            opts.rootRank = 0
            self.group.broadcast([tensor], opts).wait()
            flat = tensor.cpu().numpy()
            offset = 0
            for i in idx:
                n = arrays[i].size
                out[i] = flat[offset:offset + n].reshape(arrays[i].shape)
                offset += n
        return out


# ---- the wire: a JSON header, then raw array bytes -----------------------------------------------------------
def send_arrays(conn: Any, header: dict[str, Any], arrays: Sequence[np.ndarray]) -> None:
    """Sends ``header`` (JSON) with the dtypes and shapes of ``arrays``, then each array's raw bytes."""
    arrays = [np.asarray(a) for a in arrays]
    arrays = [a if a.flags.c_contiguous else a.copy(order="C") for a in arrays]  # (0-d arrays stay 0-d)
    header = {**header, "arrays": [[a.dtype.str, list(a.shape)] for a in arrays]}
    conn.send_bytes(json.dumps(header).encode())
    for a in arrays:
        if a.nbytes:
            conn.send_bytes(memoryview(a.reshape(-1)).cast("B"))


def recv_arrays(conn: Any) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receives what `send_arrays` sent: the header and the arrays (fresh, writable)."""
    header = json.loads(conn.recv_bytes().decode())
    arrays = []
    for dtype, shape in header.pop("arrays", []):
        kind = np.dtype(dtype)
        if kind.hasobject:
            raise ValueError(f"recv_arrays: refused an array of dtype {dtype!r} (only plain numeric arrays travel)")
        a = np.empty(shape, kind)
        if a.nbytes:
            conn.recv_bytes_into(memoryview(a.reshape(-1)).cast("B"))
        arrays.append(a)
    return header, arrays


# ---- what replica 0 and the replica processes share ------------------------------------------------------------
class ReplicaFailure(RuntimeError):
    """A replica process died or failed during a replicated call (the message names it)."""


def _allreduce_optimizer_class(base: type) -> type:
    """``base`` (an optimizer class) whose step all-reduces its gradients over the replicas first."""

    class AllReduceOptimizer(base):  # type: ignore[misc, valid-type]
        @graph_fn(returns=2, gradients=True)
        def _graph_fn_step(self, F: Any, loss: Any) -> tuple[Any, Any]:
            grads, norm_scale = self.replica_comm.gradients(F, self.backend.name, loss, self._vars)
            norm = self._clip_and_apply(F, grads)
            if self.backend.name == "tf":  # a tensor the all-reduce returned
                norm_scale = F.cast(norm_scale, norm.dtype)
            return F.stop_gradient(loss), norm * norm_scale

    AllReduceOptimizer.__name__ = AllReduceOptimizer.__qualname__ = base.__name__
    AllReduceOptimizer.__module__ = base.__module__
    return AllReduceOptimizer


def install_allreduce(root: Any, attr: str, comm: ReplicaComm, where: str) -> None:
    """Gives ``root``'s optimizer (attribute ``attr``) the all-reducing step over ``comm``.

    Raises:
        ValueError: naming ``where`` and the root when ``attr`` holds no optimizer.
    """
    optimizer = getattr(root, attr, None)
    if optimizer is None or not hasattr(optimizer, "_clip_and_apply"):
        raise ValueError(f"{where}: root {type(root).__name__} {root.global_scope!r} has no optimizer in attribute "
                         f"{attr!r} (processes mode all-reduces the gradients of its step); got {optimizer!r}")
    optimizer.__class__ = _allreduce_optimizer_class(type(optimizer))
    optimizer.replica_comm = comm


def synced_variables(executor: Any) -> tuple[list[str], list[Any]]:
    """The variables replicas keep equal to replica 0's: the root's, less its host components' (memories,
    queues), keyed and ordered by scope path."""
    root = executor.graph.root.global_scope
    host = tuple(f"{root}/{h}/" for h in HOST_COMPONENTS)
    items = [(k, v) for k, v in executor.variables().items() if not k.startswith(host)]
    return [k for k, _ in items], [v for _, v in items]
