"""Edge cases of `FrameIndex` and `HostFrameReplay` that random rollouts reach rarely or never (issue 19's mutants).

Each scenario is scripted with frames that are constants (``frame(k)``: every pixel ``k``), so which slot a
stack gets, when a transition dies and what a load restores can be worked out by hand; the expectations
follow from the documented rules (`FrameIndex`'s module docstring), never from reading the arrays back
as they are.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference_agents.components.memories import FrameIndex, HostFrameReplay
from reference_agents.components.memories import frame_index as frame_index_module
from reference_agents.oracles.frame_replay import FullStackReplay, atari_like_records, stack_records
from suites.frame_replay_checks import assert_records_equal, assert_valid_equal_oracle, fill

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.frame_index",
                   "reference_agents.components.memories.host_frame_replay")

SHAPE = (2, 2)


def frame(k: int) -> np.ndarray:
    return np.full(SHAPE, k, np.uint8)


def row(state: list[int], next_state: list[int], action: int = 0) -> dict:
    """A record whose stacks are the frames ``state`` and ``next_state`` (oldest first)."""
    return {"states": np.stack([frame(k) for k in state], -1), "actions": action, "rewards": float(action),
            "terminals": False, "next_states": np.stack([frame(k) for k in next_state], -1), "discounts": 0.9}


def test_frame_capacity_must_hold_two_stacks():
    with pytest.raises(ValueError, match="frame_capacity must hold two stacks"):
        FrameIndex(8, SHAPE, 3, frame_capacity=5)
    assert FrameIndex(8, SHAPE, 3, frame_capacity=6).frame_capacity == 6


def test_the_first_frame_written_is_a_match_candidate():
    """A next stack extending the stored stack by one frame adds one frame, also for the very first frame."""
    index = FrameIndex(4, SHAPE, 2, frame_capacity=8)
    plan = index.add(stack_records([row([1, 1], [1, 2])]))
    assert index.frames_written == 2 and len(plan.frame_slots) == 2  # frame 1 (padded), then 2 chained to it
    np.testing.assert_array_equal(index.chains(plan.transitions["target"]), index.chains([1]))
    assert index.prev[1] == 0


@pytest.mark.parametrize("window", [None, 3])
def test_stacks_are_compared_byte_for_byte_even_when_hashes_collide(monkeypatch, window):
    """Candidates come from a dictionary of hashes; with every frame hashing alike, the byte comparison alone
    must keep distinct stacks apart (with a short match window too, where a chain's older frames have left
    the window and their copies were overwritten by newer frames)."""
    monkeypatch.setattr(frame_index_module, "hash", lambda data: 0, raising=False)
    for stack in (1, 2, 3):
        rows = atari_like_records(np.random.default_rng(stack), 2, 12, 2, stack=stack, frame_shape=SHAPE,
                                  palette=4)
        store = HostFrameReplay(16, SHAPE, stack, frame_capacity=200, match_window=window, seed=0)  # room for all
        oracle = FullStackReplay(16)
        fill(store, rows, 3, oracle)
        assert len(assert_valid_equal_oracle(store, oracle)) == 16


def test_a_stack_whose_first_and_last_frames_agree_is_stored_whole():
    """Only leading repeats pad (a reset stack): ``[a, b, a]`` is three frames, not ``a`` padded."""
    rows = [row([5, 6, 5], [6, 5, 7]), row([3, 3, 4], [3, 4, 3])]
    store = HostFrameReplay(4, SHAPE, 3, frame_capacity=12, seed=0)
    oracle = FullStackReplay(4)
    fill(store, rows, 1, oracle)
    assert len(assert_valid_equal_oracle(store, oracle)) == 2


def test_a_transition_reusing_frames_older_than_every_valid_one_dies_when_they_are_overwritten():
    """Stack 1, two transitions, 7 frame slots: (C -> D) is added again once C and D are older than every valid
    transition's frames; when the ring overwrites C, that transition must die (its state would read J)."""
    store = HostFrameReplay(2, SHAPE, 1, frame_capacity=7, match_window=7, seed=0)
    oracle = FullStackReplay(2)
    rows = [row([1], [2]), row([3], [4]), row([5], [6]), row([7], [8]), row([3], [4], action=1),
            row([9], [10], action=2)]
    for r in rows:
        fill(store, [r], 1, oracle)
        assert_valid_equal_oracle(store, oracle)
    assert store.index.frames_written == 10  # (3 -> 4) again wrote nothing
    np.testing.assert_array_equal(store.index.valid, [False, True])  # frame 3's slot now holds frame 10


