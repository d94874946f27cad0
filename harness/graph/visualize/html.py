"""The self-contained HTML drawing of a `GraphModel` (`to_html`), around the vendored cytoscape.js.

The JavaScript libraries are package data of `harness.graph` (``harness/graph/assets/``, each with
its LICENSE.<name> beside it) and are inlined into the page.

Names in a drawing (class names, devices, variables, errors quoting config values, the title made
from a file name) are data, never markup: the page template is filled in one pass (`fill_template`,
so nothing substituted is scanned for markers again), the graph travels as JSON in a
``<script type="application/json">`` element escaped for HTML (`script_json`), text goes through
`html_text`, and the app puts names into the page with ``textContent`` and cytoscape's canvas labels.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any, Mapping

from harness.graph.visualize.model import API_NODE, FAILED_COLOR, GraphModel

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


def _asset(name: str) -> str:
    return resources.files("harness.graph").joinpath("assets", name).read_text(encoding="utf-8")


#: A template marker: ``@NAME@`` (capitals only).
_MARKER = re.compile(r"@([A-Z]+)@")

#: What `script_json` escapes beyond JSON itself: ``<`` and ``>`` (no ``</script>`` or ``<!--`` can end or
#: change the script element), ``&``, and ``@`` (no template marker survives in data).
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "@": "\\u0040"}


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``@NAME@`` replaced by ``values[NAME]``, in one pass.

    The template is split once on its markers, so a value that contains a marker (or anything
    else) is never scanned again: no substitution can reach into another's output.

    Raises:
        ValueError: when the template's markers and the keys of ``values`` differ (a programming error).
    """
    pieces = _MARKER.split(template)
    names = pieces[1::2]
    if set(names) != set(values):
        raise ValueError(f"template markers {sorted(set(names))} do not match the values given {sorted(values)}")
    pieces[1::2] = [values[name] for name in names]
    return "".join(pieces)


def html_text(value: str) -> str:
    """``value`` escaped for HTML text or a quoted attribute; ``@`` too, so no template marker survives."""
    return html.escape(value, quote=True).replace("@", "&#64;")


def script_json(value: Any) -> str:
    """``value`` as JSON to put inside ``<script type="application/json">``, read back with ``JSON.parse``.

    Only ASCII comes out (``ensure_ascii``: U+2028, U+2029 and every other non-ASCII character as
    ``\\uXXXX``); ``<``, ``>``, ``&`` and ``@`` are written as ``\\u003c`` etc., which is the same JSON.

    Raises:
        ValueError: for NaN or infinity, which ``JSON.parse`` would refuse.
    """
    text = json.dumps(value, ensure_ascii=True, allow_nan=False)
    return re.sub(r"[<>&@]", lambda m: _SCRIPT_ESCAPES[m.group()], text)


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
    info = "; ".join(f"{lib['name']} {lib['version']} ({lib['license']}, assets/LICENSE.{lib['name']}) from "
                     f"{lib['source']} sha256 {lib['sha256']}" for lib in JS_LIBRARIES)
    libraries = "\n".join(f"<script>/* {lib['name']} {lib['version']}, {lib['license']} license */\n"
                          f"{_asset(lib['file'])}\n</script>" for lib in JS_LIBRARIES)
    return fill_template(_HTML, {"TITLE": html_text(model.title), "LIBINFO": html_text(info),
                                 "LIBRARIES": libraries, "DATA": script_json(payload), "APP": _APP_JS})


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
<!-- Drawn by spacegraph (harness/graph/visualize). Vendored libraries: @LIBINFO@ -->
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
