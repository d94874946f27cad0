"""Drawings of component graphs (harness/graph/visualize/): DOT with every component and API edge,
build errors drawn as far as the build got, the self-contained HTML in a real headless browser."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import AssemblyError, BuildError, Component, api, graph_fn
from harness.graph import visualize
from harness.graph.visualize import API_NODE, GraphModel, GraphvizMissing, to_dot, to_html, write
from suites.html_checks import browser  # noqa: F401  (the headless Chromium fixture)

X = "float32[B,3]"


class Leaf(Component):
    """A dense layer without bias; ``fail`` plants an error in create_variables or the graph function."""

    def __init__(self, units: int, scope: str, fail: str | None = None, device: str | None = None) -> None:
        super().__init__(scope=scope, device=device)
        self.units, self.fail = units, fail

    def create_variables(self, input_spaces):
        if self.fail == "variables":
            raise RuntimeError("planted failure in create_variables")
        self.get_variable("kernel", (input_spaces["x"].shape[-1], self.units), initializer="ones")

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        if self.fail == "graph_fn":
            raise ValueError("planted failure in the graph function")
        return F.matmul(x, self.variables["kernel"])


class Mid(Component):
    def __init__(self, scope: str, fail: str | None = None) -> None:
        super().__init__(Leaf(4, "first"), Leaf(2, "second", fail=fail), scope=scope)

    @api
    def apply(self, x):
        return self.sub_components["second"].apply(self.sub_components["first"].apply(x))


class Root(Component):
    """Three levels: root -> body (Mid) -> first, second; root -> head (on another device)."""

    def __init__(self, fail: str | None = None) -> None:
        super().__init__(Mid("body", fail=fail), Leaf(3, "head", device="cpu"), scope="root")

    @api
    def forward(self, x):
        return self.sub_components["body"].apply(x)

    @api
    def features(self, x):
        return self.sub_components["head"].apply(x)


class Sloppy(Component):
    """Calls a sub-component's graph function directly: an assembly error."""

    def __init__(self) -> None:
        super().__init__(Leaf(2, "inner"), scope="sloppy")

    @api
    def apply(self, x):
        return self.sub_components["inner"]._graph_fn_apply(x)


COMPONENTS = {"root", "root/body", "root/body/first", "root/body/second", "root/head"}
EDGES = {(API_NODE, "root", "forward"), (API_NODE, "root", "features"), ("root", "root/body", "apply"),
         ("root/body", "root/body/first", "apply"), ("root/body", "root/body/second", "apply"),
         ("root", "root/head", "apply")}


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name


def parse_dot(text: str) -> tuple[dict[str, dict], set[tuple[str, str, str]], dict[str, str | None]]:
    """Nodes (with attributes), edges ``(source, target, method)`` and each node's enclosing cluster label,
    read with pydot (a DOT parser), not with the writer's own code."""
    pydot = pytest.importorskip("pydot", reason="pydot parses the DOT (pip install pydot)")
    graphs = pydot.graph_from_dot_data(text)
    assert graphs and len(graphs) == 1, "the DOT text does not parse"
    nodes, edges, cluster_of = {}, set(), {}

    def visit(graph, cluster: str | None) -> None:
        for node in graph.get_nodes():
            name = _unquote(node.get_name())
            if name in ("node", "edge", "graph"):
                continue
            nodes[name] = {k: _unquote(str(v)) for k, v in node.get_attributes().items()}
            cluster_of[name] = cluster
        for edge in graph.get_edges():
            label = _unquote(str(edge.get_attributes().get("label", "")))
            edges.add((_unquote(edge.get_source()), _unquote(edge.get_destination()), label.split("(")[0]))
        for sub in graph.get_subgraphs():
            visit(sub, _unquote(str(sub.get_attributes().get("label", sub.get_name()))))

    visit(graphs[0], None)
    return nodes, edges, cluster_of


def drawing_problems(text: str, components: set[str], edges: set[tuple[str, str, str]]) -> list[str]:
    """What the DOT drawing lacks: a component, an API edge, or a component outside its parent's cluster."""
    nodes, found, cluster_of = parse_dot(text)
    problems = [f"component {c} is not drawn" for c in sorted(components - set(nodes))]
    problems += [f"API edge {e} is not drawn" for e in sorted(edges - found)]
    for c in sorted(components & set(nodes)):
        parent = c.rsplit("/", 1)[0] if "/" in c else None
        has_kids = any(o.startswith(c + "/") for o in components)
        expected = c if has_kids else parent
        if cluster_of.get(c) != expected:
            problems.append(f"component {c} is in cluster {cluster_of.get(c)!r}, not {expected!r}")
    return problems