def test_a_transition_stays_valid_while_its_oldest_frame_is_still_stored():
    """Two frame slots, stack 1: after (A -> B) and (B -> C), C overwrote A but B and C are both stored, so
    the second transition is valid (its oldest frame is the next one to be overwritten, not gone)."""
    index = FrameIndex(4, SHAPE, 1, frame_capacity=2)
    index.add(stack_records([row([1], [2])]))
    plan = index.add(stack_records([row([2], [3])]))
    np.testing.assert_array_equal(plan.dead, [0])
    np.testing.assert_array_equal(np.flatnonzero(index.valid), [1])
    assert index.size == 1


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_a_loaded_store_still_reuses_recent_stacks(compression):
    """`load_state_dict` rebuilds the match dictionaries from the saved arrays: right after a load, a record
    whose stacks were just stored (an episode begun within the match window) adds no frame, as in the saved
    store; the loaded store equals the oracle and its byte count is the saved one's.

    (Chains begun before the window are not rebuilt: their keys need frames no longer copied in the window,
    so after a load such an episode's next stack starts a new chain; see `FrameIndex.load_state_dict`.)"""
    episode = [row([k, k + 1], [k + 1, k + 2]) for k in range(1, 20)]
    episode += [row([30, 30], [30, 31]), row([30, 31], [31, 32]), row([31, 32], [32, 33])]
    kwargs = dict(frame_capacity=40, match_window=9, compression=compression, seed=0)
    store = HostFrameReplay(20, SHAPE, 2, **kwargs)
    oracle = FullStackReplay(20)
    fill(store, episode, 4, oracle)
    loaded = HostFrameReplay(20, SHAPE, 2, **kwargs)
    loaded.load_state_dict({k: np.array(v) for k, v in store.state_dict().items()})
    assert loaded.frame_nbytes() == store.frame_nbytes() and loaded.nbytes() == store.nbytes()
    before = loaded.index.frames_written
    for s in (store, loaded):
        fill(s, episode[-2:], 2)
    oracle.add(episode[-2:])
    assert loaded.index.frames_written == before == store.index.frames_written
    assert len(assert_valid_equal_oracle(loaded, oracle)) == 20


def test_given_priorities_get_epsilon_added_as_updates_do():
    """``p = |priority| + epsilon`` on add as in `update_priorities`: a zero TD error still leaves the record
    sampleable."""
    store = HostFrameReplay(4, SHAPE, 1, alpha=1.0, epsilon=0.25, frame_capacity=12, seed=0)
    slots = store.add(stack_records([row([1], [2]), row([2], [3])]), priorities=np.array([0.0, -2.0], np.float32))
    leaves = store.trees.sum[store.trees.leaves:]
    np.testing.assert_allclose(leaves[slots], [0.25, 2.25])
    store.update_priorities(slots, np.array([-2.0, 0.0], np.float32))
    np.testing.assert_allclose(leaves[slots], [2.25, 0.25])


