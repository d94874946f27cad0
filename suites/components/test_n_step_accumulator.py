"""`NStepAccumulator`: streaming n-step folding agrees with `n_step_transitions` and bootstraps truncations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from reference_agents.components.helpers import NStepAccumulator, n_step_transitions

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.helpers.n_step",)


def _stream(acc, rewards, terminals, truncated=None):
    out = []
    truncated = truncated if truncated is not None else [False] * len(rewards)
    for t, (r, d, c) in enumerate(zip(rewards, terminals, truncated)):
        out += acc.push(state=t, action=10 + t, reward=r, next_state=t + 1, terminated=d, truncated=c)
    return out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 4), gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
       steps=st.lists(st.tuples(st.integers(-3, 3), st.booleans()), min_size=1, max_size=12))
def test_matches_the_batch_folding_on_terminated_episodes(n, gamma, steps):
    rewards = [float(r) for r, _ in steps]
    terminals = [d for _, d in steps]
    got = _stream(NStepAccumulator(n, gamma), rewards, terminals)
    ref = n_step_transitions(np.array(rewards), np.array(terminals), n, gamma)
    valid = np.flatnonzero(ref["valid"])  # windows the rollout's end did not cut
    assert [g["states"] for g in got] == sorted(g["states"] for g in got)
    by_start = {g["states"]: g for g in got}
    assert sorted(by_start) == list(valid)
    for t in valid:
        g = by_start[t]
        assert g["actions"] == 10 + t
        assert g["rewards"] == pytest.approx(ref["rewards"][t])
        assert g["terminals"] == ref["terminals"][t]
        assert g["next_states"] == ref["next_index"][t]
        assert g["discounts"] == pytest.approx(ref["discounts"][t])


def test_truncation_bootstraps_every_open_window_with_its_own_discount():
    acc = NStepAccumulator(3, 0.5)
    got = _stream(acc, [1.0, 2.0, 4.0, 8.0], [False] * 4, truncated=[False, False, False, True])
    # window 0 is full after step 2; the truncation at step 3 closes windows 1, 2, 3
    assert [(g["states"], g["next_states"], g["terminals"]) for g in got] == \
        [(0, 3, False), (1, 4, False), (2, 4, False), (3, 4, False)]
    assert [g["discounts"] for g in got] == [0.125, 0.125, 0.25, 0.5]
    assert [g["rewards"] for g in got] == [1 + 1 + 1, 2 + 2 + 2, 4 + 4, 8]
    assert len(acc) == 0


def test_termination_does_not_bootstrap_and_one_step_is_plain():
    got = _stream(NStepAccumulator(1, 0.9), [1.0, 1.0], [False, True])
    assert [(g["terminals"], g["discounts"]) for g in got] == [(False, 0.9), (True, 0.9)]
    acc = NStepAccumulator(2, 0.9)
    acc.push(0, 0, 1.0, 1, False)
    assert [(g["states"], g["next_states"]) for g in acc.flush(next_state=99)] == [(0, 99)]
    assert len(acc) == 0
    acc.push(5, 0, 1.0, 6, False)
    assert [(g["states"], g["next_states"]) for g in acc.flush()] == [(5, 6)]  # default: the newest next state


def test_state_dict_round_trip_and_bad_arguments():
    acc = NStepAccumulator(3, 0.9)
    acc.push(0, 1, 1.0, 1, False)
    other = NStepAccumulator(3, 0.9)
    other.load_state_dict(acc.state_dict())
    assert other.push(1, 1, 1.0, 2, True) == acc.push(1, 1, 1.0, 2, True)
    with pytest.raises(ValueError, match="n=2"):
        NStepAccumulator(2, 0.9).load_state_dict(acc.state_dict())
    with pytest.raises(ValueError, match="n must be a positive int"):
        NStepAccumulator(0, 0.9)
    with pytest.raises(ValueError, match="gamma"):
        NStepAccumulator(1, 1.5)


@pytest.mark.parametrize("n, gamma, message", [(0, 0.9, "n must be a positive int"), (True, 0.9, "n must be a positive int"),
                                               (2.0, 0.9, "n must be a positive int"), (2, 1.5, "gamma")])
def test_n_step_transitions_refuses_bad_arguments(n, gamma, message):
    with pytest.raises(ValueError, match=message):
        n_step_transitions(np.zeros((3, 1)), np.zeros((3, 1), bool), n, gamma)


def test_rewards_of_several_environments_fold_column_by_column() -> None:
    """``rewards [T, E]`` (one column per environment) gives what each column gives alone."""
    rng = np.random.default_rng(7)
    rewards = rng.normal(size=(5, 3))
    terminals = rng.random((5, 3)) < 0.3
    for keep_partial in (False, True):
        both = n_step_transitions(rewards, terminals, 3, 0.9, keep_partial)
        for e in range(3):
            one = n_step_transitions(rewards[:, e], terminals[:, e], 3, 0.9, keep_partial)
            for key, value in one.items():
                np.testing.assert_array_equal(both[key][:, e], value, err_msg=key)