@pytest.fixture
def built(backend):
    return GraphExecutor(Root(), {"x": X}, backend=backend, seed=0)


def test_dot_draws_every_component_and_api_edge_of_a_three_level_graph(built):
    model = GraphModel.from_assembly(built.assembly)
    text = to_dot(model)
    assert drawing_problems(text, COMPONENTS, EDGES) == []
    nodes, _, _ = parse_dot(text)
    assert "kernel: float32[3, 4]" in nodes["root/body/first"]["label"]   # variables with shapes
    assert "kernel: float32[4, 2]" in nodes["root/body/second"]["label"]
    assert "device cpu" in nodes["root/head"]["label"]
    assert nodes["root/head"]["fillcolor"] != nodes["root/body/first"]["fillcolor"]  # colour by device
    # edges carry input and output spaces
    assert "apply(x: float32[B,4]) -> float32[B,2]" in text
    assert "forward(x: float32[B,3]) -> float32[B,2]" in text
    assert {c.status for c in model.components.values()} == {"built"}


@pytest.mark.parametrize("break_it", ["drop an edge", "drop a component", "flatten the clusters"])
def test_the_drawing_check_fails_on_a_broken_drawing(built, break_it):
    text = to_dot(GraphModel.from_assembly(built.assembly))
    if break_it == "drop an edge":
        broken = "\n".join(line for line in text.splitlines() if not line.strip().startswith('"root/body" -> '))
        expected = "API edge ('root/body', 'root/body/first', 'apply') is not drawn"
    elif break_it == "drop a component":
        broken = "\n".join(line for line in text.splitlines() if not line.strip().startswith('"root/head" ['))
        expected = "component root/head is not drawn"
    else:
        broken = "\n".join(line for line in text.splitlines()
                           if not re.match(r"\s*(subgraph cluster_\d+ \{|label=.*fontsize=11;|\}$)", line)) + "\n}\n"
        expected = "component root/body/first is in cluster None, not 'root/body'"
    assert expected in drawing_problems(broken, COMPONENTS, EDGES)


@pytest.mark.parametrize("fail, error", [("variables", "planted failure in create_variables"),
                                         ("graph_fn", "planted failure in the graph function")])
def test_a_failed_build_is_drawn_as_far_as_it_got(backend, fail, error):
    with pytest.raises(BuildError) as info:
        GraphExecutor(Root(fail=fail), {"x": X}, backend=backend)
    model = GraphModel.from_exception(info.value)
    assert model is not None and model.failed == "root/body/second"
    assert error in model.error
    status = {p: c.status for p, c in model.components.items()}
    assert status["root/body/second"] == "failed" and status["root/body/first"] == "built"
    text = to_dot(model)
    assert drawing_problems(text, COMPONENTS, EDGES) == []
    nodes, _, _ = parse_dot(text)
    assert nodes["root/body/second"]["fillcolor"] == visualize.FAILED_COLOR
    assert "BUILD FAILED in root/body/second" in text
    if fail == "graph_fn":  # its output space is unknown: the edge says so
        assert "apply(x: float32[B,4]) -> ?" in text


def test_a_stuck_build_marks_the_components_without_spaces(backend):
    class NeedsAll(Leaf):
        @api(must_be_complete=True)
        def apply(self, x):
            return self._graph_fn_apply(x)

    class Loop(Component):  # b's input comes from a's output and a's from b's: nothing starts
        def __init__(self):
            super().__init__(NeedsAll(2, "a"), scope="loop")

        @api
        def run(self, x):
            return self.sub_components["a"].apply(self.sub_components["a"].apply(x))

    with pytest.raises(BuildError) as info:
        GraphExecutor(Loop(), {"x": "float32[B,2]"}, backend=backend)
    model = GraphModel.from_exception(info.value)
    if "cannot go on" in model.error:
        assert model.components["loop/a"].status == "failed"
    else:  # a space mismatch of its two calls: the component is named as the failing one
        assert model.failed == "loop/a"


def test_an_assembly_error_marks_the_calling_component(backend):
    with pytest.raises(AssemblyError) as info:
        GraphExecutor(Sloppy(), {"x": X}, backend=backend)
    model = GraphModel.from_exception(info.value)
    assert model.failed == "sloppy/inner"
    assert set(model.components) == {"sloppy", "sloppy/inner"}
    assert "components talk to each other only through API methods" in model.error


def test_an_error_without_a_graph_gives_no_model():
    try:
        raise ValueError("not a build")
    except ValueError as exc:
        assert GraphModel.from_exception(exc) is None


