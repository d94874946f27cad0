"""Gradients across steps: a loss computed by one component, differentiated by another's graph function."""

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from reference_agents.components.common import Dense


class MeanSquaredError(Component):
    def __init__(self):
        super().__init__(scope="mse")

    @api
    def loss(self, predictions, targets):
        return self._graph_fn_loss(predictions, targets)

    @graph_fn
    def _graph_fn_loss(self, F, predictions, targets):
        return F.reduce_mean(F.square(predictions - targets))


class PlainSGD(Component):
    """w <- w - lr * dL/dw over the variables of ``model``."""

    def __init__(self, model, lr):
        super().__init__(scope="sgd")
        self.model, self.lr = model, lr

    def variable_dependencies(self):
        return [self.model]

    @api
    def step(self, loss):
        return self._graph_fn_step(loss)

    @graph_fn(gradients=True)
    def _graph_fn_step(self, F, loss):
        variables = list(self.model.all_variables().values())
        for var, grad in zip(variables, F.gradients(loss, variables)):
            F.assign(var, var - self.lr * grad)
        return loss


class Regression(Component):
    def __init__(self, lr=0.1):
        dense = Dense(2, scope="dense")
        super().__init__(dense, MeanSquaredError(), PlainSGD(dense, lr), scope="regression")

    @api
    def predict(self, inputs):
        return self.sub_components["dense"].apply(inputs)

    @api
    def update(self, inputs, targets):
        predictions = self.sub_components["dense"].apply(inputs)
        loss = self.sub_components["mse"].loss(predictions, targets)
        return self.sub_components["sgd"].step(loss)


SPACES = {"inputs": "float32[B,3]", "targets": "float32[B,2]"}


def numpy_update(w, b, x, y, lr):
    pred = x @ w + b
    diff = pred - y
    loss = np.mean(diff ** 2)
    g_pred = 2.0 * diff / diff.size
    return loss, w - lr * x.T @ g_pred, b - lr * g_pred.sum(0)


def test_update_follows_numpy_gradient_descent(backend):
    ex = GraphExecutor(Regression(), SPACES, backend=backend, seed=4)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    w, b = ex.get_weights()["regression/dense/kernel"], ex.get_weights()["regression/dense/bias"]
    for _ in range(3):
        loss = ex.execute("update", x, y)
        want_loss, w, b = numpy_update(w, b, x, y, 0.1)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
        np.testing.assert_allclose(ex.get_weights()["regression/dense/kernel"], w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ex.get_weights()["regression/dense/bias"], b, rtol=1e-5, atol=1e-6)


def test_only_apis_reaching_a_gradient_step_record(backend):
    ex = GraphExecutor(Regression(), SPACES, backend=backend, seed=4)
    x = np.ones((2, 3), np.float32)
    if backend == "torch":
        import torch

        out = ex.api_function("predict")(torch.as_tensor(x))
        assert not out.requires_grad  # acting stays on the no-grad path
    before = ex.get_weights()
    ex.execute("predict", x)
    assert all(np.array_equal(before[k], v) for k, v in ex.get_weights().items())


def test_backends_take_identical_steps():
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    results = {}
    for backend in ("tf", "torch"):
        ex = GraphExecutor(Regression(lr=0.05), SPACES, backend=backend, seed=9)
        losses = [ex.execute("update", x, y) for _ in range(5)]
        results[backend] = (losses, ex.get_weights())
    np.testing.assert_allclose(results["tf"][0], results["torch"][0], rtol=1e-5)
    for key, value in results["tf"][1].items():
        np.testing.assert_allclose(value, results["torch"][1][key], rtol=1e-5, atol=1e-6)
