"""The in-graph `FrameReplay` draws uniformly without ``prioritized``, whatever the priorities, and by p^alpha with it.

The specs of `FrameReplay` check its stacks against a model, not its draws (``get_records`` is
stochastic and the model has no priorities to update), so an alpha left on in the uniform form
passed them (mutation report, ``frame_replay.py``: ``alpha if prioritized else 0.0`` made ``1.0``).
Here the priorities are updated to values 50 times apart and the drawn slots are tested against
the definition with the chi-square test of `harness.testing.distributions`; the sample size is its
power calculation for a 5% change of alpha (prioritized) or one slot never drawn (uniform).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing import distributions as D
from harness.testing.plugin import selected_backends
from reference_agents.components.memories import FrameIndex, FrameReplay
from reference_agents.components.memories.frame_replay import TRANSITION_SPACE
from reference_agents.oracles.frame_replay import atari_like_records, stack_records

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.frame_replay",
                   "reference_agents.components.memories.prioritized_replay")

CAPACITY, ALPHA, BETA, EPSILON = 8, 0.7, 0.3, 1e-6


def filled(backend: str, prioritized: bool) -> tuple[GraphExecutor, np.ndarray, np.ndarray]:
    """A replay of 8 valid transitions whose priorities were updated to 0.2 ... 10 (slot order shuffled)."""
    index = FrameIndex(CAPACITY, (2, 2), 1, frame_capacity=40, match_window=CAPACITY)
    graph = GraphExecutor(FrameReplay(CAPACITY, 1, frame_capacity=40, prioritized=prioritized, alpha=ALPHA,
                                      beta=BETA, epsilon=EPSILON),
                          {"frame_slots": "int64[B]", "frames": "uint8[B,2,2]", "frame_prevs": "int64[B]",
                           "transitions": TRANSITION_SPACE, "dead_slots": "int64[B]", "indices": "int64[B]",
                           "num_records": "int64[]", "priorities": "float32[B]"}, backend=backend, seed=0)
    rows = atari_like_records(np.random.default_rng(0), 1, CAPACITY, 1, stack=1, frame_shape=(2, 2), p_terminate=0.0,
                              p_truncate=0.0)
    plan = index.add(stack_records(rows))
    graph.execute("insert", plan.frame_slots, plan.frames, plan.frame_prevs, plan.transitions, plan.dead)
    valid = np.flatnonzero(index.valid)
    assert valid.size == CAPACITY
    priorities = np.random.default_rng(1).permutation(np.geomspace(0.2, 10.0, CAPACITY)).astype(np.float32)
    graph.execute("update_records", valid, priorities)
    return graph, valid, priorities


def draws(graph: GraphExecutor, n: int) -> tuple[np.ndarray, np.ndarray]:
    """At least ``n`` draws in whole batches of 512 (stratified draws: a batch cut short would miss its last strata)."""
    slots, weights = [], []
    while sum(map(len, slots)) < n:
        _, s, w = graph.execute("get_records", np.int64(512))
        slots.append(np.asarray(s))
        weights.append(np.asarray(w))
    return np.concatenate(slots), np.concatenate(weights)


def per_probs(priorities: np.ndarray, alpha: float) -> np.ndarray:
    q = (np.abs(priorities.astype(np.float64)) + EPSILON) ** alpha
    return q / q.sum()


@pytest.mark.parametrize("backend", selected_backends())
def test_uniform_replay_ignores_the_priorities(backend: str) -> None:
    graph, valid, _ = filled(backend, prioritized=False)
    p0 = np.full(CAPACITY, 1.0 / CAPACITY)
    n = D.sample_size_chi_square(p0, np.r_[np.full(CAPACITY - 1, 1.0 / (CAPACITY - 1)), 0.0])
    slots, weights = draws(graph, n)
    where = D.Where("FrameReplay", "get_records", "slots", backend)
    assert (weights == 1).all(), f"{where}: uniform replay must weight every draw 1"
    D.check_chi_square(where, np.searchsorted(valid, slots), p0, what="uniform over the transitions")


@pytest.mark.parametrize("backend", selected_backends())
def test_prioritized_replay_draws_by_priority_to_the_alpha(backend: str) -> None:
    graph, valid, priorities = filled(backend, prioritized=True)
    p0 = per_probs(priorities, ALPHA)
    n = D.sample_size_chi_square(p0, per_probs(priorities, ALPHA * 1.05))
    slots, weights = draws(graph, n)
    pos = np.searchsorted(valid, slots)
    D.check_chi_square(D.Where("FrameReplay", "get_records", "slots", backend), pos, p0,
                       what="p_i^alpha / sum_k p_k^alpha")
    np.testing.assert_allclose(weights, (p0.min() / p0[pos]) ** BETA, rtol=1e-4,
                               err_msg="importance weights (min_j P(j) / P(i))^beta")


def test_the_uniform_check_fails_on_priority_driven_draws() -> None:
    """The check above on draws made by priority (what an alpha left on gives): it must fail."""
    priorities = np.geomspace(0.2, 10.0, CAPACITY)
    p0 = np.full(CAPACITY, 1.0 / CAPACITY)
    n = D.sample_size_chi_square(p0, np.r_[np.full(CAPACITY - 1, 1.0 / (CAPACITY - 1)), 0.0])
    drawn = np.random.default_rng(2).choice(CAPACITY, n, p=per_probs(priorities, 1.0))
    with pytest.raises(D.DistributionMismatch):
        D.check_chi_square(D.Where("FrameReplay", "get_records", "slots", "numpy"), drawn, p0)


def test_frame_replay_has_the_prioritized_replays_defaults() -> None:
    """"alpha, beta, epsilon: as `PrioritizedReplay`" (the docstring): the same defaults, which its specs test."""
    import inspect

    from reference_agents.components.memories import PrioritizedReplay

    mine, theirs = inspect.signature(FrameReplay).parameters, inspect.signature(PrioritizedReplay).parameters
    assert {k: mine[k].default for k in ("alpha", "beta", "epsilon")} == \
        {k: theirs[k].default for k in ("alpha", "beta", "epsilon")}
