"""Sampling statistics and argument checks of the replay memories (what the spec files cannot express)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.memories import PrioritizedReplay, ReplayMemory, SegmentTree
from reference_agents.oracles.memories import SegmentTreeModel, importance_weights, prefix_sum_index

BACKENDS = selected_backends()


def _close_to(freq: np.ndarray, prob: np.ndarray, draws: int) -> None:
    """Every frequency lies within 5 standard errors of its probability."""
    se = np.sqrt(prob * (1.0 - prob) / draws)
    assert np.all(np.abs(freq - prob) <= 5.0 * se + 1e-12), f"frequencies {freq} vs probabilities {prob}"


def _replay(backend: str, capacity: int) -> GraphExecutor:
    return GraphExecutor(ReplayMemory(capacity), {"records": "int64[B]", "num_records": "int64[]",
                                                  "indices": "int64[B]"}, backend=backend, seed=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("inserted", [5, 11])
def test_replay_samples_filled_slots_uniformly(backend: str, inserted: int) -> None:
    ex = _replay(backend, 8)
    ex.execute("insert_records", np.arange(inserted, dtype=np.int64))
    values = np.concatenate([ex.execute("get_records", np.int64(256)) for _ in range(16)])
    held = np.arange(inserted)[-8:]  # the last 8 survive a wrap
    counts = np.array([(values == v).sum() for v in held])
    assert counts.sum() == len(values), f"sampled values outside the memory: {set(values) - set(held)}"
    _close_to(counts / len(values), np.full(len(held), 1.0 / len(held)), len(values))


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_empty_memory_returns_zeros(backend: str) -> None:
    assert np.array_equal(_replay(backend, 4).execute("get_records", np.int64(3)), np.zeros(3, np.int64))


def test_segment_tree_model_search_matches_the_cumulative_sum_definition() -> None:
    rng = np.random.default_rng(0)
    model = SegmentTreeModel({"capacity": 16, "operation": "sum"}, {"tree": np.zeros(32, np.float32)})
    leaves = rng.integers(0, 4, size=16).astype(np.float32)  # integers: float32 sums are exact
    model.update(np.arange(16), leaves)
    masses = np.concatenate([rng.uniform(0, leaves.sum() + 2, 200), np.cumsum(leaves)]).astype(np.float32)
    assert np.array_equal(model.prefix_sum_index(masses), prefix_sum_index(leaves, masses))


@pytest.mark.parametrize("backend", BACKENDS)
def test_segment_tree_search_matches_the_definition(backend: str) -> None:
    ex = GraphExecutor(SegmentTree(16), {"indices": "int64[B]", "values": "float32[B]", "masses": "float32[B]"},
                       backend=backend, api_methods=["update", "prefix_sum_index"])
    leaves = np.random.default_rng(1).integers(0, 4, size=16).astype(np.float32)
    ex.execute("update", np.arange(16), leaves)
    masses = np.concatenate([np.linspace(0, leaves.sum() + 1, 101), np.cumsum(leaves)]).astype(np.float32)
    assert np.array_equal(ex.execute("prefix_sum_index", masses), prefix_sum_index(leaves, masses))


def _prioritized(backend: str, capacity: int, **config: float) -> GraphExecutor:
    return GraphExecutor(PrioritizedReplay(capacity, **config),
                         {"records": "int64[B]", "num_records": "int64[]", "indices": "int64[B]",
                          "priorities": "float32[B]"}, backend=backend, seed=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_sampling_is_proportional_to_priority_to_the_alpha(backend: str) -> None:
    alpha, beta = 0.7, 0.5
    ex = _prioritized(backend, 6, alpha=alpha, beta=beta)
    ex.execute("insert_records", np.arange(5, dtype=np.int64))  # slots 0..4, slot 5 stays empty
    priorities = np.array([0.5, 1.0, 2.0, 4.0, 8.0], np.float32)
    ex.execute("update_records", np.arange(5), priorities)
    draws = []
    for _ in range(64):
        records, slots, weights = ex.execute("get_records", np.int64(64))
        assert np.array_equal(records, slots), "records must be the ones in the returned slots"
        assert np.all(np.diff(slots) >= 0), "stratified draws come in slot order"
        np.testing.assert_allclose(weights, importance_weights(priorities + 1e-6, slots, alpha, beta), rtol=1e-5)
        draws.append(slots)
    slots = np.concatenate(draws)
    p = priorities.astype(np.float64) ** alpha
    _close_to(np.bincount(slots, minlength=6)[:5] / len(slots), p / p.sum(), len(slots))
    assert not np.any(slots == 5), "an empty slot was sampled"


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_new_records_get_the_largest_priority(backend: str) -> None:
    ex = _prioritized(backend, 4, alpha=1.0)
    ex.execute("insert_records", np.array([0, 1], np.int64))
    ex.execute("update_records", np.array([0, 1]), np.array([3.0, 0.0], np.float32))
    ex.execute("insert_records", np.array([2], np.int64))
    tree = ex.get_weights()["prioritized_replay/sum_tree/tree"]
    np.testing.assert_allclose(tree[4:7], [3.0 + 1e-6, 1e-6, 3.0 + 1e-6], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_empty_memory(backend: str) -> None:
    records, slots, weights = _prioritized(backend, 4).execute("get_records", np.int64(3))
    assert np.array_equal(slots, [0, 0, 0]) and np.array_equal(weights, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("make, message", [
    (lambda: ReplayMemory(0), "capacity"),
    (lambda: ReplayMemory(2.5), "capacity"),
    (lambda: ReplayMemory(True), "capacity"),
    (lambda: SegmentTree(6), "power of two"),
    (lambda: SegmentTree(8, operation="max"), "operation"),
    (lambda: PrioritizedReplay(0), "capacity"),
    (lambda: PrioritizedReplay(8, alpha=-0.1), "alpha"),
    (lambda: PrioritizedReplay(8, beta=1.5), "beta"),
    (lambda: PrioritizedReplay(8, epsilon=0.0), "epsilon"),
    (lambda: PrioritizedReplay(8, alpha="big"), "alpha"),
])
def test_bad_arguments_name_the_argument(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
