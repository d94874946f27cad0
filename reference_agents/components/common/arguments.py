"""Constructor-argument checks shared by components; each error names the argument and the value."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.backends.base import ACTIVATIONS, initial_value


def check_positive_int(owner: str, argument: str, value: Any) -> int:
    """``value`` as an int; ValueError naming ``argument`` unless it is a positive int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{owner}: {argument} must be a positive int; got {value!r}")
    return int(value)


def check_initializer(owner: str, argument: str, initializer: Any) -> None:
    """Raises ValueError naming ``argument`` if ``initializer`` is not one `get_variable` accepts.

    Strings are checked by drawing a small probe value with the core's own
    initializer table; arrays and callables can only be checked once the
    variable's shape is known.
    """
    if isinstance(initializer, str):
        try:
            initial_value("probe", (2, 2), np.dtype("float32"), initializer, 0)
        except ValueError:
            raise ValueError(
                f"{owner}: {argument} must be 'zeros', 'ones', 'glorot_uniform', 'normal(std)', "
                f"'uniform(a)', 'constant(c)', an array or fn(shape, rng); got {initializer!r}"
            ) from None
    elif not (callable(initializer) or isinstance(initializer, (np.ndarray, int, float))) \
            or isinstance(initializer, bool):
        raise ValueError(f"{owner}: {argument} must be an initializer name, an array or fn(shape, rng); "
                         f"got {initializer!r}")


def check_layer_options(owner: str, activation: Any, use_bias: Any, kernel_initializer: Any,
                        bias_initializer: Any) -> None:
    """The options dense and convolutional layers share: activation, bias flag, initializers."""
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"{owner}: activation must be None or one of {ACTIVATIONS}; got {activation!r}")
    if not isinstance(use_bias, bool):
        raise ValueError(f"{owner}: use_bias must be a bool; got {use_bias!r}")
    check_initializer(owner, "kernel_initializer", kernel_initializer)
    if use_bias:
        check_initializer(owner, "bias_initializer", bias_initializer)