def test_a_draw_rounded_onto_an_empty_leaf_is_drawn_again_until_it_lands_on_a_filled_one(monkeypatch):
    """The redraw loop of `sample_slots`: the planted search lands on an empty leaf on the first draw and the
    first redraw; the second redraw must be taken, and a filled leaf (any value) never redrawn."""
    store = HostFrameReplay(8, SHAPE, 1, frame_capacity=30, seed=0)
    fill(store, [row([k], [k + 1]) for k in range(1, 5)], 4)   # slots 0..3 filled (leaves 1.0), 4..7 empty
    real = store.trees.prefix_sum_index
    calls = []

    def planted(masses):
        calls.append(len(masses))
        if len(calls) > 20:
            raise AssertionError("the redraw loop did not end")
        found = real(masses)
        return np.where(np.arange(len(masses)) == 0, 6, found) if len(calls) <= 2 else found

    monkeypatch.setattr(store.trees, "prefix_sum_index", planted)
    slots = store.sample_slots(4)
    assert calls == [4, 1, 1]
    assert set(slots.tolist()) <= {0, 1, 2, 3}


def test_the_default_store_takes_the_default_atari_stacks():
    """With defaults the store holds `AtariFrames`' default observations (``ATARI_SIZE`` square frames,
    stacks of ``ATARI_FRAMES``)."""
    from reference_agents.environments import ATARI_FRAMES, ATARI_SIZE

    store = HostFrameReplay(8)
    stacks = np.random.default_rng(0).integers(0, 255, (2, ATARI_SIZE, ATARI_SIZE, ATARI_FRAMES + 1), np.uint8)
    records = {"states": stacks[..., :-1], "actions": np.zeros(2, np.int64), "rewards": np.zeros(2, np.float32),
               "terminals": np.zeros(2, bool), "next_states": stacks[..., 1:], "discounts": np.ones(2, np.float32)}
    slots = store.add(records)
    got = store.records_at(slots)
    assert_records_equal({k: got[k] for k in ("states", "next_states")},
                         {k: records[k] for k in ("states", "next_states")})


def test_sizes_that_are_no_positive_int_are_refused():
    for capacity in (8.5, "8", True):
        with pytest.raises(ValueError, match="capacity must be a positive int"):
            FrameIndex(capacity, SHAPE, 2)


def test_the_match_window_is_never_longer_than_the_frame_ring():
    """Frames older than the ring are gone: a longer window would keep copies of them for nothing."""
    index = FrameIndex(8, SHAPE, 2, frame_capacity=10, match_window=100)
    assert index.window == 10 and index.recent.shape[0] == 10


def test_a_load_replaces_what_the_store_held_before():
    """Loading into a store with a history of its own: afterwards it goes on as the saved store does (its own
    match candidates are gone with the rest of its state)."""
    episode = [row([k, k + 1], [k + 1, k + 2]) for k in range(1, 12)]
    other = [row([k, k + 1], [k + 1, k + 2]) for k in range(40, 47)]
    kwargs = dict(frame_capacity=30, match_window=9, seed=0)
    saved, used = HostFrameReplay(16, SHAPE, 2, **kwargs), HostFrameReplay(16, SHAPE, 2, **kwargs)
    fill(saved, episode, 3)
    fill(used, other, 3)
    used.load_state_dict({k: np.array(v) for k, v in saved.state_dict().items()})
    more = [row([k, k + 1], [k + 1, k + 2]) for k in range(44, 48)] + episode[-2:]
    for store in (saved, used):
        fill(store, more, 2)
    assert used.index.frames_written == saved.index.frames_written
    np.testing.assert_array_equal(used.index.prev, saved.index.prev)
    np.testing.assert_array_equal(used.index.valid, saved.index.valid)


def test_a_loaded_store_weighs_and_prioritizes_as_the_saved_one():
    store = HostFrameReplay(8, SHAPE, 1, alpha=1.0, beta=1.0, frame_capacity=30, seed=0)
    slots = store.add(stack_records([row([k], [k + 1]) for k in range(1, 6)]),
                      priorities=np.array([1.0, 4.0, 2.0, 8.0, 0.5], np.float32))
    loaded = HostFrameReplay(8, SHAPE, 1, alpha=1.0, beta=1.0, frame_capacity=30, seed=0)
    loaded.load_state_dict({k: np.array(v) for k, v in store.state_dict().items()})
    np.testing.assert_array_equal(loaded.weights(slots), store.weights(slots))
    new = [s.add(stack_records([row([9], [10])])) for s in (store, loaded)]  # at the largest priority so far
    np.testing.assert_array_equal(loaded.trees.sum[loaded.trees.leaves + new[1]],
                                  store.trees.sum[store.trees.leaves + new[0]])
    np.testing.assert_allclose(loaded.trees.sum[loaded.trees.leaves + new[1]], 8.0, rtol=1e-5)


