"""`forward`: a declared API method that only forwards equals the hand-written one.

Each comparison (API table, assembly, built graph and outputs) is a helper that
raises `AssertionError` on a difference; the ``broken`` tests monkeypatch the
forwarder (wrong method, wrong sub-component, lost defaults, renamed
arguments) and show that the same helper then fails.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import AssemblyError, Component, api, assemble, decorators, forward, graph_fn

X = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
SPACES = {"x": "float32[B,3]"}


class Leaf(Component):
    """``apply(x, scale=2.0) = (x @ kernel) * scale``; ``shift`` has the same arguments, another op."""

    def create_variables(self, input_spaces):
        self.kernel = self.get_variable("kernel", (input_spaces["x"].shape[-1], 2), initializer="glorot_uniform")

    @api
    def apply(self, x, scale=2.0):
        """Scales ``x @ kernel``."""
        return self._graph_fn_apply(x, scale)

    @api
    def shift(self, x, scale=2.0):
        return self._graph_fn_shift(x, scale)

    @api
    def norm(self):
        return self._graph_fn_norm()

    @graph_fn
    def _graph_fn_apply(self, F, x, scale):
        return F.matmul(x, self.kernel) * scale

    @graph_fn
    def _graph_fn_shift(self, F, x, scale):
        return F.matmul(x, self.kernel) + scale

    @graph_fn
    def _graph_fn_norm(self, F):
        return F.reduce_sum(F.abs(self.kernel))


class TripleLeaf(Leaf):
    """A swap-in with the same API: ``apply`` gives three times `Leaf.apply`."""

    @graph_fn
    def _graph_fn_apply(self, F, x, scale):
        return F.matmul(x, self.kernel) * scale * 3.0


class InputsLeaf(Component):
    """An ``apply`` with another argument name."""

    @api
    def apply(self, inputs):
        return self._graph_fn_id(inputs)

    @graph_fn
    def _graph_fn_id(self, F, inputs):
        return inputs


class HandWritten(Component):
    def __init__(self, scope="outer", spare=False):
        self.leaf = Leaf(scope="leaf")
        self.spare = Leaf(scope="spare")
        super().__init__(self.leaf, *([self.spare] if spare else []), scope=scope)

    @api
    def apply(self, x, scale=2.0):
        return self.leaf.apply(x, scale)

    @api
    def norm(self):
        return self.leaf.norm()


class Declared(Component):
    def __init__(self, scope="outer", spare=False):
        self.leaf = Leaf(scope="leaf")
        self.spare = Leaf(scope="spare")
        super().__init__(self.leaf, *([self.spare] if spare else []), scope=scope)

    apply = forward("leaf", Leaf.apply)
    norm = forward("leaf", Leaf.norm)


class Holder(Component):
    """Forwards to whatever component it is given (a swapped sub-component)."""

    def __init__(self, leaf, scope="holder"):
        self.leaf = leaf
        super().__init__(leaf, scope=scope)

    apply = forward("leaf", Leaf.apply)


# ---- the checks ----------------------------------------------------------------------------------
def api_table(cls):
    """What the class declares: per API method its arguments, defaults, flag and signature."""
    return {name: (spec.arg_names, spec.defaults, spec.must_be_complete, str(inspect.signature(getattr(cls, name))))
            for name, spec in cls.api_specs().items()}


def assembly_view(root, fixed=None):
    """Per root method: the API calls (caller, callee, method, argument names, which records) and steps."""
    a = assemble(root, fixed=fixed or {"scale": 2.0})
    out = {"edges": a.edges()}
    for name, t in a.traces.items():
        ids = {r.id: f"arg:{k}" for k, r in t.args.items()}
        for i, step in enumerate(t.steps):
            ids.update({r.id: f"step{i}[{j}]" for j, r in enumerate(step.outputs)})

        def ref(v):
            return ids.get(v.id, "?") if hasattr(v, "id") else repr(v)

        out[name] = (
            [(c.caller.global_scope if c.caller else None, c.component.global_scope, c.method,
              {k: ref(v) for k, v in c.args.items()}, ref(c.outputs)) for c in t.calls],
            [(s.component.global_scope, s.spec.name, [ref(v) for v in s.args]) for s in t.steps],
            ref(t.outputs),
        )
    return out


def built_view(root, backend, spaces=SPACES):
    """The built graph: API table, flat chains, weights and outputs."""
    ex = GraphExecutor(root, spaces, backend=backend, seed=4)
    outputs = {"apply": ex.execute("apply", X), "norm": ex.execute("norm")}
    return ex.api_table(), {m: a.source for m, a in ex.apis.items()}, ex.get_weights(), outputs


def assert_same_table(a, b):
    assert api_table(a) == api_table(b)


def assert_same_assembly(a, b):
    assert assembly_view(a) == assembly_view(b)


def assert_same_build(a, b, backend):
    (table_a, src_a, w_a, out_a), (table_b, src_b, w_b, out_b) = built_view(a, backend), built_view(b, backend)
    assert table_a == table_b and src_a == src_b
    assert w_a.keys() == w_b.keys() and all(np.array_equal(w_a[k], w_b[k]) for k in w_a)
    for m in out_a:
        np.testing.assert_array_equal(out_a[m], out_b[m])


# ---- a declared forward equals the hand-written one -------------------------------------------------
def test_api_table_equals_hand_written():
    assert_same_table(HandWritten, Declared)
    spec = Declared.api_specs()["apply"]
    assert spec.arg_names == ("x", "scale") and spec.defaults == {"scale": 2.0} and spec.must_be_complete
    assert spec.forwards == ("leaf", "apply") and HandWritten.api_specs()["apply"].forwards is None
    assert str(inspect.signature(Declared.apply)) == "(self, x, scale=2.0)"
    assert Declared.apply.__doc__ == "Forwards to ``self.leaf.apply``: Scales ``x @ kernel``."
    assert Declared.apply.__qualname__ == "Declared.apply" and Declared.apply.__module__ == __name__


def test_assembly_equals_hand_written():
    assert_same_assembly(HandWritten(), Declared())
    assert assembly_view(Declared())["edges"] == [("outer", "outer/leaf", "apply"), ("outer", "outer/leaf", "norm")]


def test_build_and_outputs_equal_hand_written(backend):
    assert_same_build(HandWritten(), Declared(), backend)
    _, sources, weights, outputs = built_view(Declared(), backend)
    assert sources["apply"] == "def apply(x):\n    r1 = _s0(x, _c1)  # outer/leaf._graph_fn_apply\n    return r1\n"
    np.testing.assert_allclose(outputs["apply"], X @ weights["outer/leaf/kernel"] * 2.0, rtol=1e-5, atol=1e-6)


def test_default_is_carried_and_can_be_overridden(backend):
    ex = GraphExecutor(Declared(), {"x": "float32[B,3]", "scale": "float32[]"}, backend=backend, seed=4,
                       api_methods=["apply"])
    kernel = ex.get_weights()["outer/leaf/kernel"]
    assert list(ex.apis["apply"].arg_spaces) == ["x", "scale"]
    np.testing.assert_allclose(ex.execute("apply", X, np.float32(-1.5)), X @ kernel * -1.5, rtol=1e-5, atol=1e-6)
    fixed = GraphExecutor(Declared(), SPACES, backend=backend, seed=4, api_methods=["apply"])
    assert fixed.apis["apply"].constants == {"scale": 2.0}


def test_forward_of_a_forward():
    class Outer(Component):
        def __init__(self):
            self.inner = Declared(scope="inner")
            super().__init__(self.inner, scope="top")

        apply = forward("inner", Declared.apply)

    assert api_table(Outer)["apply"] == api_table(Leaf)["apply"][:3] + ("(self, x, scale=2.0)",)
    assert assembly_view(Outer())["edges"] == [("top", "top/inner", "apply"), ("top/inner", "top/inner/leaf", "apply")]


# ---- copies and swapped sub-components ------------------------------------------------------------
class Twins(Component):
    def __init__(self):
        self.a = Declared(scope="a")
        self.b = self.a.copy(scope="b")
        super().__init__(self.a, self.b, scope="twins")

    @api
    def first(self, x):
        return self.a.apply(x)

    @api
    def second(self, x):
        return self.b.apply(x)


def test_copy_forwards_to_its_own_sub_component(backend):
    twins = Twins()
    assert twins.b.leaf is twins.b.sub_components["leaf"] and twins.b.leaf is not twins.a.leaf
    assert assemble(twins).edges() == [("twins", "twins/a", "apply"), ("twins/a", "twins/a/leaf", "apply"),
                                       ("twins", "twins/b", "apply"), ("twins/b", "twins/b/leaf", "apply")]
    ex = GraphExecutor(Twins(), SPACES, backend=backend, seed=2)
    w = ex.get_weights()
    assert not np.array_equal(w["twins/a/leaf/kernel"], w["twins/b/leaf/kernel"])
    for method, scope in (("first", "a"), ("second", "b")):
        np.testing.assert_allclose(ex.execute(method, X), X @ w[f"twins/{scope}/leaf/kernel"] * 2.0,
                                   rtol=1e-5, atol=1e-6)


def test_swapped_sub_component_is_the_one_called(backend):
    ex = GraphExecutor(Holder(TripleLeaf(scope="leaf")), SPACES, backend=backend, seed=1)
    kernel = ex.get_weights()["holder/leaf/kernel"]
    np.testing.assert_allclose(ex.execute("apply", X), X @ kernel * 6.0, rtol=1e-5, atol=1e-6)


# ---- errors ----------------------------------------------------------------------------------------
def test_error_no_such_attribute():
    class NoAttr(Component):
        def __init__(self):
            super().__init__(Leaf(scope="leaf"), scope="noattr")

        apply = forward("missing", Leaf.apply)

    with pytest.raises(AssemblyError) as err:
        assemble(NoAttr(), fixed={"scale": 2.0})
    msg = str(err.value)
    assert "NoAttr('noattr').apply, declared forward('missing', Leaf.apply)" in msg
    assert "no attribute 'missing'" in msg and "['leaf']" in msg


def test_error_attribute_is_not_a_component():
    class NotComp(Component):
        def __init__(self):
            super().__init__(scope="notcomp")
            self.leaf = "leaf"

        apply = forward("leaf", Leaf.apply)

    with pytest.raises(AssemblyError, match=r"NotComp\('notcomp'\)\.apply.*self\.leaf is str 'leaf', not a Component"):
        assemble(NotComp(), fixed={"scale": 2.0})


def test_error_target_is_not_an_api_method_of_the_sub_component():
    class Other(Component):
        @api
        def apply(self, x, scale=2.0):
            return self._graph_fn_id(x)

        @graph_fn
        def _graph_fn_id(self, F, x):
            return x

    class ToShift(Component):
        def __init__(self):
            self.leaf = Other(scope="leaf")
            super().__init__(self.leaf, scope="toshift")

        shift = forward("leaf", Leaf.shift)

    with pytest.raises(AssemblyError) as err:
        assemble(ToShift(), fixed={"scale": 2.0})
    msg = str(err.value)
    assert "ToShift('toshift').shift, declared forward('leaf', Leaf.shift)" in msg
    assert "'shift' is not an API method of self.leaf, Other('toshift/leaf'); its API methods are ['apply']" in msg


def test_error_swapped_sub_component_with_other_arguments():
    with pytest.raises(AssemblyError) as err:
        assemble(Holder(InputsLeaf(scope="leaf")), fixed={"scale": 2.0})
    msg = str(err.value)
    assert "Holder('holder').apply, declared forward('leaf', Leaf.apply)" in msg
    assert "argument mismatch: apply takes ['x', 'scale'] (from Leaf.apply)" in msg
    assert "InputsLeaf('holder/leaf'), has apply(inputs)" in msg


def test_error_argument_mismatch_at_call():
    class Caller(Component):
        def __init__(self, how):
            self.outer, self.how = Declared(), how
            super().__init__(self.outer, scope="caller")

        @api
        def run(self, x):
            return self.outer.apply(x, 2.0, x) if self.how == "many" else self.outer.apply(y=x)

    with pytest.raises(AssemblyError,
                       match=r"API method caller/outer\.apply takes 2 argument\(s\) \['x', 'scale'\]; got 3"):
        assemble(Caller("many"))
    with pytest.raises(AssemblyError, match=r"API method caller/outer\.apply has no argument 'y'"):
        assemble(Caller("keyword"))
    with pytest.raises(AssemblyError, match=r"Declared\.apply\(\) was called directly"):
        Declared().apply(X)


def test_declaration_errors():
    with pytest.raises(TypeError, match=r"pass the method itself, e\.g\. forward\('leaf', SomeComponent\.apply\)"):
        forward("leaf", "apply")
    with pytest.raises(TypeError, match=r"the target must be an @api method given on its class; got <function"):
        forward("leaf", Leaf.create_variables)
    with pytest.raises(TypeError, match=r"sub must be the name of the attribute .*got 'a/b'"):
        forward("a/b", Leaf.apply)


# ---- the checks fail on broken forwarders ----------------------------------------------------------
def _calls_shift(component, spec, origin, args):
    method = "shift" if spec.forwards[1] == "apply" else spec.forwards[1]
    return getattr(getattr(component, spec.forwards[0]), method)(*args)


def _calls_spare(component, spec, origin, args):
    return getattr(component.spare, spec.forwards[1])(*args)


def test_broken_forward_to_another_method_fails_the_checks(monkeypatch, backend):
    monkeypatch.setattr(decorators, "_forward_call", _calls_shift)
    with pytest.raises(AssertionError):
        assert_same_assembly(HandWritten(), Declared())
    with pytest.raises(AssertionError):
        assert_same_build(HandWritten(), Declared(), backend)
    good, bad = built_view(HandWritten(), backend), built_view(Declared(), backend)
    assert good[1]["apply"] != bad[1]["apply"]  # the flat chain
    with pytest.raises(AssertionError):  # and, on their own, the outputs
        np.testing.assert_array_equal(good[3]["apply"], bad[3]["apply"])


def test_broken_forward_to_another_sub_component_fails_the_checks(monkeypatch):
    monkeypatch.setattr(decorators, "_forward_call", _calls_spare)
    with pytest.raises(AssertionError):
        assert_same_assembly(HandWritten(spare=True), Declared(spare=True))
    assert_same_assembly(HandWritten(spare=True), HandWritten(spare=True))


@pytest.mark.parametrize("broken", ["no_defaults", "renamed"])
def test_broken_signature_fails_the_table_check(monkeypatch, broken):
    def signature(target):
        sig = inspect.signature(target)
        params = list(sig.parameters.values())
        if broken == "no_defaults":
            params = [p.replace(default=p.empty) for p in params]
        else:
            params = [p.replace(name=p.name + "_") if p.name != "self" else p for p in params]
        return sig.replace(parameters=params)

    monkeypatch.setattr(decorators, "_forward_signature", signature)

    class Broken(Component):
        def __init__(self):
            self.leaf = Leaf(scope="leaf")
            super().__init__(self.leaf, scope="outer")

        apply = forward("leaf", Leaf.apply)
        norm = forward("leaf", Leaf.norm)

    with pytest.raises(AssertionError):
        assert_same_table(HandWritten, Broken)
