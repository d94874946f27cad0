"""`SyncReplicas`: synchronous data-parallel replicas of a root's update methods, built before assembly.

The strategy expands the root component in place (`SyncReplicas.expand`, called by the executor
before assembly):

- one tower per device, ``<root>/replica_<i>``, a `Component.copy` of the root (policy, loss and the
  rest; only what the update methods use gets variables), placed on that device;
- each tower's optimizer becomes a gradient tower: its ``step(loss)`` computes the tower's gradients
  and writes them into accumulator variables ``<path>/grad`` (no update);
- a `BatchSharder` on the host splits every input of an update method along its batch axis into one
  contiguous shard per device (sizes differ by at most one row when the batch does not divide);
- the root's optimizer gets ``sync_step(weights)``: the towers' gradients averaged with the shards'
  weights (``n_i / B`` for losses that are batch means, 1 for sums), the optimizer's own clipping and
  update rule applied once to the root's (host) variables, then every tower variable overwritten
  from its root counterpart; its gradient norm (before clipping) is the replicated method's gradient norm
  output (where the method returns its step's norm as it is);
- the replicated update method first copies the root's variables into the towers (so a target
  network synchronized, or weights loaded, in between reach them), then runs the towers on their
  shards, merges their outputs (`OutputMerger`) and takes the synchronous step.

Memories and everything else stay in the root, on the host (or where a device map puts them). The
replicated method keeps its name, arguments and output structure: agents call it as before.
"""

from __future__ import annotations

import copy as _copy
import inspect
from typing import Any, Sequence

import optree

from harness.execution.strategies import concurrent_towers
from harness.execution.strategies.base import DeviceStrategy
from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space

REDUCTIONS = ("mean", "sum")
#: Direct sub-components of the root that stay on the host (not on the first replica's device).
HOST_COMPONENTS = ("memory", "queue", "staging")


def _move(backend: Any, x: Any, like: Any) -> Any:
    """``x`` on the device of ``like`` (PyTorch needs this across devices; TensorFlow copies itself)."""
    if backend.name == "torch" and x.device != like.device:
        return x.to(like.device)
    return x


def batch_axis(space: Space) -> int | None:
    """The batch axis of a leaf space, None when it has no batch rank."""
    ranks = space.extra_ranks
    return ranks.index("B") if "B" in ranks else None


def _batch_axis(space: Space) -> int:
    axis = batch_axis(space)
    if axis is None:
        raise ValueError(f"SyncReplicas: every input of a replicated method needs a batch rank; {space!r} has none")
    return axis


def shard_sizes(total: int, count: int) -> list[int]:
    """Rows per shard as `BatchSharder` cuts them (the first ``total % count`` shards get one more)."""
    base, rem = divmod(total, count)
    return [base + (1 if i < rem else 0) for i in range(count)]


