"""The HTML graph view treats names as data: hostile component names, classes, devices, variables,
config values in a build error and a hostile title leave the page's structure intact (read with the
standard library's HTML parser) and show as text in a real headless browser, with no script of theirs run."""

from __future__ import annotations

import json
import os
import re

import pytest

from harness.graph.visualize import API_NODE, ApiEdge, ComponentNode, GraphModel, VariableInfo, to_html, write
from harness.graph.visualize.html import _APP_JS, _MARKER, JS_LIBRARIES, _asset, _elements, fill_template
from suites.html_checks import browser, parse_page  # noqa: F401  (browser: the headless Chromium fixture)

#: Names that would be markup, script or template markers if the page were not built from data.
HOSTILE = [
    "</script><script>window.__pwned=1</script>",
    "@LIBRARIES@<script>window.__pwned=2//",
    "@APP@", "@DATA@", "@TITLE@", "@LIBINFO@",
    '<img src=x onerror="window.__pwned=3">',
    "<!--<script>",
    "\"double' 'single\" `back`",
    "&lt;not an entity&gt; &amp; \u2028line\u2029separators",
]
TITLE = "@DATA@ </title><script>window.__pwned=4</script> @APP@"
ERROR = "ConfigError: 'lr' expects a number; got '<img src=x onerror=\"window.__pwned=5\">' @LIBRARIES@"


def hostile_model() -> GraphModel:
    """A root with one leaf per hostile name: the name is its scope, and in its class, device, variable,
    input space and the API method that calls it; the title and the build error are hostile too."""
    components = {"net": ComponentNode("net", "net", "Net", None, None, "built", api_methods=["run"])}
    edges = [ApiEdge(API_NODE, "net", "run", {"x": "float32[B,3]"}, "float32[B,2]", ["run"])]
    for i, name in enumerate(HOSTILE):
        path = f"net/{name}"
        status = "failed" if i == 0 else "built"
        components[path] = ComponentNode(path, name, f"Cls{name}", "net", f"dev{i}{name}", status,
                                         [VariableInfo(f"var{name}", (3, 2), "float32")], {name: f"space{name}"},
                                         [f"m{i}{name}"])
        edges.append(ApiEdge("net", path, f"m{i}{name}", {name: f"in{name}"}, f"out{name}", ["run"]))
    return GraphModel(TITLE, "net", components, edges, error=ERROR, failed=f"net/{HOSTILE[0]}")


def test_a_value_holding_a_marker_is_not_filled_again():
    assert fill_template("<a>@ONE@</a>@TWO@", {"ONE": "@TWO@", "TWO": "@ONE@"}) == "<a>@TWO@</a>@ONE@"
    with pytest.raises(ValueError, match=r"template markers \['ONE'\] do not match the values given \['TWO'\]"):
        fill_template("@ONE@", {"TWO": "x"})


def test_hostile_names_leave_the_page_structure_intact():
    model = hostile_model()
    text = to_html(model)
    page = parse_page(text)
    # the libraries, the data, the app: nothing more, nothing cut short
    assert len(page.scripts) == len(JS_LIBRARIES) + 2, [attrs for attrs, _ in page.scripts]
    for (attrs, content), lib in zip(page.scripts, JS_LIBRARIES):
        assert attrs == {} and _asset(lib["file"]) in content
    (data_attrs, data), (app_attrs, app) = page.scripts[-2:]
    assert data_attrs == {"type": "application/json", "id": "graph-data"}
    assert app_attrs == {} and app.strip() == _APP_JS.strip()
    # the JSON element holds no character that HTML could read as markup, and reads back to the same data
    assert not re.search("[<>&\u2028\u2029]", data), "the graph data is not escaped for a script element"
    loaded = json.loads(data)
    assert loaded["title"] == TITLE and loaded["error"] == ERROR and loaded["failed"] == model.failed
    assert loaded["elements"] == _elements(model)
    assert {n["data"]["label"] for n in loaded["elements"]["nodes"]} >= set(HOSTILE)
    # no markup from the names, no marker left, the title as text
    assert page.handler_attributes() == [] and page.tags("img") == []
    assert [tag for tag, _ in page.elements].count("title") == 1 and TITLE in page.text
    assert _MARKER.findall(text) == [], "a template marker is left in the page"


def test_hostile_names_show_as_text_in_a_browser_and_run_nothing(browser, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.support.ui import WebDriverWait

    model = hostile_model()
    path = write(model, "html", str(tmp_path / "hostile.html"))
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get("file://" + os.path.abspath(path))
    js = browser.execute_script
    WebDriverWait(browser, 30).until(lambda d: js("return document.readyState") == "complete")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 - raises when no alert is open
    assert js("return typeof window.__pwned") == "undefined", "a script from the names ran"
    WebDriverWait(browser, 30).until(lambda d: js("return !!window.spacegraphView"), "the app drew no graph")
    assert js("return document.scripts.length") == len(JS_LIBRARIES) + 2 and js("return document.images.length") == 0
    assert js("return Array.from(document.querySelectorAll('*')).flatMap(e => e.getAttributeNames())"
              ".filter(a => a.toLowerCase().startsWith('on'))") == []
    assert js("return document.getElementById('title').textContent") == TITLE
    assert js("return document.getElementById('error').textContent") == f"BUILD FAILED in {model.failed}: {ERROR}"
    legend = js("return document.getElementById('legend').textContent")
    for i, name in enumerate(HOSTILE):
        path = f"net/{name}"
        assert f"device dev{i}{name}" in legend
        # drawn, labelled with the name itself (cytoscape draws labels as canvas text)
        assert js("const n = window.spacegraphView.cy.getElementById(arguments[0]);"
                  "return n.nonempty() && n.visible() && n.style('label')", path) == name
        js("window.spacegraphView.cy.getElementById(arguments[0]).emit('tap')", path)
        details = js("return document.getElementById('details').textContent")
        assert details.startswith(path) and f"class Cls{name}" in details and f"var{name}: float32[3, 2]" in details
    assert js("return typeof window.__pwned") == "undefined"
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
