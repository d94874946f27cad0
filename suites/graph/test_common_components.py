"""Tests of the common components (Dense, splitter/merger, time-rank folding, Synchronizer) on both backends."""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

import numpy as np
import optree
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.backends import BACKENDS
from harness.execution.executor import GraphExecutor
from harness.graph import BuildError, Component, SpaceMismatchError, api
from harness.spaces import parse
from harness.testing.strategies import from_space
import reference_agents.components.common as common
from reference_agents.components.common import (
    ContainerMerger, ContainerSplitter, Dense, FoldTimeRank, Synchronizer, UnfoldTimeRank,
)


_MODULES = {"tf": "tensorflow", "torch": "torch"}


def backends() -> list[str]:
    """The installed backends that ``SPACEGRAPH_BACKENDS`` (a comma list) selects, else all installed ones.

    For the tests that compare backends; a test's ``backend`` argument is parametrized
    from the same variable by ``suites/graph/conftest.py``.
    """
    raw = os.environ.get("SPACEGRAPH_BACKENDS", "")
    names = [name.strip() for name in raw.split(",") if name.strip()] or list(BACKENDS)
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise ValueError(f"SPACEGRAPH_BACKENDS names unknown backend(s) {unknown}; known: {list(BACKENDS)}")
    return [name for name in dict.fromkeys(names) if importlib.util.find_spec(_MODULES[name]) is not None]


BOTH = pytest.mark.skipif(not {"tf", "torch"} <= set(backends()), reason="needs both backends")
DIRECTIONS = pytest.mark.parametrize("src, dst", [("tf", "torch"), ("torch", "tf")])

# Tolerances, in one place: float32 against a float64 NumPy oracle, and one backend against the other.
ORACLE_RTOL = 1e-5
PARITY = dict(rtol=1e-5, atol=1e-6)
FLOAT_LIMIT = 100.0

ACTIVATIONS = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "softplus": lambda x: np.logaddexp(0.0, x),
}


def dense_oracle(x: np.ndarray, weights: dict[str, np.ndarray], prefix: str, activation: str | None) -> np.ndarray:
    """``act(x @ W + b)`` in float64, and a bound on float32 rounding error (all activations are 1-Lipschitz)."""
    kernel = weights[f"{prefix}/kernel"].astype(np.float64)
    bias = weights.get(f"{prefix}/bias", np.zeros(kernel.shape[1])).astype(np.float64)
    x = np.asarray(x, np.float64)
    out = ACTIVATIONS[activation](x @ kernel + bias)
    scale = np.abs(x) @ np.abs(kernel) + np.abs(bias)
    return out, ORACLE_RTOL * scale + 1e-6


def assert_tree_equal(actual: Any, expected: Any) -> None:
    """Same nesting, and every leaf equal exactly with the same dtype."""
    a_leaves, a_tree = optree.tree_flatten(actual)
    e_leaves, e_tree = optree.tree_flatten(expected)
    assert a_tree == e_tree, f"structure {a_tree} != {e_tree}"
    for a, e in zip(a_leaves, e_leaves):
        e = np.asarray(e)
        assert a.dtype == e.dtype, f"dtype {a.dtype} != {e.dtype}"
        np.testing.assert_array_equal(a, e)


def assert_weights_differ(weights: dict[str, np.ndarray], a: str, b: str) -> None:
    for key in (k for k in weights if k.startswith(a + "/")):
        other = b + key[len(a):]
        assert not np.allclose(weights[key], weights[other]), f"{key} and {other} start equal"


# ---- roots ---------------------------------------------------------------------------------------


class Chain(Component):
    """A root (or block) whose `apply` runs ``inputs`` through its sub-components' `apply` in order."""

    def __init__(self, *layers: Component, scope: str = "net") -> None:
        super().__init__(*layers, scope=scope)
        self.layers = layers

    @api
    def apply(self, inputs):
        for layer in self.layers:
            inputs = layer.apply(inputs)
        return inputs


