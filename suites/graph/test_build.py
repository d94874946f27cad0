"""The build: input spaces flow from the root API, output spaces are inferred, errors say where."""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import BuildError, Component, SpaceMismatchError, api, graph_fn
from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple, parse

B3 = FloatBox(3, batch_rank=True)


def build(root, spaces, backend, **kw):
    return GraphExecutor(root, spaces, backend=backend, seed=1, **kw)


class Apply(Component):
    """A leaf whose single graph function is given as ``fn(F, x)``; optionally with variables."""

    def __init__(self, fn, scope="apply", variables=None, **gf):
        super().__init__(scope=scope)
        self.fn, self.var_shapes, self.events = fn, variables or {}, []

    def create_variables(self, input_spaces):
        self.events.append("create")
        for name, shape in self.var_shapes.items():
            self.get_variable(name, shape, initializer="ones")

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        self.events.append("run" if self.var_shapes.keys() <= self.variables.keys() else "run-before-variables")
        return self.fn(F, x)


# ---- output spaces -------------------------------------------------------------------------------


def test_output_spaces_are_known_after_build_and_printed(backend):
    ex = build(Apply(lambda F, x: F.reduce_sum(x, -1) > 0.0), {"x": B3}, backend)
    assert ex.apis["apply"].arg_spaces == {"x": B3}
    assert ex.apis["apply"].output_space == BoolBox(batch_rank=True)
    assert ex.api_table() == "apply(x: float32[B,3])\n    -> bool[B]"


@pytest.mark.parametrize("in_text, fn, out_text", [
    pytest.param("float32[B,4]", lambda F, x: F.tanh(x), "float32[B,4]", id="float32[B,4]->float32[B,4]"),
    pytest.param("float32[B,T,4]", lambda F, x: F.tanh(x), "float32[B,T,4]", id="float32[B,T,4]->float32[B,T,4]"),
    pytest.param("float32[T,B,4]", lambda F, x: F.tanh(x), "float32[T,B,4]", id="float32[T,B,4]->float32[T,B,4]"),
    pytest.param("float32[T,4]", lambda F, x: x * 2.0, "float32[T,4]", id="float32[T,4]->float32[T,4]"),
    pytest.param("float32[B,4]", lambda F, x: F.reduce_sum(x, 0), "float32[4]", id="float32[B,4]->float32[4]"),
    pytest.param("float32[B,4]", lambda F, x: F.reduce_sum(x, -1), "float32[B]", id="float32[B,4]->float32[B]"),
    pytest.param("float32[B,T,4]", lambda F, x: F.reduce_mean(x, 1), "float32[B,4]", id="float32[B,T,4]->float32[B,4]"),
    pytest.param("float32[B,T,4]", lambda F, x: F.reduce_mean(x, 0), "float32[T,4]", id="float32[B,T,4]->float32[T,4]"),
    pytest.param("float32[T,B,4]", lambda F, x: F.reduce_max(x, 0), "float32[B,4]", id="float32[T,B,4]->float32[B,4]"),
    pytest.param("float32[B,T,4]", lambda F, x: F.reduce_sum(x), "float32[]", id="float32[B,T,4]->float32[]"),
    pytest.param("float32[B,4]", lambda F, x: F.argmax(x), "int64[B]", id="float32[B,4]->int64[B]"),
    pytest.param("float32[B,T,4]", lambda F, x: F.reshape(x, (-1, 4)), "float32[B,4]", id="folded-batch-and-time"),
    pytest.param("float32[4]", lambda F, x: F.expand_dims(x, 0), "float32[1,4]", id="float32[4]->float32[1,4]"),
])
def test_batch_and_time_ranks_are_inferred(backend, in_text, fn, out_text):
    ex = build(Apply(fn), {"x": in_text}, backend)
    assert ex.apis["apply"].output_space == parse(out_text)


def test_output_bounds_are_not_inferred(backend):
    ex = build(Apply(lambda F, x: F.sigmoid(x)), {"x": "float32[B,2](-1.0,1.0)"}, backend)
    assert not ex.apis["apply"].output_space.bounded


