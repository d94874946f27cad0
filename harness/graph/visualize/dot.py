"""Graphviz drawings of a `GraphModel`: `to_dot` writes DOT (one cluster per scope), `render`
turns DOT into SVG/PNG with the ``dot`` program."""

from __future__ import annotations

import shutil
import subprocess

from harness.graph.visualize.model import API_NODE, FAILED_COLOR, ComponentNode, GraphModel


class GraphvizMissing(RuntimeError):
    """The ``dot`` program is needed for SVG/PNG and is not installed."""


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