def test_records_at_takes_slots_modulo_the_capacity():
    store = HostFrameReplay(4, SHAPE, 1, frame_capacity=12, seed=0)
    fill(store, [row([k], [k + 1], action=k) for k in range(1, 5)], 4)
    assert_records_equal(store.records_at([5, -1, 8]), store.records_at([1, 3, 0]))


def test_priority_updates_take_slots_as_any_sequence():
    store = HostFrameReplay(4, SHAPE, 1, alpha=1.0, epsilon=1e-6, frame_capacity=12, seed=0)
    fill(store, [row([k], [k + 1]) for k in range(1, 5)], 4)
    store.update_priorities([0, 2], [3.0, 5.0])
    np.testing.assert_allclose(store.trees.sum[store.trees.leaves:][[0, 2]], [3.0, 5.0], rtol=1e-5)


def test_compressed_bytes_are_what_the_blobs_take_in_memory():
    """``frame_nbytes`` with LZ4 is ``sys.getsizeof`` of every blob plus the list's pointers."""
    import sys

    store = HostFrameReplay(12, SHAPE, 2, compression="lz4", frame_capacity=20, seed=0)
    fill(store, atari_like_records(np.random.default_rng(30), 1, 15, 1, stack=2, frame_shape=SHAPE, palette=50), 5)
    blobs = [b for b in store.packed if b is not None]
    assert blobs and store.frame_nbytes() == sum(sys.getsizeof(b) for b in blobs) + 8 * len(store.packed)


def test_the_priority_defaults_are_prioritized_replays():
    """`HostFrameReplay` documents ``alpha, beta, epsilon`` as `PrioritizedReplay`'s, defaults included."""
    import inspect

    from reference_agents.components.memories import FrameReplay, PrioritizedReplay

    def defaults(cls):
        return {k: p.default for k, p in inspect.signature(cls).parameters.items() if k in ("alpha", "beta", "epsilon")}

    assert defaults(HostFrameReplay) == defaults(PrioritizedReplay) == defaults(FrameReplay)
    assert len(defaults(PrioritizedReplay)) == 3


def test_a_batch_longer_than_the_capacity_keeps_the_last_records_with_their_own_priorities():
    store = HostFrameReplay(4, SHAPE, 1, alpha=1.0, epsilon=1e-6, frame_capacity=20, seed=0)
    rows = [row([k], [k + 1], action=k) for k in range(1, 7)]
    slots = store.add(stack_records(rows), priorities=np.array([9.0, 7.0, 1.0, 2.0, 3.0, 4.0], np.float32))
    assert sorted(slots.tolist()) == [0, 1, 2, 3]
    np.testing.assert_array_equal(store.records_at(slots)["actions"], [3, 4, 5, 6])
    np.testing.assert_allclose(store.trees.sum[store.trees.leaves + slots], [1.0, 2.0, 3.0, 4.0], rtol=1e-5)
    assert store.max_priority == np.float32(4.0 + 1e-6)  # the dropped records' priorities are not kept


def test_the_oldest_frame_of_the_match_window_is_still_reused():
    """Stack 1, window 3: after A, B, C, D (stamps 0-3) the window holds B, C, D; a stack B reuses B's slot."""
    index = FrameIndex(8, SHAPE, 1, frame_capacity=10, match_window=3)
    index.add(stack_records([row([1], [2]), row([3], [4])]))
    index.add(stack_records([row([2], [5])]))
    assert index.frames_written == 5  # only frame 5 was new


