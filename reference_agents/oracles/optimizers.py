"""Fixture roots and NumPy models for the optimizers, written from their update equations.

An optimizer cannot be a spec's root alone: it differentiates a loss that other
components compute. Each fixture here is a linear regression, a `Dense` layer
(``dense``) trained on the mean squared error by one optimizer (``optimizer``),
with API ``predict(inputs)`` and ``update(inputs, targets) -> (loss,
grad_norm)``. Its model is the same regression in NumPy: the analytic gradient
of the MSE, global-norm clipping, then the optimizer's update rule, keeping
every variable (slots and Adam's step counter included) so that the stateful
check compares them all after every step. Maths runs in float64; the state is
stored back in each variable's dtype after a step, as the component stores it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import Component, api, forward, graph_fn
from harness.spaces import FloatBox, Space
from reference_agents.components.common import Dense
from reference_agents.components.optimizers import SGD, Adam, Optimizer, RMSProp
from reference_agents.oracles.common import dense

_PARAMS = ("dense/bias", "dense/kernel")  # the targets' relative paths, in the optimizer's (sorted) order


class _RegressionFixture(Component):
    """A `Dense` layer fitted to targets by the mean squared error and an optimizer.

    API: ``predict(inputs)`` for ``float*[B,n]`` gives ``float*[B,units]``;
    ``update(inputs, targets)`` takes one optimizer step on
    ``mean((predict(inputs) - targets)^2)`` over all elements and returns
    ``(loss, grad_norm)``, float scalars (the norm before clipping).
    Variables: ``dense/kernel``, ``dense/bias`` and the optimizer's under
    ``optimizer/``.

    Args:
        optimizer: a function ``(dense) -> Optimizer`` (the subclasses pass one).
        units: the layer's output size.
        scope: the component's name.
    """

    spec_exempt = "fixture base: specced through its per-optimizer subclasses"

    def __init__(self, optimizer: Any, units: int = 2, scope: str = "regression") -> None:
        layer = Dense(units, scope="dense")
        opt: Optimizer = optimizer(layer)
        super().__init__(layer, opt, scope=scope)
        self.layer, self.optimizer, self.units = layer, opt, units

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts ``targets`` of ``float*[B,units]`` in the dtype of ``inputs``."""
        targets, inputs = input_spaces.get("targets"), input_spaces.get("inputs")
        if targets is None:
            return
        if not (isinstance(targets, FloatBox) and targets.extra_ranks == ("B",) and targets.shape == (self.units,)
                and (inputs is None or getattr(inputs, "dtype", None) == targets.dtype)):
            raise self.space_mismatch("targets", f"a FloatBox [B,{self.units}] of the inputs' dtype", targets)

    predict = forward("layer", Dense.apply, doc="The layer's output.")

    @api
    def update(self, inputs: Any, targets: Any) -> Any:
        """One optimizer step on the mean squared error; returns ``(loss, grad_norm)``."""
        return self.optimizer.step(self._graph_fn_mse(self.layer.apply(inputs), targets))

    @graph_fn
    def _graph_fn_mse(self, F: Any, predictions: Any, targets: Any) -> Any:
        return F.reduce_mean(F.square(predictions - targets))


class SGDRegression(_RegressionFixture):
    """`_RegressionFixture` trained by `SGD` (keyword arguments as `SGD`'s, plus ``units``)."""

    spec_covers = (SGD,)

    def __init__(self, learning_rate: float = 0.1, momentum: float = 0.0, nesterov: bool = False,
                 clip_grad_norm: float | None = None, units: int = 2, scope: str = "regression") -> None:
        super().__init__(lambda layer: SGD(learning_rate, layer, momentum=momentum, nesterov=nesterov,
                                           clip_grad_norm=clip_grad_norm), units, scope)


class AdamRegression(_RegressionFixture):
    """`_RegressionFixture` trained by `Adam` (keyword arguments as `Adam`'s, plus ``units``)."""

    spec_covers = (Adam,)

    def __init__(self, learning_rate: float = 0.01, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, clip_grad_norm: float | None = None, units: int = 2,
                 scope: str = "regression") -> None:
        super().__init__(lambda layer: Adam(learning_rate, layer, beta1=beta1, beta2=beta2, epsilon=epsilon,
                                            clip_grad_norm=clip_grad_norm), units, scope)


class RMSPropRegression(_RegressionFixture):
    """`_RegressionFixture` trained by `RMSProp` (keyword arguments as `RMSProp`'s, plus ``units``)."""

    spec_covers = (RMSProp,)

    def __init__(self, learning_rate: float = 0.01, decay: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-10, centered: bool = False, clip_grad_norm: float | None = None,
                 units: int = 2, scope: str = "regression", epsilon_outside: bool = False) -> None:
        super().__init__(lambda layer: RMSProp(learning_rate, layer, decay=decay, momentum=momentum,
                                               epsilon=epsilon, centered=centered, clip_grad_norm=clip_grad_norm,
                                               epsilon_outside=epsilon_outside),
                         units, scope)


# ---- oracles and models ------------------------------------------------------------------------------


