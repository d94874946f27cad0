"""`apex_epsilons`: the per-actor exploration rates of Ape-X."""

from __future__ import annotations

import math

import numpy as np


def apex_epsilons(num_workers: int, epsilon: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """One constant exploration rate per actor, as in Ape-X.

    Actor ``i`` of ``N`` gets ``epsilon ** (1 + alpha * i / (N - 1))``; a single
    actor gets ``epsilon``. With the defaults (``epsilon = 0.4``, ``alpha = 7``)
    the rates run from 0.4 down to ``0.4 ** 8 ~ 6.6e-4``.

    Reference: Horgan et al., "Distributed Prioritized Experience Replay"
    (ICLR 2018), section 4.1 (Atari), which gives each actor ``i`` a fixed
    ``epsilon_i = epsilon ** (1 + i / (N - 1) * alpha)``.

    Args:
        num_workers: the number of actors N, a positive int.
        epsilon: the base rate, in ``[0, 1]``.
        alpha: the exponent spread, a non-negative number.

    Returns:
        float64 array of shape ``(N,)``, non-increasing for ``epsilon < 1``.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers <= 0:
        raise ValueError(f"apex_epsilons: num_workers must be a positive int; got {num_workers!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"apex_epsilons: epsilon must be a number in [0, 1]; got {epsilon!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"apex_epsilons: alpha must be a finite non-negative number; got {alpha!r}")
    if num_workers == 1:
        return np.array([float(epsilon)])
    i = np.arange(num_workers, dtype=np.float64)
    return float(epsilon) ** (1.0 + alpha * i / (num_workers - 1))