def two_layer(scope: str = "net") -> Chain:
    return Chain(Dense(6, "tanh", bias_initializer="normal(0.5)", scope="h"),
                 Dense(3, bias_initializer="normal(0.5)", scope="out"), scope=scope)


class SplitMerge(Component):
    """`split` through a splitter; `roundtrip` through the splitter, then a merger."""

    def __init__(self, splitter: ContainerSplitter, merger: ContainerMerger) -> None:
        super().__init__(splitter, merger, scope="root")
        self.splitter, self.merger = splitter, merger

    @api
    def split(self, inputs):
        return self.splitter.split(inputs)

    @api
    def roundtrip(self, inputs):
        return self.merger.merge(self.splitter.split(inputs))


class TimeRanks(Component):
    """`fold`; `roundtrip` = unfold(fold(x), like=x); `apply` = unfold(dense(fold(x)), like=x).

    `roundtrip` and `apply` give the unfolder different ``inputs`` spaces, so one
    executor builds either `fold` and `roundtrip`, or `apply`.
    """

    def __init__(self, units: int = 4) -> None:
        self.dense = Dense(units, "relu", bias_initializer="normal(0.5)", scope="dense")
        self.folder, self.unfolder = FoldTimeRank(scope="fold"), UnfoldTimeRank(scope="unfold")
        super().__init__(self.folder, self.unfolder, self.dense, scope="root")

    @api
    def fold(self, inputs):
        return self.folder.fold(inputs)

    @api
    def roundtrip(self, inputs):
        return self.unfolder.unfold(self.folder.fold(inputs), inputs)

    @api
    def apply(self, inputs):
        return self.unfolder.unfold(self.dense.apply(self.folder.fold(inputs)), like=inputs)


class SyncRoot(Component):
    """A Q-network ``q``, its target copy and a synchronizer between them."""

    def __init__(self, q: Component, target: Component | None = None, tau: float = 1.0) -> None:
        target = q.copy(scope="target_q") if target is None else target
        super().__init__(q, target, Synchronizer(q, target, tau=tau, scope="sync"), scope="agent")
        self.q, self.target = q, target

    @api
    def q_values(self, inputs):
        return self.q.apply(inputs), self.target.apply(inputs)

    @api
    def sync(self):
        return self.sub_components["sync"].sync()


def make_root(kind: str, **dense_options: Any) -> Component:
    """A fresh root of one kind; ``dense_options`` go to the Dense of kind ``"dense"``."""
    if kind == "dense":
        return Chain(Dense(3, bias_initializer="normal(0.5)", scope="layer", **dense_options))
    return {"two_layer": two_layer, "time_ranks": TimeRanks}[kind]()


@functools.cache
def executor(kind: str, backend: str, space: str, seed: int = 0, api_methods: tuple | None = None,
             **dense_options: Any) -> GraphExecutor:
    """Built executors, cached across hypothesis examples (tests must not change their weights)."""
    return GraphExecutor(make_root(kind, **dense_options), {"inputs": space}, backend=backend, seed=seed,
                         api_methods=list(api_methods) if api_methods else None)


# ---- the package ---------------------------------------------------------------------------------


def test_package_exports_only_the_components():
    assert sorted(common.__all__) == sorted(["ContainerMerger", "ContainerSplitter", "Dense", "FoldTimeRank",
                                            "Synchronizer", "UnfoldTimeRank"])
    for name in common.__all__:
        assert issubclass(getattr(common, name), Component)
        assert getattr(common, name).__doc__


