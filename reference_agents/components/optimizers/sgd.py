"""`SGD`: stochastic gradient descent with optional (Nesterov) momentum."""

from __future__ import annotations

from typing import Any, Sequence

from harness.graph import Component
from reference_agents.components.optimizers.base import Optimizer, check_number


class SGD(Optimizer):
    """Gradient descent, with heavy-ball or Nesterov momentum.

    For each target variable ``w`` with (clipped) gradient ``g``, learning rate
    ``lr`` and momentum ``mu``:

    - ``mu == 0``: ``w <- w - lr * g`` (no slots);
    - otherwise a slot ``momentum`` (``b``, starting at 0) with
      ``b <- mu * b + g`` and ``w <- w - lr * b``, or with ``nesterov``
      ``w <- w - lr * (g + mu * b)`` using the new ``b`` (the form of
      Sutskever et al. 2013 as PyTorch and TF write it, without dampening).

    See `Optimizer` for targets, slots, clipping and the ``step`` API.

    Args:
        learning_rate: the step size, a positive number.
        variables_of: the component(s) whose trainable variables are updated.
        momentum: the momentum factor in ``[0, 1)``.
        nesterov: whether to use Nesterov momentum (needs ``momentum > 0``).
        clip_grad_norm: None or a positive global-norm threshold.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, learning_rate: float, variables_of: Component | Sequence[Component],
                 momentum: float = 0.0, nesterov: bool = False, clip_grad_norm: float | None = None,
                 scope: str = "optimizer") -> None:
        momentum = check_number("SGD", "momentum", momentum, 0.0, 1.0, high_open=True)
        if not isinstance(nesterov, bool):
            raise ValueError(f"SGD: nesterov must be a bool; got {nesterov!r}")
        if nesterov and momentum == 0.0:
            raise ValueError(f"SGD: nesterov=True needs momentum > 0; got momentum={momentum!r}")
        super().__init__(learning_rate, variables_of, clip_grad_norm, scope)
        self.momentum = momentum
        self.nesterov = nesterov

    def slot_names(self) -> tuple[str, ...]:
        """``("momentum",)`` with momentum, else none."""
        return ("momentum",) if self.momentum > 0.0 else ()

    def _apply(self, F: Any, grads: list[Any]) -> None:
        lr, mu = self.learning_rate, self.momentum
        if mu == 0.0:
            for var, g in zip(self._vars, grads):
                F.assign(var, var - lr * g)
            return
        for var, g, buf in zip(self._vars, grads, self.slots["momentum"]):
            new_buf = mu * buf + g
            F.assign(buf, new_buf)
            F.assign(var, var - lr * (g + mu * new_buf if self.nesterov else new_buf))
