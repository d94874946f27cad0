"""Device strategies: how the executor may expand a component graph before assembly.

`DeviceStrategy` (the default) leaves the graph as it is; `SyncReplicas` copies the update
sub-graph once per device and averages the towers' gradients into one optimizer step
(see `harness.execution.strategies.replicas`). `make_strategy` builds one from an agent
config's ``execution`` section.
"""

from harness.execution.strategies.base import DeviceStrategy
from harness.execution.strategies.replicas import SyncReplicas, make_strategy

__all__ = ["DeviceStrategy", "SyncReplicas", "make_strategy"]
