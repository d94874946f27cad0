"""The executor's and backends' per-call fast paths (issue 18) give what the general paths give."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.inputs import arg_converter
from harness.graph import Component, api, graph_fn
from harness.graph.errors import ExecutionError
from harness.spaces import Dict, FloatBox, IntBox
from harness.testing.plugin import selected_backends

SPACE = Dict(a=FloatBox(2, batch_rank=True), n=IntBox(4, batch_rank=True))
VALUE = {"a": np.ones((3, 2), np.float32), "n": np.array([0, 1, 3])}


def test_flat_dict_fast_path_equals_the_general_path(monkeypatch):
    fast = arg_converter("Root 'root'", "apply", "obs", SPACE, lambda x: ("fed", x))
    out = fast(VALUE)
    assert list(out) == ["a", "n"] and all(v[0] == "fed" for v in out.values())
    np.testing.assert_array_equal(out["n"][1], VALUE["n"])
    # The fast path is taken: flatten_value is never called for a plain dict with exactly the keys.
    monkeypatch.setattr(type(SPACE), "flatten_value", lambda *a, **k: pytest.fail("general path taken"))
    fast(VALUE)


def test_flat_dict_fast_path_leaves_bad_values_to_the_general_errors():
    convert = arg_converter("Root 'root'", "apply", "obs", SPACE, lambda x: x)
    with pytest.raises(ExecutionError, match=r"apply\(obs\): .*missing \['n'\]"):
        convert({"a": VALUE["a"]})
    with pytest.raises(ExecutionError, match=r"unexpected \['z'\]"):
        convert({**VALUE, "z": 1})
    with pytest.raises(ExecutionError, match=r"apply\(obs/n\): dtype float64 cannot be cast to int64"):
        convert({**VALUE, "n": np.array([1.0, 2.0, 3.0])})
    # A dict subclass takes the general path and gives the same result.
    class Sub(dict):
        pass
    np.testing.assert_array_equal(convert(Sub(VALUE))["a"], VALUE["a"])


def test_nested_dict_takes_the_general_path(monkeypatch):
    nested = Dict(x=SPACE, b=FloatBox(1, batch_rank=True))
    convert = arg_converter("Root 'root'", "apply", "obs", nested, lambda x: x)
    calls = []
    general = Dict.flatten_value
    monkeypatch.setattr(Dict, "flatten_value", lambda self, *a, **k: calls.append(self) or general(self, *a, **k))
    out = convert({"x": VALUE, "b": np.zeros((3, 1), np.float32)})
    np.testing.assert_array_equal(out["x"]["n"], VALUE["n"])
    assert calls, "a nested Dict was converted without the general path"


def test_torch_api_call_sets_and_restores_grad_and_inference_mode():
    torch = pytest.importorskip("torch")
    from harness.backends.torch.backend import TorchBackend

    seen = []

    def fn(x):
        seen.append((torch.is_grad_enabled(), torch.is_inference_mode_enabled()))
        if x is None:
            raise ValueError("planted")
        return x

    backend = TorchBackend(0)
    acting = backend.compile_api("act", fn, {})
    with_grad = backend.compile_api("update", fn, {}, gradients=True)
    assert torch.is_grad_enabled()
    acting(1)
    with torch.no_grad():
        with_grad(1)
        assert not torch.is_grad_enabled()
    with pytest.raises(ValueError, match="planted"):
        acting(None)
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()  # restored after the exception
    # acting: no recording, in inference mode; updating: recording, never in inference mode
    assert seen == [(False, True), (True, False), (False, True)]


class _ConvFit(Component):
    """A `Conv2D` fitted by SGD: ``predict`` (no gradients) and ``update`` (gradients) on one kernel variable."""

    spec_exempt = "test fixture"

    def __init__(self) -> None:
        from reference_agents.components.nn import Conv2D
        from reference_agents.components.optimizers import SGD

        conv = Conv2D(2, 3, scope="conv")
        opt = SGD(0.5, conv)
        super().__init__(conv, opt, scope="fit")
        self.conv, self.opt = conv, opt

    @api
    def predict(self, inputs):
        return self.conv.apply(inputs)

    @api
    def update(self, inputs, targets):
        return self.opt.step(self._graph_fn_mse(self.conv.apply(inputs), targets))

    @graph_fn
    def _graph_fn_mse(self, F, predictions, targets):
        return F.reduce_mean(F.square(predictions - targets))


def test_torch_acting_between_updates_leaves_nothing_an_update_cannot_record():
    """Acting runs in inference mode and keeps each kernel's OIHW copy between calls; updates record gradients
    through the kernel variable itself. Interleaved, they must give what updates alone give: the copy made while
    acting is never saved for backward, and an update's in-place step makes the next act use the new kernel."""
    pytest.importorskip("torch")
    from harness.execution.executor import GraphExecutor

    spaces = {"inputs": "float32[B,5,5,1]", "targets": "float32[B,3,3,2]"}
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=(2, 5, 5, 1)).astype(np.float32), rng.normal(size=(2, 3, 3, 2)).astype(np.float32))
               for _ in range(3)]
    acting = GraphExecutor(_ConvFit(), spaces, "torch", seed=4)
    alone = GraphExecutor(_ConvFit(), spaces, "torch", seed=4)
    for x, y in batches:
        before = acting.execute("predict", x)
        np.testing.assert_allclose(before, alone.execute("predict", x), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(acting.execute("update", x, y)[0], alone.execute("update", x, y)[0], rtol=1e-6)
        after = acting.execute("predict", x)
        assert not np.allclose(after, before), "the act after an update used the kernel from before it"
        np.testing.assert_allclose(after, alone.execute("predict", x), rtol=1e-6, atol=1e-6)


class _OwnLoss(Component):
    """``fit(x)``: one graph function computing a loss of its variable and differentiating it with
    ``F.value_and_grad``, written in the function itself (``direct``) or in a helper (``helper``)."""

    spec_exempt = "test fixture"

    def __init__(self, through_helper: bool) -> None:
        super().__init__(scope="own_loss")
        self.through_helper = through_helper

    def create_variables(self, input_spaces):
        self.v = self.get_variable("v", shape=(3,), dtype="float32", initializer=np.array([1.0, -2.0, 0.5]))

    @api
    def fit(self, x):
        return self._graph_fn_helper(x) if self.through_helper else self._graph_fn_direct(x)

    @graph_fn
    def _graph_fn_direct(self, F, x):
        value, grads = F.value_and_grad(lambda: F.reduce_sum(F.square(self.v * x)), [self.v])
        return grads[0]

    @graph_fn
    def _graph_fn_helper(self, F, x):
        return _value_and_grad_by_helper(F, self.v, x)


def _value_and_grad_by_helper(F, v, x):
    return F.value_and_grad(lambda: F.reduce_sum(F.square(v * x)), [v])[1][0]


@pytest.mark.parametrize("backend", selected_backends())
def test_value_and_grad_in_a_graph_function_runs_its_method_with_recording(backend):
    """A graph function calling ``F.value_and_grad`` itself needs no ``gradients=True``: the build sees the call
    and runs its API method with recording (on PyTorch not in inference mode, where nothing is recorded)."""
    from harness.execution.executor import GraphExecutor

    x = np.array([[0.5, 1.0, -1.0], [2.0, 0.0, 1.0]], np.float32)
    expected = 2.0 * np.array([1.0, -2.0, 0.5]) * (x ** 2).sum(0)
    ex = GraphExecutor(_OwnLoss(through_helper=False), {"x": "float32[B,3]"}, backend, seed=0)
    assert ex._gradients == {"fit": True}
    np.testing.assert_allclose(ex.execute("fit", x), expected, rtol=1e-5)


def test_value_and_grad_through_a_helper_without_gradients_says_what_to_declare():
    """Through a helper the build cannot see the call: on PyTorch the method runs in inference mode, and the op
    says to declare ``gradients=True`` instead of PyTorch's error about tensors that do not require grad."""
    pytest.importorskip("torch")
    from harness.execution.executor import GraphExecutor

    ex = GraphExecutor(_OwnLoss(through_helper=True), {"x": "float32[B,3]"}, "torch", seed=0)
    with pytest.raises(ExecutionError, match=r"'fit'.*declare @graph_fn\(gradients=True\)"):
        ex.execute("fit", np.ones((2, 3), np.float32))


class _Unused(Component):
    """``scale(x, ignored)`` reads only ``x``; ``echo(x, y)`` returns ``y`` as it is (an output is a use)."""

    spec_exempt = "test fixture"

    def __init__(self) -> None:
        super().__init__(scope="unused")

    @api
    def scale(self, x, ignored):
        return self._graph_fn_double(x)

    @api
    def echo(self, x, y):
        return self._graph_fn_double(x), y

    @graph_fn
    def _graph_fn_double(self, F, x):
        return x * 2.0


@pytest.mark.parametrize("backend", selected_backends())
def test_an_argument_no_step_reads_is_not_converted_unless_validating(backend):
    from harness.execution.executor import GraphExecutor
    from harness.graph.chain import unused_args
    from harness.graph.errors import InputValidationError

    spaces = {"x": "float32[B,2]", "ignored": "int64[]", "y": "float32[B,2]"}
    x = np.array([[1.0, -2.0]], np.float32)
    fast = GraphExecutor(_Unused(), spaces, backend, seed=0, validate=False)
    assert unused_args(fast.assembly.traces["scale"]) == ("ignored",)
    assert unused_args(fast.assembly.traces["echo"]) == ()
    # any value passes where nothing reads it (it is not looked at), and the results are those of a fitting one
    for value in (np.int64(3), "not a time step", np.zeros((4, 4))):
        np.testing.assert_array_equal(fast.execute("scale", x, value), 2 * x)
    out, echoed = fast.execute("echo", x, x + 1)
    np.testing.assert_array_equal(echoed, x + 1)
    with pytest.raises(ExecutionError, match=r"echo\(y\): shape \(3,\) does not fit"):
        fast.execute("echo", x, np.zeros(3, np.float32))   # an argument that is read is still converted
    with pytest.raises(ExecutionError, match=r"takes 2 input\(s\)"):
        fast.execute("scale", x, 1, 2)                    # and the arity is still checked
    checked = GraphExecutor(_Unused(), spaces, backend, seed=0, validate=True)
    np.testing.assert_array_equal(checked.execute("scale", x, np.int64(3)), 2 * x)
    with pytest.raises(InputValidationError, match=r"scale\(ignored\)"):
        checked.execute("scale", x, np.zeros((4, 4)))


@pytest.mark.parametrize("backend", selected_backends())
def test_arrays_that_fit_are_fed_inline_and_everything_else_through_the_converter(backend):
    from harness.execution.executor import GraphExecutor

    spaces = {"x": "float32[B,2]", "ignored": "int64[]", "y": "float32[B,2]"}
    ex = GraphExecutor(_Unused(), spaces, backend, seed=0, validate=False)
    call = ex._calls["echo"]
    x = np.array([[1.0, -2.0], [3.0, 4.5]], np.float32)
    converted = []
    for name in ("c0", "c1"):  # the generated call's converters of x and y, counting what they are given
        conv = call.__globals__[name]
        call.__globals__[name] = lambda v, conv=conv: converted.append(v) or conv(v)
    out, echoed = ex.execute("echo", x, x + 1)
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_array_equal(echoed, x + 1)
    assert converted == []  # both arrays fit their spaces: fed without a converter call
    # a reversed view of the right dtype and shape is fed inline too (PyTorch's feed copies what it cannot share)
    out, echoed = ex.execute("echo", x[::-1], x[::-1])
    np.testing.assert_array_equal(out, 2 * x[::-1])
    np.testing.assert_array_equal(echoed, x[::-1])
    assert converted == []
    # another dtype, a list and a wrong shape go through the converter: cast, converted, or refused naming the argument
    out, _ = ex.execute("echo", x.astype(np.float64), x.tolist())
    np.testing.assert_array_equal(out, 2 * x)
    assert len(converted) == 2 and converted[0].dtype == np.float64 and isinstance(converted[1], list)
    with pytest.raises(ExecutionError, match=r"echo\(x\): shape \(2, 2, 1\) does not fit"):
        ex.execute("echo", x[..., None], x)
    with pytest.raises(ExecutionError, match=r"echo\(x\): shape \(2, 3\) does not fit"):
        ex.execute("echo", np.zeros((2, 3), np.float32), x)  # the rank fits, the core shape does not
    with pytest.raises(ExecutionError, match=r"echo\(y\): shape \(2,\) does not fit"):
        ex.execute("echo", x, x[0])
    with pytest.raises(ExecutionError, match=r"echo\(x\): dtype complex64 cannot be cast to float32"):
        ex.execute("echo", x.astype(np.complex64), x)


def test_a_constant_exploration_rate_leaves_the_time_step_of_act_unread():
    pytest.importorskip("torch")
    from harness.graph.chain import unused_args
    from reference_agents.agents import DQNAgent
    from spacegraph.reports.sampling_contenders import CARTPOLE_CONFIG, load_config

    cfg = load_config(CARTPOLE_CONFIG)
    linear = DQNAgent(cfg, backend="torch", seed=0)
    assert unused_args(linear.executor.assembly.traces["act"]) == ()
    cfg["exploration"] = {"type": "constant", "value": 0.25}
    constant = DQNAgent(cfg, backend="torch", seed=0)
    assert unused_args(constant.executor.assembly.traces["act"]) == ("time_step",)


def test_torch_small_outputs_leave_as_numpy_copies_equal_to_numpy():
    """`TorchBackend.to_numpy` takes small outputs through ``tolist``: the same dtype, shape and bits as
    ``numpy()``, in an array of its own, for every dtype it takes that way; larger and empty ones as before."""
    torch = pytest.importorskip("torch")
    from harness.backends.torch.backend import SMALL_OUTPUT, TorchBackend

    backend = TorchBackend(0)
    rng = np.random.default_rng(0)
    cases = []
    for dtype in (np.float64, np.float32, np.float16):
        info = np.finfo(dtype)
        extremes = [np.nan, -0.0, np.inf, -np.inf, info.max, info.min, info.tiny, info.smallest_subnormal, 0.1]
        cases += [np.array(extremes, dtype), np.array(-0.0, dtype), rng.normal(size=(2, 3)).astype(dtype)]
    for dtype in (np.int64, np.int32, np.int16, np.int8, np.uint8):
        info = np.iinfo(dtype)
        cases += [np.array([info.min, info.max, 0, 1], dtype), np.array(info.max, dtype)]
    cases += [np.array([True, False]), np.array(True), np.zeros((0, 3), np.float32), np.zeros((4, 0), np.int64),
              rng.normal(size=SMALL_OUTPUT + 1).astype(np.float32), np.arange(SMALL_OUTPUT, dtype=np.int64)]
    for value in cases:
        tensor = torch.from_numpy(value.copy())
        out = backend.to_numpy(tensor)
        assert out.dtype == value.dtype and out.shape == value.shape, (value.dtype, value.shape, out.dtype, out.shape)
        assert out.tobytes() == value.tobytes(), value      # the same bits (NaN, -0.0 and the extremes too)
        if value.size:
            tensor.view(-1)[0] = 1                           # a copy: the tensor's later changes do not reach it
            assert out.tobytes() == value.tobytes()
