"""Assembly: root API methods traced once into a backend-free registry and component graph."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import harness
from harness.graph import AssemblyError, Component, api, assemble, graph_fn
from harness.graph.records import Record

HARNESS_ROOT = str(Path(harness.__file__).resolve().parents[1])


class Scale(Component):
    """A leaf: one graph function; counts how often its API body runs."""

    def __init__(self, scope: str = "scale") -> None:
        super().__init__(scope=scope)
        self.api_runs = 0

    @api
    def apply(self, x):
        self.api_runs += 1
        return self._graph_fn_scale(x)

    @graph_fn
    def _graph_fn_scale(self, F, x):
        return x * 2.0

    def not_api(self, x):
        return self._graph_fn_scale(x)


class Pair(Component):
    """Two leaves in sequence."""

    def __init__(self, scope: str = "pair") -> None:
        super().__init__(Scale("first"), Scale("second"), scope=scope)

    @api
    def apply(self, x):
        return self.sub_components["second"].apply(self.sub_components["first"].apply(x))


class Root(Component):
    """Three levels: root -> pair -> first/second, and root -> head."""

    def __init__(self) -> None:
        super().__init__(Pair(), Scale("head"), scope="root")
        self.api_runs = {"forward": 0, "both": 0}

    @api
    def forward(self, x):
        self.api_runs["forward"] += 1
        return self.sub_components["head"].apply(self.sub_components["pair"].apply(x))

    @api
    def both(self, x, y):
        self.api_runs["both"] += 1
        return {"x": self.sub_components["head"].apply(x), "y": (self._graph_fn_add(x, y),)}

    @graph_fn
    def _graph_fn_add(self, F, x, y):
        return x + y


def test_each_root_api_method_is_traced_once():
    root = Root()
    assembly = assemble(root)
    assert set(assembly.traces) == {"forward", "both"}
    assert root.api_runs == {"forward": 1, "both": 1}
    # head is called once from each root method; each call is traced once.
    assert root.sub_components["head"].api_runs == 2
    assert root.sub_component("pair/first").api_runs == 1


def test_assemble_only_named_methods():
    root = Root()
    assembly = assemble(root, methods=["both"])
    assert list(assembly.traces) == ["both"]
    assert root.api_runs == {"forward": 0, "both": 1}


def test_api_registry_records_args_steps_and_outputs():
    assembly = assemble(Root())
    forward = assembly.traces["forward"]
    assert forward.arg_names == ("x",)
    assert set(forward.args) == {"x"} and isinstance(forward.args["x"], Record)
    assert [(s.component.global_scope, s.spec.name) for s in forward.steps] == [
        ("root/pair/first", "_graph_fn_scale"),
        ("root/pair/second", "_graph_fn_scale"),
        ("root/head", "_graph_fn_scale"),
    ]
    # Each step consumes the previous step's output record; the trace returns the last one.
    assert forward.steps[0].args == (forward.args["x"],)
    assert forward.steps[1].args == (forward.steps[0].outputs[0],)
    assert forward.outputs is forward.steps[2].outputs[0]
    assert forward.steps[1].where == (
        "root.forward -> root/pair.apply -> root/pair/second.apply -> root/pair/second._graph_fn_scale")

    both = assembly.traces["both"]
    assert both.arg_names == ("x", "y")
    assert set(both.outputs) == {"x", "y"} and isinstance(both.outputs["y"], tuple)
    assert both.outputs["y"][0] is both.steps[-1].outputs[0]
    assert [c.method for c in both.calls] == ["both", "apply"]


def test_component_graph_edges():
    assembly = assemble(Root())
    assert assembly.edges() == [
        ("root", "root/pair", "apply"),
        ("root/pair", "root/pair/first", "apply"),
        ("root/pair", "root/pair/second", "apply"),
        ("root", "root/head", "apply"),
    ]
    assert [c.global_scope for c in assembly.components()] == [
        "root", "root/pair", "root/head", "root/pair/first", "root/pair/second"
    ]


def test_defaults_of_root_arguments_can_be_fixed_as_constants():
    class WithDefault(Component):
        def __init__(self):
            super().__init__(scope="wd")

        @api
        def apply(self, x, factor=3):
            return self._graph_fn_mul(x, factor)

        @graph_fn
        def _graph_fn_mul(self, F, x, factor):
            return x * factor

    trace = assemble(WithDefault(), fixed={"factor": 3}).traces["apply"]
    assert set(trace.args) == {"x"} and trace.constants == {"factor": 3}
    assert trace.steps[0].args[1] == 3


def test_assembly_imports_no_backend():
    code = textwrap.dedent("""
        import sys
        import harness.graph, harness.spaces
        from harness.graph import Component, api, graph_fn, assemble

        class Leaf(Component):
            def __init__(self):
                super().__init__(scope="leaf")
            @api
            def apply(self, x):
                return self._graph_fn_f(x)
            @graph_fn
            def _graph_fn_f(self, F, x):
                return F.tanh(x)

        assembly = assemble(Leaf())
        assert list(assembly.traces) == ["apply"]
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "torch", "keras", "jax"))
        print("LOADED", loaded)
    """)
    # The child imports the same harness as this process (the checkout, or an installed package).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([HARNESS_ROOT, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], cwd=HARNESS_ROOT, capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stdout, proc.stdout


# ---- assembly errors ------------------------------------------------------------------------------


def test_calling_a_non_api_method_that_uses_a_graph_fn_is_refused():
    class CallsHelper(Component):
        def __init__(self):
            super().__init__(Scale("sub"), scope="root")

        @api
        def apply(self, x):
            return self.sub_components["sub"].not_api(x)

    with pytest.raises(AssemblyError) as info:
        assemble(CallsHelper())
    msg = str(info.value)
    assert "root.apply" in msg and "root/sub" in msg and "_graph_fn_scale" in msg
    assert "not an API method" in msg and "not_api" in msg


def _routing_root(body):
    class Routing(Component):
        def __init__(self):
            super().__init__(Scale("sub"), scope="root")

        @api
        def apply(self, x):
            return body(self, x)

    return Routing()


@pytest.mark.parametrize("body, what", [
    (lambda self, x: self.sub_components["sub"].apply(x) + 1.0, "the operator +"),
    (lambda self, x: 2.0 * self.sub_components["sub"].apply(x), "the operator *"),
    (lambda self, x: -x, "the operator unary -"),
    (lambda self, x: x if x else x, "a truth test"),
    (lambda self, x: len(x), "len()"),
    (lambda self, x: x[0], "indexing"),
    (lambda self, x: tuple(self.sub_components["sub"].apply(x)), "unpacking/iteration"),
    (lambda self, x: x < 0.0, "the operator <"),
], ids=["add", "rmul", "neg", "if", "len", "index", "unpack", "compare"])
def test_computing_on_records_in_an_api_method_is_refused(body, what):
    with pytest.raises(AssemblyError) as info:
        assemble(_routing_root(body))
    msg = str(info.value)
    assert what in msg and "during assembly" in msg and "@graph_fn" in msg


def test_an_api_method_returning_a_python_value_is_refused():
    with pytest.raises(AssemblyError, match=r"API method root\.apply returned float 1\.0"):
        assemble(_routing_root(lambda self, x: 1.0))


def test_calling_an_api_method_directly_is_refused():
    with pytest.raises(AssemblyError) as info:
        Scale().apply(np.ones(3))
    msg = str(info.value)
    assert "Scale.apply() was called directly" in msg and "execute('apply'" in msg
    with pytest.raises(AssemblyError, match=r"graph function Scale\._graph_fn_scale was called outside assembly"):
        Scale()._graph_fn_scale(np.ones(3))


def test_calling_a_component_outside_the_tree_is_refused():
    stranger = Scale("stranger")
    with pytest.raises(AssemblyError, match=r"stranger.*not a sub-component of the root 'root'.*add_components"):
        assemble(_routing_root(lambda self, x: stranger.apply(x)))


def test_unknown_root_method_lists_registered_ones():
    with pytest.raises(AssemblyError, match=r"no API method\(s\) \['nope'\]; registered: \['both', 'forward'\]"):
        assemble(Root(), methods=["nope"])


def test_api_argument_errors_name_the_method():
    with pytest.raises(AssemblyError, match=r"root/sub\.apply has no argument 'z'; its arguments are \['x'\]"):
        assemble(_routing_root(lambda self, x: self.sub_components["sub"].apply(z=x)))
    with pytest.raises(AssemblyError, match=r"API method root/sub\.apply takes 1 argument\(s\) \['x'\]; got 2"):
        assemble(_routing_root(lambda self, x: self.sub_components["sub"].apply(x, x)))


def test_declaration_errors():
    with pytest.raises(TypeError, match=r"\*xs.*is not supported; take a named argument"):
        class Star(Component):
            @api
            def apply(self, *xs):
                return xs
    with pytest.raises(ValueError, match="scope must be a non-empty name"):
        Scale("a/b")
    with pytest.raises(AssemblyError, match="declares no @api methods"):
        assemble(Component(scope="empty"))
