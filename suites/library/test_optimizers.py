"""Unit tests of the optimizers that the spec harness cannot express."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import BuildError, Component, SpaceMismatchError, api, graph_fn
from harness.testing.plugin import selected_backends
from reference_agents.components.common import Dense
from reference_agents.components.optimizers import SGD, Adam, RMSProp
from reference_agents.oracles.optimizers import AdamRegression, RMSPropRegression, SGDRegression, mse_gradients

BACKENDS = pytest.mark.parametrize("backend", selected_backends())
SPACES = {"inputs": "float32[B,3]", "targets": "float32[B,2]"}


def _data(seed: int = 0, batch: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (batch, 3)).astype(np.float32), rng.uniform(-1, 1, (batch, 2)).astype(np.float32))


def _params(ex: GraphExecutor) -> dict[str, np.ndarray]:
    w = ex.get_weights()
    return {"dense/kernel": w["regression/dense/kernel"], "dense/bias": w["regression/dense/bias"]}


def _grads(ex: GraphExecutor, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    p = _params(ex)
    return mse_gradients(x, y, p["dense/kernel"], p["dense/bias"])


# ---- clipping -------------------------------------------------------------------------------------


@BACKENDS
@pytest.mark.parametrize("clip", [0.05, 100.0])
def test_global_norm_clipping_above_and_below_the_threshold(backend, clip):
    x, y = _data(1)
    ex = GraphExecutor(SGDRegression(learning_rate=0.5, clip_grad_norm=clip), SPACES, backend, seed=2)
    before = _params(ex)
    loss, grads = _grads(ex, x, y)
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    assert 0.05 < norm < 100.0  # one threshold below the norm, one above
    out_loss, out_norm = ex.execute("update", x, y)
    np.testing.assert_allclose(out_loss, loss, rtol=1e-5)
    np.testing.assert_allclose(out_norm, norm, rtol=1e-5)  # the norm before clipping
    scale = min(1.0, clip / norm)
    after = _params(ex)
    for key, g in grads.items():
        np.testing.assert_allclose(after[key], before[key] - 0.5 * scale * g, rtol=1e-5, atol=1e-6)
    step = np.sqrt(sum(np.sum((after[k] - before[k]) ** 2) for k in before))
    np.testing.assert_allclose(step, 0.5 * min(norm, clip), rtol=1e-4)


# ---- update rules against a few lines of NumPy ----------------------------------------------------


@BACKENDS
@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_and_nesterov_follow_their_formulas(backend, nesterov):
    x, y = _data(2)
    lr, mu = 0.1, 0.9
    ex = GraphExecutor(SGDRegression(learning_rate=lr, momentum=mu, nesterov=nesterov), SPACES, backend, seed=3)
    w = {k: v.astype(np.float64) for k, v in _params(ex).items()}
    buf = {k: np.zeros_like(v) for k, v in w.items()}
    for _ in range(4):
        _, g = mse_gradients(x, y, w["dense/kernel"], w["dense/bias"])
        for k in w:
            buf[k] = mu * buf[k] + g[k]
            w[k] = w[k] - lr * (g[k] + mu * buf[k] if nesterov else buf[k])
        ex.execute("update", x, y)
    weights = ex.get_weights()
    for k in w:
        np.testing.assert_allclose(weights[f"regression/{k}"], w[k], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(weights[f"regression/optimizer/{k}/momentum"], buf[k], rtol=1e-5, atol=1e-6)


@BACKENDS
def test_adam_bias_correction_makes_the_first_step_lr_times_the_sign(backend):
    x, y = _data(3)
    lr, eps = 0.01, 1e-8
    ex = GraphExecutor(AdamRegression(learning_rate=lr, epsilon=eps), SPACES, backend, seed=4)
    before = _params(ex)
    _, g = _grads(ex, x, y)
    ex.execute("update", x, y)
    after = _params(ex)
    for k in g:
        # m_hat = g and v_hat = g^2 at t = 1: the step is lr * g / (|g| + eps), about lr * sign(g).
        np.testing.assert_allclose(after[k], before[k] - lr * g[k] / (np.abs(g[k]) + eps), rtol=1e-5, atol=1e-7)
    assert ex.get_weights()["regression/optimizer/step"] == 1
    # Step 2 by hand, with the moments and the corrections 1 - 0.9^2 and 1 - 0.999^2.
    _, g2 = _grads(ex, x, y)
    ex.execute("update", x, y)
    final = _params(ex)
    for k in g:
        m = 0.9 * (0.1 * g[k]) + 0.1 * g2[k]
        v = 0.999 * (0.001 * g[k] ** 2) + 0.001 * g2[k] ** 2
        want = after[k] - lr * (m / (1 - 0.9 ** 2)) / (np.sqrt(v / (1 - 0.999 ** 2)) + eps)
        np.testing.assert_allclose(final[k], want, rtol=1e-5, atol=1e-6)
    assert ex.get_weights()["regression/optimizer/step"] == 2


@BACKENDS
@pytest.mark.parametrize("outside", [False, True])
def test_rmsprop_puts_epsilon_inside_the_square_root_or_outside_it(backend, outside):
    # A large epsilon separates sqrt(ms + eps) (TF1's form, the default) from sqrt(ms) + eps (PyTorch's form).
    x, y = _data(4)
    lr, eps, rho = 0.01, 0.1, 0.9
    ex = GraphExecutor(RMSPropRegression(learning_rate=lr, decay=rho, epsilon=eps, epsilon_outside=outside), SPACES,
                       backend, seed=5)
    before = _params(ex)
    _, g = _grads(ex, x, y)
    ex.execute("update", x, y)
    after = _params(ex)
    for k in g:
        ms = (1 - rho) * g[k] ** 2
        tf1_form, torch_form = (before[k] - lr * g[k] / np.sqrt(ms + eps),
                                before[k] - lr * g[k] / (np.sqrt(ms) + eps))
        want, other = (torch_form, tf1_form) if outside else (tf1_form, torch_form)
        np.testing.assert_allclose(after[k], want, rtol=1e-5, atol=1e-7)
        assert not np.allclose(after[k], other, rtol=1e-5, atol=1e-7)


def test_backends_take_identical_steps():
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    x, y = _data(5)
    for fixture in (SGDRegression(learning_rate=0.05, momentum=0.9, clip_grad_norm=0.2),
                    AdamRegression(learning_rate=0.02, clip_grad_norm=0.5),
                    RMSPropRegression(learning_rate=0.01, momentum=0.5, centered=True)):
        results = {}
        for backend in ("tf", "torch"):
            ex = GraphExecutor(fixture.copy(scope="regression"), SPACES, backend=backend, seed=9)
            outputs = [ex.execute("update", x, y) for _ in range(8)]
            results[backend] = (np.array(outputs), ex.get_weights())
        np.testing.assert_allclose(results["tf"][0], results["torch"][0], rtol=1e-5, atol=1e-7)
        assert sorted(results["tf"][1]) == sorted(results["torch"][1])
        for key, value in results["tf"][1].items():
            np.testing.assert_allclose(value, results["torch"][1][key], rtol=1e-5, atol=1e-6, err_msg=key)


# ---- variables, errors, acting ----------------------------------------------------------------------


@BACKENDS
def test_slots_are_named_by_the_target_path_and_not_trainable(backend):
    ex = GraphExecutor(RMSPropRegression(momentum=0.5, centered=True), SPACES, backend, seed=0)
    keys = set(ex.get_weights())
    for path in ("dense/kernel", "dense/bias"):
        for slot in ("rms", "mean_grad", "momentum"):
            assert f"regression/optimizer/{path}/{slot}" in keys
    assert all(np.all(v == 0) for k, v in ex.get_weights().items() if k.startswith("regression/optimizer/"))
    assert len(keys) == 2 + 6  # kernel, bias and three slots for each


class _MSE(Component):
    """A loss without variables."""

    def __init__(self) -> None:
        super().__init__(scope="mse")

    @api
    def loss(self, predictions, targets):
        return self._graph_fn_mse(predictions, targets)

    @graph_fn
    def _graph_fn_mse(self, F, predictions, targets):
        return F.reduce_mean(F.square(predictions - targets))


class _BadTargets(Component):
    """A regression whose optimizer targets a frozen layer, or the (variable-free) loss component."""

    def __init__(self, what: str) -> None:
        layer, mse = Dense(2, scope="dense"), _MSE()
        layer.trainable = False
        super().__init__(layer, mse, SGD(0.1, layer if what == "frozen" else mse), scope="regression")
        self.layer, self.mse = layer, mse

    @api
    def update(self, inputs, targets):
        return self.sub_components["optimizer"].step(self.mse.loss(self.layer.apply(inputs), targets))


@BACKENDS
@pytest.mark.parametrize("what", ["frozen", "no_variables"])
def test_variables_of_without_trainable_variables_fails_the_build(backend, what):
    with pytest.raises(BuildError, match=r"regression/optimizer.*no trainable floating-point variables"):
        GraphExecutor(_BadTargets(what), SPACES, backend, seed=0)


class _PerSampleLoss(Component):
    def __init__(self) -> None:
        layer = Dense(2, scope="dense")
        super().__init__(layer, SGD(0.1, layer), scope="regression")
        self.layer = layer

    @api
    def update(self, inputs, targets):
        return self.sub_components["optimizer"].step(self._graph_fn_loss(self.layer.apply(inputs), targets))

    @graph_fn
    def _graph_fn_loss(self, F, predictions, targets):
        return F.reduce_mean(F.square(predictions - targets), axis=-1)  # [B]: not reduced to a scalar


@BACKENDS
def test_a_loss_with_a_batch_rank_is_rejected(backend):
    with pytest.raises(SpaceMismatchError, match="regression/optimizer"):
        GraphExecutor(_PerSampleLoss(), SPACES, backend, seed=0)


@BACKENDS
def test_acting_records_no_gradients_and_changes_nothing(backend):
    ex = GraphExecutor(AdamRegression(), SPACES, backend, seed=1)
    x, y = _data(6)
    if backend == "torch":
        import torch

        assert not ex.api_function("predict")(torch.as_tensor(x)).requires_grad
        loss, norm = ex.api_function("update")(torch.as_tensor(x), torch.as_tensor(y))
        assert not loss.requires_grad and not norm.requires_grad
    ex = GraphExecutor(AdamRegression(), SPACES, backend, seed=1)
    before = ex.get_weights()
    ex.execute("predict", x)
    assert all(np.array_equal(before[k], v) for k, v in ex.get_weights().items())


@pytest.mark.parametrize("make,match", [
    (lambda d: SGD(0.0, d), "learning_rate"),
    (lambda d: SGD(-1, d), "learning_rate"),
    (lambda d: SGD(True, d), "learning_rate"),
    (lambda d: SGD(0.1, [d, "x"]), "variables_of"),
    (lambda d: SGD(0.1, []), "variables_of"),
    (lambda d: SGD(0.1, d, clip_grad_norm=0), "clip_grad_norm"),
    (lambda d: SGD(0.1, d, momentum=1.0), "momentum"),
    (lambda d: SGD(0.1, d, nesterov=True), "nesterov"),
    (lambda d: SGD(0.1, d, momentum=0.5, nesterov=1), "nesterov"),
    (lambda d: Adam(0.1, d, beta1=1.0), "beta1"),
    (lambda d: Adam(0.1, d, beta2=-0.1), "beta2"),
    (lambda d: Adam(0.1, d, epsilon=0.0), "epsilon"),
    (lambda d: RMSProp(0.1, d, decay=1.5), "decay"),
    (lambda d: RMSProp(0.1, d, momentum=-0.5), "momentum"),
    (lambda d: RMSProp(0.1, d, epsilon=float("nan")), "epsilon"),
    (lambda d: RMSProp(0.1, d, centered="yes"), "centered"),
    (lambda d: RMSProp(0.1, d, epsilon_outside=1), "epsilon_outside"),
])
def test_constructor_arguments_are_checked(make, match):
    with pytest.raises(ValueError, match=match):
        make(Dense(2))


class _RootOptimized(Component):
    """An optimizer over the whole root it sits in (``variables_of=self``), Adam's slots included."""

    def __init__(self) -> None:
        layer, mse = Dense(2, scope="dense"), _MSE()
        super().__init__(layer, mse, scope="regression")
        self.add_components(Adam(0.01, self))
        self.layer, self.mse = layer, mse

    @api
    def update(self, inputs, targets):
        return self.sub_components["optimizer"].step(self.mse.loss(self.layer.apply(inputs), targets))


@BACKENDS
def test_an_optimizer_over_its_own_root_updates_the_other_branches_only(backend):
    x, y = _data(7)
    ex = GraphExecutor(_RootOptimized(), SPACES, backend, seed=2)
    assert sorted(k for k in ex.get_weights() if "/optimizer/" in k) == [
        "regression/optimizer/dense/bias/m", "regression/optimizer/dense/bias/v",
        "regression/optimizer/dense/kernel/m", "regression/optimizer/dense/kernel/v", "regression/optimizer/step"]
    before = _params(ex)
    _, g = _grads(ex, x, y)
    ex.execute("update", x, y)
    for k, value in _params(ex).items():
        np.testing.assert_allclose(value, before[k] - 0.01 * g[k] / (np.abs(g[k]) + 1e-8), rtol=1e-5, atol=1e-7)