class Containers(Component):
    """Dict in, Dict out: split with keys, flatten, declared output spaces."""

    def __init__(self):
        super().__init__(scope="containers")

    @api
    def split(self, x):
        return self._graph_fn_split(x)

    @api
    def flat(self, x):
        return self._graph_fn_flat(x)

    @api
    def declared(self, x):
        return self._graph_fn_declared(x)

    @api
    def pick(self, x):
        return self._graph_fn_pick(x)

    @graph_fn(split=True)
    def _graph_fn_split(self, F, leaf):
        return F.cast(leaf, "float32") * 2.0

    @graph_fn(flatten=True)
    def _graph_fn_flat(self, F, x):
        assert sorted(x) == ["a", "b/0", "b/1"]
        return {key: F.reduce_sum(F.cast(v, "float32"), -1) if key == "a" else v for key, v in x.items()}

    @graph_fn(output_spaces=lambda self, space: FloatBox(2 * space["a"].shape[-1], batch_rank=True))
    def _graph_fn_declared(self, F, x):
        return F.concat([x["a"], x["a"]], -1)

    @graph_fn(returns=2)
    def _graph_fn_pick(self, F, x):
        return {"first": x["a"]}, (x["b"][1], x["b"][0])


CONTAINER_SPACE = Dict(a=FloatBox(2, batch_rank=True), b=Tuple(IntBox(5, batch_rank=True), BoolBox(batch_rank=True)))
CONTAINER_VALUE = {"a": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
                   "b": (np.array([1, 4]), np.array([True, False]))}


def test_container_inputs_and_outputs(backend):
    ex = build(Containers(), {"x": CONTAINER_SPACE}, backend)
    spaces = {m: a.output_space for m, a in ex.apis.items()}
    assert spaces["split"] == parse("[B]{a: float32[2], b: (float32[], float32[])}")
    out = ex.execute("split", CONTAINER_VALUE)
    np.testing.assert_array_equal(out["a"], CONTAINER_VALUE["a"] * 2.0)
    np.testing.assert_array_equal(out["b"][0], [2.0, 8.0])
    np.testing.assert_array_equal(out["b"][1], [2.0, 0.0])

    assert spaces["flat"] == parse("[B]{a: float32[], b: (int64[], bool[])}")
    out = ex.execute("flat", CONTAINER_VALUE)
    np.testing.assert_array_equal(out["a"], [3.0, 7.0])
    assert isinstance(out["b"], tuple) and out["b"][1].dtype == bool

    assert spaces["declared"] == FloatBox(4, batch_rank=True)
    assert ex.execute("declared", CONTAINER_VALUE).shape == (2, 4)

    assert spaces["pick"] == (Dict(first=FloatBox(2, batch_rank=True)),
                              Tuple(BoolBox(batch_rank=True), IntBox(shape=(), batch_rank=True)))
    first, swapped = ex.execute("pick", CONTAINER_VALUE)
    np.testing.assert_array_equal(first["first"], CONTAINER_VALUE["a"])
    np.testing.assert_array_equal(swapped[0], [True, False])


class PerBackend(Component):
    def __init__(self):
        super().__init__(scope="per_backend")

    @api
    def apply(self, x):
        return self._graph_fn_which(x)

    @graph_fn
    def _graph_fn_which(self, F, x):
        return x + 1.0

    @_graph_fn_which.torch
    def _graph_fn_which_torch(self, F, x):
        return x + 2.0


def test_backend_specific_bodies_run_only_on_their_backend(backend):
    ex = build(PerBackend(), {"x": B3}, backend)
    out = ex.execute("apply", np.zeros((1, 3), np.float32))
    np.testing.assert_array_equal(out, np.full((1, 3), 2.0 if backend == "torch" else 1.0))


def test_variables_are_created_once_before_graph_functions_run(backend):
    comp = Apply(lambda F, x: F.matmul(x, comp.variables["w"]), variables={"w": (3, 2)})
    ex = build(comp, {"x": B3}, backend)
    assert comp.events[0] == "create" and comp.events.count("create") == 1
    assert set(comp.events[1:]) == {"run"}
    assert comp.input_spaces == {"x": B3}
    ex.execute("apply", np.ones((2, 3), np.float32))
    assert comp.events.count("create") == 1


