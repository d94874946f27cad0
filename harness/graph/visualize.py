"""Drawings of a component graph: a backend-free model, DOT and self-contained HTML writers.

`GraphModel` is what a drawing shows: every component of the tree (nested by scope) with its
class, device, input spaces, variables (shapes, dtypes) and build status, and every recorded API
call as an edge from caller to callee labelled with its argument and output spaces (root API
calls come from the pseudo-node ``API``). It is made from an `Assembly` (built or not: spaces
that are unknown show as ``?``), from a bare component tree, or from a build error
(`GraphModel.from_exception`: the graph as far as the build got, the failing component marked).

`to_dot` writes Graphviz DOT (one cluster per scope); `render` turns it into SVG/PNG with the
``dot`` program; `to_html` writes one self-contained HTML file around the vendored cytoscape.js
(``assets/``): compound nodes per scope that collapse and expand on click, a search box, and a
detail panel. Nothing here imports a backend.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable

from harness.graph.assembly import Assembly
from harness.graph.component import Component
from harness.graph.partial import ATTRIBUTE, PartialBuild, exception_chain
from harness.graph.records import Record

#: The id of the pseudo-node root API calls come from.
API_NODE = "API"

#: The vendored JavaScript libraries inlined into the HTML drawing, in load order (``assets/``, each
#: with its LICENSE.<name> beside it): cytoscape.js draws, fcose lays out compound graphs.
JS_LIBRARIES = [
    {"file": "cytoscape.min.js", "name": "cytoscape", "version": "3.34.4", "license": "MIT",
     "source": "https://registry.npmjs.org/cytoscape/-/cytoscape-3.34.4.tgz (dist/cytoscape.min.js)",
     "sha256": "081591ab735b2b6a3b31a3c60f8f3a3e2fee8c92939e0c7820ad1208571b6cd8"},
    {"file": "layout-base.js", "name": "layout-base", "version": "2.0.1", "license": "MIT",
     "source": "https://registry.npmjs.org/layout-base/-/layout-base-2.0.1.tgz (layout-base.js)",
     "sha256": "ec15ab5df9af3f20708f4faab994accf91cda71848cd5bb10a23432cc50b6745"},
    {"file": "cose-base.js", "name": "cose-base", "version": "2.2.0", "license": "MIT",
     "source": "https://registry.npmjs.org/cose-base/-/cose-base-2.2.0.tgz (cose-base.js)",
     "sha256": "7cae9509bd36235a63a85e71c8d9fa2cd0bc1d0c1ecc5b5a737976f39d040ddf"},
    {"file": "cytoscape-fcose.js", "name": "cytoscape-fcose", "version": "2.2.0", "license": "MIT",
     "source": "https://registry.npmjs.org/cytoscape-fcose/-/cytoscape-fcose-2.2.0.tgz (cytoscape-fcose.js)",
     "sha256": "4b1cab218d74996aa59cd8473f9239cc6398b8c1774d84d7e59ad9a68959cb57"},
]

#: Fill colours of devices, in order of first appearance (the default device is grey-blue).
DEFAULT_DEVICE_COLOR = "#dfe7f2"
DEVICE_COLORS = ["#cde8c5", "#fde2b8", "#e3d4f0", "#c8e6ef", "#f6d0de", "#e8e5b8", "#d9d9d9"]
FAILED_COLOR = "#ff8a80"
STATUSES = ("built", "not built", "failed", "unused")


class GraphvizMissing(RuntimeError):
    """The ``dot`` program is needed for SVG/PNG and is not installed."""


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
    """What a drawing shows (see the module docstring)."""

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


# ---- DOT -------------------------------------------------------------------------------------------


def _dot_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l") + '"'


def _node_label(node: ComponentNode, limit: int = 8) -> str:
    lines = [f"{node.scope}  ({node.cls})"]
    if node.tower:
        lines.append(f"tower {node.tower}")
    if node.device:
        lines.append(f"device {node.device}")
    if node.status != "built":
        lines.append(node.status.upper())
    for var in node.variables[:limit]:
        lines.append(str(var))
    if len(node.variables) > limit:
        lines.append(f"... {len(node.variables) - limit} more variables")
    return "\n".join(lines) + "\n"


def to_dot(model: GraphModel, edge_labels: bool = True) -> str:
    """The graph as Graphviz DOT text: a cluster per scope that has sub-components, a node per
    component (variables in its label, filled by device; failed red, unused or unbuilt dashed),
    an edge per API method called (labelled with argument and output spaces)."""
    out = ["digraph spacegraph {",
           f"  graph [rankdir=LR, compound=true, fontname=\"Helvetica\", fontsize=12, labelloc=t, "
           f"label={_dot_str(_graph_label(model))}];",
           "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];",
           "  edge [fontname=\"Helvetica\", fontsize=8];",
           f"  {_dot_str(API_NODE)} [shape=cds, fillcolor=\"#ffffff\", label=\"root API\"];"]
    clusters = iter(range(1_000_000))

    def node_line(node: ComponentNode, indent: str) -> str:
        attrs = {"label": _dot_str(_node_label(node)), "fillcolor": _dot_str(model.device_color(node.device)),
                 "tooltip": _dot_str(node.path)}
        if node.status == "failed":
            attrs.update(fillcolor=_dot_str(FAILED_COLOR), color="\"#c62828\"", penwidth="3")
        elif node.status in ("not built", "unused"):
            attrs.update(style="\"rounded,filled,dashed\"", fontcolor="\"#666666\"")
        return f"{indent}{_dot_str(node.path)} [" + ", ".join(f"{k}={v}" for k, v in attrs.items()) + "];"

    def emit(node: ComponentNode, depth: int) -> None:
        indent = "  " * depth
        kids = model.children(node.path)
        if not kids:
            out.append(node_line(node, indent))
            return
        style = "dashed" if node.status in ("not built", "unused") else "rounded"
        color = "#c62828" if node.status == "failed" else "#7a8699"
        out.append(f"{indent}subgraph cluster_{next(clusters)} {{")
        out.append(f"{indent}  label={_dot_str(node.path)}; style={style}; color={_dot_str(color)}; "
                   f"fontsize=11;")
        out.append(node_line(node, indent + "  "))
        for kid in kids:
            emit(kid, depth + 1)
        out.append(f"{indent}}}")

    emit(model.components[model.root], 1)
    for edge in model.edges:
        attrs = {"tooltip": _dot_str(edge.label)}
        if edge_labels:
            attrs["label"] = _dot_str(_wrap(edge.short_label))
        out.append(f"  {_dot_str(edge.source)} -> {_dot_str(edge.target)} ["
                   + ", ".join(f"{k}={v}" for k, v in attrs.items()) + "];")
    out.append("}")
    return "\n".join(out) + "\n"


def _graph_label(model: GraphModel) -> str:
    label = model.title
    if model.error:
        where = f" in {model.failed}" if model.failed else ""
        label += f"\nBUILD FAILED{where}: " + _wrap(model.error, 110, 6)
    return label


def _wrap(text: str, width: int = 60, max_lines: int = 4) -> str:
    """Breaks long labels at commas and spaces (DOT labels do not wrap by themselves)."""
    lines, line = [], ""
    for word in text.replace("\n", " ").split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    if len(lines) > max_lines:
        lines = lines[:max_lines] + ["..."]
    return "\n".join(lines)


def render(dot_text: str, fmt: str, out: str) -> str:
    """Renders DOT text to ``out`` as ``svg`` or ``png`` with Graphviz's ``dot`` program.

    Raises:
        GraphvizMissing: when ``dot`` is not on PATH (saying how to install it).
        RuntimeError: with dot's message when it fails.
    """
    if fmt not in ("svg", "png"):
        raise ValueError(f"render: format must be svg or png; got {fmt!r}")
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissing(
            f"drawing {fmt.upper()} needs Graphviz's `dot` program, which is not installed: install it "
            f"(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz; conda: conda install "
            f"graphviz), or write DOT (--format dot) or HTML (--format html) instead")
    done = subprocess.run([dot, f"-T{fmt}", "-o", out], input=dot_text.encode(), capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {done.stderr.decode(errors='replace').strip()}")
    return out


# ---- HTML ------------------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return resources.files("harness.graph").joinpath("assets", name).read_text(encoding="utf-8")


def _elements(model: GraphModel) -> dict[str, Any]:
    nodes = [{"data": {"id": API_NODE, "label": "root API", "kind": "api", "color": "#ffffff"}}]
    parents = {c.parent for c in model.components.values() if c.parent is not None}
    for c in model.components.values():
        data = {"id": c.path, "label": c.scope, "cls": c.cls, "device": c.device or "default",
                "color": FAILED_COLOR if c.status == "failed" else model.device_color(c.device),
                "status": c.status, "kind": "scope" if c.path in parents else "leaf",
                "variables": [str(v) for v in c.variables], "inputs": c.input_spaces, "apis": c.api_methods,
                "tower": c.tower, "depth": c.path.count("/")}
        if c.parent is not None:
            data["parent"] = c.parent
        nodes.append({"data": data})
    edges = [{"data": {"id": f"e{i}", "source": e.source, "target": e.target, "label": e.method,
                       "inputs": e.inputs, "outputs": e.outputs, "roots": e.root_apis, "text": e.label}}
             for i, e in enumerate(model.edges)]
    return {"nodes": nodes, "edges": edges}


def to_html(model: GraphModel) -> str:
    """One self-contained HTML page (cytoscape.js inlined) drawing the graph.

    Scopes are compound nodes: the root's children show, deeper scopes start collapsed and
    expand (or collapse) on click; calls into a collapsed scope are drawn to it, dashed. The
    search box highlights matching components (scope path, class, device, variables) and
    expands the scopes around them. Clicking a component or an edge shows its details.
    """
    payload = {"title": model.title, "root": model.root, "error": model.error, "failed": model.failed,
               "elements": _elements(model),
               "devices": [{"device": d or "default", "color": model.device_color(d)} for d in model.devices()]}
    data = json.dumps(payload).replace("</", "<\\/")
    info = "; ".join(f"{lib['name']} {lib['version']} ({lib['license']}, assets/LICENSE.{lib['name']}) from "
                     f"{lib['source']} sha256 {lib['sha256']}" for lib in JS_LIBRARIES)
    libraries = "\n".join(f"<script>/* {lib['name']} {lib['version']}, {lib['license']} license */\n"
                          f"{_asset(lib['file'])}\n</script>" for lib in JS_LIBRARIES)
    return (_HTML.replace("@TITLE@", html.escape(model.title)).replace("@LIBINFO@", html.escape(info))
            .replace("@DATA@", data).replace("@APP@", _APP_JS).replace("@LIBRARIES@", libraries))


def write(model: GraphModel, fmt: str, out: str) -> str:
    """Writes the drawing of ``model`` to ``out`` as ``dot``, ``svg``, ``png`` or ``html``; returns ``out``.

    Raises:
        GraphvizMissing: for svg/png without Graphviz's ``dot`` (nothing is written then).
    """
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    if fmt == "dot":
        text = to_dot(model)
    elif fmt == "html":
        text = to_html(model)
    elif fmt in ("svg", "png"):
        return render(to_dot(model), fmt, out)
    else:
        raise ValueError(f"format must be one of dot, svg, png, html; got {fmt!r}")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    return out


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>@TITLE@</title>
<style>
 body { margin: 0; font: 13px Helvetica, Arial, sans-serif; display: flex; flex-direction: column; height: 100vh; }
 header { padding: 6px 10px; background: #f4f6f9; border-bottom: 1px solid #ccd; display: flex; gap: 12px;
          align-items: center; flex-wrap: wrap; }
 header h1 { font-size: 15px; margin: 0; }
 #search { width: 220px; padding: 3px 6px; }
 .legend span { display: inline-block; padding: 1px 6px; margin-right: 4px; border: 1px solid #999; border-radius: 3px; }
 #error { display: none; background: #ffebee; color: #b71c1c; padding: 6px 10px; border-bottom: 1px solid #e57373;
          white-space: pre-wrap; font-family: monospace; max-height: 8em; overflow: auto; }
 main { flex: 1; display: flex; min-height: 0; }
 #cy { flex: 1; min-width: 0; }
 #details { width: 320px; border-left: 1px solid #ccd; padding: 8px; overflow: auto; font-family: monospace;
            font-size: 12px; white-space: pre-wrap; }
</style></head>
<body>
<!-- Drawn by spacegraph (harness/graph/visualize.py). Vendored libraries: @LIBINFO@ -->
<header><h1 id="title"></h1>
 <input id="search" type="search" placeholder="search components, classes, devices, variables">
 <span id="matches"></span>
 <button id="expand-all" type="button">expand all</button><button id="collapse-all" type="button">collapse</button>
 <span class="legend" id="legend"></span></header>
<div id="error"></div>
<main><div id="cy"></div><div id="details">Click a scope to expand or collapse it; click a component or an
edge for its details.</div></main>
@LIBRARIES@
<script type="application/json" id="graph-data">@DATA@</script>
<script>
@APP@
</script>
</body></html>
"""

