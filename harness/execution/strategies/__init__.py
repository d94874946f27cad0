"""Device strategies: how the executor may expand a component graph before assembly.

`DeviceStrategy` (the default) leaves the graph as it is; `SyncReplicas` copies the update
sub-graph once per device and averages the towers' gradients into one optimizer step
(see `harness.execution.strategies.replicas`). `make_strategy` builds one from an agent
config's ``execution`` section. `harness.execution.strategies.distributed` holds the variant across
processes (``torch.distributed``).
"""

from __future__ import annotations

from typing import Any, Sequence

from harness.execution.strategies.base import DeviceStrategy
from harness.execution.strategies.replicas import SyncReplicas

__all__ = ["DeviceStrategy", "STRATEGIES", "SyncReplicas", "make_strategy"]

#: The strategies an agent config's ``execution.strategy`` may name.
STRATEGIES = ("local", "sync-replicas")


def make_strategy(execution: dict[str, Any] | None, methods: Sequence[str], reduction: str = "mean",
                  where: str = "execution") -> DeviceStrategy:
    """The strategy an agent config's ``execution`` section names (None or ``{}``: the local default).

    Args:
        execution: ``{"strategy": "local" | "sync-replicas", "devices": [...]}``.
        methods: the agent's update methods (replicated by ``sync-replicas``).
        reduction: how the agent's loss reduces the batch (``"mean"`` or ``"sum"``).
        where: the config key path for error messages.

    Raises:
        ValueError: naming ``where`` and the key for an unknown strategy or missing devices.
    """
    execution = dict(execution or {})
    kind = execution.get("strategy", "local")
    if kind not in STRATEGIES:
        raise ValueError(f"{where}.strategy: unknown strategy {kind!r}; expected one of {STRATEGIES}")
    if kind == "local":
        return DeviceStrategy()
    devices = execution.get("devices")
    if not devices:
        raise ValueError(f"{where}.devices: sync-replicas needs a list of devices (e.g. ['/cpu:0', '/cpu:1']); "
                         f"got {devices!r}")
    return SyncReplicas(devices, methods, reduction=reduction)

