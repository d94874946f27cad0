"""`spacegraph graph`: drawings of spec files and class paths, a failed build drawn, TensorBoard export."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

from harness.graph import visualize
from spacegraph.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(REPO, "specs", "components", "nn_network_mlp.yaml")
MLP_SCOPES = ("network/dense_0", "network/dense_1")

FAILING = '''
from harness.graph import Component, api, graph_fn


class Inner(Component):
    def __init__(self):
        super().__init__(scope="inner")

    def create_variables(self, input_spaces):
        raise RuntimeError("inner cannot make its variables")

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        return x


class Outer(Component):
    def __init__(self):
        super().__init__(Inner(), scope="outer")

    @api
    def apply(self, x):
        return self.sub_components["inner"].apply(x)
'''


def test_a_spec_file_is_drawn_as_dot_and_html(tmp_path, capsys):
    dot = tmp_path / "mlp.dot"
    assert main(["graph", MLP, "--backend", "torch", "--format", "dot", "--out", str(dot)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {dot}" in out and "3 components" in out
    text = dot.read_text()
    for scope in MLP_SCOPES:
        assert f'"{scope}" [' in text
    assert "apply(inputs: float32[B,T,5]) -> float32[B,T,3]" in text
    html = tmp_path / "mlp.html"
    assert main(["graph", MLP, "--backend", "tf", "--out", str(html)]) == 0  # html is the default
    assert '"id": "network/dense_1"' in html.read_text()


def test_a_failed_build_is_drawn_and_the_command_says_where(tmp_path, capsys, monkeypatch):
    (tmp_path / "failing_graph_mod.py").write_text(FAILING)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "failed.dot"
    rc = main(["graph", "failing_graph_mod.Outer", "--space", "x=float32[B,2]", "--backend", "torch",
               "--format", "dot", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "the build failed in outer/inner" in err and "inner cannot make its variables" in err
    assert f"drawn in {out}" in err
    text = out.read_text()
    assert f'fillcolor="{visualize.FAILED_COLOR}"' in text and '"outer" -> "outer/inner"' in text


def test_svg_without_graphviz_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(visualize.shutil, "which", lambda name: None)
    rc = main(["graph", MLP, "--backend", "torch", "--format", "svg", "--out", str(tmp_path / "g.svg")])
    assert rc == 2
    assert "apt-get install graphviz" in capsys.readouterr().err
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")
def test_png_is_rendered(tmp_path):
    out = tmp_path / "mlp.png"
    assert main(["graph", MLP, "--backend", "torch", "--format", "png", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _graph_node_names(directory: str) -> list[str]:
    """Node names of the graph in a TensorBoard log directory (read with TensorFlow's event reader)."""
    import glob

    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    names = []
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.graph_def:
                graph = graph_pb2.GraphDef()
                graph.ParseFromString(event.graph_def)
                names += [n.name for n in graph.node]
    return names


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_tensorboard_export_keeps_component_scopes(tmp_path, capsys, backend):
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("reading the event files needs tensorflow")
    if backend == "torch" and importlib.util.find_spec("tensorboard") is None:
        pytest.skip("torch.utils.tensorboard needs the tensorboard package (pip install tensorboard)")
    out = tmp_path / "tb"
    assert main(["graph", MLP, "--backend", backend, "--format", "tensorboard", "--out", str(out)]) == 0
    assert f"tensorboard --logdir {out}" in capsys.readouterr().out
    names = _graph_node_names(str(out / "apply"))
    assert names, "no graph in the event file"
    if backend == "tf":
        for scope in MLP_SCOPES:
            assert any(n.startswith(f"{scope}/_graph_fn_apply/") for n in names), names
    else:  # torch.utils.tensorboard names nodes by the module path: Root/Scope[network]/Scope[dense_0]/...
        for scope in ("Scope[dense_0]", "Scope[dense_1]"):
            assert any(scope in n for n in names), names
