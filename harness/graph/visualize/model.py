"""The drawing model: `GraphModel`, what a drawing of a component graph shows.

Every component of the tree (nested by scope) with its class, device, input spaces, variables
(shapes, dtypes) and build status (`ComponentNode`), and every recorded API call as an edge from
caller to callee labelled with its argument and output spaces (`ApiEdge`; root API calls come
from the pseudo-node `API_NODE`). Made from an `Assembly` (built or not: spaces that are unknown
show as ``?``), from a bare component tree, or from a build error (`GraphModel.from_exception`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.graph.assembly import Assembly
from harness.graph.component import Component
from harness.graph.partial import ATTRIBUTE, PartialBuild, exception_chain
from harness.graph.records import Record

#: The id of the pseudo-node root API calls come from.
API_NODE = "API"

#: Fill colours of devices, in order of first appearance (the default device is grey-blue).
DEFAULT_DEVICE_COLOR = "#dfe7f2"
DEVICE_COLORS = ["#cde8c5", "#fde2b8", "#e3d4f0", "#c8e6ef", "#f6d0de", "#e8e5b8", "#d9d9d9"]
FAILED_COLOR = "#ff8a80"
STATUSES = ("built", "not built", "failed", "unused")


@dataclass
class VariableInfo:
    """One variable of a component: its name within the component, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"


@dataclass
class ComponentNode:
    """One component of the drawing.

    ``status``: ``built`` (variables created), ``not built`` (takes part in the API but the build
    did not reach it), ``failed`` (the build failed here), ``unused`` (no root API method calls it).
    ``tower``: the device tower a multi-device strategy put it in (see `GraphModel.from_assembly`).
    """

    path: str
    scope: str
    cls: str
    parent: str | None
    device: str | None
    status: str
    variables: list[VariableInfo] = field(default_factory=list)
    input_spaces: dict[str, str] = field(default_factory=dict)
    api_methods: list[str] = field(default_factory=list)
    tower: str | None = None


@dataclass
class ApiEdge:
    """Calls of ``target``'s API method ``method`` by ``source`` (a component path or `API_NODE`)."""

    source: str
    target: str
    method: str
    inputs: dict[str, str]
    outputs: str
    root_apis: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        args = ", ".join(f"{a}: {s}" for a, s in self.inputs.items())
        return f"{self.method}({args}) -> {self.outputs}"

    @property
    def short_label(self) -> str:
        """`label` without space bounds (``float32[B,4](-4.8,4.8)`` shows as ``float32[B,4]``)."""
        return re.sub(r"\]\([^()]*\)", "]", self.label)


def _space_text(value: Any) -> str:
    """The spaces of a nested structure of records (``?`` where the build gave none yet)."""
    if isinstance(value, Record):
        return "?" if value.space is None else repr(value.space)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_space_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_space_text(v) for v in value) + ")"
    if value is None:
        return "-"
    return repr(value)  # a constant


def _variables(comp: Component) -> list[VariableInfo]:
    out = []
    for name, var in comp.variables.items():
        shape = tuple(int(d) for d in getattr(var, "shape", ()))
        dtype = getattr(var, "dtype", "?")
        dtype = getattr(dtype, "name", None) or str(dtype).removeprefix("torch.")
        out.append(VariableInfo(name, shape, dtype))
    return out