class BatchSharder(Component):
    """Splits a tuple of batched values into ``count`` contiguous shards along each leaf's batch axis.

    API ``shard(inputs)`` -> ``count * len(inputs)`` values (shard 0's inputs, then shard 1's, ...)
    and the shard weights ``float32[count]``: ``n_i / B`` (``reduction="mean"``), ones (``"sum"``) or the
    row counts ``n_i`` (``"rows"``).
    Shard ``i`` holds rows ``[start_i, start_i + n_i)`` with ``n_i = B // count + (i < B % count)``.
    """

    def __init__(self, count: int, reduction: str = "mean", scope: str = "replica_sharder") -> None:
        super().__init__(scope=scope)
        self.count, self.reduction = int(count), reduction
        self.axes: dict[str, int] = {}
        self.space: Space | None = None
        self.arity = 0  # inputs per call, set at assembly by the replicated method

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Records every leaf's batch axis; raises `SpaceMismatchError` for a leaf without batch rank."""
        self.space = input_spaces["inputs"]
        try:
            self.axes = {path: _batch_axis(leaf) for path, leaf in self.space.leaves()}
        except ValueError as exc:
            raise self.space_mismatch("inputs", "values with a batch rank", self.space, str(exc)) from None

    def _output_spaces(self, inputs: Space) -> Any:
        return tuple(inputs[j] for _ in range(self.count) for j in range(len(inputs))) + (
            FloatBox((self.count,)),)

    @api
    def shard(self, inputs: Any) -> tuple:
        """``count`` shards of every input (flat, shard-major) and the shard weights."""
        return self._graph_fn_shard(inputs)

    @graph_fn(returns=lambda self: self.count * self.arity + 1, output_spaces=_output_spaces)
    def _graph_fn_shard(self, F: Any, inputs: Any) -> Any:
        flat = self.space.flatten_value(inputs)
        first = next(iter(flat))
        total = F.dim(flat[first], self.axes[first])
        n = self.count
        static = isinstance(total, int)
        if static and total < n:
            raise ValueError(f"BatchSharder {self.global_scope!r}: a batch of {total} rows cannot be split "
                             f"across {n} replicas (each needs at least one row)")
        base, rem = total // n, total % n
        shards, sizes = [], []
        for i in range(n):
            if static:
                start, size = i * base + min(i, rem), base + (1 if i < rem else 0)
                idx = F.arange(size, dtype="int64") + start
            else:
                start = i * base + F.minimum(rem, i)
                size = base + F.minimum(F.maximum(rem - i, 0), 1)
                idx = F.arange(size, dtype="int64") + F.cast(start, "int64")
            part = {p: F.gather(v, idx, axis=self.axes[p]) for p, v in flat.items()}
            shards.extend(self.space.unflatten(part))
            sizes.append(size)
        if self.reduction == "rows":  # the shard sizes themselves (the torch.distributed variant)
            weights = F.constant([float(x) for x in sizes], "float32") if static else F.stack(
                [F.cast(x, "float32") for x in sizes])
        elif self.reduction == "sum":
            weights = F.ones((n,), "float32")
        elif static:
            weights = F.constant([s / total for s in sizes], "float32")
        else:
            weights = F.stack([F.cast(s, "float32") for s in sizes]) / F.cast(total, "float32")
        return tuple(shards) + (weights,)


class OutputMerger(Component):
    """Merges the towers' outputs of a replicated method into one output of the unreplicated form.

    API ``merge(values, weights)``: ``values`` holds ``count`` groups of ``width`` leaves (tower-major).
    Scalars (rank 0: losses, norms) become the shard-weighted sum, i.e. the whole batch's mean for
    ``reduction="mean"``; other leaves (per-row values such as TD errors) are concatenated along their
    first axis, which restores the batch's row order.
    """

    def __init__(self, count: int, width: int, scope: str) -> None:
        super().__init__(scope=scope)
        self.count, self.width = int(count), int(width)

    def _output_spaces(self, values: Space, weights: Space) -> Any:
        out = tuple(values[j] for j in range(self.width))
        return out if self.width > 1 else out[0]

    @api(must_be_complete=False)
    def merge(self, values: Any, weights: Any) -> Any:
        """One output per leaf of the towers' outputs."""
        return self._graph_fn_merge(values, weights)

    @graph_fn(returns=lambda self: self.width, output_spaces=_output_spaces)
    def _graph_fn_merge(self, F: Any, values: Any, weights: Any) -> Any:
        out = []
        for j in range(self.width):
            parts = [_move(self.backend, values[i * self.width + j], weights) for i in range(self.count)]
            if len(parts[0].shape) == 0:
                out.append(sum(F.cast(weights[i], parts[i].dtype) * parts[i] for i in range(self.count)))
            else:
                out.append(F.concat(parts, axis=0))
        return tuple(out) if self.width > 1 else out[0]


def _variable_pairs(root: Component, towers: Sequence[Component], skip: Sequence[Component]) -> list[tuple]:
    """``(tower variable, root variable)`` for every tower variable with a root counterpart.

    Counterparts are matched by the scope path below the tower and the root; variables of the components
    in ``skip`` (the gradient towers' accumulators) have none.
    """
    root_vars = root.all_variables()
    skipped = {id(v) for c in skip for v in c.all_variables().values()}
    prefix = root.global_scope + "/"
    pairs = []
    for tower in towers:
        tp = tower.global_scope + "/"
        for path, var in tower.all_variables().items():
            if id(var) not in skipped:
                main = root_vars.get(prefix + path[len(tp):])
                if main is not None:
                    pairs.append((var, main))
    return pairs