@pytest.mark.parametrize("make, message", [
    (lambda: Dense(0), "units must be a positive int; got 0"),
    (lambda: Dense(2.5), "units must be a positive int; got 2.5"),
    (lambda: Dense(True), "units must be a positive int; got True"),
    (lambda: Dense(3, activation="swish"), "activation must be None or one of"),
    (lambda: Dense(3, use_bias="yes"), "use_bias must be a bool; got 'yes'"),
    (lambda: Dense(3, kernel_initializer="xavier"), "kernel_initializer must be"),
    (lambda: Dense(3, bias_initializer="normal(x)"), "bias_initializer must be"),
    (lambda: ContainerSplitter(), "keys must name at least one key"),
    (lambda: ContainerSplitter("a", 1), "keys must be non-empty strings"),
    (lambda: ContainerSplitter("a/b"), "without '/'"),
    (lambda: ContainerSplitter(0, -1), "indices must be >= 0; got -1"),
    (lambda: ContainerSplitter("a", "a"), "keys must be unique"),
    (lambda: ContainerMerger(), "keys must name at least one key"),
    (lambda: ContainerMerger("a", tuple_size=2), "either keys or tuple_size"),
    (lambda: ContainerMerger(tuple_size=0), "tuple_size must be a positive int; got 0"),
    (lambda: ContainerMerger("", "b"), "keys must be non-empty strings"),
    (lambda: Synchronizer(Dense(2), Dense(2), tau=0.0), "tau must be a number in (0, 1]; got 0.0"),
    (lambda: Synchronizer(Dense(2), Dense(2), tau=1.5), "tau must be a number in (0, 1]; got 1.5"),
    (lambda: Synchronizer(Dense(2), "q"), "target must be a Component"),
    (lambda q=Dense(2): Synchronizer(q, q), "source and target must differ"),
])
def test_constructor_arguments_are_checked_at_once(make, message):
    with pytest.raises(ValueError, match="^" + "|".join(["Dense", "ContainerSplitter", "ContainerMerger",
                                                          "Synchronizer"])) as info:
        make()
    assert message in str(info.value)


# ---- Dense ---------------------------------------------------------------------------------------

DENSE_CASES = [  # (activation, use_bias, input space)
    (None, True, "float32[B,5]"),
    ("relu", True, "float32[B,T,5]"),
    ("tanh", True, "float32[T,B,5]"),
    ("sigmoid", True, "float32[B,5]"),
    ("elu", True, "float32[B,T,5]"),
    ("softplus", False, "float32[B,5]"),
]


@pytest.mark.parametrize("activation, use_bias, space", DENSE_CASES)
@given(data=st.data())
def test_dense_matches_numpy(backend, activation, use_bias, space, data):
    ex = executor("dense", backend, space, activation=activation, use_bias=use_bias)
    x = data.draw(from_space(parse(space), float_limit=FLOAT_LIMIT), label="inputs")
    out = ex.execute("apply", x)
    expected, tolerance = dense_oracle(x, ex.get_weights(), "net/layer", activation)
    assert out.shape == x.shape[:-1] + (3,) and out.dtype == np.float32
    assert np.all(np.abs(out - expected) <= tolerance), np.max(np.abs(out - expected) - tolerance)


def test_dense_variables_and_output_space(backend):
    ex = executor("dense", backend, "float32[T,B,5]", activation="relu", use_bias=True)
    assert {k: v.shape for k, v in ex.get_weights().items()} == {"net/layer/kernel": (5, 3),
                                                                 "net/layer/bias": (3,)}
    assert ex.apis["apply"].output_space == parse("float32[T,B,3]")
    no_bias = executor("dense", backend, "float32[B,5]", activation="softplus", use_bias=False)
    assert list(no_bias.get_weights()) == ["net/layer/kernel"]


@pytest.mark.parametrize("space", ["int64[B,4]", "float32[B,2,3]", "float32[4]", "float32[T,4]", "bool[B,4]",
                                   "{a: float32[B,4]}"])
def test_dense_rejects_other_spaces(backend, space):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(Chain(Dense(3, scope="layer")), {"inputs": space}, backend=backend)
    err = info.value
    assert (err.component, err.method, err.argument) == ("net/layer", "apply", "inputs")
    assert "FloatBox with a batch rank and core rank 1" in err.expected
    assert err.received == str(parse(space))
    for part in ("net/layer", "apply", "inputs", err.expected, err.received):
        assert part in str(err)


