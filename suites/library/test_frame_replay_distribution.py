"""Distribution oracles for `HostFrameReplay`'s sampling: uniform over valid transitions, and proportional.

The store is filled with Atari-like rows, so some slots are invalid (their stacks were overwritten);
the oracle is NumPy written from the definition: uniform over ``index.valid`` without
``prioritized``, else ``P(i) = p_i^alpha / sum_k p_k^alpha`` with ``p_i = |priority_i| + epsilon``
and weights ``(min_j P(j) / P(i))^beta``. Sample sizes come from the power calculation of
`harness.testing.distributions` (alpha 1e-4, power 0.99) for the stated effects. The store draws
stratified masses (one per stratum of the total), which makes slot counts less variable than
multinomial ones: the chi-square test is then conservative (fewer false failures), and a shifted
distribution still moves the expected counts in full. Each check is shown to fail on a planted bug.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.testing import distributions as D
from reference_agents.components.memories import HostFrameReplay
from reference_agents.oracles.frame_replay import atari_like_records, stack_records

CAPACITY, ALPHA, BETA, EPSILON = 32, 0.7, 0.3, 1e-6
#: The stated effects: one valid slot never drawn (uniform); alpha 5% off (prioritized).
ALPHA_EFFECT = 1.05


def filled(prioritized: bool) -> HostFrameReplay:
    """A store of 32 transitions after 120 rows in chunks of 8 (so the oldest stacks are overwritten)."""
    store = HostFrameReplay(CAPACITY, (3, 3), 4, prioritized=prioritized, alpha=ALPHA, beta=BETA,
                            epsilon=EPSILON, frame_capacity=200, seed=0)
    rows = atari_like_records(np.random.default_rng(3), 3, 40, 2, palette=100)
    for i in range(0, len(rows), 8):
        store.add(stack_records(rows[i:i + 8]))
    return store


def categories(where: D.Where, slots: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Slots as indices into ``valid`` (sorted slot ids); a draw of an invalid slot fails."""
    slots = np.asarray(slots, np.int64)
    pos = np.minimum(np.searchsorted(valid, slots), len(valid) - 1)
    stray = valid[pos] != slots
    if stray.any():
        raise D.DistributionMismatch(f"{where}: drew {int(stray.sum())} invalid slots, first {int(slots[stray][0])}")
    return pos


def check_uniform(backend: str = "numpy") -> None:
    store = filled(prioritized=False)
    valid = np.flatnonzero(store.index.valid[:CAPACITY])
    k = len(valid)
    p0 = np.full(k, 1.0 / k)
    n = D.sample_size_chi_square(p0, np.r_[np.full(k - 1, 1.0 / (k - 1)), 0.0])
    _, slots, weights = store.sample(n)
    where = D.Where("HostFrameReplay", "sample", "slots", backend)
    assert (weights == 1).all(), f"{where}: uniform sampling must weight every draw 1"
    D.check_chi_square(where, categories(where, slots, valid), p0, what="uniform over the valid transitions")


def per_probs(priorities: np.ndarray, alpha: float) -> np.ndarray:
    q = (np.abs(priorities) + EPSILON) ** alpha
    return q / q.sum()


def check_prioritized(backend: str = "numpy") -> None:
    store = filled(prioritized=True)
    valid = np.flatnonzero(store.index.valid[:CAPACITY])
    priorities = np.random.default_rng(1).uniform(0.1, 6.0, len(valid))
    store.update_priorities(valid, priorities.astype(np.float32))
    p0 = per_probs(priorities, ALPHA)
    n = D.sample_size_chi_square(p0, per_probs(priorities, ALPHA * ALPHA_EFFECT))
    _, slots, weights = store.sample(n)
    where = D.Where("HostFrameReplay", "sample", "slots", backend)
    pos = categories(where, slots, valid)
    D.check_chi_square(where, pos, p0, what="p_i^alpha / sum_k p_k^alpha over the valid transitions")
    expected = (p0.min() / p0[pos]) ** BETA
    bad = ~np.isclose(weights, expected, rtol=1e-4, atol=0)
    if bad.any():
        raise D.DistributionMismatch(
            f"HostFrameReplay.sample leaf 'weights': importance weights differ from (min_j P(j) / P(i))^beta at "
            f"{int(bad.sum())} of {bad.size} draws; first expected {expected[bad][0]:.7g}, got {weights[bad][0]:.7g}")


def must_fail(check: Any) -> str:
    with pytest.raises(D.DistributionMismatch) as info:
        check()
    return str(info.value)


def test_uniform_sampling_is_uniform_over_valid_transitions() -> None:
    check_uniform()


def test_prioritized_sampling_and_weights_match_the_oracle() -> None:
    check_prioritized()


def test_planted_uniform_bug_last_stratum_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    original = HostFrameReplay.sample_slots

    def sample_slots(self: HostFrameReplay, num_records: int, masses: Any = None) -> np.ndarray:
        total = self.trees.sum[1]  # the bug: masses cover [0, total - one leaf), so the last valid slot is lost
        u = (np.arange(num_records) + self.rng.random(num_records)) / num_records * (total - 1.0)
        return original(self, num_records, u.astype(np.float32))

    monkeypatch.setattr(HostFrameReplay, "sample_slots", sample_slots)
    assert "uniform over the valid transitions" in must_fail(check_uniform)


@pytest.mark.parametrize("bug", ["alpha ignored", "alpha*1.05"])
def test_planted_prioritized_alpha(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    alpha = 1.0 if bug == "alpha ignored" else ALPHA * ALPHA_EFFECT
    monkeypatch.setattr(HostFrameReplay, "_weighted",
                        lambda self, p: np.exp(np.float32(alpha) * np.log(p)).astype(np.float32))
    assert "p_i^alpha / sum_k p_k^alpha" in must_fail(check_prioritized)


def test_planted_weights_with_beta_off(monkeypatch: pytest.MonkeyPatch) -> None:
    original = HostFrameReplay.weights
    monkeypatch.setattr(HostFrameReplay, "weights", lambda self, slots: original(self, slots) ** 1.05)
    assert "importance weights differ" in must_fail(check_prioritized)