class ReplicaBroadcast(Component):
    """Copies the root's variables into every tower (API ``broadcast()``, no inputs or outputs)."""

    def __init__(self, scope: str = "replica_broadcast") -> None:
        super().__init__(scope=scope)
        self.strategy_root: Component | None = None
        self.towers: list[Component] = []
        self.skip: list[Component] = []

    @api
    def broadcast(self) -> None:
        """Overwrites each tower variable with its root counterpart."""
        return self._graph_fn_broadcast()

    @graph_fn(returns=0)
    def _graph_fn_broadcast(self, F: Any) -> None:
        for tower_var, main_var in _variable_pairs(self.strategy_root, self.towers, self.skip):
            F.assign(tower_var, _move(self.backend, main_var, tower_var))


def _gradient_tower_class(base: type) -> type:
    """``base`` (an optimizer class) whose ``step`` stores the loss's gradients instead of applying them."""

    class GradientTower(base):  # type: ignore[misc, valid-type]
        def slot_names(self) -> tuple[str, ...]:
            return ("grad",)

        def _create_extra_variables(self) -> None:
            pass

        def _graph_fn_step(self, loss: Any) -> tuple[Any, Any]:
            # (not a graph function itself: it keeps the records of the step's outputs, by which the replicated
            # method finds its gradient norm among its outputs)
            self.step_records = self._graph_fn_tower_step(loss)
            return self.step_records

        @graph_fn(returns=2, gradients=True)
        def _graph_fn_tower_step(self, F: Any, loss: Any) -> tuple[Any, Any]:
            grads = F.gradients(loss, self._vars)
            for acc, g in zip(self.slots["grad"], grads):
                F.assign(acc, g)
            return F.stop_gradient(loss), F.global_norm(grads)

    GradientTower.__name__ = GradientTower.__qualname__ = base.__name__
    GradientTower.__module__ = base.__module__
    return GradientTower


class TowerStepMixin:
    """What a strategy's optimizer shares: it depends on its gradient towers and checks ``loss`` spaces only
    when its own ``step`` is built. It clips and applies the reduced gradients with the optimizer's own
    `Optimizer._clip_and_apply`."""

    def variable_dependencies(self) -> list[Component]:
        return list(super().variable_dependencies()) + list(self.gradient_towers)  # type: ignore[misc]

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        if "loss" in input_spaces:
            super().check_input_spaces(input_spaces)  # type: ignore[misc]


def _sync_optimizer_class(base: type) -> type:
    """``base`` with ``sync_step(weights)``: the towers' weighted gradients applied once, then broadcast."""

    class SyncOptimizer(TowerStepMixin, base):  # type: ignore[misc, valid-type]
        @api(must_be_complete=False)
        def sync_step(self, weights: Any) -> Any:
            """Applies the weighted sum of the gradient towers' gradients; returns its global norm."""
            return self._graph_fn_sync_step(weights)

        @graph_fn(output_spaces=lambda self, weights: FloatBox(()))
        def _graph_fn_sync_step(self, F: Any, weights: Any) -> Any:
            grads = []
            for j, var in enumerate(self._vars):
                parts = [_move(self.backend, tower.slots["grad"][j], var) for tower in self.gradient_towers]
                grads.append(sum(F.cast(weights[i], self._dtypes[j]) * g for i, g in enumerate(parts)))
            norm = self._clip_and_apply(F, grads)
            for tower_var, main_var in _variable_pairs(self.strategy_root, self.towers, self.gradient_towers):
                F.assign(tower_var, _move(self.backend, main_var, tower_var))
            return norm

    SyncOptimizer.__name__ = SyncOptimizer.__qualname__ = base.__name__
    SyncOptimizer.__module__ = base.__module__
    return SyncOptimizer


