"""Device strategies: how the executor may expand a component graph before assembly.

`DeviceStrategy` (the default) leaves the graph as it is; `SyncReplicas` copies the update
sub-graph once per device and averages the towers' gradients into one optimizer step
(see `harness.execution.strategies.replicas`: ``mode: towers``); `ProcessReplicas` runs one replica per
process and all-reduces their gradients (`harness.execution.strategies.processes`: ``mode: processes``).
`make_strategy` builds one from an agent config's ``execution`` section.
`harness.execution.strategies.distributed` holds the variant for ranks a launcher started (``torch.distributed``).
"""

from __future__ import annotations

from typing import Any, Sequence

from harness.execution.strategies.base import DeviceStrategy
from harness.execution.strategies.process_comm import ReplicaFailure
from harness.execution.strategies.processes import GROUP_BACKENDS, ProcessReplicas
from harness.execution.strategies.replicas import SyncReplicas

__all__ = ["DeviceStrategy", "MODES", "ProcessReplicas", "ReplicaFailure", "STRATEGIES", "SyncReplicas",
           "make_strategy"]

#: The strategies an agent config's ``execution.strategy`` may name.
STRATEGIES = ("local", "sync-replicas")
#: How ``sync-replicas`` runs its replicas (the mapping form's ``mode``; the first is the default).
MODES = ("processes", "towers")
#: The keys of the mapping form of ``execution.strategy``.
STRATEGY_KEYS = ("type", "replicas", "mode", "backend", "devices")


def make_strategy(execution: dict[str, Any] | None, methods: Sequence[str], reduction: str = "mean",
                  where: str = "execution") -> DeviceStrategy:
    """The strategy an agent config's ``execution`` section names (None or ``{}``: the local default).

    Two forms: ``{"strategy": {"type": "sync-replicas", "replicas": N, "mode": "processes" | "towers",
    "backend": "auto" | "gloo" | "nccl", "devices": [...]}}`` (``mode`` default processes, ``backend`` default
    auto and for processes only, ``devices`` optional: one per replica; ``replicas: 1`` is local), and the
    older ``{"strategy": "local" | "sync-replicas", "devices": [...]}`` (towers on those devices).

    Args:
        execution: the ``execution`` section (other keys, such as ``trace`` and ``replay``, are ignored).
        methods: the agent's update methods (replicated by ``sync-replicas``).
        reduction: how the agent's loss reduces the batch (``"mean"`` or ``"sum"``).
        where: the config key path for error messages.

    Raises:
        ValueError: naming the key path (``execution.strategy.replicas``, ...), what was expected and what came.
    """
    execution = dict(execution or {})
    kind = execution.get("strategy", "local")
    if isinstance(kind, dict):
        if execution.get("devices"):
            raise ValueError(f"{where}.devices: with the mapping form of {where}.strategy, give the devices as "
                             f"{where}.strategy.devices; got {where}.devices {execution['devices']!r}")
        return _from_mapping(kind, methods, reduction, f"{where}.strategy")
    if kind not in STRATEGIES:
        raise ValueError(f"{where}.strategy: unknown strategy {kind!r}; expected one of {STRATEGIES} or a mapping "
                         f"{{type: sync-replicas, replicas: N, mode: processes | towers}}")
    if kind == "local":
        return DeviceStrategy()
    devices = execution.get("devices")
    if not devices:
        raise ValueError(f"{where}.devices: sync-replicas needs a list of devices (e.g. ['/cpu:0', '/cpu:1']); "
                         f"got {devices!r}")
    return SyncReplicas(devices, methods, reduction=reduction)


def _from_mapping(spec: dict[str, Any], methods: Sequence[str], reduction: str, where: str) -> DeviceStrategy:
    """The strategy of the mapping form (see `make_strategy`); ``where`` is its key path."""
    unknown = sorted(set(spec) - set(STRATEGY_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; the keys are {list(STRATEGY_KEYS)}")
    kind = spec.get("type", "sync-replicas")
    if kind not in STRATEGIES:
        raise ValueError(f"{where}.type: expected one of {STRATEGIES}; got {kind!r}")
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"{where}.replicas: expected an int >= 1; got {replicas!r}")
    mode = spec.get("mode", MODES[0])
    if mode not in MODES:
        raise ValueError(f"{where}.mode: expected one of {MODES}; got {mode!r}")
    backend = spec.get("backend", "auto")
    if backend not in GROUP_BACKENDS:
        raise ValueError(f"{where}.backend: expected one of {GROUP_BACKENDS}; got {backend!r}")
    if mode == "towers" and backend != "auto":
        raise ValueError(f"{where}.backend: only processes mode has an all-reduce backend; got {backend!r} with "
                         f"mode towers")
    devices = spec.get("devices")
    if devices is not None and (not isinstance(devices, (list, tuple)) or len(devices) != replicas
                                or not all(isinstance(d, str) and d for d in devices)):
        raise ValueError(f"{where}.devices: expected a list of {replicas} device name(s), one per replica "
                         f"(replicas: {replicas}); got {devices!r}")
    if kind == "local" and replicas != 1:
        raise ValueError(f"{where}.replicas: type local runs one replica; got {replicas!r}")
    if kind == "local" or replicas == 1:
        return DeviceStrategy()
    if mode == "towers":
        return SyncReplicas(list(devices or ["cpu"] * replicas), methods, reduction=reduction)
    try:
        return ProcessReplicas(replicas, methods, reduction=reduction, devices=devices, backend=backend)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
