"""Device strategies: how the executor may expand a component graph before assembly."""

from __future__ import annotations

from typing import Any, Callable

from harness.graph.component import Component


class DeviceStrategy:
    """The default strategy: one process, one device; the graph is left as it is.

    A multi-device strategy overrides `expand` to add device towers (copies of
    sub-graphs made with `Component.copy`) and a synchronizing component before
    the executor assembles and builds the graph.
    """

    name = "local"

    def expand(self, root: Component) -> Component:
        """The root component to assemble and build (possibly a new one wrapping ``root``)."""
        return root

    def tower_of(self, component: Component) -> str | None:
        """The device tower ``component`` belongs to after `expand` (for the graph view), or None."""
        return None

    def attach(self, executor: Any) -> None:
        """Called by the executor's build before `expand`: the strategy may read the executor's root, input
        spaces, backend, seed, device map and API methods (processes mode hands them to its replicas)."""

    def wrap_call(self, executor: Any, method: str, call: Callable) -> Callable:
        """The executor's call of root API method ``method`` (NumPy in and out): ``call`` itself, or a
        strategy's wrapper of it (processes mode splits the batch of a replicated method across processes)."""
        return call

    def shutdown(self) -> None:
        """Releases what the strategy started (replica processes); idempotent. The executor's ``close``."""

    def describe(self) -> dict[str, Any]:
        """The strategy for results and logs: ``{"type", "mode", "replicas", "backend", "devices"}``."""
        return {"type": self.name, "mode": None, "replicas": 1, "backend": None, "devices": []}

    def schedule(self, trace: Any, step_fns: dict[int, Callable], backend_name: str) -> tuple[Any, dict[int, Callable]]:
        """The trace (`harness.graph.assembly.ApiTrace`) and step functions the executor builds a root API
        method's call chain from: ``(trace, step_fns)`` as they are, or a strategy's rewrite of them (the
        concurrent towers of `SyncReplicas`)."""
        return trace, step_fns