def _replicated_method(name: str, original: Any) -> Any:
    """An ``@api`` method ``name`` with ``original``'s arguments that runs it on every tower's shard."""

    def body(self: Any, *args: Any) -> Any:
        rep = self._sync_replicas
        if rep.towers:
            rep.broadcast.broadcast()
        sharder = rep.sharders[name]
        sharder.arity = k = len(args)
        out = sharder.shard(tuple(args))
        shards, weights = out[:-1], out[-1]
        own = getattr(self, rep.optimizer_attr)
        setattr(self, rep.optimizer_attr, rep.own_gradients)  # replica 0: this root's own sub-graph
        rep.own_gradients.step_records = None
        try:
            results = [original(self, *shards[:k])]
        finally:
            setattr(self, rep.optimizer_attr, own)
        own_norm = (rep.own_gradients.step_records or (None, None))[1]
        results += [getattr(tower, name)(*shards[(i + 1) * k:(i + 2) * k]) for i, tower in enumerate(rep.towers)]
        leaves, treedef = optree.tree_flatten(results[0], none_is_leaf=False)
        flat = [leaf for r in results for leaf in optree.tree_leaves(r)]
        norm = own.sync_step(weights)
        if not leaves or len(results) == 1:
            return results[0]
        rep.mergers[name].width = len(leaves)
        merged = rep.mergers[name].merge(tuple(flat), weights)
        merged = list(merged) if len(leaves) > 1 else [merged]
        # The method's gradient norm (its step's output, returned as it is) is the synchronised step's norm,
        # not a merge of the towers' own norms.
        merged = [norm if leaf is own_norm else m for leaf, m in zip(leaves, merged)]
        return optree.tree_unflatten(treedef, merged)

    body.__name__, body.__doc__ = name, (inspect.getdoc(original) or "") + "\n\n(Synchronous replicas.)"
    body.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    return api(name=name)(body)


def _copy_optimizer(optimizer: Component, scope: str) -> Component:
    """A copy of ``optimizer`` under ``scope`` that still targets the same components (not copies of them)."""
    parent, optimizer.parent = optimizer.parent, None
    try:
        new = _copy.deepcopy(optimizer, {id(t): t for t in optimizer.targets})
    finally:
        optimizer.parent = parent
    new.scope = scope
    return new


class _Replicas:
    """What a replicated method needs at assembly (kept on the root as ``_sync_replicas``)."""

    def __init__(self) -> None:
        self.towers: list[Component] = []
        self.own_gradients: Component | None = None
        self.optimizer_attr = "optimizer"
        self.sharders: dict[str, BatchSharder] = {}
        self.mergers: dict[str, OutputMerger] = {}
        self.broadcast: ReplicaBroadcast | None = None


