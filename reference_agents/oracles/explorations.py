"""NumPy oracles for the exploration components, written from the schedules' formulas."""

from __future__ import annotations

from typing import Any

import numpy as np


def schedule_value(schedule: dict[str, Any], time_step: Any) -> np.ndarray:
    """An epsilon schedule at ``time_step`` (``t = max(time_step, 0)``), in float64.

    ``constant``: ``v``; ``linear``: ``a + (b - a) * min(t, n) / n``;
    ``exponential``: ``b + (a - b) * 0.5 ** (t / h)``.
    """
    t = np.maximum(np.asarray(time_step, np.float64), 0.0)
    kind = schedule["type"]
    if kind == "constant":
        return np.full(t.shape, float(schedule["value"]))
    a, b = float(schedule["from"]), float(schedule["to"])
    if kind == "linear":
        n = float(schedule["steps"])
        return a + (b - a) * np.minimum(t, n) / n
    return b + (a - b) * 0.5 ** (t / float(schedule["half_life"]))


def epsilon(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `EpsilonGreedy.epsilon`: the schedule at the time step, as float32."""
    return schedule_value(config["schedule"], inputs["time_step"]).astype(np.float32)


def explore_when_certain(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Oracle of `EpsilonGreedy.explore` where the schedule gives epsilon 0: the greedy actions unchanged.

    Raises:
        ValueError: where epsilon is not 0 (the outputs are then random).
    """
    eps = float(schedule_value(config["schedule"], inputs["time_step"]))
    if eps != 0.0:
        raise ValueError(f"explore_when_certain: epsilon is {eps} at time step {inputs['time_step']}, not 0; "
                         f"give deterministic_inputs with a time step where the schedule reaches 0")
    return np.asarray(inputs["greedy_actions"]).copy()
