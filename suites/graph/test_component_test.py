"""`ComponentTest` itself (F-op parity lives in suites/backends/test_ops.py)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, Dict, FloatBox, IntBox
from harness.testing.component_test import ComponentTest, assert_outputs_equal

B3 = FloatBox(3, batch_rank=True)


class Nested(Component):
    """Nested outputs of mixed dtypes, two variables, methods of zero to two inputs."""

    def __init__(self):
        super().__init__(scope="nested")

    def create_variables(self, input_spaces):
        self.get_variable("scale", (3,), initializer="ones")
        self.get_variable("steps", (), dtype="int64")

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @api
    def combine(self, x, y):
        return self._graph_fn_combine(x, y)

    @api
    def constant(self):
        return self._graph_fn_constant()

    @api
    def dict_in(self, obs):
        return self._graph_fn_dict_in(obs)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        scaled = x * self.variables["scale"]
        return {"stats": (scaled, F.argmax(scaled, -1)), "positive": F.reduce_sum(x, -1) > 0.0}

    @graph_fn
    def _graph_fn_combine(self, F, x, y):
        return x - y

    @graph_fn
    def _graph_fn_constant(self, F):
        return self.variables["steps"] + 1

    @graph_fn
    def _graph_fn_dict_in(self, F, obs):
        return obs["a"] + obs["b"]


SPACES = {"x": B3, "y": B3, "obs": Dict(a=B3, b=B3)}
X = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
EXPECTED = {"stats": (X, np.array([0, 1])), "positive": np.array([False, True])}


@pytest.fixture
def nested(backend):
    return ComponentTest(Nested(), SPACES, backend=backend)


def test_passes_on_correct_expected_and_returns_outputs(nested):
    out = nested.test("apply", X, expected=EXPECTED)
    assert set(out) == {"stats", "positive"} and out["stats"][1].dtype == np.int64
    nested.test("apply", X, expected={"stats": [X + 1e-7, [0, 1]], "positive": [False, True]})


@pytest.mark.parametrize("expected, path, detail", [
    ({"stats": (X + 0.01, np.array([0, 1])), "positive": EXPECTED["positive"]}, "stats/0",
     "max abs difference 0.01"),
    ({"stats": (X, np.array([0, 0])), "positive": EXPECTED["positive"]}, "stats/1", "exact comparison"),
    ({"stats": (X, np.array([0, 1])), "positive": np.array([True, True])}, "positive", "exact comparison"),
    ({"stats": (X, np.array([0, 1]))}, "the root", r"dict keys differ: missing \[\], unexpected \['positive'\]"),
    ({"stats": (X,), "positive": EXPECTED["positive"]}, "stats", "length 2 != expected length 1"),
    ({"stats": (X[:1], np.array([0, 1])), "positive": EXPECTED["positive"]}, "stats/0",
     r"shape \(2, 3\) != expected shape \(1, 3\)"),
], ids=["float", "int", "bool", "keys", "length", "shape"])
def test_fails_naming_method_and_key_path(nested, expected, path, detail):
    where = f"key path '{path}'" if path != "the root" else path
    with pytest.raises(AssertionError, match=rf"^'apply': output at {where} differs: .*{detail}") as info:
        nested.test("apply", X, expected=expected)
    assert "actual:" in str(info.value) and "expected:" in str(info.value)


def test_message_shows_both_values_and_first_index(nested):
    wrong = X.copy()
    wrong[1, 2] = 5.0
    with pytest.raises(AssertionError) as info:
        nested.test("apply", X, expected={"stats": (wrong, np.array([0, 1])), "positive": EXPECTED["positive"]})
    msg = str(info.value)
    assert "1 of 6 element(s) differ" in msg and "max abs difference 6" in msg and "first at index (1, 2)" in msg
    assert "-1." in msg and "5." in msg


def test_tolerances(nested):
    off = X + 0.004
    with pytest.raises(AssertionError, match="decimals=3"):
        nested.test("combine", (X, np.zeros_like(X)), expected=off, decimals=3)
    nested.test("combine", (X, np.zeros_like(X)), expected=off, decimals=2)
    nested.test("combine", (X, np.zeros_like(X)), expected=off, atol=0.005)
    with pytest.raises(AssertionError, match="rtol=1e-05, atol=1e-06"):
        nested.test("combine", (X, np.zeros_like(X)), expected=off)
    with pytest.raises(AssertionError, match="exact comparison"):  # ints never pass by tolerance
        nested.test("constant", expected=np.int64(2), atol=10)
    with pytest.raises(ValueError, match="either decimals or rtol/atol"):
        nested.test("combine", (X, X), expected=X, decimals=2, atol=1.0)


def test_nans_match_nans():
    assert_outputs_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    with pytest.raises(AssertionError, match="max abs difference inf"):
        assert_outputs_equal(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), what="m")


def test_input_forms(nested):
    nested.test("combine", (X, X), expected=np.zeros_like(X))
    nested.test("combine", [X, 2 * X], expected=-X)
    nested.test("combine", {"y": X, "x": 3 * X}, expected=2 * X)
    nested.test("apply", {"x": X}, expected=EXPECTED)
    nested.test("dict_in", {"a": X, "b": X}, expected=2 * X)  # one Dict argument: the value itself
    nested.test("dict_in", {"obs": {"a": X, "b": X}}, expected=2 * X)
    nested.test("constant", expected=np.int64(1))


def test_variables(nested):
    assert nested.variable_names() == ["nested/scale", "nested/steps"]
    assert set(nested.read_variable_values()) == {"nested/scale", "nested/steps"}
    np.testing.assert_array_equal(nested.read_variable_values("nested/scale")["nested/scale"], np.ones(3))
    assert list(nested.read_variable_values(["steps"])) == ["nested/steps"]
    nested.write_variable_values({"scale": np.array([2.0, 0.0, 1.0]), "nested/steps": 4})
    nested.test("apply", X, expected={"stats": (X * [2.0, 0.0, 1.0], np.array([0, 0])),
                                      "positive": EXPECTED["positive"]})
    nested.test("constant", expected=np.int64(5))
    with pytest.raises(KeyError, match=r"no variable 'nope'.*nested/scale"):
        nested.read_variable_values("nope")
    with pytest.raises(ValueError, match=r"'nested/scale' has shape \(2,\)"):
        nested.write_variable_values({"scale": np.zeros(2)})
    weights = nested.get_weights()
    nested.set_weights({k: v * 0 for k, v in weights.items()})
    assert all(not v.any() for v in nested.get_weights().values())


def test_introspection(nested, backend):
    assert nested.executor.backend_name == backend
    assert nested.output_spaces["combine"] == B3
    assert nested.output_spaces["apply"] == Dict(
        stats=(B3, IntBox(shape=(), batch_rank=True)), positive=BoolBox(batch_rank=True))
    assert nested.profile.variables == 2
    assert backend in repr(nested)


def test_exported_from_harness_testing():
    import harness.testing

    assert harness.testing.ComponentTest is ComponentTest


def test_only_some_api_methods(backend):
    test = ComponentTest(Nested(), {"x": B3, "y": B3}, backend=backend, api_methods=["combine"])
    assert list(test.output_spaces) == ["combine"]
    test.test("combine", (X, X), expected=np.zeros_like(X))
