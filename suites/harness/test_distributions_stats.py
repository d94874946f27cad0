"""The generic statistics of `harness.testing.distributions`: p-values, power calculations, messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.testing import distributions as D


@pytest.mark.parametrize("x, df, expected", [
    (3.841458820694124, 1, 0.05),        # the 95% quantile of chi2(1)
    (10.0, 2, math.exp(-5.0)),           # chi2(2) sf is exp(-x/2)
    (124.3421134, 100, 0.05),            # table value
    (21.10751347, 3, 1e-4),              # table value
])
def test_chi2_sf_known_values(x: float, df: int, expected: float) -> None:
    assert D.chi2_sf(x, df) == pytest.approx(expected, rel=1e-6)
    assert D.chi2_cdf(x, df) == pytest.approx(1.0 - expected, rel=1e-6)
    assert D.chi2_isf(expected, df) == pytest.approx(x, rel=1e-6)


def test_chi2_sf_large_df_matches_normal_limit() -> None:
    df = 20000
    x = df + 2.0 * math.sqrt(2.0 * df)  # about 2 standard deviations above the mean
    assert D.chi2_sf(x, df) == pytest.approx(0.0228, abs=0.002)


def test_kolmogorov_known_values() -> None:
    assert D.kolmogorov_sf(1.3581) == pytest.approx(0.05, abs=1e-4)
    assert D.kolmogorov_sf(1.6276) == pytest.approx(0.01, abs=1e-4)
    assert D.kolmogorov_isf(1e-4) == pytest.approx(math.sqrt(math.log(2e4) / 2.0), rel=1e-6)


def test_ncx2_cdf_reduces_to_central_and_matches_simulation() -> None:
    assert D.ncx2_cdf(5.0, 3, 0.0) == pytest.approx(D.chi2_cdf(5.0, 3))
    rng = np.random.default_rng(0)
    sim = rng.noncentral_chisquare(3, 7.5, size=200_000)
    assert D.ncx2_cdf(9.0, 3, 7.5) == pytest.approx(np.mean(sim <= 9.0), abs=0.005)


def test_sample_sizes_documented_values() -> None:
    z = 3.890591886 + 2.326347874  # z_(1 - 1e-4 / 2) + z_0.99
    assert D.sample_size_mean(0.05) == math.ceil((z / 0.05) ** 2) == 15461
    assert D.sample_size_scale(1.05) == math.ceil(2 * (z / (2 * math.log(1.05))) ** 2)
    assert D.sample_size_ks(0.05) == math.ceil(((D.kolmogorov_isf(1e-4) + math.sqrt(math.log(200) / 2)) / 0.05) ** 2)


def test_chi_square_power_and_size_by_simulation() -> None:
    """At alpha 0.01 / power 0.9 (cheap to simulate) the chosen n rejects p1 at least ~90% of the time
    and p0 about 1% of the time."""
    p0 = np.array([0.1, 0.2, 0.3, 0.4])
    p1 = np.array([0.12, 0.2, 0.28, 0.4])
    n = D.sample_size_chi_square(p0, p1, alpha=0.01, power=0.9)
    rng = np.random.default_rng(1)
    reps = 400
    reject1 = np.mean([D.chi_square_test(rng.choice(4, n, p=p1), p0).p_value < 0.01 for _ in range(reps)])
    reject0 = np.mean([D.chi_square_test(rng.choice(4, n, p=p0), p0).p_value < 0.01 for _ in range(reps)])
    assert reject1 >= 0.85, (n, reject1)
    assert reject0 <= 0.035, (n, reject0)
    # and n is not wastefully large: 70% of it has clearly less power
    smaller = int(0.7 * n)
    reject_small = np.mean([D.chi_square_test(rng.choice(4, smaller, p=p1), p0).p_value < 0.01
                            for _ in range(reps)])
    assert reject_small < reject1


def test_ks_power_bound_holds_by_simulation() -> None:
    n = D.sample_size_ks(0.1, alpha=0.01, power=0.9)
    rng = np.random.default_rng(2)
    cdf = lambda x: np.clip(x, 0.0, 1.0)  # noqa: E731
    rejected = np.mean([D.ks_test(rng.uniform(0.1, 1.1, n), cdf).p_value < 0.01 for _ in range(200)])
    assert rejected >= 0.9
    sizes = np.mean([D.ks_test(rng.uniform(0.0, 1.0, n), cdf).p_value < 0.01 for _ in range(400)])
    assert sizes <= 0.03


def test_moment_tests_detect_mean_and_scale() -> None:
    rng = np.random.default_rng(3)
    n = D.sample_size_mean(0.05, alpha=D.ALPHA / 3)
    where = D.Where("Comp", "sample", "x", "tf")
    D.check_moments(where, rng.normal(2.0, 3.0, (n, 1)), 2.0, 3.0)
    with pytest.raises(D.DistributionMismatch, match=r"Comp.sample leaf 'x\[0\]' \[tf\].*mean z"):
        D.check_moments(where, rng.normal(2.0 + 0.05 * 3.0, 3.0, (n, 1)), 2.0, 3.0)
    with pytest.raises(D.DistributionMismatch, match="expected std 3, observed"):
        D.check_moments(where, rng.normal(2.0, 3.0 * 1.05, (n, 1)), 2.0, 3.0)


def test_chi_square_failure_message_and_impossible_draws() -> None:
    where = D.Where("Memory", "get_records", "slots", "torch")
    with pytest.raises(D.DistributionMismatch) as info:
        D.check_chi_square(where, np.r_[np.zeros(900, int), np.ones(100, int)], [0.5, 0.5])
    text = str(info.value)
    for part in ("Memory.get_records leaf 'slots' [torch]", "chi2(df=1)", "p-value", "expected frequencies [0.5, 0.5]",
                 "observed [0.9, 0.1]"):
        assert part in text, text
    with pytest.raises(D.DistributionMismatch, match="1 draws in categories of probability 0"):
        D.check_chi_square(where, np.r_[np.zeros(10, int), [2]], [0.5, 0.5, 0.0])
    D.check_chi_square(where, np.r_[np.zeros(500, int), np.ones(500, int)], [0.5, 0.5])
