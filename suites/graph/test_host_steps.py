"""Graph functions of scalars only run on the host (NumPy) on PyTorch, with the backend's values and dtypes.

`harness.graph.steps.host_step` decides at build time; these tests check which steps it takes, which it
leaves on the backend, and that what leaves a host step is what the backend would have computed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.backends.host_ops import HostOps
from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, parse

STEP = parse("int64[]")           # a time step
RATE = parse("float32[]")


class Scalar(Component):
    """One graph function ``fn(F, x)`` on a scalar; records the op namespace of every run in ``ran_with``."""

    def __init__(self, fn, scope="scalar", device=None):
        super().__init__(scope=scope, device=device)
        self.fn, self.ran_with = fn, []

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        self.ran_with.append(F.name)
        return self.fn(F, x)


class Schedule(Component):
    """A linear and an exponential schedule of a time step, clipped, as exploration schedules are written."""

    def __init__(self, scope="schedule"):
        super().__init__(scope=scope)

    @api
    def linear(self, t):
        return self._graph_fn_linear(t)

    @api
    def exponential(self, t):
        return self._graph_fn_exponential(t)

    @graph_fn(output_spaces=lambda self, t: FloatBox((), 0.05, 1.0))
    def _graph_fn_linear(self, F, t):
        return F.clip(F.cast(t, "float32") * (-0.95 / 1000.0) + 1.0, 0.05, 1.0)

    @graph_fn
    def _graph_fn_exponential(self, F, t):
        return 0.01 + 0.99 * F.exp(F.maximum(F.cast(t, "float32"), 0.0) * (-math.log(2.0) / 250.0))


def build(root, spaces, backend):
    return GraphExecutor(root, spaces, backend=backend, seed=3)


def host_steps(ex):
    return ex.profile.host_steps


# ---- what runs on the host -----------------------------------------------------------------------


def test_scalar_schedules_run_on_the_host_on_torch_with_numpy_oracle_values():
    ex = build(Schedule(), {"t": STEP}, "torch")
    assert host_steps(ex) == 2
    assert "_graph_fn_linear (host)" in ex.apis["linear"].source
    ts = np.array([-7, 0, 1, 499, 500, 999, 1000, 10**6, -10**6], np.int64)
    linear = np.clip(ts.astype(np.float32) * np.float32(-0.95 / 1000.0) + np.float32(1.0), 0.05, 1.0)
    exponential = 0.01 + 0.99 * np.exp(np.maximum(ts, 0).astype(np.float64) * (-math.log(2.0) / 250.0))
    for t, lin, exp in zip(ts, linear, exponential):
        out = ex.execute("linear", t)
        assert out.dtype == np.float32 and out.shape == ()
        assert out == pytest.approx(lin, rel=1e-6), t
        assert ex.execute("exponential", t) == pytest.approx(exp, rel=1e-6), t


def test_host_steps_agree_with_tensorflow(both_backends):
    tf_ex, torch_ex = (build(Schedule(), {"t": STEP}, b) for b in both_backends)
    assert host_steps(tf_ex) == 0 and host_steps(torch_ex) == 2   # TF runs everything in its graph
    for t in np.random.default_rng(0).integers(-100, 3000, 50):
        for method in ("linear", "exponential"):
            np.testing.assert_allclose(torch_ex.execute(method, t), tf_ex.execute(method, t), rtol=1e-6)


def test_the_host_runs_with_numpy_ops_and_outputs_are_torch_tensors_of_the_space_dtype():
    import torch

    comp = Scalar(lambda F, x: x * 0.5)      # int64 * 0.5: float32 on torch, float64 in NumPy
    ex = build(comp, {"x": STEP}, "torch")
    assert ex.apis["apply"].output_space == parse("float32[]")
    assert host_steps(ex) == 1
    comp.ran_with.clear()
    fn = ex.api_function("apply")
    out = fn(torch.tensor(7))
    assert comp.ran_with == ["host"]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == () and out.item() == 3.5
    assert ex.execute("apply", np.int64(-3)).dtype == np.float32


@pytest.mark.parametrize("fn", [
    pytest.param(lambda F, x: x + F.random_uniform(()), id="a random draw"),
    pytest.param(lambda F, x: F.reduce_sum(F.expand_dims(x, 0)), id="a shape op"),
    pytest.param(lambda F, x: x * 2.0 if F.name == "torch" else x * 3.0, id="a host result that differs"),
])
def test_a_step_the_host_cannot_match_stays_on_torch(fn):
    comp = Scalar(fn)
    ex = build(comp, {"x": RATE if "random" in str(fn) else STEP}, "torch")
    assert host_steps(ex) == 0
    comp.ran_with.clear()
    ex.execute("apply", np.float32(2.0) if "random" in str(fn) else np.int64(2000))
    assert comp.ran_with == ["torch"]


def test_batched_placed_recording_and_torch_only_steps_stay_on_torch():
    assert host_steps(build(Scalar(lambda F, x: x * 2.0), {"x": parse("float32[B]")}, "torch")) == 0
    assert host_steps(build(Scalar(lambda F, x: x * 2.0), {"x": parse("float32[1]")}, "torch")) == 0
    assert host_steps(build(Scalar(lambda F, x: x * 2.0, device="cpu"), {"x": RATE}, "torch")) == 0

    class TorchBody(Scalar):
        @graph_fn
        def _graph_fn_apply(self, F, x):
            return x * 2.0

        @_graph_fn_apply.torch
        def _graph_fn_apply(self, F, x):
            return x * 2.0

    assert host_steps(build(TorchBody(None), {"x": RATE}, "torch")) == 0


class ScaledLoss(Component):
    """``update``: a batch loss, a scalar step scaling it, then the gradient; ``scale``: the scalar step alone."""

    def __init__(self):
        super().__init__(scope="scaled_loss")

    def create_variables(self, input_spaces):
        self.w = self.get_variable("w", (3,), "float32", "ones")

    @api
    def update(self, x):
        return self._graph_fn_gradient_sum(self._graph_fn_scale(self._graph_fn_loss(x)))

    @api
    def scale(self, loss):
        return self._graph_fn_scale(loss)

    @graph_fn
    def _graph_fn_loss(self, F, x):
        return F.reduce_mean(F.square(x * self.w))

    @graph_fn
    def _graph_fn_scale(self, F, loss):
        return loss * 2.0

    @graph_fn(gradients=True)
    def _graph_fn_gradient_sum(self, F, loss):
        return F.reduce_sum(F.gradients(loss, [self.w])[0])


def test_a_method_recording_gradients_keeps_its_scalar_steps_on_the_backend(backend):
    # A host step's output is a new tensor without the autograd history of its input: run on the host between
    # the loss and the gradient step, the scalar scaling silently made the PyTorch gradient 0.
    ex = build(ScaledLoss(), {"x": parse("float32[B,3]"), "loss": RATE}, backend)
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    # d/dw of 2 * mean((x * w)^2) at w = 1, summed over w: 2 * 2 * sum(x^2) / x.size
    np.testing.assert_allclose(ex.execute("update", x), 4.0 * np.sum(x.astype(np.float64) ** 2) / x.size, rtol=1e-5)
    assert "(host)" not in ex.apis["update"].source
    assert ("(host)" in ex.apis["scale"].source) == (backend == "torch")   # the same step, not recording
    assert host_steps(ex) == (1 if backend == "torch" else 0)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")   # NaN to int32, as torch casts it
def test_a_step_with_constant_arguments_and_several_outputs_runs_on_the_host():
    class Pair(Component):
        def __init__(self):
            super().__init__(scope="pair")

        @api
        def apply(self, x):
            return self._graph_fn_pair(x, 4.0)

        @graph_fn(returns=2)
        def _graph_fn_pair(self, F, x, c):
            return F.minimum(x, c), F.cast(F.maximum(x, c), "int32")

    ex = build(Pair(), {"x": RATE}, "torch")
    assert host_steps(ex) == 1
    low, high = ex.execute("apply", np.float32(6.5))
    assert (low, high) == (4.0, 6) and low.dtype == np.float32 and high.dtype == np.int32
    import torch

    low, high = ex.api_function("apply")(torch.tensor(float("nan")))   # (execute refuses NaN inputs in tests)
    assert torch.isnan(low) and low.dtype == torch.float32   # NaN propagates, as through torch.minimum


# ---- HostOps itself ------------------------------------------------------------------------------


@pytest.mark.parametrize("op, args, want", [
    ("clip", (np.float32(2.0), 0.0, 1.0), np.float32(1.0)),
    ("clip", (np.float32(-1.0), 0.0, 1.0), np.float32(0.0)),
    ("clip", (np.float32(0.25), 0.0, 1.0), np.float32(0.25)),
    ("clip", (np.float32("nan"), 0.0, 1.0), np.float32("nan")),
    ("maximum", (np.float32(-1.0), 0.0), np.float32(0.0)),
    ("cast", (np.float32(-2.7), "int64"), np.int64(-2)),
    ("cast", (np.float32(0.5), "bool"), np.bool_(True)),
    ("sigmoid", (np.float32(-200.0),), np.float32(0.0)),
    ("sigmoid", (np.float32(200.0),), np.float32(1.0)),
    ("elu", (np.float32(-1.0),), np.float32(math.expm1(-1.0))),
    ("softplus", (np.float32(30.0),), np.float32(30.0)),
    ("where", (np.bool_(False), np.float32(1.0), np.float32(2.0)), np.float32(2.0)),
])
def test_host_ops_match_the_backends_on_scalars(op, args, want):
    got = getattr(HostOps(), op)(*args)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


_XS = [np.float32(v) for v in (-2.0, -0.0, 0.0, 0.05, 0.3, 0.7, 1.0, 7.5, np.inf, -np.inf, np.nan)] + \
    [np.float64(0.049999999), np.float16(2.0), np.float64(np.nan), np.int64(3), np.int32(-4), np.bool_(True)]
_BOUNDS = [0, 1, -1, 0.05, 0.7, 1.0, -0.0, 0.0, 1e-50, -1e-50, 2.5, 1e300, float("inf"), float("nan"),
           np.float32(0.5), np.float64(0.05), np.int64(2)]


@pytest.mark.parametrize("x", _XS, ids=repr)
def test_host_maximum_minimum_and_clip_give_what_the_numpy_ufuncs_give(x):
    """The Python comparisons of NumPy float scalars with Python numbers against the ufuncs they stand for:
    the same value (NaN where NaN) and the same type, for every bound, in range or inverted."""
    def same(got, want, what):
        assert type(got) is type(want), f"{what}: {type(got).__name__} against the ufuncs' {type(want).__name__}"
        assert (np.isnan(got) and np.isnan(want)) if np.isnan(want) else (got == want and
                                                                          np.signbit(got) == np.signbit(want)), \
            f"{what}: {got!r} against the ufuncs' {want!r}"

    with np.errstate(all="ignore"):
        for y in _BOUNDS:
            same(HostOps.maximum(x, y), np.maximum(x, y), f"maximum({x!r}, {y!r})")
            same(HostOps.minimum(x, y), np.minimum(x, y), f"minimum({x!r}, {y!r})")
            for high in _BOUNDS:
                same(HostOps.clip(x, y, high), np.minimum(np.maximum(x, y), high), f"clip({x!r}, {y!r}, {high!r})")


def test_host_ops_refuse_arrays_and_lack_what_the_host_cannot_do():
    with pytest.raises(TypeError, match="HostOps.cast takes scalars; got shape"):
        HostOps.cast(np.zeros(3), "float32")
    for name in ("random_uniform", "assign", "reduce_sum", "conv2d", "gradients"):
        assert not hasattr(HostOps, name)
