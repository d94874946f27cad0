"""`RMSProp`: gradients divided by a running root mean square (Tieleman & Hinton, 2012)."""

from __future__ import annotations

from typing import Any, Sequence

from harness.graph import Component
from reference_agents.components.optimizers.base import Optimizer, check_number


class RMSProp(Optimizer):
    """RMSProp with optional momentum and centering, epsilon inside the square root (or outside it).

    For each target variable ``w`` with (clipped) gradient ``g``, decay
    ``rho``, momentum ``mu`` and learning rate ``lr``::

        ms <- rho * ms + (1 - rho) * g^2
        mg <- rho * mg + (1 - rho) * g                   # centered only
        v = ms                                           # not centered
        v = max(ms - mg^2, 0)                            # centered
        denom = sqrt(v + epsilon)                        # epsilon_outside False (default)
        denom = sqrt(v) + epsilon                        # epsilon_outside True
        mu == 0:  w <- w - lr * g / denom
        mu > 0:   mom <- mu * mom + lr * g / denom;  w <- w - mom

    By default this is TensorFlow 1's ``RMSPropOptimizer`` form (and the Nature
    DQN's "min squared gradient"): ``epsilon`` sits inside the square root and
    the learning rate inside the momentum buffer. PyTorch's ``RMSprop`` divides
    by ``sqrt(.) + epsilon`` instead (``epsilon_outside=True``, for results
    published with it, e.g. MinAtar's DQN) and keeps the learning rate outside
    its buffer, so with momentum the two also differ when ``lr`` changes. The
    forms differ most when gradients are small: with ``epsilon`` 0.01 the
    denominator is at least 0.1 inside the root, 0.01 outside it. The
    ``max(., 0)`` guards against rounding making the centered variance
    estimate slightly negative. All slots start at zero.

    Slots: ``rms`` (``ms``), ``mean_grad`` (``mg``, centered only) and
    ``momentum`` (``mom``, with ``mu > 0`` only). See `Optimizer` for targets,
    slot names, clipping and the ``step`` API.

    Args:
        learning_rate: the step size, a positive number.
        variables_of: the component(s) whose trainable variables are updated.
        decay: ``rho``, the running averages' decay in ``[0, 1)``.
        momentum: ``mu`` in ``[0, 1)``.
        epsilon: the positive constant added under the square root (or to it).
        epsilon_outside: add ``epsilon`` to the square root (PyTorch's form)
            instead of under it.
        centered: whether to divide by the running standard deviation
            (subtracting the squared running mean gradient) instead of the RMS.
        clip_grad_norm: None or a positive global-norm threshold.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, learning_rate: float, variables_of: Component | Sequence[Component],
                 decay: float = 0.9, momentum: float = 0.0, epsilon: float = 1e-10, centered: bool = False,
                 clip_grad_norm: float | None = None, scope: str = "optimizer", epsilon_outside: bool = False) -> None:
        decay = check_number("RMSProp", "decay", decay, 0.0, 1.0, high_open=True)
        momentum = check_number("RMSProp", "momentum", momentum, 0.0, 1.0, high_open=True)
        epsilon = check_number("RMSProp", "epsilon", epsilon, 0.0, low_open=True)
        for name, flag in (("centered", centered), ("epsilon_outside", epsilon_outside)):
            if not isinstance(flag, bool):
                raise ValueError(f"RMSProp: {name} must be a bool; got {flag!r}")
        super().__init__(learning_rate, variables_of, clip_grad_norm, scope)
        self.decay, self.momentum, self.epsilon, self.centered = decay, momentum, epsilon, centered
        self.epsilon_outside = epsilon_outside

    def slot_names(self) -> tuple[str, ...]:
        """``rms``, plus ``mean_grad`` when centered and ``momentum`` with momentum."""
        return ("rms",) + (("mean_grad",) if self.centered else ()) + (("momentum",) if self.momentum else ())

    def _apply(self, F: Any, grads: list[Any]) -> None:
        # One fused op per backend (F.rmsprop_update): the formula above over all variables at once.
        F.rmsprop_update(self._vars, grads, self.slots["rms"], self.slots["mean_grad"] if self.centered else None,
                         self.slots["momentum"] if self.momentum > 0.0 else None, self.learning_rate, self.decay,
                         self.momentum, self.epsilon, self.epsilon_outside)
