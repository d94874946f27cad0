"""`Adam`: adaptive moment estimation (Kingma & Ba, 2015) with bias correction."""

from __future__ import annotations

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
    step runs as one fused op, `F.adam_update` (PyTorch's fused Adam kernel,
    TensorFlow's ``ResourceApplyAdam`` with its epsilon rescaled to this form):
    one pass over each variable instead of a dozen elementwise ops.

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

    def _apply(self, F: Any, grads: list[Any]) -> None:
        # One fused op per backend (F.adam_update): the same formula in one pass over each variable.
        F.adam_update(self._vars, grads, self.slots["m"], self.slots["v"], self.step_count + 1, self.learning_rate,
                      self.beta1, self.beta2, self.epsilon)
        F.assign(self.step_count, self.step_count + 1)
