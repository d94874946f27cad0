"""NumPy oracles of the components in this package, written from their definitions (the specs name them)."""

from __future__ import annotations

import numpy as np


def soft_clip_apply(inputs, weights, config):
    """``bound * tanh(gain * inputs)`` in float64, cast back to the input's dtype."""
    x = inputs["inputs"]
    out = config.get("bound", 1.0) * np.tanh(x.astype(np.float64) * weights["gain"])
    return out.astype(x.dtype)
