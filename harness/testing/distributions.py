"""Statistical checks of stochastic outputs against NumPy oracles of their distributions.

Generic (no component knowledge): chi-square goodness of fit of discrete draws against
given probabilities, the one-sample Kolmogorov-Smirnov test against a CDF, and mean and
scale tests per coordinate of multivariate draws; each raises `DistributionMismatch`
(an AssertionError) naming the component, method, leaf, statistic, p-value and expected
against observed values. The ``sample_size_*`` functions are the power calculations that
choose how many draws a check takes: the fewest with which the test rejects a stated
effect with probability ``POWER`` while rejecting a correct sampler with probability at
most ``ALPHA`` (see docs/distribution_tests.md). All p-values are computed here in NumPy
and ``math`` (no SciPy): the chi-square survival function by the regularized incomplete
gamma function, the Kolmogorov distribution by its alternating series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable, Sequence

import numpy as np

__all__ = [
    "ALPHA", "POWER", "DistributionMismatch", "Result", "Where",
    "chi2_sf", "chi2_cdf", "chi2_isf", "ncx2_cdf", "kolmogorov_sf", "kolmogorov_isf",
    "chi_square_test", "ks_test", "mean_test", "scale_test", "check_chi_square", "check_ks", "check_moments",
    "sample_size_chi_square", "sample_size_ks", "sample_size_mean", "sample_size_scale", "ks_distance",
]

#: The largest false-failure probability of one check (split over its tests by Bonferroni).
ALPHA = 1e-4
#: The smallest probability with which a check detects its stated effect.
POWER = 0.99

_N01 = NormalDist()


class DistributionMismatch(AssertionError):
    """Samples of a stochastic method that do not fit the oracle's distribution."""


@dataclass(frozen=True)
class Where:
    """What is tested, for failure messages: component, method, leaf (key path / index) and backend."""

    component: str
    method: str
    leaf: str = ""
    backend: str = ""

    def __str__(self) -> str:
        leaf = f" leaf {self.leaf!r}" if self.leaf else ""
        backend = f" [{self.backend}]" if self.backend else ""
        return f"{self.component}.{self.method}{leaf}{backend}"


@dataclass(frozen=True)
class Result:
    """One test's outcome."""

    statistic_name: str
    statistic: float
    p_value: float
    n: int
    detail: str = ""