@dataclass
class GraphModel:
    """What a drawing shows (see the docstring of `harness.graph.visualize`)."""

    title: str
    root: str
    components: dict[str, ComponentNode]
    edges: list[ApiEdge]
    error: str | None = None
    failed: str | None = None

    # ---- making one ---------------------------------------------------------------------------
    @classmethod
    def from_assembly(cls, assembly: Assembly, title: str | None = None, error: str | None = None,
                      failed: Component | None = None, stuck: list[Component] | None = None,
                      device_of: Callable[[Component], str | None] | None = None,
                      tower_of: Callable[[Component], str | None] | None = None) -> "GraphModel":
        """The model of an assembled (and possibly built, or partly built) graph.

        Args:
            assembly: the traces of the root API methods; record spaces are whatever the build set.
            title: a heading (default: the root's class and scope).
            error: the build error's text, drawn as a banner.
            failed: the component the build failed in (drawn red).
            stuck: components a stuck build could not make input-complete (drawn red too).
            device_of: a component's device (default `Component.effective_device`; None is the
                executor's default placement).
            tower_of: the hook for multi-device strategies: the tower a component belongs to (a
                strategy's ``tower_of``), shown in its label and detail panel.
        """
        root = assembly.root
        used = {id(c) for c in assembly.components()}
        bad = {id(c) for c in [failed, *(stuck or [])] if c is not None}
        device_of = device_of or Component.effective_device
        components: dict[str, ComponentNode] = {}
        for comp in root.walk():
            if id(comp) in bad:
                status = "failed"
            elif id(comp) not in used:
                status = "unused"
            elif comp.input_spaces is not None:
                status = "built"
            else:
                status = "not built"
            components[comp.global_scope] = ComponentNode(
                path=comp.global_scope, scope=comp.scope, cls=type(comp).__name__,
                parent=comp.parent.global_scope if comp.parent is not None and comp is not root else None,
                device=device_of(comp), status=status, variables=_variables(comp),
                input_spaces={a: repr(s) for a, s in (comp.input_spaces or {}).items()},
                api_methods=sorted(comp.api_specs()), tower=tower_of(comp) if tower_of else None)
        edges: dict[tuple[str, str, str], ApiEdge] = {}
        for trace in assembly.traces.values():
            for call in trace.calls:
                source = call.caller.global_scope if call.caller is not None else API_NODE
                key = (source, call.component.global_scope, call.method)
                inputs = {a: _space_text(v) for a, v in call.args.items()}
                outputs = _space_text(call.outputs)
                edge = edges.get(key)
                if edge is None:
                    edge = edges[key] = ApiEdge(source, key[1], call.method, inputs, outputs)
                elif "?" in edge.label and "?" not in f"{inputs}{outputs}":
                    edge.inputs, edge.outputs = inputs, outputs
                if trace.name not in edge.root_apis:
                    edge.root_apis.append(trace.name)
        return cls(title or f"{type(root).__name__} {root.global_scope!r}", root.global_scope, components,
                   list(edges.values()), error, failed.global_scope if failed is not None else None)

    @classmethod
    def from_component(cls, root: Component, title: str | None = None, error: str | None = None,
                       failed: Component | None = None) -> "GraphModel":
        """The component tree alone (no API edges), for a graph that did not assemble."""
        return cls.from_assembly(Assembly(root, {}), title, error, failed)

    @classmethod
    def from_partial_build(cls, partial: PartialBuild, title: str | None = None,
                           error: str | None = None) -> "GraphModel":
        """The graph of a `PartialBuild`: its failing component (or a stuck build's components) red."""
        return cls.from_assembly(partial.assembly, title, error, partial.failed, partial.stuck)

    @classmethod
    def from_exception(cls, exc: BaseException, title: str | None = None) -> "GraphModel | None":
        """The graph as far as a failed assembly or build got, the failing component marked.

        Reads the `PartialBuild` the assembly or build put on the error (``exc.partial_build``, see
        `harness.graph.partial`), on ``exc`` or on the first exception of its cause/context chain
        that has one (an agent config's error wrapping the build error); the banner shows that
        exception. None when no exception of the chain carries one.
        """
        for err in exception_chain(exc):
            partial = getattr(err, ATTRIBUTE, None)
            if isinstance(partial, PartialBuild):
                return cls.from_partial_build(partial, title, f"{type(err).__name__}: {err}")
        return None

    # ---- queries --------------------------------------------------------------------------------
    def devices(self) -> list[str | None]:
        """The devices in the drawing, in walk order (None: the default placement)."""
        return list(dict.fromkeys(c.device for c in self.components.values()))

    def device_color(self, device: str | None) -> str:
        """The fill colour of a device."""
        if device is None:
            return DEFAULT_DEVICE_COLOR
        named = [d for d in self.devices() if d is not None]
        return DEVICE_COLORS[named.index(device) % len(DEVICE_COLORS)] if device in named else DEVICE_COLORS[-1]

    def children(self, path: str) -> list[ComponentNode]:
        """The direct sub-components of ``path``."""
        return [c for c in self.components.values() if c.parent == path]