def test_a_stack_is_never_chained_onto_the_frame_about_to_be_overwritten():
    """Stack 2, a ring of 4 frames: the stack [A, E] must not take A's slot as E's parent when A is the oldest
    frame (E is written into that very slot: the chain would point at itself and read [E, E])."""
    store = HostFrameReplay(8, SHAPE, 2, frame_capacity=4, seed=0)
    oracle = FullStackReplay(8)
    rows = [row([1, 1], [1, 2]), row([1, 2], [2, 3]), row([2, 3], [3, 4]), row([1, 5], [5, 6])]
    fill(store, rows, 1, oracle)
    assert store.index.valid[3] and len(assert_valid_equal_oracle(store, oracle)) >= 1


def test_a_matched_stack_does_not_need_the_ancestors_before_its_oldest_frame():
    """Stack 2: E was chained to an older B; once B is overwritten, the stack [E, H] still holds (B is not in it)
    and is reused: the next record adds one frame."""
    index = FrameIndex(16, SHAPE, 2, frame_capacity=6)
    index.add(stack_records([row([1, 1], [1, 2]), row([3, 3], [3, 4]), row([1, 2], [2, 5]), row([2, 5], [5, 8]),
                             row([9, 9], [9, 10])]))
    assert index.frames_written == 8 and index.stamp[1] == 7  # B's slot now holds frame 10
    index.add(stack_records([row([5, 8], [8, 11])]))
    assert index.frames_written == 9


@pytest.mark.parametrize("stack", [1, 2])
def test_right_after_a_load_recent_stacks_are_extended_by_one_frame(stack):
    """After a load: a record whose state is the last stored stack and whose next stack extends it adds one
    frame (suffix candidates are rebuilt), also when every frame written so far is in the window."""
    start = [1] * stack
    episode = [row(start, start[1:] + [2]), row(start[1:] + [2], start[2:] + [2, 3])] if stack == 2 else \
        [row([1], [2]), row([2], [3])]
    for batch in (episode, episode + [row([7] * stack, [7] * (stack - 1) + [8])] * 6):
        kwargs = dict(frame_capacity=40, match_window=12, seed=0)
        store = HostFrameReplay(20, SHAPE, stack, **kwargs)
        fill(store, batch, 2)
        loaded = HostFrameReplay(20, SHAPE, stack, **kwargs)
        loaded.load_state_dict({k: np.array(v) for k, v in store.state_dict().items()})
        before = loaded.index.frames_written
        last = batch[-1]["next_states"]
        following = row([int(f[0, 0]) for f in np.moveaxis(last, -1, 0)],
                        [int(f[0, 0]) for f in np.moveaxis(last, -1, 0)][1:] + [99])
        for s in (store, loaded):
            fill(s, [following, batch[0]], 2)
        assert loaded.index.frames_written == store.index.frames_written == before + 1


def test_a_stack_whose_older_frame_was_overwritten_is_stored_afresh():
    """Stack 2: E was chained to B; once B's slot holds another frame, the stack [B, E] is no longer in the
    store and must be written again (not read as [<the new frame>, E])."""
    store = HostFrameReplay(16, SHAPE, 2, frame_capacity=6, seed=0)
    oracle = FullStackReplay(16)
    rows = [row([1, 1], [1, 2]), row([3, 3], [3, 4]), row([1, 2], [2, 5]), row([2, 5], [5, 8]), row([9, 9], [9, 10]),
            row([2, 5], [5, 12])]
    fill(store, rows, 1, oracle)
    assert store.index.valid[5]
    assert_valid_equal_oracle(store, oracle)


