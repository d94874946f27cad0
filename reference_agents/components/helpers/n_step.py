"""`n_step_transitions`: worker-side folding of a rollout into n-step transitions, in NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np


def n_step_transitions(rewards: Any, terminals: Any, n: int, gamma: float,
                       keep_partial: bool = False) -> dict[str, np.ndarray]:
    """Folds the steps of rollouts into n-step transitions, one per start step.

    The transition from step ``t`` covers ``k`` steps, ``k = min(n, steps to
    the episode's end, steps to the rollout's end)``: its reward is
    ``sum_{i<k} gamma^i r_{t+i}``, its discount ``gamma^k``, it is terminal when
    the episode ended within those ``k`` steps, and it bootstraps from the
    observation ``t + k`` (observations ``0..T``: ``obs[t + 1]`` follows step
    ``t``). This is the n-step target of Mnih et al. 2016 (eq. in section 4)
    and Hessel et al. 2018 (eq. 2): ``R_t^(n) + gamma^n max_a Q(s_{t+n}, a)``.

    A window cut short by the rollout's end (not by a terminal) has
    ``k < n``; `DQNLoss` with ``n_step=n`` bootstraps every transition with
    ``gamma^n``, so such windows are marked invalid unless ``keep_partial``.

    Args:
        rewards: float rewards, time-major ``[T]`` or ``[T, ...]`` (one column per rollout).
        terminals: bools of ``rewards``' shape; ``terminals[t]`` means the episode ended with step ``t``.
        n: the number of steps, a positive int.
        gamma: the discount, in [0, 1].
        keep_partial: whether windows cut by the rollout's end count as valid.

    Returns:
        A dict of arrays of ``rewards``' shape: ``rewards`` (float64 n-step sums),
        ``discounts`` (``gamma^k``), ``terminals`` (bool), ``next_index``
        (int64 ``t + k``), ``steps`` (int64 ``k``) and ``valid`` (bool).

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"n_step_transitions: n must be a positive int; got {n!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"n_step_transitions: gamma must be a number in [0, 1]; got {gamma!r}")
    r = np.asarray(rewards, dtype=np.float64)
    done = np.asarray(terminals)
    if done.dtype != np.bool_:
        raise ValueError(f"n_step_transitions: terminals must be bools; got dtype {done.dtype}")
    if r.ndim == 0 or r.shape != done.shape:
        raise ValueError(f"n_step_transitions: rewards and terminals must share one shape [T, ...]; got "
                         f"{r.shape} and {done.shape}")
    length = r.shape[0]
    sums = np.zeros_like(r)
    steps = np.zeros(r.shape, np.int64)
    ended = np.zeros(r.shape, bool)
    open_ = np.ones(r.shape, bool)  # windows still collecting rewards
    for i in range(n):
        # step t + i of the window starting at t, for every t that has one
        idx = np.arange(length) + i
        inside = idx < length
        take = open_ & inside.reshape((-1,) + (1,) * (r.ndim - 1))
        shifted_r = np.zeros_like(r)
        shifted_d = np.zeros_like(done)
        shifted_r[inside] = r[idx[inside]]
        shifted_d[inside] = done[idx[inside]]
        sums = np.where(take, sums + gamma ** i * shifted_r, sums)
        steps = np.where(take, steps + 1, steps)
        ended = ended | (take & shifted_d)
        open_ = take & ~shifted_d
    starts = np.arange(length, dtype=np.int64).reshape((-1,) + (1,) * (r.ndim - 1))
    return {
        "rewards": sums,
        "discounts": np.power(float(gamma), steps).astype(np.float64),
        "terminals": ended,
        "next_index": starts + steps,
        "steps": steps,
        "valid": ended | (steps == n) | bool(keep_partial),
    }