# ---- special functions ------------------------------------------------------------------------------
def _gamma_p_series(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x) by its power series (x < a + 1)."""
    term = total = 1.0 / a
    ap = a
    for _ in range(1_000_000):
        ap += 1.0
        term *= x / ap
        total += term
        if abs(term) < abs(total) * 1e-16:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_q_fraction(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) by its continued fraction, modified Lentz (x >= a + 1)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 1_000_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(x: float, df: float) -> float:
    """``P(X > x)`` for X chi-square with ``df`` degrees of freedom."""
    if x <= 0:
        return 1.0
    a, y = df / 2.0, x / 2.0
    return 1.0 - _gamma_p_series(a, y) if y < a + 1.0 else _gamma_q_fraction(a, y)


def chi2_cdf(x: float, df: float) -> float:
    """``P(X <= x)`` for X chi-square with ``df`` degrees of freedom."""
    if x <= 0:
        return 0.0
    a, y = df / 2.0, x / 2.0
    return _gamma_p_series(a, y) if y < a + 1.0 else 1.0 - _gamma_q_fraction(a, y)


def _bisect(f: Callable[[float], float], lo: float, hi: float, iterations: int = 200) -> float:
    """The root of increasing ``f`` in ``[lo, hi]`` (``f(lo) <= 0 <= f(hi)``)."""
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def chi2_isf(p: float, df: float) -> float:
    """The ``x`` with ``chi2_sf(x, df) = p``."""
    hi = df + 20.0 * math.sqrt(2.0 * df) + 100.0
    return _bisect(lambda x: p - chi2_sf(x, df), 0.0, hi)


def ncx2_cdf(x: float, df: float, nc: float) -> float:
    """``P(X <= x)`` for X noncentral chi-square: a Poisson(nc/2) mixture of central chi-squares."""
    if nc == 0:
        return chi2_cdf(x, df)
    mu = nc / 2.0
    lo = max(0, int(mu - 12.0 * math.sqrt(mu) - 20))
    hi = int(mu + 12.0 * math.sqrt(mu) + 20)
    total = 0.0
    for j in range(lo, hi + 1):
        weight = math.exp(-mu + j * math.log(mu) - math.lgamma(j + 1.0))
        total += weight * chi2_cdf(x, df + 2.0 * j)
    return min(total, 1.0)


def kolmogorov_sf(lam: float) -> float:
    """``P(K > lam)`` for the Kolmogorov distribution: ``2 sum_k (-1)^(k-1) exp(-2 k^2 lam^2)``."""
    if lam <= 0.0:
        return 1.0
    if lam < 0.3:  # the series converges slowly there; the sf is 1 to double precision below ~0.27
        return 1.0
    total = 0.0
    for k in range(1, 200):
        term = math.exp(-2.0 * k * k * lam * lam)
        total += term if k % 2 else -term
        if term < 1e-18:
            break
    return min(max(2.0 * total, 0.0), 1.0)


def kolmogorov_isf(p: float) -> float:
    """The ``lam`` with ``kolmogorov_sf(lam) = p``."""
    return _bisect(lambda lam: p - kolmogorov_sf(lam), 0.3, 10.0)


def _z(p: float) -> float:
    return _N01.inv_cdf(p)


# ---- power calculations -------------------------------------------------------------------------
def sample_size_chi_square(p0: Sequence[float], p1: Sequence[float], alpha: float = ALPHA,
                           power: float = POWER) -> int:
    """Draws with which the chi-square test of ``p0`` rejects draws from ``p1`` with probability ``power``.

    Under ``p1`` the statistic is (asymptotically) noncentral chi-square with ``k - 1``
    degrees of freedom (``k`` categories of nonzero ``p0``) and noncentrality
    ``n * w2``, ``w2 = sum_i (p1_i - p0_i)^2 / p0_i``; the result is the smallest ``n``
    with ``P(chi2'(k - 1, n w2) > chi2_isf(alpha, k - 1)) >= power``, computed from the
    Poisson-mixture form of the noncentral CDF.
    """
    p0, p1 = np.asarray(p0, np.float64), np.asarray(p1, np.float64)
    keep = p0 > 0
    df = int(keep.sum()) - 1
    w2 = float(np.sum((p1[keep] - p0[keep]) ** 2 / p0[keep]))
    if df < 1 or w2 <= 0:
        raise ValueError(f"no effect to detect: p0={p0}, p1={p1}")
    crit = chi2_isf(alpha, df)
    miss = lambda n: ncx2_cdf(crit, df, n * w2)  # noqa: E731  P(no rejection) with n draws
    hi = 1
    while miss(hi) > 1.0 - power:
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if miss(mid) <= 1.0 - power else (mid, hi)
    return hi


def sample_size_ks(distance: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Draws with which the KS test rejects a distribution at sup-distance ``distance`` from the oracle's.

    The test rejects when ``sqrt(n) D > lam_alpha = kolmogorov_isf(alpha)`` (the statistic
    used, with Stephens' factor, is larger than ``sqrt(n) D``). By the Dvoretzky-Kiefer-
    Wolfowitz inequality (Massart's constant) the empirical CDF of ``n`` draws of the
    true distribution stays within ``eps = sqrt(ln(2 / (1 - power)) / (2 n))`` of it with
    probability ``>= power``, so ``D >= distance - eps``; hence
    ``n = ceil(((lam_alpha + sqrt(ln(2 / (1 - power)) / 2)) / distance)^2)``, a bound that holds
    for every continuous distribution, not an approximation.
    """
    lam = kolmogorov_isf(alpha)
    return int(math.ceil(((lam + math.sqrt(math.log(2.0 / (1.0 - power)) / 2.0)) / distance) ** 2))


def ks_distance(cdf0: Callable[[np.ndarray], np.ndarray], cdf1: Callable[[np.ndarray], np.ndarray],
                grid: np.ndarray) -> float:
    """``sup_x |cdf0(x) - cdf1(x)|`` over ``grid`` (a dense grid covering both supports)."""
    return float(np.max(np.abs(cdf0(grid) - cdf1(grid))))


def sample_size_mean(shift: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Draws with which the two-sided z-test of a known-scale mean detects a shift of ``shift`` scales.

    ``n = ceil(((z_(1 - alpha / 2) + z_power) / shift)^2)`` (exact for normal draws; the
    central limit approximation otherwise).
    """
    return int(math.ceil(((_z(1.0 - alpha / 2.0) + _z(power)) / shift) ** 2))


def sample_size_scale(ratio: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Draws with which the two-sided chi-square test of a known variance detects the scale times ``ratio``.

    ``log(T / n)`` with ``T = sum ((x - mu) / sigma)^2`` is about normal with variance ``2 / n``
    and mean ``2 log(ratio)``: ``n = ceil(2 ((z_(1 - alpha / 2) + z_power) / (2 log ratio))^2)``;
    the test itself uses the exact chi-square distribution of ``T``.
    """
    return int(math.ceil(2.0 * ((_z(1.0 - alpha / 2.0) + _z(power)) / (2.0 * abs(math.log(ratio)))) ** 2))


# ---- tests ----------------------------------------------------------------------------------------
def _fmt(values: np.ndarray, limit: int = 12) -> str:
    flat = np.asarray(values).ravel()
    text = np.array2string(flat[:limit], precision=5, separator=", ", max_line_width=10_000)
    return text if flat.size <= limit else f"{text[:-1]}, ...] ({flat.size} values)"


def chi_square_test(draws: np.ndarray, probs: Sequence[float]) -> Result:
    """Pearson's chi-square of integer draws in ``0..k-1`` against probabilities ``probs`` (length k).

    A draw outside ``0..k-1`` or in a category of probability 0 gives p-value 0.
    """
    draws = np.asarray(draws).ravel()
    p = np.asarray(probs, np.float64)
    if not np.isclose(p.sum(), 1.0, atol=1e-9) or np.any(p < 0):
        raise ValueError(f"probabilities must be >= 0 and sum to 1; got {p} (sum {p.sum()})")
    n, k = draws.size, len(p)
    outside = int(np.sum((draws < 0) | (draws >= k)))
    counts = np.bincount(draws[(draws >= 0) & (draws < k)].astype(np.int64), minlength=k).astype(np.float64)
    expected = n * p
    detail = (f"expected frequencies {_fmt(p)}, observed {_fmt(counts / max(n, 1))}; "
              f"counts {_fmt(counts)} of {n}")
    impossible = int(counts[p == 0].sum()) + outside
    if impossible:
        return Result("chi2", math.inf, 0.0, n, f"{impossible} draws in categories of probability 0 or outside "
                                                  f"0..{k - 1}; {detail}")
    keep = p > 0
    stat = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    df = int(keep.sum()) - 1
    return Result(f"chi2(df={df})", stat, chi2_sf(stat, df) if df > 0 else 1.0, n, detail)


def ks_test(draws: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray]) -> Result:
    """One-sample KS of continuous draws against ``cdf``; p-value from the Kolmogorov distribution at
    ``(sqrt(n) + 0.12 + 0.11 / sqrt(n)) D`` (Stephens' small-sample factor)."""
    x = np.sort(np.asarray(draws, np.float64).ravel())
    n = x.size
    f = np.asarray(cdf(x), np.float64)
    i = np.arange(1, n + 1)
    above, below = i / n - f, f - (i - 1) / n
    d = float(max(above.max(), below.max()))
    where = int(np.argmax(np.maximum(above, below)))
    root = math.sqrt(n)
    p = kolmogorov_sf((root + 0.12 + 0.11 / root) * d)
    detail = (f"largest CDF gap at x={x[where]:.6g}: oracle CDF {f[where]:.5f}, empirical "
              f"{(where + 1) / n:.5f}; sample mean {x.mean():.5g}, std {x.std():.5g}, min {x[0]:.5g}, max {x[-1]:.5g}")
    return Result("KS D", d, p, n, detail)


def mean_test(draws: np.ndarray, mean: float, std: float) -> Result:
    """Two-sided z-test that draws of known standard deviation ``std`` have mean ``mean``."""
    x = np.asarray(draws, np.float64).ravel()
    n = x.size
    z = (x.mean() - mean) / (std / math.sqrt(n))
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return Result("mean z", float(z), p, n, f"expected mean {mean:.6g}, observed {x.mean():.6g} "
                                             f"(standard error {std / math.sqrt(n):.3g})")


def scale_test(draws: np.ndarray, mean: float, std: float) -> Result:
    """Two-sided test that draws of known mean have standard deviation ``std``: ``sum ((x - mean) / std)^2``
    is chi-square with n degrees of freedom (for normal draws)."""
    x = np.asarray(draws, np.float64).ravel()
    n = x.size
    t = float(np.sum(((x - mean) / std) ** 2))
    p = min(1.0, 2.0 * min(chi2_sf(t, n), chi2_cdf(t, n)))
    return Result(f"chi2(df={n}) of squares", t, p, n,
                  f"expected std {std:.6g}, observed {math.sqrt(t / n) * std:.6g} (about the known mean)")


def _raise_if(result: Result, where: Where, alpha: float, what: str) -> Result:
    if not result.p_value >= alpha:
        raise DistributionMismatch(
            f"{where}: draws do not fit {what}: {result.statistic_name} = {result.statistic:.6g}, "
            f"p-value {result.p_value:.3g} < alpha {alpha:.3g} (n = {result.n}); {result.detail}")
    return result


def check_chi_square(where: Where, draws: np.ndarray, probs: Sequence[float], alpha: float = ALPHA,
                     what: str = "the oracle's probabilities") -> Result:
    """`chi_square_test`, raising `DistributionMismatch` when its p-value is below ``alpha``."""
    return _raise_if(chi_square_test(draws, probs), where, alpha, what)


def check_ks(where: Where, draws: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray], alpha: float = ALPHA,
             what: str = "the oracle's CDF") -> Result:
    """`ks_test`, raising `DistributionMismatch` when its p-value is below ``alpha``."""
    return _raise_if(ks_test(draws, cdf), where, alpha, what)