def regression_predict(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of ``predict``: ``inputs @ dense/kernel + dense/bias``."""
    return dense(inputs["inputs"], weights, {}, prefix="dense/")


def mse_gradients(x: np.ndarray, y: np.ndarray, kernel: np.ndarray,
                  bias: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """``(loss, {path: gradient})`` of ``mean((x @ kernel + bias - y)^2)`` in float64."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    diff = x @ np.asarray(kernel, np.float64) + np.asarray(bias, np.float64) - y
    d_pred = 2.0 * diff / diff.size
    return float(np.mean(diff ** 2)), {"dense/kernel": x.T @ d_pred, "dense/bias": d_pred.sum(axis=0)}


def clip_by_global_norm(grads: dict[str, np.ndarray], clip: float | None) -> tuple[dict[str, np.ndarray], float]:
    """``(grads scaled by clip / max(norm, clip), norm)``; unscaled when ``clip`` is None."""
    norm = float(np.sqrt(sum(float(np.sum(np.square(g))) for g in grads.values())))
    if clip is None or norm <= clip:
        return grads, norm
    return {k: g * (clip / norm) for k, g in grads.items()}, norm


class _RegressionModel:
    """NumPy model of a regression fixture; subclasses give the optimizer's rule in `_apply`.

    Args:
        config: the spec's fixture config.
        weights: the initial variables, relative to the fixture.
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
        self.config = dict(config)
        self._weights = {k: np.array(v) for k, v in weights.items()}

    def weights(self) -> dict[str, np.ndarray]:
        """Every variable of the fixture, slots included, by relative path."""
        return self._weights

    def _get(self, key: str) -> np.ndarray:
        return self._weights[key].astype(np.float64)

    def _set(self, key: str, value: np.ndarray) -> None:
        self._weights[key] = np.asarray(value).astype(self._weights[key].dtype)

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        """The layer's output."""
        return dense(inputs, self._weights, {}, prefix="dense/")

    def update(self, inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step: MSE gradient, clipping, then the optimizer's rule; returns ``(loss, norm)``."""
        loss, grads = mse_gradients(inputs, targets, self._weights["dense/kernel"], self._weights["dense/bias"])
        grads, norm = clip_by_global_norm(grads, self.config.get("clip_grad_norm"))
        lr = float(self.config.get("learning_rate", self.default_lr))
        for path in _PARAMS:
            self._apply(path, grads[path], lr)
        self._after_step()
        dtype = np.asarray(inputs).dtype
        return np.asarray(loss, dtype), np.asarray(norm, dtype)

    default_lr = 0.01

    def _apply(self, path: str, g: np.ndarray, lr: float) -> None:
        raise NotImplementedError

    def _after_step(self) -> None:
        pass


class SGDRegressionModel(_RegressionModel):
    """`SGDRegression` in NumPy: ``b = mu b + g``; ``w -= lr b`` (or ``lr (g + mu b)`` with Nesterov)."""

    default_lr = 0.1

    def _apply(self, path: str, g: np.ndarray, lr: float) -> None:
        mu = float(self.config.get("momentum", 0.0))
        w = self._get(path)
        if mu == 0.0:
            self._set(path, w - lr * g)
            return
        buf = mu * self._get(f"optimizer/{path}/momentum") + g
        self._set(f"optimizer/{path}/momentum", buf)
        self._set(path, w - lr * (g + mu * buf if self.config.get("nesterov", False) else buf))


class AdamRegressionModel(_RegressionModel):
    """`AdamRegression` in NumPy: Kingma & Ba's Algorithm 1, ``m_hat / (sqrt(v_hat) + eps)``."""

    def _apply(self, path: str, g: np.ndarray, lr: float) -> None:
        b1, b2 = float(self.config.get("beta1", 0.9)), float(self.config.get("beta2", 0.999))
        eps = float(self.config.get("epsilon", 1e-8))
        t = int(self._weights["optimizer/step"]) + 1
        m = b1 * self._get(f"optimizer/{path}/m") + (1.0 - b1) * g
        v = b2 * self._get(f"optimizer/{path}/v") + (1.0 - b2) * g ** 2
        self._set(f"optimizer/{path}/m", m)
        self._set(f"optimizer/{path}/v", v)
        m_hat, v_hat = m / (1.0 - b1 ** t), v / (1.0 - b2 ** t)
        self._set(path, self._get(path) - lr * m_hat / (np.sqrt(v_hat) + eps))

    def _after_step(self) -> None:
        self._set("optimizer/step", self._weights["optimizer/step"] + 1)


class RMSPropRegressionModel(_RegressionModel):
    """`RMSPropRegression` in NumPy: TF1's form, ``g / sqrt(ms [- mg^2] + eps)`` (``epsilon_outside``:
    ``g / (sqrt(ms [- mg^2]) + eps)``), ``lr`` inside the momentum."""

    def _apply(self, path: str, g: np.ndarray, lr: float) -> None:
        rho, mu = float(self.config.get("decay", 0.9)), float(self.config.get("momentum", 0.0))
        eps = float(self.config.get("epsilon", 1e-10))
        ms = rho * self._get(f"optimizer/{path}/rms") + (1.0 - rho) * g ** 2
        self._set(f"optimizer/{path}/rms", ms)
        if self.config.get("centered", False):
            mg = rho * self._get(f"optimizer/{path}/mean_grad") + (1.0 - rho) * g
            self._set(f"optimizer/{path}/mean_grad", mg)
            v = np.maximum(ms - mg ** 2, 0.0)
        else:
            v = ms
        denom = np.sqrt(v) + eps if self.config.get("epsilon_outside", False) else np.sqrt(v + eps)
        if mu > 0.0:
            mom = mu * self._get(f"optimizer/{path}/momentum") + lr * g / denom
            self._set(f"optimizer/{path}/momentum", mom)
            self._set(path, self._get(path) - mom)
        else:
            self._set(path, self._get(path) - lr * g / denom)
