"""Element-wise value maps: `Normalize` to ``[0, 1]``, `Divide` by a constant, `Clip` to a range."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import graph_fn
from harness.spaces import IntBox, Space
from reference_agents.components.preprocessors.base import Preprocessor, check_number, is_numeric_box

_NUMERIC = "a float or int box (any shape and ranks)"


class Normalize(Preprocessor):
    """Maps ``[low, high]`` onto ``[0, 1]``: ``(inputs - low) / (high - low)``, in float32.

    Accepts a float or integer box of any shape and extra ranks; returns float32
    of the same shape whatever the input dtype (the input is cast first).

    Args:
        low: the value mapped to 0.
        high: the value mapped to 1, > ``low``.
        scope: the component's name.

    Raises:
        ValueError: naming the argument when a bound is not a finite number or
            ``high <= low``.
    """

    def __init__(self, low: float, high: float, scope: str = "normalize") -> None:
        self.low = check_number("Normalize", "low", low)
        self.high = check_number("Normalize", "high", high)
        if self.high <= self.low:
            raise ValueError(f"Normalize: high must be > low; got low={low!r}, high={high!r}")
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts any float or int box."""
        if not is_numeric_box(input_spaces["inputs"]):
            raise self.space_mismatch("inputs", _NUMERIC, input_spaces["inputs"])

    @graph_fn
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        return (F.cast(inputs, "float32") - self.low) / (self.high - self.low)


class Divide(Preprocessor):
    """Divides by a constant, in float32: ``inputs / divisor`` (``divisor=255`` maps uint8 frames onto ``[0, 1]``).

    Accepts a float or integer box of any shape and extra ranks; returns float32
    of the same shape whatever the input dtype.

    Args:
        divisor: a finite non-zero number.
        scope: the component's name.

    Raises:
        ValueError: naming ``divisor`` when it is 0 or not a finite number.
    """

    def __init__(self, divisor: float, scope: str = "divide") -> None:
        self.divisor = check_number("Divide", "divisor", divisor, nonzero=True)
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts any float or int box."""
        if not is_numeric_box(input_spaces["inputs"]):
            raise self.space_mismatch("inputs", _NUMERIC, input_spaces["inputs"])

    @graph_fn
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        return F.cast(inputs, "float32") / self.divisor


class Clip(Preprocessor):
    """Clips values to ``[min, max]`` (e.g. rewards to ``[-1, 1]``), keeping the input's dtype.

    Accepts a float or integer box of any shape and extra ranks; for integer
    boxes ``min`` and ``max`` must be integers.

    Args:
        min: the lower bound.
        max: the upper bound, >= ``min``.
        scope: the component's name.

    Raises:
        ValueError: naming the argument when a bound is not a finite number or
            ``max < min``.
    """

    def __init__(self, min: float, max: float, scope: str = "clip") -> None:  # noqa: A002 - the natural names
        self.min = check_number("Clip", "min", min)
        self.max = check_number("Clip", "max", max)
        if self.max < self.min:
            raise ValueError(f"Clip: max must be >= min; got min={min!r}, max={max!r}")
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts any float box, and int boxes when ``min`` and ``max`` are integers."""
        space = input_spaces["inputs"]
        if not is_numeric_box(space):
            raise self.space_mismatch("inputs", _NUMERIC, space)
        if isinstance(space, IntBox) and not (self.min.is_integer() and self.max.is_integer()):
            raise self.space_mismatch("inputs", "a float box (min/max are not integers)", space,
                                      f"clipping integers to [{self.min}, {self.max}] needs integer bounds")

    @graph_fn
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        dtype = self.input_spaces["inputs"].dtype
        info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype)
        # bounds beyond the dtype's range clip nothing on that side
        low, high = (F.constant(np.asarray(np.clip(v, info.min, info.max), dtype)) for v in (self.min, self.max))
        return F.minimum(F.maximum(inputs, low), high)
