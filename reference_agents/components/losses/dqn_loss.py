"""`DQNLoss`: the (double, n-step, prioritized) Q-learning loss of DQN and its descendants."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, FloatBox, IntBox, Space
from reference_agents.components.helpers.returns import check_discount


class DQNLoss(Component):
    """The Q-learning loss with a target network (Mnih et al. 2015), optionally double Q, n-step and weighted.

    For a batch of (n-step) transitions ``(s, a, r, terminal, s')``:

    - target ``y = r + (1 - terminal) * gamma^n * Q_target(s', a*)`` with
      ``a* = argmax_a Q_online(s', a)`` for double Q (van Hasselt et al. 2016,
      eq. 4) else ``a* = argmax_a Q_target(s', a)`` (Mnih et al. 2015); ``y``
      carries no gradient;
    - TD error ``delta = y - Q(s, a)``;
    - per-item loss ``w * huber(delta)`` (``0.5 delta^2`` for ``|delta| <= d``,
      else ``d (|delta| - 0.5 d)``; ``0.5 delta^2`` when ``huber_delta`` is None),
      with ``w`` the importance weights of prioritized replay (Schaul et al.
      2016) or 1.

    With ``discounts`` fed, the bootstrap term is ``(1 - terminal) * discount_i *
    Q_target(s', a*)`` with each transition's own discount instead of
    ``gamma^n_step``: n-step windows cut short by a time limit (``k < n`` steps,
    ``discount = gamma^k``) bootstrap with the right power (see
    `NStepAccumulator`).

    Dueling networks (Wang et al. 2016) only change how ``Q`` is computed.

    API:
        ``loss(q_values, actions, rewards, terminals, next_q_values_target,
        next_q_values_online=None, importance_weights=None)`` ->
        ``(loss, td_errors)``: the mean per-item loss ``float*[]`` and the TD
        errors ``float*[B]`` (for new priorities);
        ``loss_per_item(...)`` (same arguments) -> the per-item losses ``float*[B]``.

    Spaces: ``q_values``, ``next_q_values_target`` and ``next_q_values_online``
    ``float*[B,A]`` (one dtype), ``actions`` an ``IntBox[B]`` of ``A``
    categories, ``rewards``, ``importance_weights`` and ``discounts`` ``float*[B]``,
    ``terminals`` ``bool[B]``. ``next_q_values_online`` must be fed when
    ``double_q``; ``importance_weights`` when ``importance_weights``.

    Args:
        gamma: the discount, in [0, 1].
        double_q: pick the bootstrap action with the online network.
        huber_delta: the Huber loss's threshold, a positive number, or None for the squared loss.
        n_step: the number of steps folded into each transition (the bootstrap is discounted by ``gamma^n_step``).
        importance_weights: whether to weight items by the fed ``importance_weights``.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, gamma: float = 0.99, double_q: bool = True, huber_delta: float | None = 1.0,
                 n_step: int = 1, importance_weights: bool = True, scope: str = "dqn_loss") -> None:
        gamma = check_discount("DQNLoss", "gamma", gamma)
        if not isinstance(double_q, bool):
            raise ValueError(f"DQNLoss: double_q must be a bool; got {double_q!r}")
        if huber_delta is not None and (isinstance(huber_delta, bool) or not isinstance(huber_delta, (int, float))
                                        or not huber_delta > 0):
            raise ValueError(f"DQNLoss: huber_delta must be a positive number or None; got {huber_delta!r}")
        if isinstance(n_step, bool) or not isinstance(n_step, int) or n_step <= 0:
            raise ValueError(f"DQNLoss: n_step must be a positive int; got {n_step!r}")
        if not isinstance(importance_weights, bool):
            raise ValueError(f"DQNLoss: importance_weights must be a bool; got {importance_weights!r}")
        super().__init__(scope=scope)
        self.gamma, self.double_q, self.n_step = gamma, double_q, n_step
        self.huber_delta = None if huber_delta is None else float(huber_delta)
        self.importance_weights = importance_weights
        self.num_actions = 0

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Checks shapes, dtypes and that the needed optional arguments are fed (see the class docstring)."""
        q = input_spaces["q_values"]
        if not (isinstance(q, FloatBox) and q.extra_ranks == ("B",) and q.rank == 1):
            raise self.space_mismatch("q_values", "a FloatBox [B,A] (float32[B,A])", q)
        self.num_actions = q.shape[0]
        dtype = q.dtype.name
        q_like = f"{dtype}[B,{self.num_actions}] (like q_values)"
        needed = ["next_q_values_target"] + (["next_q_values_online"] if self.double_q else [])
        for arg in needed:
            space = input_spaces.get(arg)
            if not (isinstance(space, FloatBox) and space.extra_ranks == ("B",) and space.shape == q.shape
                    and space.dtype == q.dtype):
                raise self.space_mismatch(arg, q_like, space,
                                          "required with double_q=True" if arg == "next_q_values_online" else "")
        actions = input_spaces["actions"]
        if not (isinstance(actions, IntBox) and actions.extra_ranks == ("B",) and actions.rank == 0
                and actions.num_categories == self.num_actions):
            raise self.space_mismatch("actions", f"an IntBox [B] of {self.num_actions} categories "
                                      f"(int64[B](0,{self.num_actions - 1}))", actions)
        per_item = [("rewards", FloatBox, dtype)] + ([("importance_weights", FloatBox, dtype)]
                                                      if self.importance_weights else [])
        if "discounts" in input_spaces:
            per_item.append(("discounts", FloatBox, dtype))
        for arg, kind, want in per_item + [("terminals", BoolBox, "bool")]:
            space = input_spaces.get(arg)
            if not (isinstance(space, kind) and space.extra_ranks == ("B",) and space.rank == 0
                    and space.dtype.name == want):
                raise self.space_mismatch(arg, f"{want}[B]", space,
                                          "required with importance_weights=True"
                                          if arg == "importance_weights" else "")

    @api
    def loss(self, q_values: Any, actions: Any, rewards: Any, terminals: Any, next_q_values_target: Any,
             next_q_values_online: Any = None, importance_weights: Any = None, discounts: Any = None) -> Any:
        """``(mean loss, td_errors)`` (see the class docstring)."""
        per_item, td_errors = self._graph_fn_per_item(q_values, actions, rewards, terminals, next_q_values_target,
                                                      next_q_values_online, importance_weights, discounts)
        return self._graph_fn_mean(per_item), td_errors

    @api
    def loss_per_item(self, q_values: Any, actions: Any, rewards: Any, terminals: Any, next_q_values_target: Any,
                      next_q_values_online: Any = None, importance_weights: Any = None,
                      discounts: Any = None) -> Any:
        """The weighted per-item losses ``float*[B]``."""
        per_item, _ = self._graph_fn_per_item(q_values, actions, rewards, terminals, next_q_values_target,
                                              next_q_values_online, importance_weights, discounts)
        return per_item

    def _per_item_spaces(self, q_values: Space, *_: Space | None) -> tuple[Space, Space]:
        # declared (``[B]`` items of the Q-values' dtype; check_input_spaces fixes the ranks), so the build runs
        # no sample batches through the loss: on TF those eager runs cost about 0.05 s of a DQN build
        item = FloatBox((), dtype=q_values.dtype, batch_rank=True)
        return item, item

    @graph_fn(returns=2, output_spaces=_per_item_spaces)
    def _graph_fn_per_item(self, F: Any, q_values: Any, actions: Any, rewards: Any, terminals: Any,
                           next_q_values_target: Any, next_q_values_online: Any,
                           importance_weights: Any, discounts: Any) -> tuple[Any, Any]:
        dtype = q_values.dtype
        q_taken = F.select_last(q_values, actions)
        chooser = next_q_values_online if self.double_q else next_q_values_target
        bootstrap = F.select_last(next_q_values_target, F.argmax(chooser, axis=-1))
        discount = self.gamma ** self.n_step if discounts is None else discounts
        # not-terminal as a cast of logical_not: a Python number minus a tensor runs through torch's Python-level
        # __rsub__ (about 5 us more per update on PyTorch)
        target = rewards + F.cast(F.logical_not(terminals), dtype) * discount * bootstrap
        td_errors = F.stop_gradient(target) - q_taken
        if self.huber_delta is None:
            per_item = 0.5 * F.square(td_errors)
        else:
            d = self.huber_delta
            magnitude = F.abs(td_errors)
            per_item = F.where(magnitude <= d, 0.5 * F.square(td_errors), d * (magnitude - 0.5 * d))
        if self.importance_weights:
            per_item = importance_weights * per_item
        return per_item, td_errors

    @graph_fn
    def _graph_fn_mean(self, F: Any, per_item: Any) -> Any:
        return F.reduce_mean(per_item)