# ---- weights move between backends ---------------------------------------------------------------


@BOTH
@DIRECTIONS
@pytest.mark.parametrize("kind", ["dense", "two_layer"])
def test_weights_transfer_between_backends(kind, src, dst):
    options = dict(activation="tanh", use_bias=True) if kind == "dense" else {}
    a = executor(kind, src, "float32[B,4]", seed=1, **options)
    b = GraphExecutor(make_root(kind, **options), {"inputs": "float32[B,4]"}, backend=dst, seed=2)
    x = np.random.default_rng(7).normal(size=(9, 4)).astype(np.float32)
    before = b.execute("apply", x)
    assert not np.allclose(before, a.execute("apply", x)), "different seeds must start different"
    b.set_weights(a.get_weights())
    np.testing.assert_allclose(b.execute("apply", x), a.execute("apply", x), **PARITY)


# ---- splitter and merger -------------------------------------------------------------------------

NESTED = "{a: float32[B,3], b: {c: int64[B](0,4), d: bool[B,2]}}"
TUPLE = "(float32[B,2], int64[B](0,3), bool[B])"


def split_executor(backend: str, space: str, keys: tuple) -> GraphExecutor:
    merger = ContainerMerger(tuple_size=len(keys)) if isinstance(keys[0], int) else ContainerMerger(*keys)
    return GraphExecutor(SplitMerge(ContainerSplitter(*keys), merger), {"inputs": space}, backend=backend)


@pytest.fixture(scope="module")
def split_executors():
    cache: dict = {}
    return lambda backend, space, keys: cache.setdefault((backend, space, keys),
                                                         split_executor(backend, space, keys))


@pytest.mark.parametrize("space, keys", [(NESTED, ("b", "a")), (NESTED, ("a",)), (TUPLE, (2, 0)),
                                         (TUPLE, (1, 2, 0))])
@given(data=st.data())
def test_splitter_returns_the_parts_in_key_order(split_executors, backend, space, keys, data):
    ex = split_executors(backend, space, keys)
    value = data.draw(from_space(parse(space)), label="inputs")
    parts = ex.execute("split", value)
    assert isinstance(parts, tuple) and len(parts) == len(keys)
    for key, part in zip(keys, parts):
        assert_tree_equal(part, value[key])
    assert ex.apis["split"].output_space == tuple(parse(space)[k] for k in keys)


@pytest.mark.parametrize("space, keys", [(NESTED, ("a", "b")), (NESTED, ("b", "a")), (TUPLE, (0, 1, 2))])
@given(data=st.data())
def test_merger_inverts_the_splitter(split_executors, backend, space, keys, data):
    ex = split_executors(backend, space, keys)
    value = data.draw(from_space(parse(space)), label="inputs")
    assert_tree_equal(ex.execute("roundtrip", value), value)
    assert ex.apis["roundtrip"].output_space == parse(space)


@BOTH
@pytest.mark.parametrize("space, keys", [(NESTED, ("b", "a")), (TUPLE, (2, 0))])
def test_splitter_agrees_across_backends(split_executors, space, keys):
    value = parse(space).sample(6, rng=3)
    assert_tree_equal(split_executors("tf", space, keys).execute("split", value),
                      split_executors("torch", space, keys).execute("split", value))


class Probe(Component):
    """A root passing two inputs to a merger (`merge`) or to an unfolder (`unfold`)."""

    def __init__(self, inner: Component) -> None:
        super().__init__(inner, scope="root")
        self.inner = inner

    @api
    def merge(self, a, b):
        return self.inner.merge((a, b))

    @api
    def unfold(self, inputs, like):
        return self.inner.unfold(inputs, like)


