"""Replica 0's side of a `ProcessReplicas` call: check and shard the batch, send the shards, keep the replicas'
variables equal to replica 0's, run its own shard, merge the outputs, and turn a replica's death into
`ReplicaFailure` (see `harness.execution.strategies.processes` for the whole picture)."""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import wait as wait_ready
from typing import Any, Callable

import numpy as np
import optree

from harness.execution.inputs import arg_converter
from harness.execution.strategies.process_comm import (ReplicaFailure, make_group, recv_arrays, send_arrays,
                                                       synced_variables)
from harness.execution.strategies.replicas import batch_axis, shard_sizes


def _identity(x: Any) -> Any:
    return x


class _Changes:
    """Which synced variables replica 0 changed since `mark`: on PyTorch by the tensors' version counters (an
    in-place write moves them; nothing is copied), on TF by comparing them in TF with a copy `mark` takes
    there (`_tf_snapshot`)."""

    def __init__(self, backend: Any, variables: list[Any]) -> None:
        self.variables = variables
        self.torch = backend.name == "torch"
        self.seen: list[int] | None = None  # None: nothing broadcast yet (the first call sends everything)
        self._differ, self._copy = (None, None) if self.torch or not variables else _tf_snapshot(variables)

    def changed(self) -> list[int]:
        if self.seen is None:
            return list(range(len(self.variables)))
        if self.torch:
            return [i for i, (v, seen) in enumerate(zip(self.variables, self.seen)) if v._version != seen]
        return [int(i) for i in np.flatnonzero(self._differ().numpy())] if self.variables else []

    def mark(self) -> None:
        if self.torch:
            self.seen = [v._version for v in self.variables]
        else:
            self.seen = []
            if self.variables:
                self._copy()


def _tf_snapshot(variables: list[Any]) -> tuple[Callable, Callable]:
    """``(differ, copy)``: TF functions over a copy of ``variables`` kept beside them: ``differ()`` says per
    variable whether it differs from the copy (exactly, element by element), ``copy()`` renews the copy."""
    import tensorflow as tf

    snaps = []
    for v in variables:
        with tf.device(v.device):
            snaps.append(tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False))

    @tf.function(autograph=False)
    def differ() -> Any:
        return tf.stack([tf.reduce_any(tf.not_equal(v, s)) for v, s in zip(variables, snaps)])

    @tf.function(autograph=False)
    def copy() -> None:
        for v, s in zip(variables, snaps):
            s.assign(v)

    return differ, copy


