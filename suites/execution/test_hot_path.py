"""The executor's and backends' per-call fast paths (issue 18) give what the general paths give."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import _arg_converter
from harness.graph import Component, api, graph_fn
from harness.graph.errors import ExecutionError
from harness.spaces import Dict, FloatBox, IntBox
from harness.testing.plugin import selected_backends

SPACE = Dict(a=FloatBox(2, batch_rank=True), n=IntBox(4, batch_rank=True))
VALUE = {"a": np.ones((3, 2), np.float32), "n": np.array([0, 1, 3])}


def test_flat_dict_fast_path_equals_the_general_path(monkeypatch):
    fast = _arg_converter("Root 'root'", "apply", "obs", SPACE, lambda x: ("fed", x))
    out = fast(VALUE)
    assert list(out) == ["a", "n"] and all(v[0] == "fed" for v in out.values())
    np.testing.assert_array_equal(out["n"][1], VALUE["n"])
    # The fast path is taken: flatten_value is never called for a plain dict with exactly the keys.
    monkeypatch.setattr(type(SPACE), "flatten_value", lambda *a, **k: pytest.fail("general path taken"))
    fast(VALUE)


def test_flat_dict_fast_path_leaves_bad_values_to_the_general_errors():
    convert = _arg_converter("Root 'root'", "apply", "obs", SPACE, lambda x: x)
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
    convert = _arg_converter("Root 'root'", "apply", "obs", nested, lambda x: x)
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
