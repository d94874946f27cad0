"""`VTrace`: the off-policy corrected value targets and policy-gradient advantages of IMPALA."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space
from reference_agents.components.helpers.returns import check_discount, reverse_recursion


def check_clip(owner: str, argument: str, value: Any) -> float | None:
    """``value`` as a positive float or None (no clipping), else ValueError naming ``argument``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{owner}: {argument} must be a positive number or None; got {value!r}")
    return float(value)


class VTrace(Component):
    """V-trace targets (Espeholt et al. 2018, eq. 1, computed by the recursion of Remark 1).

    With ``rho_t = min(rho_bar, pi/mu)``, ``c_t = min(c_bar, pi/mu)`` (from
    ``log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t)``), the discount
    ``gamma_t = gamma * discounts_t`` and ``V(x_T) = bootstrap_value``:

    - ``delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))``,
    - ``v_t = V(x_t) + delta_t + gamma_t c_t (v_{t+1} - V(x_{t+1}))``, ``v_T = V(x_T)``,
    - ``A_t = min(rho_bar_pg, pi/mu) (r_t + gamma_t v_{t+1} - V(x_t))`` (section 4.2).

    Both outputs carry no gradient (they are targets). ``discounts`` are
    continuation factors in [0, 1], ``1 - terminal`` or any per-step discount;
    with ``gamma=1`` they are the discounts themselves (the convention of the
    IMPALA reference code).

    API: ``vtrace(log_rhos, discounts, rewards, values, bootstrap_value)`` ->
    ``(vs, pg_advantages)``; every argument but ``bootstrap_value`` (``float*[B]``)
    is time-major ``float*[T,B]``, all of one dtype; outputs are ``float*[T,B]``.

    Args:
        rho_bar: the clip of the importance weights in ``delta_t``, positive or None (no clip).
        c_bar: the clip of the trace coefficients ``c_t``, positive or None.
        rho_bar_pg: the clip of the importance weights in ``A_t``, positive or None.
        gamma: the discount, in [0, 1].
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, rho_bar: float | None = 1.0, c_bar: float | None = 1.0, rho_bar_pg: float | None = 1.0,
                 gamma: float = 0.99, scope: str = "vtrace") -> None:
        self.rho_bar = check_clip("VTrace", "rho_bar", rho_bar)
        self.c_bar = check_clip("VTrace", "c_bar", c_bar)
        self.rho_bar_pg = check_clip("VTrace", "rho_bar_pg", rho_bar_pg)
        self.gamma = check_discount("VTrace", "gamma", gamma)
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires time-major ``float*[T,B]`` sequences of one dtype and a ``float*[B]`` bootstrap value."""
        first = input_spaces["log_rhos"]
        if not (isinstance(first, FloatBox) and first.rank == 0 and first.extra_ranks == ("T", "B")):
            raise self.space_mismatch("log_rhos", "a time-major scalar FloatBox (float32[T,B])", first)
        dtype = first.dtype.name
        for arg in ("discounts", "rewards", "values"):
            space = input_spaces[arg]
            if not (isinstance(space, FloatBox) and space.rank == 0 and space.extra_ranks == ("T", "B")
                    and space.dtype == first.dtype):
                raise self.space_mismatch(arg, f"{dtype}[T,B] (time-major, like log_rhos)", space)
        boot = input_spaces["bootstrap_value"]
        if not (isinstance(boot, FloatBox) and boot.rank == 0 and boot.extra_ranks == ("B",)
                and boot.dtype == first.dtype):
            raise self.space_mismatch("bootstrap_value", f"{dtype}[B]", boot)

    @api
    def vtrace(self, log_rhos: Any, discounts: Any, rewards: Any, values: Any, bootstrap_value: Any) -> Any:
        """``(vs, pg_advantages)`` (see the class docstring)."""
        deltas, factors = self._graph_fn_deltas(log_rhos, discounts, rewards, values, bootstrap_value)
        vs_minus_values = self._graph_fn_recursion(deltas, factors)
        return self._graph_fn_targets(vs_minus_values, log_rhos, discounts, rewards, values, bootstrap_value)

    def _clip(self, F: Any, rhos: Any, bar: float | None) -> Any:
        return rhos if bar is None else F.minimum(rhos, bar)

    @graph_fn(returns=2)
    def _graph_fn_deltas(self, F: Any, log_rhos: Any, discounts: Any, rewards: Any, values: Any,
                         bootstrap_value: Any) -> tuple[Any, Any]:
        rhos = F.exp(log_rhos)
        step_discounts = self.gamma * discounts
        next_values = F.concat([values[1:], F.expand_dims(bootstrap_value, 0)], axis=0)
        deltas = self._clip(F, rhos, self.rho_bar) * (rewards + step_discounts * next_values - values)
        return deltas, step_discounts * self._clip(F, rhos, self.c_bar)

    @graph_fn
    def _graph_fn_recursion(self, F: Any, deltas: Any, factors: Any) -> Any:
        return reverse_recursion(F, deltas, factors)

    @graph_fn(returns=2)
    def _graph_fn_targets(self, F: Any, vs_minus_values: Any, log_rhos: Any, discounts: Any, rewards: Any,
                          values: Any, bootstrap_value: Any) -> tuple[Any, Any]:
        vs = vs_minus_values + values
        next_vs = F.concat([vs[1:], F.expand_dims(bootstrap_value, 0)], axis=0)
        pg_rhos = self._clip(F, F.exp(log_rhos), self.rho_bar_pg)
        advantages = pg_rhos * (rewards + self.gamma * discounts * next_vs - values)
        return F.stop_gradient(vs), F.stop_gradient(advantages)