class Counter(Component):
    def __init__(self):
        super().__init__(scope="counter")

    def create_variables(self, input_spaces):
        self.count = self.get_variable("count", (), dtype="int64", initializer=np.int64(7))

    @api
    def step(self, x):
        return self._graph_fn_step(x)

    @graph_fn
    def _graph_fn_step(self, F, x):
        F.assign(self.count, self.count + 1)
        return x * 1.0


def test_build_restores_variables_changed_by_sample_runs(backend):
    ex = build(Counter(), {"x": B3}, backend)
    assert ex.get_weights() == {"counter/count": 7}
    ex.execute("step", np.zeros((2, 3), np.float32))
    ex.execute("step", np.zeros((2, 3), np.float32))
    assert ex.get_weights()["counter/count"] == 9


def test_build_profile(backend):
    ex = build(Apply(lambda F, x: x * 2.0, variables={"v": (2,)}), {"x": B3}, backend)
    prof = ex.profile.as_dict()
    assert prof["components"] == 1 and prof["graph_fn_calls"] == 1 and prof["variables"] == 1
    assert prof["build_total_s"] > 0 and prof["framework_overhead_s"] >= prof["assembly_s"]


# ---- build errors ------------------------------------------------------------------------------------


class Strict(Component):
    def __init__(self, scope="strict"):
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces):
        if input_spaces["x"].shape != (3,):
            raise self.space_mismatch("x", "float32[B,3]", input_spaces["x"], "needs exactly 3 features")

    @api
    def apply(self, x):
        return self._graph_fn_id(x)

    @graph_fn
    def _graph_fn_id(self, F, x):
        return x * 1.0


class Wrapper(Component):
    def __init__(self, sub):
        super().__init__(sub, scope="outer")
        self.sub = sub

    @api
    def run(self, obs):
        return self.sub.apply(obs)

    @api
    def other(self, obs2):
        return self.sub.apply(obs2)


def test_space_mismatch_names_component_method_argument_and_spaces(backend):
    with pytest.raises(SpaceMismatchError) as info:
        build(Wrapper(Strict("policy")), {"obs": "float32[B,4]", "obs2": "float32[B,4]"}, backend)
    err = info.value
    assert (err.component, err.method, err.argument) == ("outer/policy", "apply", "x")
    assert err.expected == "float32[B,3]" and err.received == "float32[B,4]"
    assert str(err).startswith("space mismatch at outer/policy.apply(x): expected float32[B,3], received float32[B,4]")


def test_space_mismatch_keeps_the_components_detail(backend):
    with pytest.raises(SpaceMismatchError, match="needs exactly 3 features"):
        build(Strict(), {"x": "float32[B,4]"}, backend)


def test_one_argument_receiving_two_spaces_is_refused(backend):
    with pytest.raises(SpaceMismatchError) as info:
        build(Wrapper(Strict("policy")), {"obs": "float32[B,3]", "obs2": "float32[B,5]"}, backend)
    msg = str(info.value)
    assert "outer/policy.apply(x)" in msg and "float32[B,3]" in msg and "float32[B,5]" in msg
    assert "already received" in msg and "one argument name takes one space" in msg


def test_missing_root_space_names_method_and_argument(backend):
    with pytest.raises(BuildError, match=r"no input space for root API argument\(s\) other\(obs2\) of Wrapper"):
        build(Wrapper(Strict()), {"obs": "float32[B,3]"}, backend)


def test_unknown_input_space_key(backend):
    msg = r"unknown root API argument\(s\) \['obz'\]; the root API takes \['obs', 'obs2'\]"
    with pytest.raises(BuildError, match=msg):
        build(Wrapper(Strict()), {"obs": B3, "obs2": B3, "obz": B3}, backend)


def test_bad_input_space_text_names_the_argument(backend):
    with pytest.raises(BuildError, match=r"input space for root API argument apply\(x\)"):
        build(Strict(), {"x": "float32[B,"}, backend)


