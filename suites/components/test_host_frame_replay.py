"""`FrameIndex` and the host-side `HostFrameReplay` against the naive full-stack oracle (NumPy, no backend).

Moved here from ``suites/library/test_frame_replay.py`` so that ``pytest suites/components``, the suite the
mutation report measures, exercises these modules (``MUTATION_COVERS``: a mutant of one of them runs this file).
The in-graph form against the host form, and the agent-level tests, stay in ``suites/library``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reference_agents.components.memories import FrameIndex, FrameReplay, HostFrameReplay
from reference_agents.components.memories.host_frame_replay import LAYOUTS
from reference_agents.oracles.frame_replay import FullStackReplay, atari_like_records, stack_records
from reference_agents.oracles.memories import PrioritizedReplayModel
from suites.frame_replay_checks import assert_layout, assert_records_equal, assert_valid_equal_oracle, fill

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.host_frame_replay",
                   "reference_agents.components.memories.frame_index",
                   "reference_agents.components.memories.frame_replay")




@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), num_envs=st.integers(1, 8), n_step=st.integers(1, 5),
       capacity=st.integers(4, 40), spare=st.integers(0, 30), stack=st.integers(1, 4),
       chunk=st.integers(1, 17), window=st.integers(4, 64), compression=st.sampled_from([None, "lz4"]))
# a match window spanning the frame ring: a stack once chained onto the oldest frame, about to be overwritten,
# and its chain became a cycle (fixed in `FrameIndex._in_window`)
@example(seed=8, num_envs=8, n_step=5, capacity=4, spare=23, stack=3, chunk=1, window=27, compression=None)
# the smallest frame ring (two stacks): the next state's new frame overwrote the state's oldest frame, and the
# transition stayed valid reading it (fixed in `FrameIndex.add`: the state's oldest stamp is taken first)
@example(seed=160, num_envs=1, n_step=3, capacity=4, spare=0, stack=2, chunk=1, window=4, compression=None)
def test_every_sampled_stack_equals_the_full_stack_oracle(seed, num_envs, n_step, capacity, spare, stack, chunk,
                                                          window, compression):
    rng = np.random.default_rng(seed)
    rows = atari_like_records(rng, num_envs, int(rng.integers(5, 40)), n_step, stack=stack,
                              p_terminate=float(rng.uniform(0, 0.3)), p_truncate=float(rng.uniform(0, 0.3)))
    store = HostFrameReplay(capacity, (3, 3), stack, frame_capacity=max(2 * stack, capacity + spare),
                            match_window=window, compression=compression, seed=seed)
    oracle = FullStackReplay(capacity)
    fill(store, rows, chunk, oracle)
    valid = assert_valid_equal_oracle(store, oracle)
    assert set(valid) <= {i % capacity for i in range(max(0, len(rows) - capacity), len(rows))}
    if valid.size:
        masses = rng.uniform(0, 1, 16).astype(np.float32) * store.trees.sum[1]
        for layout in LAYOUTS:
            records, slots, _ = store.sample(16, masses, layout=layout)
            assert_layout(records, layout)
            assert_records_equal(records, oracle.records_at(slots))
            assert store.index.valid[slots].all()


def test_enough_frame_slots_keep_every_recent_transition_valid():
    rows = atari_like_records(np.random.default_rng(1), 4, 60, 3, palette=200, p_terminate=0.02, p_truncate=0.02)
    store = HostFrameReplay(50, (3, 3), 4, frame_capacity=200, seed=0)
    oracle = FullStackReplay(50)
    fill(store, rows, 9, oracle)
    assert len(assert_valid_equal_oracle(store, oracle)) == 50 == store.index.size == store.size
    assert store.index.frames_written < 1.15 * len(rows)  # frames once, plus episode starts and finals


def test_an_off_by_one_in_the_chains_is_caught(monkeypatch):
    rows = atari_like_records(np.random.default_rng(2), 2, 30, 2, palette=50)
    store = HostFrameReplay(20, (3, 3), 4, seed=0)
    oracle = FullStackReplay(20)
    fill(store, rows, 5, oracle)
    original = FrameIndex.chains
    monkeypatch.setattr(FrameIndex, "chains", lambda self, slots: original(self, (np.asarray(slots) + 1)
                                                                            % self.frame_capacity))
    with pytest.raises(AssertionError):
        assert_valid_equal_oracle(store, oracle)


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_a_channel_swap_in_the_nhwc_gather_is_caught(monkeypatch, compression):
    rows = atari_like_records(np.random.default_rng(8), 2, 30, 2, palette=50)
    store = HostFrameReplay(20, (3, 3), 4, compression=compression, seed=0)
    oracle = FullStackReplay(20)
    fill(store, rows, 5, oracle)
    assert_valid_equal_oracle(store, oracle)
    original = HostFrameReplay._stacks

    def swapped(self, chains, layout):  # channels 0 and 1 exchanged, in the NHWC path only
        return original(self, chains[:, [1, 0, *range(2, chains.shape[1])]] if layout == "nhwc" else chains, layout)

    monkeypatch.setattr(HostFrameReplay, "_stacks", swapped)
    store.records_at(np.flatnonzero(store.index.valid), layout="nchw_view")  # the view path is untouched
    with pytest.raises(AssertionError, match="states"):
        assert_valid_equal_oracle(store, oracle)


def test_an_unknown_layout_is_refused():
    store = HostFrameReplay(20, (3, 3), 4, seed=0)
    fill(store, atari_like_records(np.random.default_rng(9), 1, 10, 1), 5)
    for call in (lambda: store.sample(4, layout="nchw"), lambda: store.records_at([0], layout="NHWC")):
        with pytest.raises(ValueError, match="layout must be one of"):
            call()


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), capacity=st.integers(4, 20), alpha=st.floats(0.0, 1.0), beta=st.floats(0.0, 1.0))
def test_priorities_and_weights_equal_the_prioritized_replay_model(seed, capacity, alpha, beta):
    rng = np.random.default_rng(seed)
    rows = atari_like_records(rng, 2, 25, 3, palette=100)
    store = HostFrameReplay(capacity, (3, 3), 4, alpha=alpha, beta=beta, frame_capacity=4 * capacity + 40, seed=seed)
    model = PrioritizedReplayModel({"capacity": capacity, "alpha": alpha}, {
        "memory/records": np.zeros(capacity), "memory/index": np.asarray(0), "memory/size": np.asarray(0),
        "sum_tree/tree": np.zeros(2 * store.trees.leaves, np.float32),
        "min_tree/tree": np.full(2 * store.trees.leaves, np.inf, np.float32), "max_priority": np.float32(1.0)})
    for i in range(0, len(rows), 6):
        store.add(stack_records(rows[i:i + 6]))
        model.insert_records(np.zeros(len(rows[i:i + 6])))
        masses = rng.uniform(0, 1, 8).astype(np.float32) * store.trees.sum[1]
        slots = store.sample_slots(8, masses)
        np.testing.assert_array_equal(slots, np.minimum(model.sum_tree.prefix_sum_index(masses), capacity - 1))
        leaves = model.sum_tree.get(slots)
        want = (np.minimum(model.min_tree.reduce() / leaves, 1.0).astype(np.float64) ** beta).astype(np.float32)
        np.testing.assert_allclose(store.weights(slots), want, rtol=2e-5)
        td = rng.normal(size=8).astype(np.float32)
        store.update_priorities(slots, td)
        model.update_records(slots, td)
        np.testing.assert_allclose(store.trees.sum[store.trees.leaves:], model.sum_tree.tree[store.trees.leaves:],
                                   rtol=2e-5)


def test_uniform_sampling_covers_valid_transitions_evenly():
    rows = atari_like_records(np.random.default_rng(3), 3, 40, 2, palette=100)
    store = HostFrameReplay(32, (3, 3), 4, prioritized=False, frame_capacity=200, seed=0)
    fill(store, rows, 8)
    _, slots, weights = store.sample(32_000)
    counts = np.bincount(slots, minlength=32)
    assert (weights == 1).all() and counts.min() > 800 and counts.max() < 1200


def test_storage_is_within_two_percent_of_one_frame_per_transition():
    for capacity in (100_000, 1_000_000):  # zero pages until written: these cost nothing to make
        store = HostFrameReplay(capacity, (84, 84), 4)
        assert store.nbytes() <= capacity * 84 * 84 * 1.02, (capacity, store.nbytes() / (capacity * 84 * 84))
        assert store.frame_nbytes() >= capacity * 84 * 84


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_state_dict_round_trip(tmp_path, compression):
    rows = atari_like_records(np.random.default_rng(4), 3, 40, 3, palette=4)
    store = HostFrameReplay(30, (3, 3), 4, compression=compression, frame_capacity=50, seed=0)
    fill(store, rows, 7)
    store.update_priorities(np.arange(10), np.arange(10.0))
    np.savez(tmp_path / "r.npz", **store.state_dict())
    loaded = HostFrameReplay(30, (3, 3), 4, compression=compression, frame_capacity=50, seed=0)
    with np.load(tmp_path / "r.npz") as data:
        loaded.load_state_dict({k: data[k] for k in data.files})
    slots = np.arange(30)
    for key, value in store.records_at(slots).items():
        np.testing.assert_array_equal(loaded.records_at(slots)[key], value)
    np.testing.assert_array_equal(loaded.trees.sum, store.trees.sum)
    more = atari_like_records(np.random.default_rng(5), 3, 10, 3, palette=4)
    oracle = FullStackReplay(30)
    oracle.add(rows)
    for s in (store, loaded):
        fill(s, more, 7)
    oracle.add(more)
    assert_valid_equal_oracle(loaded, oracle)
    np.testing.assert_array_equal(loaded.index.valid, store.index.valid)
    with pytest.raises(ValueError, match="compression"):
        HostFrameReplay(30, (3, 3), 4, compression=None if compression else "lz4",
                        frame_capacity=50).load_state_dict(store.state_dict())


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="stack"):
        HostFrameReplay(10, (3, 3), 0)
    with pytest.raises(ValueError, match="capacity must be at least the stack depth"):
        HostFrameReplay(3, (3, 3), 4)
    with pytest.raises(ValueError, match="compression"):
        HostFrameReplay(10, (3, 3), 4, compression="zstd")
    for name, value in (("alpha", -0.1), ("beta", 1.1), ("beta", -0.1), ("epsilon", 0.0)):
        with pytest.raises(ValueError, match=name):
            HostFrameReplay(10, (3, 3), 4, **{name: value})
    with pytest.raises(ValueError, match="compression is only for the host-side store"):
        FrameReplay(10, 4, compression="lz4")
    with pytest.raises(ValueError, match="stack"):
        FrameReplay(10, 0)
    with pytest.raises(ValueError, match=r"records\['states'\]"):
        HostFrameReplay(10, (3, 3), 4).add(stack_records(atari_like_records(np.random.default_rng(0), 1, 9, 1,
                                                                            frame_shape=(3, 4))))


def test_compressed_frames_count_their_blob_bytes_exactly():
    """``frame_nbytes`` with LZ4: the blobs' lengths plus a 33-byte header each and the list's pointers."""
    from reference_agents.components.memories.host_frame_replay import BYTES_HEADER

    store = HostFrameReplay(12, (3, 3), 2, compression="lz4", frame_capacity=20, seed=0)
    for chunk in range(4):  # 60 rows into 20 frame slots: overwritten slots replace their blobs
        fill(store, atari_like_records(np.random.default_rng(10 + chunk), 1, 15, 1, stack=2, palette=50), 5)
        blobs = [b for b in store.packed if b is not None]
        assert store.frame_nbytes() == sum(map(len, blobs)) + BYTES_HEADER * len(blobs) + 8 * len(store.packed)


@pytest.mark.parametrize("batch", [1, 3])
def test_small_batches_draw_uniformly_too(batch):
    """Stratified masses split the total into ``batch`` strata: with 1 or 3 of them, a stratum boundary off by one
    (all masses shifted down a stratum) would draw slot 0 far too often; 32,000 draws hide it, small batches not."""
    from harness.testing import distributions as D

    rows = atari_like_records(np.random.default_rng(3), 3, 40, 2, palette=100)
    store = HostFrameReplay(32, (3, 3), 4, prioritized=False, frame_capacity=200, seed=0)
    fill(store, rows, 8)
    valid = np.flatnonzero(store.index.valid)
    k = len(valid)
    p0 = np.full(k, 1.0 / k)
    n = D.sample_size_chi_square(p0, np.r_[np.full(k - 1, 1.0 / (k - 1)), 0.0])
    slots = np.concatenate([store.sample(batch)[1] for _ in range(-(-n // batch))])
    assert np.isin(slots, valid).all()
    D.check_chi_square(D.Where("HostFrameReplay", "sample", "slots", "numpy"), np.searchsorted(valid, slots), p0,
                       what=f"uniform over the valid transitions, {batch} per draw")


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_nbytes_is_the_frames_plus_every_array_of_the_index_and_trees(compression):
    store = HostFrameReplay(50, (3, 3), 4, compression=compression, frame_capacity=80, seed=0)
    fill(store, atari_like_records(np.random.default_rng(11), 2, 40, 3, palette=50), 7)
    arrays = [v for part in (store.index, store.trees) for v in vars(part).values() if isinstance(v, np.ndarray)]
    assert store.nbytes() == store.frame_nbytes() + sum(a.nbytes for a in arrays)
    if compression is None:
        assert store.frame_nbytes() == store.frames.nbytes


def test_sampling_an_empty_store_is_refused():
    store = HostFrameReplay(8, (3, 3), 2, seed=0)
    with pytest.raises(RuntimeError, match="no valid transition to sample"):
        store.sample(4)
    fill(store, atari_like_records(np.random.default_rng(12), 1, 6, 1, stack=2, palette=20), 6)
    assert store.index.valid.any() and len(store.sample(4)[1]) == 4


def test_uniform_replay_ignores_priority_updates():
    """Without ``prioritized`` the priorities may be given (the agent does, on add and by update) but the draws
    stay uniform."""
    from harness.testing import distributions as D

    rows = atari_like_records(np.random.default_rng(3), 3, 40, 2, palette=100)
    store = HostFrameReplay(32, (3, 3), 4, prioritized=False, frame_capacity=200, seed=0)
    for i in range(0, len(rows), 8):
        store.add(stack_records(rows[i:i + 8]), priorities=np.geomspace(0.01, 100.0, len(rows[i:i + 8])))
    valid = np.flatnonzero(store.index.valid)
    store.update_priorities(valid, np.geomspace(0.01, 100.0, len(valid)).astype(np.float32))
    p0 = np.full(len(valid), 1.0 / len(valid))
    n = D.sample_size_chi_square(p0, np.r_[np.full(len(valid) - 1, 1.0 / (len(valid) - 1)), 0.0])
    _, slots, weights = store.sample(n)
    assert (weights == 1).all()
    D.check_chi_square(D.Where("HostFrameReplay", "sample", "slots", "numpy"), np.searchsorted(valid, slots), p0,
                       what="uniform over the valid transitions after priority updates")


@settings(max_examples=30, deadline=None)
@given(capacity=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_host_trees_are_an_implicit_binary_tree_over_their_leaves(capacity, seed):
    """`HostSumMinTrees` against a flat model: leaves 2^k >= capacity at nodes [leaves, 2 leaves), the root at 1
    holding the sum (the min), and prefix-sum search finding the leaf whose cumulative interval holds the mass."""
    from reference_agents.components.memories.host_frame_replay import HostSumMinTrees

    rng = np.random.default_rng(seed)
    trees = HostSumMinTrees(capacity)
    leaves = trees.leaves
    assert leaves >= capacity and leaves & (leaves - 1) == 0 and (leaves == 1 or leaves // 2 < capacity)
    assert trees.sum.shape == trees.min.shape == (2 * leaves,)
    flat_sum, flat_min = np.zeros(leaves, np.float32), np.full(leaves, np.inf, np.float32)
    for _ in range(3):
        slots = rng.integers(0, capacity, rng.integers(1, 8))
        values = rng.uniform(0.5, 2.0, len(slots)).astype(np.float32)
        trees.set(slots, values)
        flat_sum[slots], flat_min[slots] = values, values  # the last of repeated slots wins, as in NumPy
        np.testing.assert_allclose(trees.sum[leaves:], flat_sum)
        np.testing.assert_allclose(trees.sum[1], flat_sum.sum(), rtol=1e-5)
        assert trees.min[1] == flat_min.min()
        masses = rng.uniform(0, 1, 16).astype(np.float32) * trees.sum[1] * np.float32(0.999)
        want = np.minimum(np.searchsorted(np.cumsum(flat_sum.astype(np.float64)), masses, side="right"), leaves - 1)
        np.testing.assert_array_equal(trees.prefix_sum_index(masses), want)


def test_default_sizes_follow_their_documented_rules():
    """Frame slots: capacity plus 0.5% spare plus two stacks; match window: capacity / 500 within [64, 4096]."""
    from reference_agents.components.memories.frame_index import default_frame_capacity, default_match_window

    for capacity, stack in ((1_000_000, 4), (40_000, 3), (199, 2), (10, 1)):
        assert default_frame_capacity(capacity, stack) - capacity - 2 * stack == int(capacity * 0.005)
    assert [default_match_window(c) for c in (1, 32_000, 32_499, 100_000, 2_048_000, 10**8)] == \
        [64, 64, 64, 200, 4096, 4096]


def test_records_added_without_priorities_get_the_largest_priority_so_far():
    """As `PrioritizedReplay.insert_records`: new records enter at the largest ``p`` seen, including the ``p`` of
    records added with explicit priorities."""
    store = HostFrameReplay(16, (3, 3), 2, alpha=0.5, epsilon=1e-6, frame_capacity=60, seed=0)
    rows = atari_like_records(np.random.default_rng(13), 1, 12, 1, stack=2, palette=30)
    first = store.add(stack_records(rows[:6]), priorities=np.full(6, 4.0, np.float32))
    second = store.add(stack_records(rows[6:]))
    leaves = store.trees.sum[store.trees.leaves:]
    np.testing.assert_allclose(leaves[first[store.index.valid[first]]], 2.0, rtol=1e-5)   # (4 + 1e-6) ** 0.5
    assert store.index.valid[second].any()
    np.testing.assert_allclose(leaves[second[store.index.valid[second]]], 2.0, rtol=1e-5)