_APP_JS = r"""
(function () {
  'use strict';
  cytoscape.use(cytoscapeFcose);
  const data = JSON.parse(document.getElementById('graph-data').textContent);
  document.getElementById('title').textContent = data.title;
  document.title = data.title;
  if (data.error) {
    const box = document.getElementById('error');
    box.style.display = 'block';
    box.textContent = 'BUILD FAILED' + (data.failed ? ' in ' + data.failed : '') + ': ' + data.error;
  }
  const legend = document.getElementById('legend');
  data.devices.forEach(function (d) {
    const s = document.createElement('span');
    s.style.background = d.color; s.textContent = 'device ' + d.device; legend.appendChild(s);
  });
  const failedKey = document.createElement('span');
  failedKey.style.background = '#ff8a80'; failedKey.textContent = 'failed'; legend.appendChild(failedKey);

  const cy = cytoscape({
    container: document.getElementById('cy'),
    elements: [],
    style: [
      { selector: 'node', style: { 'label': 'data(label)', 'background-color': 'data(color)', 'shape': 'round-rectangle',
          'border-width': 1, 'border-color': '#7a8699', 'font-size': 11, 'text-valign': 'center', 'text-halign': 'center',
          'width': 'data(width)', 'height': 26, 'padding': '8px' } },
      { selector: 'node[kind = "api"]', style: { 'shape': 'tag', 'border-color': '#333' } },
      { selector: ':parent', style: { 'text-valign': 'top', 'text-halign': 'center', 'background-opacity': 0.35,
          'padding': '14px' } },
      { selector: 'node.collapsed', style: { 'border-width': 3, 'border-style': 'double', 'min-width': 60,
          'min-height': 24 } },
      { selector: 'node[status = "failed"]', style: { 'border-color': '#c62828', 'border-width': 4 } },
      { selector: 'node[status = "not built"], node[status = "unused"]', style: { 'border-style': 'dashed',
          'color': '#666' } },
      { selector: 'node.match', style: { 'border-color': '#ff6f00', 'border-width': 5, 'underlay-color': '#ffca28',
          'underlay-opacity': 0.6, 'underlay-padding': 6 } },
      { selector: 'edge', style: { 'label': 'data(label)', 'font-size': 9, 'curve-style': 'bezier',
          'target-arrow-shape': 'triangle', 'width': 1.5, 'line-color': '#5c6bc0', 'target-arrow-color': '#5c6bc0',
          'text-background-color': '#fff', 'text-background-opacity': 0.8, 'text-rotation': 'autorotate' } },
      { selector: 'edge.proxy', style: { 'line-style': 'dashed', 'line-color': '#9fa8da', 'target-arrow-color': '#9fa8da' } },
      { selector: ':selected', style: { 'overlay-color': '#1e88e5', 'overlay-opacity': 0.2 } }
    ],
    layout: { name: 'preset' }
  });

  // Collapsing a scope takes its descendants out of the graph (a compound node without children
  // is drawn as a plain node); calls into it are then drawn to it as dashed proxy edges.
  const nodeData = {};
  data.elements.nodes.forEach(function (n) {
    nodeData[n.data.id] = n.data;
    n.data.width = Math.max(50, 7 * n.data.label.length + 12);
  });
  const collapsed = new Set();
  let query = '';
  function matching() {  // ids of the components the search box text matches
    if (!query) { return []; }
    return data.elements.nodes.filter(function (n) {
      const d = n.data;
      return [d.id, d.cls, d.device, (d.variables || []).join(' ')].join(' ').toLowerCase().indexOf(query) >= 0;
    }).map(function (n) { return n.data.id; });
  }
  function collapseDeep() {
    data.elements.nodes.forEach(function (n) {
      if (n.data.kind === 'scope' && n.data.depth >= 1) { collapsed.add(n.data.id); }
    });
  }
  collapseDeep();
  function ancestors(id) {
    const out = [];
    let p = nodeData[id].parent;
    while (p !== undefined) { out.push(p); p = nodeData[p].parent; }
    return out;
  }
  function visible(id) {
    return ancestors(id).every(function (a) { return !collapsed.has(a); });
  }
  function shown(id) {  // the node itself or its outermost collapsed ancestor
    let s = id;
    ancestors(id).forEach(function (a) { if (collapsed.has(a)) { s = a; } });
    return s;
  }
  function refresh() {
    const nodes = data.elements.nodes.filter(function (n) { return visible(n.data.id); })
      .sort(function (a, b) { return (a.data.depth || 0) - (b.data.depth || 0); })
      .map(function (n) { return { group: 'nodes', data: n.data, classes: collapsed.has(n.data.id) ? 'collapsed' : '' }; });
    const edges = [], proxies = {};
    data.elements.edges.forEach(function (e) {
      const s = shown(e.data.source), t = shown(e.data.target);
      if (s === e.data.source && t === e.data.target) {
        edges.push({ group: 'edges', data: e.data });
      } else if (s !== t) {
        const key = s + '->' + t;
        if (!proxies[key]) { proxies[key] = { source: s, target: t, labels: [] }; }
        if (proxies[key].labels.indexOf(e.data.label) < 0) { proxies[key].labels.push(e.data.label); }
      }
    });
    Object.keys(proxies).forEach(function (k, i) {
      const p = proxies[k];
      edges.push({ group: 'edges', classes: 'proxy', data: { id: 'proxy' + i, source: p.source, target: p.target,
        label: p.labels.join(', '), text: 'calls into the collapsed scope: ' + p.labels.join(', ') } });
    });
    cy.batch(function () {
      cy.elements().remove();
      cy.add(nodes.concat(edges));
    });
    cy.layout({ name: 'fcose', animate: false, randomize: true, quality: 'proof', nodeDimensionsIncludeLabels: true,
      idealEdgeLength: function () { return 110; }, nodeRepulsion: function () { return 9000; },
      nestingFactor: 0.3, padding: 20 }).run();
    matching().forEach(function (id) { cy.getElementById(id).addClass('match'); });
    cy.fit(undefined, 30);
  }

  function details(el) {
    const d = el.data();
    let lines;
    if (el.isEdge()) {
      lines = [d.text || d.label];
      if (d.roots) { lines.push('', 'in root API: ' + d.roots.join(', ')); }
    } else if (d.kind === 'api') {
      lines = ['the root API: edges from here are the root API methods'];
    } else {
      lines = [d.id, 'class ' + d.cls, 'device ' + d.device, 'status ' + d.status];
      if (d.tower) { lines.push('tower ' + d.tower); }
      lines.push('API methods: ' + (d.apis.join(', ') || '-'));
      const ins = Object.keys(d.inputs);
      lines.push('', 'input spaces:' + (ins.length ? '' : ' -'));
      ins.forEach(function (k) { lines.push('  ' + k + ': ' + d.inputs[k]); });
      lines.push('', 'variables:' + (d.variables.length ? '' : ' -'));
      d.variables.forEach(function (v) { lines.push('  ' + v); });
    }
    document.getElementById('details').textContent = lines.join('\n');
  }

  function toggle(id) {
    if (!nodeData[id] || nodeData[id].kind !== 'scope') { return false; }
    if (collapsed.has(id)) { collapsed.delete(id); } else { collapsed.add(id); }
    refresh();
    return true;
  }

  cy.on('tap', 'node', function (evt) {
    const n = evt.target;
    details(n);
    // after cytoscape has finished with this tap (refresh replaces the tapped element)
    if (n.data('kind') === 'scope') { const id = n.id(); setTimeout(function () { toggle(id); }, 0); }
  });
  cy.on('tap', 'edge', function (evt) { details(evt.target); });

  function search(text) {
    query = text.trim().toLowerCase();
    const hits = matching();
    hits.forEach(function (id) { ancestors(id).forEach(function (a) { collapsed.delete(a); }); });
    refresh();
    document.getElementById('matches').textContent = query ? hits.length + ' match' + (hits.length === 1 ? '' : 'es') : '';
  }
  document.getElementById('search').addEventListener('input', function (e) { search(e.target.value); });
  document.getElementById('expand-all').addEventListener('click', function () { collapsed.clear(); refresh(); });
  document.getElementById('collapse-all').addEventListener('click', function () { collapseDeep(); refresh(); });

  refresh();
  window.spacegraphView = {
    cy: cy, toggle: toggle, search: search,
    isShown: function (id) { return cy.getElementById(id).nonempty(); },
    isCollapsed: function (id) { return collapsed.has(id); }
  };
})();
"""
