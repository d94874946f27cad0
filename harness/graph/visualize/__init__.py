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

Layout: `model` (the model), `dot` (DOT and Graphviz rendering), `html` (the HTML page; the
vendored libraries are package data in ``harness/graph/assets/``); `write` below picks one.
"""

from __future__ import annotations

import os
import shutil  # noqa: F401  (`visualize.shutil`: tests patch `shutil.which` through it)

from harness.graph.visualize.dot import GraphvizMissing, render, to_dot
from harness.graph.visualize.html import JS_LIBRARIES, to_html
from harness.graph.visualize.model import (
    API_NODE, DEFAULT_DEVICE_COLOR, DEVICE_COLORS, FAILED_COLOR, STATUSES, ApiEdge, ComponentNode, GraphModel,
    VariableInfo,
)

__all__ = [
    "API_NODE", "JS_LIBRARIES", "DEFAULT_DEVICE_COLOR", "DEVICE_COLORS", "FAILED_COLOR", "STATUSES",
    "GraphvizMissing", "VariableInfo", "ComponentNode", "ApiEdge", "GraphModel",
    "to_dot", "render", "to_html", "write",
]


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
