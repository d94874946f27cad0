"""`IMPALALoss`: IMPALA's actor-critic loss on V-trace targets."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, IntBox, Space
from reference_agents.components.losses.vtrace import VTrace

REDUCTIONS = ("sum", "mean")


class IMPALALoss(Component):
    """The IMPALA loss (Espeholt et al. 2018, section 4.2) on time-major rollouts.

    With ``log pi`` the log-softmax of ``logits``, ``mu`` the behaviour policy
    (``behaviour_logits``), ``(v_t, A_t)`` the `VTrace` targets and advantages
    for ``log_rhos = log pi(a_t) - log mu(a_t)`` (no gradient flows through them):

    - ``pg = -sum_t log pi(a_t|x_t) A_t`` (the policy gradient of section 4.2),
    - ``baseline = 0.5 sum_t (v_t - V(x_t))^2`` (its gradient is the value update),
    - ``entropy = sum_t sum_a pi(a|x_t) log pi(a|x_t)`` (the negative entropy: minimizing
      it is the entropy bonus),
    - ``total = pg + baseline_cost * baseline + entropy_cost * entropy``.

    Sums run over time and batch (``reduction="sum"``, as the paper's
    implementation) or are means (``"mean"``). With ``normalize_advantages``
    the policy gradient takes ``A_t / (sqrt(mean A^2) + 1e-8)`` over the
    batch's [T,B]: the policy term keeps a unit scale against the entropy
    term however small the returns' differences are (the entropy's pull
    toward uniform otherwise wins where rewards are sparse). Unlike PPO's
    implementations it does not subtract the batch mean: V-trace's
    advantages already have the value baseline subtracted, and a positive
    scale per batch keeps the gradient's direction, where centering makes
    the result ill-conditioned when the advantages are nearly equal.

    API: ``loss(logits, actions, behaviour_logits, rewards, discounts, values,
    bootstrap_value)`` -> ``(total, pg, baseline, entropy)``, four ``float*[]``.
    ``logits`` and ``behaviour_logits`` are ``float*[T,B,A]``, ``actions`` an
    ``IntBox[T,B]`` of ``A`` categories, ``rewards``, ``discounts`` (see
    `VTrace`) and ``values`` ``float*[T,B]``, ``bootstrap_value`` ``float*[B]``.

    Args:
        baseline_cost: the baseline loss's weight, >= 0.
        entropy_cost: the entropy loss's weight, >= 0.
        rho_bar: see `VTrace`.
        c_bar: see `VTrace`.
        rho_bar_pg: see `VTrace`.
        gamma: see `VTrace`.
        reduction: ``"sum"`` or ``"mean"`` over time and batch.
        normalize_advantages: scale the advantages to a unit root mean square
            over the batch.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, baseline_cost: float = 0.5, entropy_cost: float = 0.01, rho_bar: float | None = 1.0,
                 c_bar: float | None = 1.0, rho_bar_pg: float | None = 1.0, gamma: float = 0.99,
                 reduction: str = "sum", normalize_advantages: bool = False,
                 scope: str = "impala_loss") -> None:
        for name, value in (("baseline_cost", baseline_cost), ("entropy_cost", entropy_cost)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"IMPALALoss: {name} must be a number >= 0; got {value!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"IMPALALoss: reduction must be one of {REDUCTIONS}; got {reduction!r}")
        if not isinstance(normalize_advantages, bool):
            raise ValueError(f"IMPALALoss: normalize_advantages must be true or false; got {normalize_advantages!r}")
        vtrace = VTrace(rho_bar, c_bar, rho_bar_pg, gamma, scope="vtrace")
        super().__init__(vtrace, scope=scope)
        self.vtrace_fn = vtrace
        self.baseline_cost, self.entropy_cost = float(baseline_cost), float(entropy_cost)
        self.reduction = reduction
        self.normalize_advantages = normalize_advantages
        self.num_actions = 0

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Checks the logits' and actions' spaces (`VTrace` checks the sequences)."""
        logits = input_spaces["logits"]
        if not (isinstance(logits, FloatBox) and logits.rank == 1 and logits.extra_ranks == ("T", "B")):
            raise self.space_mismatch("logits", "a time-major FloatBox [T,B,A] (float32[T,B,A])", logits)
        self.num_actions = logits.shape[0]
        behaviour = input_spaces["behaviour_logits"]
        if not (isinstance(behaviour, FloatBox) and behaviour.shape == logits.shape
                and behaviour.extra_ranks == ("T", "B") and behaviour.dtype == logits.dtype):
            raise self.space_mismatch("behaviour_logits", f"{logits.dtype.name}[T,B,{self.num_actions}] "
                                      f"(like logits)", behaviour)
        actions = input_spaces["actions"]
        if not (isinstance(actions, IntBox) and actions.rank == 0 and actions.extra_ranks == ("T", "B")
                and actions.num_categories == self.num_actions):
            raise self.space_mismatch("actions", f"a time-major IntBox [T,B] of {self.num_actions} categories "
                                      f"(int64[T,B](0,{self.num_actions - 1}))", actions)
        values = input_spaces["values"]
        if isinstance(values, FloatBox) and values.dtype != logits.dtype:
            raise self.space_mismatch("values", f"{logits.dtype.name}[T,B] (the dtype of logits)", values)

    @api
    def loss(self, logits: Any, actions: Any, behaviour_logits: Any, rewards: Any, discounts: Any, values: Any,
             bootstrap_value: Any) -> Any:
        """``(total, pg, baseline, entropy)`` (see the class docstring)."""
        log_rhos, log_probs = self._graph_fn_log_rhos(logits, actions, behaviour_logits)
        vs, advantages = self.vtrace_fn.vtrace(log_rhos, discounts, rewards, values, bootstrap_value)
        return self._graph_fn_losses(logits, log_probs, vs, advantages, values)

    @graph_fn(returns=2)
    def _graph_fn_log_rhos(self, F: Any, logits: Any, actions: Any, behaviour_logits: Any) -> tuple[Any, Any]:
        log_probs = F.select_last(F.log_softmax(logits), actions)
        behaviour_log_probs = F.select_last(F.log_softmax(behaviour_logits), actions)
        return F.stop_gradient(log_probs - behaviour_log_probs), log_probs

    @graph_fn(returns=4)
    def _graph_fn_losses(self, F: Any, logits: Any, log_probs: Any, vs: Any, advantages: Any,
                         values: Any) -> tuple[Any, Any, Any, Any]:
        reduce = F.reduce_sum if self.reduction == "sum" else F.reduce_mean
        advantages = F.stop_gradient(advantages)
        if self.normalize_advantages:
            advantages = advantages / (F.sqrt(F.reduce_mean(F.square(advantages))) + 1e-8)
        pg = -reduce(log_probs * advantages)
        baseline = 0.5 * reduce(F.square(F.stop_gradient(vs) - values))
        entropy = reduce(F.reduce_sum(F.softmax(logits) * F.log_softmax(logits), axis=-1))
        total = pg + self.baseline_cost * baseline + self.entropy_cost * entropy
        return total, pg, baseline, entropy