class SyncReplicas(DeviceStrategy):
    """Synchronous replicas of the update methods on several devices (see the module docstring).

    Args:
        devices: one device name per replica (``"/cpu:1"``, ``"/gpu:0"``, ``"cuda:1"``, ``"cpu"``); the
            same name may repeat (several replicas on one device).
        methods: the root API methods to replicate (each must end in ``optimizer.step(loss)`` and take only
            batched inputs).
        optimizer: the attribute of the root that holds its optimizer.
        reduction: ``"mean"`` when the loss is a batch mean (gradients weighted by shard size, so the step
            equals the single-device step on the whole batch), ``"sum"`` when it is a batch sum.
        concurrent: run the towers of one call at the same time (PyTorch: a thread per tower; TensorFlow runs
            them concurrently anyway, see `harness.execution.strategies.concurrent_towers`); False runs them
            one after another.

    Raises:
        ValueError: naming the argument for an empty device list, a non-string device, an unknown
            reduction; at `expand`, naming the root for an unknown method or a missing optimizer.
    """

    name = "sync-replicas"

    def __init__(self, devices: Sequence[str], methods: Sequence[str], optimizer: str = "optimizer",
                 reduction: str = "mean", host: Sequence[str] = HOST_COMPONENTS, concurrent: bool = True) -> None:
        if isinstance(devices, str) or not devices or not all(isinstance(d, str) and d for d in devices):
            raise ValueError(f"SyncReplicas: devices must be a non-empty list of device names; got {devices!r}")
        if isinstance(methods, str) or not methods:
            raise ValueError(f"SyncReplicas: methods must be a non-empty list of API method names; got {methods!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"SyncReplicas: reduction must be one of {REDUCTIONS}; got {reduction!r}")
        self.devices, self.methods = list(devices), list(methods)
        self.optimizer_attr, self.reduction, self.host = optimizer, reduction, tuple(host)
        self.concurrent = bool(concurrent)

    def expand(self, root: Component) -> Component:
        """Adds towers, sharders, mergers and the broadcast to ``root`` and replicates its update methods."""
        where = f"SyncReplicas: root {type(root).__name__} {root.global_scope!r}"
        specs = root.api_specs()
        unknown = [m for m in self.methods if m not in specs]
        if unknown:
            raise ValueError(f"{where} has no API method(s) {unknown} to replicate; its API methods are {sorted(specs)}")
        optimizer = getattr(root, self.optimizer_attr, None)
        if not isinstance(optimizer, Component) or not hasattr(optimizer, "_apply"):
            raise ValueError(f"{where}: attribute {self.optimizer_attr!r} must hold the root's optimizer (a component "
                             f"with targets, slots and _apply); got {optimizer!r}")
        if optimizer.parent is not root:
            raise ValueError(f"{where}: the optimizer {optimizer.global_scope!r} must be a direct sub-component")
        towers = [root.copy(scope=f"replica_{i}", device=device) for i, device in enumerate(self.devices) if i]
        for tower in towers:
            for c in tower.walk():
                if c is not tower:
                    c.device = None  # the tower's device holds all of it
        for child in list(root.sub_components.values()):  # replica 0 is the root's own update sub-graph
            if child.scope not in self.host and child.device is None:
                child.device = self.devices[0]
        own = _copy_optimizer(optimizer, f"replica_0_{optimizer.scope}")
        own.__class__ = _gradient_tower_class(type(own))
        gradient_towers = [own]
        for tower in towers:
            opt = tower.sub_components[optimizer.scope]
            opt.__class__ = _gradient_tower_class(type(opt))
            gradient_towers.append(opt)
        optimizer.__class__ = self._sync_class(type(optimizer))
        optimizer.gradient_towers, optimizer.towers, optimizer.strategy_root = gradient_towers, towers, root
        rep = _Replicas()
        rep.towers, rep.own_gradients, rep.optimizer_attr = towers, own, self.optimizer_attr
        rep.broadcast = ReplicaBroadcast()
        rep.broadcast.strategy_root, rep.broadcast.towers, rep.broadcast.skip = root, towers, gradient_towers
        for m in self.methods:
            rep.sharders[m] = BatchSharder(len(self.devices), self._shard_weights(), scope=f"replica_sharder_{m}")
            rep.mergers[m] = OutputMerger(len(self.devices), 1, scope=f"replica_merger_{m}")  # width set at assembly
        methods = {m: _replicated_method(m, specs[m].fn) for m in self.methods}
        root.__class__ = type(type(root).__name__, (type(root),), {**methods, "__module__": type(root).__module__})
        root._sync_replicas = rep
        self._towers, self._root, self._own = towers, root, own
        root.add_components(*towers, own, rep.broadcast, *rep.sharders.values(), *rep.mergers.values())
        return root

    def tower_of(self, component: Component) -> str | None:
        """``"replica <i>"`` for the components of replica i (0: the root's own update sub-graph on the first
        device, its gradient tower included), None for the host's (memories, sharders, the broadcast)."""
        chain = [component, *component.ancestors()]
        for i, tower in enumerate(getattr(self, "_towers", []), start=1):
            if tower in chain:
                return f"replica {i}"
        own = getattr(self, "_own", None)
        if own is not None and (own in chain or (component is not self._root and
                                                 component.effective_device() == self.devices[0])):
            return "replica 0"
        return None

    def schedule(self, trace: Any, step_fns: dict[int, Any], backend_name: str) -> tuple[Any, dict[int, Any]]:
        """A replicated method's towers as one step that runs them concurrently (`concurrent_towers.schedule`;
        PyTorch only, with ``concurrent``); every other trace as it is."""
        rep = getattr(getattr(self, "_root", None), "_sync_replicas", None)
        if not self.concurrent or rep is None or trace.name not in rep.sharders:
            return trace, step_fns
        return concurrent_towers.schedule(trace, step_fns, self._root, rep.sharders[trace.name],
                                          getattr(self._root, self.optimizer_attr).gradient_towers,
                                          rep.towers, backend_name)

    def _sync_class(self, base: type) -> type:
        """The class the root's optimizer takes (one with ``sync_step(weights)``)."""
        return _sync_optimizer_class(base)

    def _shard_weights(self) -> str:
        """What the sharders' weights are (see `BatchSharder`)."""
        return self.reduction

    def describe(self) -> dict[str, Any]:
        """The strategy for results and logs: ``{"type", "mode": "towers", "replicas", "backend": None, "devices",
        "methods", "reduction"}`` (the keys every strategy's ``describe`` has, then its own)."""
        return {"type": self.name, "mode": "towers", "replicas": len(self.devices), "backend": None,
                "devices": list(self.devices), "methods": list(self.methods), "reduction": self.reduction}