def test_prefix_sum_search_puts_a_mass_on_a_boundary_into_the_next_leaf():
    """Leaf ``j`` holds the masses ``[c_j, c_j + leaf_j)``: a mass equal to a cumulative sum belongs to the next
    non-empty leaf (so an empty leaf is never found), and the total itself to the last slot."""
    from reference_agents.components.memories.host_frame_replay import HostSumMinTrees

    trees = HostSumMinTrees(5)
    trees.set(np.arange(5), np.array([1.0, 0.0, 2.0, 1.0, 1.0], np.float32))
    np.testing.assert_array_equal(trees.prefix_sum_index(np.array([0.0, 1.0, 3.0, 4.0], np.float32)), [0, 2, 3, 4])
    store = HostFrameReplay(5, SHAPE, 1, frame_capacity=20, seed=0)
    fill(store, [row([k], [k + 1]) for k in range(1, 6)], 5)
    assert store.sample_slots(8, masses=np.full(8, store.trees.sum[1], np.float32)).tolist() == [4] * 8


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_saving_a_loaded_store_gives_back_what_was_loaded(compression):
    """`load_state_dict` into a store with a history of its own replaces all of it: saving it again gives the
    arrays that were loaded, and its byte counts are the saved store's."""
    kwargs = dict(frame_capacity=24, compression=compression, seed=0)
    saved, used = HostFrameReplay(12, SHAPE, 2, **kwargs), HostFrameReplay(12, SHAPE, 2, **kwargs)
    fill(saved, atari_like_records(np.random.default_rng(40), 1, 6, 1, stack=2, frame_shape=SHAPE, palette=50), 3)
    fill(used, atari_like_records(np.random.default_rng(41), 2, 12, 1, stack=2, frame_shape=SHAPE, palette=50), 3)
    state = {k: np.array(v) for k, v in saved.state_dict().items()}
    used.load_state_dict(state)
    again = used.state_dict()
    assert sorted(again) == sorted(state)
    for key, value in state.items():
        np.testing.assert_array_equal(np.asarray(again[key]), value, err_msg=key)
    assert used.frame_nbytes() == saved.frame_nbytes() and used.nbytes() == saved.nbytes()


def test_redraws_are_proportional_draws_over_the_whole_total(monkeypatch):
    """The draws replacing ones rounded onto an empty leaf are fresh proportional draws over all of the total:
    with the first search planted onto a dead slot (leaf 0) for every mass, the redraws follow the live
    priorities (chi-square test at the suite's level, `harness.testing.distributions`; fixed seed)."""
    from harness.testing import distributions as D

    store = HostFrameReplay(5, SHAPE, 1, alpha=1.0, epsilon=1e-6, frame_capacity=20, seed=3)
    fill(store, [row([k], [k + 1]) for k in range(1, 6)], 5)
    store.update_priorities(np.arange(5), np.array([1.0, 2.0, 5.0, 3.0, 4.0], np.float32))
    store.trees.set(np.array([2]), np.zeros(1, np.float32), np.full(1, np.inf, np.float32))  # slot 2 dead
    real, calls = store.trees.prefix_sum_index, []

    def planted(masses):
        calls.append(len(masses))
        return np.full(len(masses), 2) if len(calls) == 1 else real(masses)

    monkeypatch.setattr(store.trees, "prefix_sum_index", planted)
    live = np.array([0, 1, 3, 4])
    p0 = np.array([1.0, 2.0, 3.0, 4.0]) / 10.0
    n = D.sample_size_chi_square(p0, np.array([1.0, 2.0, 4.0, 3.0]) / 10.0)
    slots = store.sample_slots(n)
    assert calls[:2] == [n, n] and np.isin(slots, live).all()
    D.check_chi_square(D.Where("HostFrameReplay", "sample_slots", "redraws", "numpy"), np.searchsorted(live, slots),
                       p0, what="proportional to the live priorities")


def test_a_slot_that_cannot_be_drawn_weighs_one_as_in_prioritized_replay():
    store = HostFrameReplay(8, SHAPE, 1, alpha=1.0, beta=1.0, frame_capacity=20, seed=0)
    fill(store, [row([k], [k + 1]) for k in range(1, 4)], 3)
    store.update_priorities(np.arange(3), np.array([1.0, 2.0, 4.0], np.float32))
    np.testing.assert_allclose(store.weights(np.array([0, 1, 2, 5, 7])), [1.0, 0.5, 0.25, 1.0, 1.0], rtol=1e-5)
