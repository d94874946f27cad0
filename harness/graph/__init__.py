"""Component graphs: `Component`, `@api`, `@graph_fn`, assembly and the space-driven build."""

from harness.graph.assembly import Assembly, assemble
from harness.graph.build import BuildProfile, BuiltApi, BuiltGraph
from harness.graph.component import Component
from harness.graph.decorators import api, forward, graph_fn
from harness.graph.errors import (
    AssemblyError, BuildError, ExecutionError, SpaceMismatchError, SpacegraphError, UnknownApiError,
)
from harness.graph.partial import PartialBuild

__all__ = [
    "Component", "api", "forward", "graph_fn", "assemble", "Assembly", "BuildProfile", "BuiltApi", "BuiltGraph",
    "SpacegraphError", "AssemblyError", "BuildError", "SpaceMismatchError", "UnknownApiError", "ExecutionError",
    "PartialBuild",
]