def test_html_is_one_self_contained_file(built, tmp_path):
    text = to_html(GraphModel.from_assembly(built.assembly))
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)  # nothing loaded from elsewhere
    assert "cytoscape 3.34.4" in text and "cytoscape-fcose 2.2.0" in text
    assets = os.path.join(os.path.dirname(os.path.dirname(visualize.__file__)), "assets")  # harness/graph/assets
    for lib in visualize.JS_LIBRARIES:
        assert os.path.exists(os.path.join(assets, f"LICENSE.{lib['name']}"))
    assert '"id": "root/body/first"' in text


def test_svg_without_graphviz_says_how_to_install_it(built, tmp_path, monkeypatch):
    model = GraphModel.from_assembly(built.assembly)
    monkeypatch.setattr(visualize.shutil, "which", lambda name: None)
    with pytest.raises(GraphvizMissing, match="apt-get install graphviz"):
        write(model, "svg", str(tmp_path / "g.svg"))
    assert not (tmp_path / "g.svg").exists()
    assert drawing_problems((tmp_path / "g.dot").read_text() if write(model, "dot", str(tmp_path / "g.dot")) else "",
                            COMPONENTS, EDGES) == []


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")
def test_svg_is_rendered_with_every_component(built, tmp_path):
    path = write(GraphModel.from_assembly(built.assembly), "svg", str(tmp_path / "g.svg"))
    svg = open(path, encoding="utf-8").read()
    for c in COMPONENTS:
        assert f"<title>{c}</title>" in svg


# ---- the HTML in a real headless browser -----------------------------------------------------------

def _click_node(driver, node_id: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_element(By.ID, "cy")
    # the middle of a plain node; for an expanded scope, just inside its top border (its middle may be a child)
    x, y = driver.execute_script("const n = window.spacegraphView.cy.getElementById(arguments[0]);"
                                 "const b = n.renderedBoundingBox({includeLabels: false});"
                                 "return n.isParent() ? [(b.x1 + b.x2) / 2, b.y1 + 4] : [(b.x1 + b.x2) / 2, (b.y1 + b.y2) / 2];",
                                 node_id)
    width, height = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];",
                                          canvas)
    ActionChains(driver).move_to_element_with_offset(canvas, int(x - width / 2), int(y - height / 2)).click().perform()


def test_html_opens_in_a_browser_and_a_scope_expands_on_click(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with pytest.raises(BuildError) as info:  # a failed build: the banner and the red component show too
        GraphExecutor(Root(fail="variables"), {"x": X}, backend="torch" if _has("torch") else "tf")
    path = write(GraphModel.from_exception(info.value), "html", str(tmp_path / "graph.html"))
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get("file://" + os.path.abspath(path))
    view = "return window.spacegraphView && window.spacegraphView.{}"
    WebDriverWait(browser, 10).until(lambda d: d.execute_script(view.format("isShown('root')")))
    shown = lambda node: browser.execute_script(view.format(f"isShown('{node}')"))  # noqa: E731
    assert shown("root") and shown("root/body") and shown("root/head") and shown(API_NODE)
    assert not shown("root/body/first") and not shown("root/body/second")  # deeper scopes start collapsed
    assert "BUILD FAILED in root/body/second" in browser.find_element(By.ID, "error").text

    _click_node(browser, "root/body")
    WebDriverWait(browser, 10).until(lambda d: shown("root/body/first"))
    assert shown("root/body/second")
    assert "class Mid" in browser.find_element(By.ID, "details").text

    _click_node(browser, "root/body")  # and collapses again
    WebDriverWait(browser, 10).until(lambda d: not shown("root/body/first"))

    search = browser.find_element(By.ID, "search")
    search.send_keys("second")
    WebDriverWait(browser, 10).until(lambda d: shown("root/body/second"))
    assert browser.execute_script(view.format("cy.getElementById('root/body/second').hasClass('match')"))
    assert browser.find_element(By.ID, "matches").text == "1 match"

    shot = os.environ.get("SPACEGRAPH_GRAPH_SCREENSHOT") or str(tmp_path / "graph_view.png")
    assert browser.save_screenshot(shot)
    problems = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert problems == []


def test_the_browser_check_sees_console_errors(browser, tmp_path):
    """The console check above can fail: a page with a script error is reported."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    browser.get_log("browser")
    browser.get("file://" + str(page))
    assert any(e["level"] == "SEVERE" and "undefinedFunction" in e["message"] for e in browser.get_log("browser"))


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
