"""`ComponentTest` itself, and F-op parity: each op agrees on TF, torch and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
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


# ---- F-op parity ---------------------------------------------------------------------------------


class OpApply(Component):
    """Applies ``fn(F, *xs)`` to a tuple of inputs."""

    def __init__(self, fn):
        super().__init__(scope="op")
        self.fn = fn

    @api
    def apply(self, xs):
        return self._graph_fn_apply(xs)

    @graph_fn
    def _graph_fn_apply(self, F, xs):
        return self.fn(F, *xs)


_R = np.random.default_rng(7)
A = _R.normal(size=(3, 4)).astype(np.float32)
A2 = _R.normal(size=(3, 4)).astype(np.float32)
M = _R.normal(size=(4, 2)).astype(np.float32)
P = _R.normal(size=(5, 3)).astype(np.float32)
MASK = _R.random((3, 4)) < 0.5
MASK2 = _R.random((3, 4)) < 0.5
IDX = np.array([3, 0, 2])
IDX2 = np.array([[1, 0], [3, 3], [0, 2]])


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _space(value):
    if value.dtype == bool:
        return BoolBox(value.shape)
    if value.dtype.kind == "i":  # sample runs draw indices no larger than the test's
        return IntBox(int(value.max()) + 1, shape=value.shape)
    return FloatBox(value.shape)


# name: (fn(F, *xs), numpy reference(*xs), inputs)
OPS = {
    "matmul": (lambda F, a, m: F.matmul(a, m), np.matmul, (A, M)),
    "arithmetic": (lambda F, a, b: (a + b) * a - b / 2.0 - -a, lambda a, b: (a + b) * a - b / 2.0 + a, (A, A2)),
    "compare": (lambda F, a, b: a > b, np.greater, (A, A2)),
    "reduce_sum_axis": (lambda F, a: F.reduce_sum(a, 1), lambda a: a.sum(1), (A,)),
    "reduce_sum_all": (lambda F, a: F.reduce_sum(a), np.sum, (A,)),
    "reduce_mean_keepdims": (lambda F, a: F.reduce_mean(a, 0, keepdims=True), lambda a: a.mean(0, keepdims=True), (A,)),
    "reduce_max": (lambda F, a: F.reduce_max(a, -1), lambda a: a.max(-1), (A,)),
    "reduce_max_all_keepdims": (lambda F, a: F.reduce_max(a, keepdims=True), lambda a: a.max(keepdims=True), (A,)),
    "reduce_min_all": (lambda F, a: F.reduce_min(a), np.min, (A,)),
    "argmax": (lambda F, a: F.argmax(a, -1), lambda a: a.argmax(-1), (A,)),
    "argmax_axis0": (lambda F, a: F.argmax(a, 0), lambda a: a.argmax(0), (A,)),
    "where": (lambda F, c, a, b: F.where(c, a, b), np.where, (MASK, A, A2)),
    "one_hot": (lambda F, i: F.one_hot(i, 4), lambda i: np.eye(4, dtype=np.float32)[i], (IDX,)),
    "gather_axis0": (lambda F, p, i: F.gather(p, i), lambda p, i: np.take(p, i, 0), (P, IDX)),
    "gather_axis1_2d_indices": (lambda F, p, i: F.gather(p, i, axis=1), lambda p, i: np.take(p, i, 1), (P, IDX2 % 3)),
    "take_along_axis": (lambda F, a, i: F.take_along_axis(a, i, 1), lambda a, i: np.take_along_axis(a, i, 1),
                        (A, IDX2)),
    "softmax": (lambda F, a: F.softmax(a), _softmax, (A,)),
    "log_softmax": (lambda F, a: F.log_softmax(a, -1), lambda a: np.log(_softmax(a)), (A,)),
    "clip": (lambda F, a: F.clip(a, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,)),
    "maximum": (lambda F, a, b: F.maximum(a, b), np.maximum, (A, A2)),
    "maximum_scalar": (lambda F, a: F.maximum(a, 0.25), lambda a: np.maximum(a, 0.25), (A,)),
    "minimum": (lambda F, a, b: F.minimum(a, b), np.minimum, (A, A2)),
    "concat": (lambda F, a, b: F.concat([a, b], 0), lambda a, b: np.concatenate([a, b], 0), (A, A2)),
    "stack": (lambda F, a, b: F.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), (A, A2)),
    "transpose": (lambda F, a: F.transpose(a, (1, 0)), np.transpose, (A,)),
    "reshape_expand_squeeze": (lambda F, a: F.squeeze(F.expand_dims(F.reshape(a, (2, 6)), 1), 1),
                               lambda a: a.reshape(2, 6), (A,)),
    "exp_log_sqrt": (lambda F, a: F.exp(a) + F.log(F.abs(a) + 1.0) + F.sqrt(F.square(a) + 1.0),
                     lambda a: np.exp(a) + np.log(np.abs(a) + 1.0) + np.sqrt(a * a + 1.0), (A,)),
    "sign": (lambda F, a: F.sign(a), np.sign, (A,)),
    "activations": (lambda F, a: F.stack([F.relu(a), F.tanh(a), F.sigmoid(a), F.elu(a), F.softplus(a),
                                          F.activation("linear")(a)]),
                    lambda a: np.stack([np.maximum(a, 0), np.tanh(a), 1 / (1 + np.exp(-a)),
                                        np.where(a > 0, a, np.expm1(a)), np.log1p(np.exp(a)), a]), (A,)),
    "equal_logical": (lambda F, m, n: F.stack([F.equal(m, n), F.logical_and(m, n), F.logical_or(m, n),
                                               F.logical_not(m)]),
                      lambda m, n: np.stack([m == n, m & n, m | n, ~m]), (MASK, MASK2)),
    "cast": (lambda F, a: F.cast(a * 3.0, "int32"), lambda a: (a * 3.0).astype(np.int32), (A,)),
    "like_and_constant": (lambda F, a: F.zeros_like(a) + F.ones_like(a) * F.constant(2.5),
                          lambda a: np.full_like(a, 2.5), (A,)),
}


@pytest.mark.parametrize("name", list(OPS))
def test_f_op_parity(name, backends):
    fn, reference, inputs = OPS[name]
    expected = reference(*[x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs])
    if np.asarray(expected).dtype == np.float64:
        expected = np.asarray(expected, np.float32)
    results = {}
    for backend in backends:
        test = ComponentTest(OpApply(fn), {"xs": Tuple([_space(x) for x in inputs])}, backend=backend)
        results[backend] = test.test("apply", inputs, expected=expected, rtol=1e-5, atol=1e-5)
        assert results[backend].dtype == np.asarray(expected).dtype
    if len(results) == 2:
        assert_outputs_equal(results["torch"], results["tf"], what=f"{name} torch vs tf", rtol=1e-6, atol=1e-6)
        assert results["torch"].dtype == results["tf"].dtype
