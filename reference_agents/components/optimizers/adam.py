"""`Adam`: adaptive moment estimation (Kingma & Ba, 2015) with bias correction."""

from __future__ import annotations

import math
from typing import Any, Sequence

from harness.graph import Component
from reference_agents.components.optimizers.base import Optimizer, check_number


class Adam(Optimizer):
    """Adam, as in Algorithm 1 of Kingma & Ba (2015).

    For each target variable ``w`` with (clipped) gradient ``g`` at step
    ``t = 1, 2, ...``::

        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g^2
        m_hat = m / (1 - beta1^t)
        v_hat = v / (1 - beta2^t)
        w <- w - lr * m_hat / (sqrt(v_hat) + epsilon)

    ``epsilon`` is added *outside* the square root of the bias-corrected
    ``v_hat``, as in the paper (TF's Keras Adam adds an ``epsilon_hat`` to the
    uncorrected ``sqrt(v)`` instead; the two differ only in how much
    ``epsilon`` weighs in the first steps).

    Variables: slots ``m`` and ``v`` per target (starting at 0) and ``step``,
    an int64 scalar counting the steps taken (``t - 1`` before a step). The
    bias corrections ``1 - beta^t`` are computed in float64 from ``step`` and
    cast to each variable's dtype, so they stay exact for small ``t``.

    See `Optimizer` for targets, slot names, clipping and the ``step`` API.

    Args:
        learning_rate: the step size, a positive number.
        variables_of: the component(s) whose trainable variables are updated.
        beta1: the first moment's decay in ``[0, 1)``.
        beta2: the second moment's decay in ``[0, 1)``.
        epsilon: the positive constant added to ``sqrt(v_hat)``.
        clip_grad_norm: None or a positive global-norm threshold.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, learning_rate: float, variables_of: Component | Sequence[Component],
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 clip_grad_norm: float | None = None, scope: str = "optimizer") -> None:
        beta1 = check_number("Adam", "beta1", beta1, 0.0, 1.0, high_open=True)
        beta2 = check_number("Adam", "beta2", beta2, 0.0, 1.0, high_open=True)
        epsilon = check_number("Adam", "epsilon", epsilon, 0.0, low_open=True)
        super().__init__(learning_rate, variables_of, clip_grad_norm, scope)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.step_count: Any = None

    def slot_names(self) -> tuple[str, ...]:
        """``("m", "v")``: the first and second moment estimates."""
        return ("m", "v")

    def _create_extra_variables(self) -> None:
        self.step_count = self.get_variable("step", (), "int64", "zeros", trainable=False)

    @staticmethod
    def _correction(F: Any, t: Any, beta: float) -> Any:
        """``1 - beta^t`` in float64 for a float64 tensor ``t >= 1``."""
        if beta == 0.0:
            return F.ones_like(t)
        return 1.0 - F.exp(t * math.log(beta))

    def _apply(self, F: Any, grads: list[Any]) -> None:
        b1, b2 = self.beta1, self.beta2
        t = F.cast(self.step_count + 1, "float64")
        c1, c2 = self._correction(F, t, b1), self._correction(F, t, b2)
        corrections = {d: (F.cast(c1, d), F.cast(c2, d)) for d in set(self._dtypes)}  # cast once per dtype
        for var, g, m, v, dtype in zip(self._vars, grads, self.slots["m"], self.slots["v"], self._dtypes):
            new_m = b1 * m + (1.0 - b1) * g
            new_v = b2 * v + (1.0 - b2) * F.square(g)
            m_hat = new_m / corrections[dtype][0]
            v_hat = new_v / corrections[dtype][1]
            F.assign(m, new_m)
            F.assign(v, new_v)
            F.assign(var, var - self.learning_rate * m_hat / (F.sqrt(v_hat) + self.epsilon))
        F.assign(self.step_count, self.step_count + 1)