def check_moments(where: Where, draws: np.ndarray, mean: np.ndarray, std: np.ndarray,
                  alpha: float = ALPHA) -> list[Result]:
    """Mean and scale of every coordinate of ``draws [n, ...]`` against ``mean``/``std`` (broadcast to a
    draw's shape), and KS of all standardized draws against N(0, 1); Bonferroni over the
    ``2 * coordinates + 1`` tests keeps the check's false-failure rate below ``alpha``."""
    x = np.asarray(draws, np.float64)
    n = x.shape[0]
    flat = x.reshape(n, -1)
    mu = np.broadcast_to(np.asarray(mean, np.float64), x.shape[1:]).ravel()
    sd = np.broadcast_to(np.asarray(std, np.float64), x.shape[1:]).ravel()
    each = alpha / (2 * flat.shape[1] + 1)
    results = []
    for j in range(flat.shape[1]):
        index = tuple(int(i) for i in np.unravel_index(j, x.shape[1:])) if x.ndim > 1 else ()
        at = Where(where.component, where.method, f"{where.leaf}{list(index) if index else ''}", where.backend)
        results.append(_raise_if(mean_test(flat[:, j], mu[j], sd[j]), at, each, f"mean {mu[j]:.6g}"))
        results.append(_raise_if(scale_test(flat[:, j], mu[j], sd[j]), at, each, f"std {sd[j]:.6g}"))
    standard = ((flat - mu) / sd).ravel()
    results.append(_raise_if(ks_test(standard, lambda v: np.vectorize(_N01.cdf)(v)), where, each,
                             "N(0, 1) after standardizing by the oracle's mean and std"))
    return results