@pytest.mark.parametrize("space, keys, expected", [
    (NESTED, ("b", "zz"), "key 'zz' (available keys: ['a', 'b'])"),
    (TUPLE, (0, 3), "key 3 (available keys: [0, 1, 2])"),
    (NESTED, (0,), "a Tuple space"),
    ("float32[B,3]", ("a",), "a Dict space"),
])
def test_splitter_rejects_missing_keys(backend, space, keys, expected):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(SplitMerge(ContainerSplitter(*keys), ContainerMerger("x")), {"inputs": space},
                      backend=backend, api_methods=["split"])
    err = info.value
    assert (err.component, err.method, err.argument) == ("root/splitter", "split", "inputs")
    assert expected in str(err)


@pytest.mark.parametrize("merger", [lambda: ContainerMerger("x", "y", "z"), lambda: ContainerMerger(tuple_size=1)])
def test_merger_rejects_the_wrong_number_of_values(backend, merger):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(Probe(merger()), {"a": "float32[B,2]", "b": "int64[B]"}, backend=backend,
                      api_methods=["merge"])
    err = info.value
    assert (err.component, err.method, err.argument) == ("root/merger", "merge", "values")
    assert "a Tuple of" in err.expected and err.received == str(parse("(float32[B,2], int64[B])"))


# ---- folding the time rank -----------------------------------------------------------------------

FOLDABLE = ["float32[B,T,3]", "float32[T,B,3]", "[B,T]{x: float32[2], y: int64[](0,3)}",
            "[T,B]({x: float32[2]}, bool[])"]


@pytest.mark.parametrize("space", FOLDABLE)
@given(data=st.data())
def test_fold_then_unfold_gives_back_the_input(backend, space, data):
    ex = executor("time_ranks", backend, space, api_methods=("fold", "roundtrip"))
    value = data.draw(from_space(parse(space)), label="inputs")
    assert_tree_equal(ex.execute("roundtrip", value), value)
    folded = ex.execute("fold", value)
    assert_tree_equal(folded, optree.tree_map(lambda v: v.reshape((-1,) + v.shape[2:]), value))
    assert ex.apis["fold"].output_space == parse(space).with_ranks(True, False)
    assert ex.apis["roundtrip"].output_space == parse(space)


@pytest.mark.parametrize("space", ["float32[B,T,3]", "float32[T,B,3]"])
@given(data=st.data())
def test_fold_dense_unfold_matches_numpy(backend, space, data):
    ex = executor("time_ranks", backend, space, api_methods=("apply",))
    x = data.draw(from_space(parse(space), float_limit=FLOAT_LIMIT), label="inputs")
    out = ex.execute("apply", x)
    expected, tolerance = dense_oracle(x, ex.get_weights(), "root/dense", "relu")
    assert out.shape == x.shape[:2] + (4,)
    assert np.all(np.abs(out - expected) <= tolerance)
    assert ex.apis["apply"].output_space == parse(space.replace(",3]", ",4]"))


@BOTH
@DIRECTIONS
@pytest.mark.parametrize("space", ["float32[B,T,3]", "float32[T,B,3]"])
def test_fold_dense_unfold_agrees_across_backends(src, dst, space):
    a = executor("time_ranks", src, space, api_methods=("apply",))
    b = GraphExecutor(make_root("time_ranks"), {"inputs": space}, backend=dst, seed=5, api_methods=["apply"])
    b.set_weights(a.get_weights())
    x = parse(space).sample((3, 4), rng=11)
    np.testing.assert_allclose(b.execute("apply", x), a.execute("apply", x), **PARITY)


@pytest.mark.parametrize("space", ["float32[B,3]", "float32[T,3]", "{x: float32[B,T,2], y: float32[B,2]}"])
def test_fold_rejects_values_without_both_ranks(backend, space):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(TimeRanks(), {"inputs": space}, backend=backend, api_methods=["fold"])
    assert (info.value.component, info.value.method, info.value.argument) == ("root/fold", "fold", "inputs")


@pytest.mark.parametrize("inputs, like, argument", [
    ("float32[B,T,3]", "float32[B,T,3]", "inputs"),
    ("float32[B,3]", "float32[B,3]", "like"),
    ("float32[B,3]", "{a: float32[B,T], b: float32[T,B]}", "like"),
])
def test_unfold_rejects_bad_ranks(backend, inputs, like, argument):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(Probe(UnfoldTimeRank()), {"inputs": inputs, "like": like}, backend=backend,
                      api_methods=["unfold"])
    assert (info.value.component, info.value.argument) == ("root/unfold_time_rank", argument)