@pytest.mark.parametrize("fn, returns, message", [
    (lambda F, x: 1.5, 1, r"returned float 1\.5 as output 0; graph functions must return {b} tensors"),
    (lambda F, x: {"a": x, "b": np.zeros(2)}, 1, r"returned ndarray .* as output 0 at 'b'; graph functions must"),
    (lambda F, x: x, 2, r"declares returns=2 but returned \w*Tensor"),
    (lambda F, x: (x, x, x), 2, r"declares returns=2 but returned tuple of length 3"),
    (lambda F, x: F.transpose(x, (1, 0)), 1, r"output 0 has dimensions \[1\] that follow the batch/time size"),
], ids=["python-float", "numpy-leaf", "one-of-two", "three-of-two", "batch-not-leading"])
def test_bad_graph_function_outputs_name_the_graph_function(backend, fn, returns, message):
    class Bad(Component):
        def __init__(self):
            super().__init__(scope="bad")

        @api
        def apply(self, x):
            return self._graph_fn_bad(x)

        @graph_fn(returns=returns)
        def _graph_fn_bad(self, F, x):
            return fn(F, x)

    with pytest.raises(BuildError, match=r"graph function bad\.apply -> bad\._graph_fn_bad") as info:
        build(Bad(), {"x": "float32[B,3]"}, backend)
    assert re.search(message.format(b=backend), str(info.value)), str(info.value)


def test_failing_graph_function_names_component_function_and_spaces(backend):
    comp = Apply(lambda F, x: F.matmul(x, comp.variables["w"]), scope="mm", variables={"w": (5, 2)})
    with pytest.raises(BuildError) as info:
        build(comp, {"x": B3}, backend)
    msg = str(info.value)
    assert msg.startswith("graph function mm.apply -> mm._graph_fn_apply failed on inputs with spaces (x=float32[B,3])")
    assert ("RuntimeError" if backend == "torch" else "InvalidArgumentError") in msg
    assert isinstance(info.value.__cause__, Exception)


def test_failing_create_variables_names_the_component(backend):
    comp = Apply(lambda F, x: x, scope="vars", variables={"w": (-1, 2)})
    with pytest.raises(BuildError, match=r"Apply 'vars' failed to create its variables for input spaces"):
        build(comp, {"x": B3}, backend)


class Stuck(Component):
    """``second``'s argument can only come from this component's own graph function."""

    def __init__(self):
        super().__init__(scope="stuck")

    def create_variables(self, input_spaces):
        self.get_variable("w", (input_spaces["h"].shape[-1],))

    @api
    def first(self, x):
        return self.second(self._graph_fn_twice(x))

    @api
    def second(self, h):
        return self._graph_fn_twice(h)

    @graph_fn
    def _graph_fn_twice(self, F, x):
        return x * 2.0


def test_stuck_build_lists_component_argument_and_suggests_a_fix(backend):
    with pytest.raises(BuildError) as info:
        build(Stuck(), {"x": B3}, backend, api_methods=["first"])
    msg = str(info.value)
    assert "the build cannot go on" in msg
    assert "stuck: argument 'h' of API method 'second' has no space" in msg
    assert "stuck.first -> stuck._graph_fn_twice" in msg
    assert "must_be_complete=False" in msg


def test_must_be_complete_false_unblocks_the_build(backend):
    class Unstuck(Stuck):
        def create_variables(self, input_spaces):
            self.get_variable("w", (input_spaces["x"].shape[-1],))

        @api(must_be_complete=False)
        def second(self, h):
            return self._graph_fn_twice(h)

    ex = build(Unstuck(), {"x": B3}, backend, api_methods=["first"])
    np.testing.assert_array_equal(ex.execute("first", np.ones((1, 3), np.float32)), np.full((1, 3), 4.0))


class EagerOnly(Component):
    """Reads a tensor's NumPy value: fine in the eager sample runs, fails when TF traces the API."""

    def __init__(self):
        super().__init__(scope="eager_only")

    @api
    def apply(self, inputs):
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F, inputs):
        return inputs * float(inputs.numpy().size >= 0)


def test_an_api_that_fails_to_compile_is_a_build_error():
    with pytest.raises(BuildError, match=r"EagerOnly 'eager_only': API method 'apply' failed to compile on "
                                         r"backend 'tf' \(the eager sample runs passed\): AttributeError"):
        GraphExecutor(EagerOnly(), {"inputs": "float32[B,2]"}, backend="tf")
