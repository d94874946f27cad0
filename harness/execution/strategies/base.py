"""Device strategies: how the executor may expand a component graph before assembly."""

from __future__ import annotations

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