# ---- Synchronizer --------------------------------------------------------------------------------


def sync_root(tau: float = 1.0, nested: bool = False) -> SyncRoot:
    q = two_layer(scope="q") if nested else Dense(3, bias_initializer="normal(0.5)", scope="q")
    return SyncRoot(q, tau=tau)


@pytest.mark.parametrize("nested", [False, True])
def test_synchronizer_copies_source_into_target(backend, nested):
    ex = GraphExecutor(sync_root(nested=nested), {"inputs": "float32[B,4]"}, backend=backend)
    before = ex.get_weights()
    assert_weights_differ(before, "agent/q", "agent/target_q")
    assert ex.execute("sync") is None
    after = ex.get_weights()
    for key in (k for k in after if k.startswith("agent/q/")):
        np.testing.assert_array_equal(after[key.replace("agent/q/", "agent/target_q/")], before[key])
        np.testing.assert_array_equal(after[key], before[key])
    q, target = ex.execute("q_values", np.ones((2, 4), np.float32))
    np.testing.assert_array_equal(q, target)


@pytest.mark.parametrize("tau", [0.5, 0.25])
def test_synchronizer_soft_update_blends(backend, tau):
    ex = GraphExecutor(sync_root(tau=tau), {"inputs": "float32[B,4]"}, backend=backend)
    expected = ex.get_weights()
    for _ in range(2):
        ex.execute("sync")
        for name in ("kernel", "bias"):
            expected[f"agent/target_q/{name}"] = (tau * expected[f"agent/q/{name}"]
                                                  + (1 - tau) * expected[f"agent/target_q/{name}"])
        actual = ex.get_weights()
        for key, value in expected.items():
            np.testing.assert_allclose(actual[key], value, rtol=1e-6, atol=1e-7, err_msg=key)


def test_synchronizer_depends_on_source_and_target():
    root = sync_root()
    assert root.sub_components["sync"].variable_dependencies()[:2] == [root.q, root.target]
    assert root.sub_components["sync"].sub_components == {}


@pytest.mark.parametrize("target, differing", [
    (lambda: Dense(2, scope="target_q"), "kernel"),
    (lambda: Dense(3, use_bias=False, scope="target_q"), "only in source ['bias']"),
])
def test_synchronizer_refuses_mismatched_components(backend, target, differing):
    root = SyncRoot(Dense(3, scope="q"), target())
    with pytest.raises(BuildError) as info:
        GraphExecutor(root, {"inputs": "float32[B,4]"}, backend=backend)
    message = str(info.value)
    for part in ("agent/sync", "agent/q", "agent/target_q", differing):
        assert part in message


# ---- a deeper graph ------------------------------------------------------------------------------


def test_three_level_graph_matches_numpy(backend):
    sub_block = Chain(Dense(5, "relu", bias_initializer="normal(0.5)", scope="dense"), scope="sub")
    block = Chain(sub_block, Dense(2, bias_initializer="normal(0.5)", scope="post"), scope="block")
    ex = GraphExecutor(Chain(block, scope="root"), {"inputs": "float32[B,4]"}, backend=backend, seed=4)
    weights = ex.get_weights()
    assert sorted(weights) == ["root/block/post/bias", "root/block/post/kernel",
                               "root/block/sub/dense/bias", "root/block/sub/dense/kernel"]
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    hidden, tol_h = dense_oracle(x, weights, "root/block/sub/dense", "relu")
    expected, tolerance = dense_oracle(hidden, weights, "root/block/post", None)
    out = ex.execute("apply", x)
    assert out.shape == (5, 2)
    assert np.all(np.abs(out - expected) <= tolerance + np.abs(weights["root/block/post/kernel"]).sum() * tol_h.max())
