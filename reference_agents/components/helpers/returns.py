"""`DiscountedReturns`: discounted reward sums along the time rank, reset at episode ends."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, FloatBox, Space


def check_discount(owner: str, argument: str, value: Any) -> float:
    """``value`` as a float in [0, 1], else ValueError naming ``argument``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{owner}: {argument} must be a number in [0, 1]; got {value!r}")
    return float(value)


def reverse_recursion(F: Any, x: Any, a: Any) -> Any:
    """``acc_t = x_t + a_t * acc_{t+1}`` with ``acc_T = 0``, over the leading (time) axis of ``x`` ``[T, ...]``.

    ``a`` holds the per-step factors, of ``x``'s shape; the result has ``x``'s shape
    (``[0, ...]`` for ``T == 0``). One ``F.scan`` in reverse.
    """
    zeros = F.zeros_like(F.reduce_sum(x[:1], 0))  # acc_T, of one step's shape (also when T == 0)
    return F.scan(lambda acc, xa: xa[0] + xa[1] * acc, (x, a), zeros, reverse=True)[1]


class DiscountedReturns(Component):
    """Discounted sums of rewards along the time rank, reset where an episode ends.

    ``R_t = r_t + gamma * (1 - terminal_t) * R_{t+1}`` with ``R_T = 0`` after the
    last step (no bootstrap): the Monte-Carlo return of every step within the
    sequence (Sutton & Barto 2018, eq. 3.9, truncated at the sequence's end).

    Accepts ``rewards`` ``float*[B,T]`` or ``float*[T,B]`` and ``terminals``
    ``bool`` of the same layout (``terminal_t``: the episode ended with step
    ``t``). Returns ``float*`` returns in the input's dtype and layout.

    Args:
        gamma: the discount, in [0, 1].
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
    """

    def __init__(self, gamma: float = 0.99, scope: str = "discounted_returns") -> None:
        self.gamma = check_discount("DiscountedReturns", "gamma", gamma)
        super().__init__(scope=scope)
        self.time_major = False

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Requires ``rewards`` ``float*[B,T]``/``[T,B]`` and ``terminals`` ``bool`` in the same layout."""
        rewards, terminals = input_spaces["rewards"], input_spaces["terminals"]
        if not (isinstance(rewards, FloatBox) and rewards.rank == 0 and set(rewards.extra_ranks) == {"B", "T"}):
            raise self.space_mismatch("rewards", "a scalar FloatBox with batch and time ranks (float32[B,T] or "
                                      "float32[T,B])", rewards)
        if not (isinstance(terminals, BoolBox) and terminals.rank == 0
                and terminals.extra_ranks == rewards.extra_ranks):
            raise self.space_mismatch("terminals", f"a scalar BoolBox in the layout of rewards "
                                      f"(bool[{','.join(rewards.extra_ranks)}])", terminals)
        self.time_major = rewards.time_major

    @api
    def discounted_sums(self, rewards: Any, terminals: Any) -> Any:
        """The discounted returns of every step (see the class docstring)."""
        summands, factors = self._graph_fn_time_major(rewards, terminals)
        return self._graph_fn_from_time_major(self._graph_fn_recursion(summands, factors))

    @graph_fn(returns=2)
    def _graph_fn_time_major(self, F: Any, rewards: Any, terminals: Any) -> tuple[Any, Any]:
        factors = self.gamma * (1.0 - F.cast(terminals, rewards.dtype))
        if self.time_major:
            return rewards, factors
        return F.transpose(rewards, [1, 0]), F.transpose(factors, [1, 0])

    @graph_fn
    def _graph_fn_recursion(self, F: Any, summands: Any, factors: Any) -> Any:
        return reverse_recursion(F, summands, factors)

    @graph_fn
    def _graph_fn_from_time_major(self, F: Any, returns: Any) -> Any:
        return returns if self.time_major else F.transpose(returns, [1, 0])
