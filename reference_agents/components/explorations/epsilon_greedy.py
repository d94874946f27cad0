"""`EpsilonGreedy`: replaces greedy discrete actions by uniform random ones with a scheduled probability."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, IntBox, Space

from reference_agents.components.common.arguments import check_positive_int

#: The schedule types and the keys each takes (besides ``type``).
SCHEDULE_KEYS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "linear": ("from", "to", "steps"),
    "exponential": ("from", "to", "half_life"),
}


def _probability(owner: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{owner}: schedule[{key!r}] must be a number in [0, 1]; got {value!r}")
    return float(value)


def check_schedule(owner: str, schedule: Any) -> dict[str, Any]:
    """A normalised copy of an epsilon schedule dict, or ValueError naming the bad key and value.

    Schedules (``t = max(time_step, 0)``):

    - ``{type: constant, value: v}``: ``epsilon(t) = v``.
    - ``{type: linear, from: a, to: b, steps: n}``: ``epsilon(t) = a + (b - a) * min(t, n) / n``
      (from ``a`` at ``t = 0`` to ``b`` at ``t >= n``).
    - ``{type: exponential, from: a, to: b, half_life: h}``:
      ``epsilon(t) = b + (a - b) * 0.5 ** (t / h)`` (the distance to ``b`` halves every ``h`` steps).

    Probabilities must lie in ``[0, 1]``; ``steps`` is a positive int, ``half_life`` a positive number.
    """
    if not isinstance(schedule, dict) or schedule.get("type") not in SCHEDULE_KEYS:
        raise ValueError(f"{owner}: schedule must be a dict with type one of {sorted(SCHEDULE_KEYS)}; "
                         f"got {schedule!r}")
    kind = schedule["type"]
    wanted = set(SCHEDULE_KEYS[kind])
    given = set(schedule) - {"type"}
    if given != wanted:
        raise ValueError(f"{owner}: a {kind} schedule takes keys {sorted(wanted)}; got {sorted(given)} "
                         f"in {schedule!r}")
    out: dict[str, Any] = {"type": kind}
    for key in ("value", "from", "to"):
        if key in wanted:
            out[key] = _probability(owner, key, schedule[key])
    if kind == "linear":
        steps = schedule["steps"]
        check_positive_int(owner, "schedule['steps']", steps)
        out["steps"] = int(steps)
    if kind == "exponential":
        half_life = schedule["half_life"]
        if isinstance(half_life, bool) or not isinstance(half_life, (int, float, np.integer, np.floating)) \
                or not (math.isfinite(half_life) and half_life > 0):
            raise ValueError(f"{owner}: schedule['half_life'] must be a positive number; got {half_life!r}")
        out["half_life"] = float(half_life)
    return out


def schedule_range(schedule: dict[str, Any]) -> tuple[float, float]:
    """The smallest and largest epsilon a (normalised) schedule gives."""
    if schedule["type"] == "constant":
        return schedule["value"], schedule["value"]
    return min(schedule["from"], schedule["to"]), max(schedule["from"], schedule["to"])


class EpsilonGreedy(Component):
    """Epsilon-greedy exploration over ``num_actions`` discrete actions.

    ``epsilon(time_step)`` evaluates the schedule (see `check_schedule`) at a
    scalar integer time step (``int64[]``, no batch rank), as ``float32[]``
    within the schedule's range (inside ``[0, 1]``). ``explore(greedy_actions,
    time_step)`` takes greedy actions ``int*[B]`` (a time rank may come too) and
    replaces each element independently, with probability epsilon, by an action
    drawn uniformly from ``0..num_actions-1`` (which may be the greedy one, so
    an element changes with probability ``epsilon * (A - 1) / A``); the output
    is ``int*[B](0,A-1)`` for bounded greedy actions (which must lie in
    ``0..A-1``), unbounded for unbounded ones. Unlike
    RLgraph's `EpsilonExploration` and Ape-X worker, one coin is flipped per
    element, not one per batch.

    Args:
        num_actions: the number of actions A, a positive int.
        schedule: the epsilon schedule, a dict (see `check_schedule`).
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, num_actions: int, schedule: dict[str, Any], scope: str = "epsilon_greedy") -> None:
        check_positive_int("EpsilonGreedy", "num_actions", num_actions)
        self.schedule = check_schedule("EpsilonGreedy", schedule)
        super().__init__(scope=scope)
        self.num_actions = int(num_actions)
        self.epsilon_low, self.epsilon_high = (float(np.float32(v)) for v in schedule_range(self.schedule))

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires ``time_step`` ``int*[]`` (no extra ranks) and ``greedy_actions`` ``int*[B]`` within ``0..A-1``."""
        step = input_spaces.get("time_step")
        if step is not None and not (isinstance(step, IntBox) and step.shape == () and not step.extra_ranks):
            raise self.space_mismatch("time_step", "a scalar integer time step without batch rank (int64[])", step)
        greedy = input_spaces.get("greedy_actions")
        if greedy is not None:
            if not (isinstance(greedy, IntBox) and greedy.shape == () and greedy.has_batch_rank):
                raise self.space_mismatch("greedy_actions", "scalar integer actions with a batch rank (int64[B])",
                                          greedy)
            if greedy.bounded and (np.any(greedy.low < 0) or np.any(greedy.high > self.num_actions - 1)):
                raise self.space_mismatch("greedy_actions", f"actions within 0..{self.num_actions - 1}", greedy)

    def _epsilon_space(self, time_step: Space) -> Space:
        return FloatBox((), self.epsilon_low, self.epsilon_high)

    def _explore_space(self, greedy_actions: Space, epsilon: Space) -> Space:
        # bounded greedy actions lie in 0..A-1 (check_input_spaces), and so do the explored ones;
        # unbounded ones pass through as they are where the coin says greedy
        ranks = dict(batch_rank=greedy_actions.has_batch_rank, time_rank=greedy_actions.has_time_rank,
                     time_major=greedy_actions.time_major)
        if greedy_actions.bounded:
            return IntBox(self.num_actions, dtype=greedy_actions.dtype, **ranks)
        return IntBox(dtype=greedy_actions.dtype, **ranks)

    @api
    def epsilon(self, time_step: Any) -> Any:
        """The schedule's epsilon at ``time_step``, ``float32[]``."""
        return self._graph_fn_epsilon(time_step)

    @api
    def explore(self, greedy_actions: Any, time_step: Any) -> Any:
        """``greedy_actions`` with each element replaced by a uniform random action with probability epsilon."""
        if self.schedule["type"] == "constant":
            # the epsilon is a constant of the explore step (float32-rounded, as the schedule's output is), not a
            # step of its own: an eager act runs one step fewer, and the time step is not read
            return self._graph_fn_explore(greedy_actions, self.epsilon_low)
        return self._graph_fn_explore(greedy_actions, self._graph_fn_epsilon(time_step))

    @graph_fn(output_spaces=_epsilon_space)
    def _graph_fn_epsilon(self, F: Any, time_step: Any) -> Any:
        s = self.schedule
        if s["type"] == "constant":
            # the float32 value itself (low == high): no op on the time step, and a traced act holds it as a
            # graph constant instead of running a cast, a fill, an add and a clip on every call
            return F.constant(self.epsilon_low, "float32")
        t = F.cast(time_step, "float32")
        if s["type"] == "linear":
            # from + (to - from) * t / steps is monotone in t: clipping it into [min, max] of from and to holds
            # it at 'from' before step 0 and at 'to' after 'steps' (no separate max(t, 0) and min(t, steps)).
            eps = t * ((s["to"] - s["from"]) / float(s["steps"])) + s["from"]
        else:
            eps = s["to"] + (s["from"] - s["to"]) * F.exp(F.maximum(t, 0.0) * (-math.log(2.0) / s["half_life"]))
        # clipped into the schedule's range (also against float32 rounding stepping outside by one ulp)
        return F.clip(eps, self.epsilon_low, self.epsilon_high)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """No variables; notes the greedy actions' rank and dtype, which the explore step needs on every call."""
        greedy = input_spaces.get("greedy_actions")
        if greedy is not None:
            self._actions_rank = len(greedy.extra_ranks)
            self._actions_dtype = greedy.dtype.name

    @graph_fn(output_spaces=_explore_space)
    def _graph_fn_explore(self, F: Any, greedy_actions: Any, epsilon: Any) -> Any:
        # actions [B] (a batch of single actions, the common case) without a comprehension's call
        shape = ([F.dim(greedy_actions, 0)] if self._actions_rank == 1
                 else [F.dim(greedy_actions, i) for i in range(self._actions_rank)])
        explore = F.random_bernoulli(shape, epsilon)  # True with probability epsilon
        # int32/int64 are drawn as they are; narrower integer actions are drawn as int64 and cast
        drawn = self._actions_dtype if self._actions_dtype in ("int32", "int64") else "int64"
        random_actions = F.random_integers(shape, self.num_actions, drawn)
        if drawn != self._actions_dtype:
            random_actions = F.cast(random_actions, self._actions_dtype)
        return F.where(explore, random_actions, greedy_actions)