class ReplicatedCall:
    """The replicated calls of one executor (one per `ProcessReplicas`, made at its first `wrap_call`)."""

    def __init__(self, strategy: Any, executor: Any) -> None:
        self.strategy, self.executor = strategy, executor
        self.ready = False
        self.lock = threading.Lock()
        self.names: list[str] = []
        self.variables: list[Any] = []
        self.changes: _Changes | None = None

    def call_for(self, method: str, call: Callable) -> Callable:
        """``method``'s replicated call around the executor's own ``call`` (which replica 0 runs on its shard)."""
        api = self.executor.apis[method]
        where = f"{type(self.executor.root).__name__} {self.executor.root.global_scope!r}"
        names = list(api.arg_spaces)
        spaces = list(api.arg_spaces.values())
        checks = [arg_converter(where, method, a, s, _identity, self.executor.validate)
                  for a, s in api.arg_spaces.items()]
        axes = [{p: batch_axis(leaf) for p, leaf in s.leaves()} for s in spaces]
        out_axes = [batch_axis(s) for s in optree.tree_leaves(api.output_space)] if api.output_space is not None else []

        def replicated(*args: Any, **kwargs: Any) -> Any:
            if kwargs or len(args) != len(names):
                bound = {**dict(zip(names, args)), **kwargs}
                if len(args) > len(names) or sorted(bound) != sorted(names):
                    return call(*args, **kwargs)  # the executor's own error naming the inputs (nothing runs)
                args = tuple(bound[a] for a in names)
            flat = [s.flatten_value(check(a)) for s, check, a in zip(spaces, checks, args)]
            return self.run(method, call, flat, axes, out_axes)

        replicated.__name__ = method
        return replicated

    # ---- one call -------------------------------------------------------------------------------------------
    def run(self, method: str, call: Callable, flat: list[dict[str, Any]], axes: list[dict[str, Any]],
            out_axes: list[Any]) -> Any:
        n = self.strategy.replicas
        total = next((np.shape(v)[axes[i][p]] for i, leaves in enumerate(flat) for p, v in leaves.items()
                      if axes[i][p] is not None), None)
        if total is None:
            raise ValueError(f"ProcessReplicas: {method} has no batched input to split across {n} replicas")
        if total < n:
            raise ValueError(f"ProcessReplicas: {method}: a batch of {total} rows cannot be split across {n} "
                             f"replicas (each needs at least one row)")
        if self.strategy.closed:
            raise RuntimeError(f"ProcessReplicas: {method!r} needs the replica processes, which executor.close() "
                               f"ended; build a new executor to update again")
        with self.lock:  # one replicated call at a time: the replicas serve the calls in the order they come
            return self._run_locked(method, call, flat, axes, out_axes, total, n)

    def _run_locked(self, method: str, call: Callable, flat: list[dict[str, Any]], axes: list[dict[str, Any]],
                    out_axes: list[Any], total: int, n: int) -> Any:
        flat = [{p: np.asarray(v) for p, v in leaves.items()} for leaves in flat]
        sizes = shard_sizes(total, n)
        starts = np.cumsum([0] + sizes)
        mean = self.strategy.reduction == "mean"
        weights = [s / total for s in sizes] if mean else [1.0] * n
        norm_scale = 1.0 if mean else 1.0 / n

        def shard(r: int) -> list[dict[str, Any]]:
            """Replica ``r``'s rows of every batched leaf: views of the batch (a slice along the batch axis)."""
            rows = slice(starts[r], starts[r + 1])
            return [{p: v if axes[i][p] is None else v[(slice(None),) * axes[i][p] + (rows,)]
                     for p, v in leaves.items()} for i, leaves in enumerate(flat)]

        stage, applied = "start", False
        try:
            self._ensure_ready(method)
            self._check_alive(method)
            changed = self.changes.changed()
            stage = "send"
            for r in range(1, n):
                parts = shard(r)
                leaves = [[i, p] for i, part in enumerate(parts) for p in part]
                send_arrays(self.strategy.conns[r - 1],
                            {"op": "call", "method": method, "changed": changed, "scale": weights[r],
                             "norm_scale": norm_scale, "leaves": leaves},
                            [v for part in parts for v in part.values()])
            stage = "sync"
            comm, backend = self.strategy.comm, self.executor.backend
            if changed:
                comm.broadcast([backend.variable_value(self.variables[i]) for i in changed])
            stage = "step"
            own = [part[""] if list(part) == [""] else space.unflatten(part)
                   for part, space in zip(shard(0), self._arg_spaces(method))]
            comm.scale, comm.norm_scale, comm.active = weights[0], norm_scale, True
            try:
                outs = [call(*own)]
            finally:
                comm.active = False
            applied, stage = True, "outputs"
            for r in range(1, n):
                header, arrays = recv_arrays(self.strategy.conns[r - 1])
                if header["op"] == "error":
                    raise ReplicaFailure(self._failure(r, method, applied, header["text"]))
                outs.append(arrays)
        except ReplicaFailure:
            self.strategy.shutdown(grace_s=0.5, failed=True)  # a replica is gone: the step cannot finish
            raise
        except Exception as exc:
            dead = self._dead()
            detail = f"{type(exc).__name__}: {exc} (replica 0, while {stage})"
            message = self._failure(dead, method, applied, self._reported(dead) or detail)
            self.strategy.shutdown(grace_s=0.5, failed=True)  # the replicas can no longer be in step
            if message is None:
                state = "had applied" if applied else "had not applied"
                message = (f"ProcessReplicas: replica 0 failed during {method!r} ({detail}); it {state} the step to "
                           f"its variables; the replicas were ended, as they can no longer be in step")
            raise ReplicaFailure(message) from exc
        self.changes.mark()
        return self._merge(outs, weights, out_axes)

    def _arg_spaces(self, method: str) -> list[Any]:
        return list(self.executor.apis[method].arg_spaces.values())

    @staticmethod
    def _merge(outs: list[Any], weights: list[float], out_axes: list[Any]) -> Any:
        """Replica 0's output with each leaf replaced by the merge over replicas: scalars (and other leaves
        without batch rank) as the ``weights``-weighted sum, batched leaves concatenated along their batch axis."""
        leaves, treedef = optree.tree_flatten(outs[0], none_is_leaf=False)
        if not leaves:
            return outs[0]
        merged = []
        for j, own in enumerate(leaves):
            parts = [np.asarray(own)] + [o[j] for o in outs[1:]]
            ax = out_axes[j] if j < len(out_axes) else None
            if ax is None:
                value = sum(np.float64(w) * p.astype(np.float64) for w, p in zip(weights, parts))
                merged.append(np.asarray(value, dtype=parts[0].dtype))
            else:
                merged.append(np.concatenate(parts, axis=ax))
        return optree.tree_unflatten(treedef, merged)

    def replica_weights(self, index: int) -> dict[str, np.ndarray]:
        """Replica ``index``'s (>= 1) synced variables by scope path, as it holds them now."""
        self._ensure_ready("weights")
        conn = self.strategy.conns[index - 1]
        send_arrays(conn, {"op": "weights"}, [])
        header, arrays = recv_arrays(conn)
        if header["op"] != "weights":
            raise ReplicaFailure(self._failure(index, "weights", False, header.get("text")))
        return dict(zip(self.names, arrays))

    # ---- readiness and failure ------------------------------------------------------------------------------
    def _ensure_ready(self, method: str) -> None:
        """At the first call: joins the group (the replicas join it as they start) and waits for every replica's
        ready message, checking its variables match replica 0's."""
        if self.ready:
            return
        st = self.strategy
        names, variables = synced_variables(self.executor)
        index = {k: i for i, k in enumerate(names)}
        deadline = time.monotonic() + st.timeout_s
        pending = {r: st.conns[r - 1] for r in range(1, st.replicas)}
        wanted: list[str] | None = None
        while pending:
            self._check_alive(method)
            if time.monotonic() > deadline:
                raise ReplicaFailure(f"ProcessReplicas: replica(s) {sorted(pending)} did not report ready within "
                                     f"{st.timeout_s:g} s")
            for conn in wait_ready(list(pending.values()), timeout=0.5):
                r = next(k for k, c in pending.items() if c is conn)
                header, _ = recv_arrays(conn)
                if header["op"] == "error":
                    raise ReplicaFailure(self._failure(r, method, False, header["text"]))
                theirs = [k for k, _ in header["variables"]]
                unknown = [k for k in theirs if k not in index]
                if unknown:
                    raise ReplicaFailure(f"ProcessReplicas: replica {r} built variables replica 0 does not have: "
                                         f"{unknown[:5]}")
                if wanted is not None and theirs != wanted:
                    raise ReplicaFailure(f"ProcessReplicas: replica {r} built other variables than replica 1")
                wanted = theirs
                del pending[r]
        st.comm.group = make_group(st.backend, st.store, 0, st.replicas, st.timeout_s)  # the replicas join it now
        self.names = list(wanted or [])
        self.variables = [variables[index[k]] for k in self.names]
        self.changes = _Changes(self.executor.backend, self.variables)
        self.ready = True

    def _check_alive(self, method: str) -> None:
        r = self._dead(wait_s=0.0)
        if r is not None:
            raise ReplicaFailure(self._failure(r, method, False, None))

    def _dead(self, wait_s: float = 5.0) -> int | None:
        """The first replica that has ended, waiting up to ``wait_s`` for one to show it; None if all run."""
        deadline = time.monotonic() + wait_s
        while True:
            for r, p in enumerate(self.strategy.procs, start=1):
                if not p.is_alive():
                    return r
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def _reported(self, r: int | None) -> str | None:
        """The error replica ``r`` reported before it ended (its traceback), if it did."""
        if r is None:
            return None
        conn = self.strategy.conns[r - 1]
        try:
            while conn.poll(0):
                header, _ = recv_arrays(conn)
                if header["op"] == "error":
                    return header["text"]
        except (EOFError, OSError, ValueError):
            pass
        return None

    def _failure(self, r: int | None, method: str, applied: bool, detail: str | None) -> str | None:
        """The `ReplicaFailure` message for replica ``r`` (None when ``r`` is None: no replica is to blame)."""
        if r is None:
            return None
        st = self.strategy
        p = st.procs[r - 1]
        p.join(timeout=1.0)
        status = st.exit_status(r) or "still running"
        state = ("replica 0 had applied this step to its variables" if applied
                 else "replica 0's variables are unchanged by this step")
        text = (f"ProcessReplicas: replica {r} of {st.replicas} (pid {p.pid}, {status}) failed during "
                f"{method!r}; {state}; the other replicas were ended")
        return text + (f"\n{detail}" if detail else "")
