"""`apex_epsilons`, the per-actor exploration rates of Ape-X (host-side NumPy, no spec).

Moved here from ``suites/library/test_explorations.py`` so that ``pytest suites/components`` exercises
the module (``MUTATION_COVERS``: a mutant of it runs this file).
"""

from __future__ import annotations

import numpy as np
import pytest

from reference_agents.components.explorations import apex_epsilons

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.explorations.apex",)


def test_apex_epsilons_follow_the_paper() -> None:
    """eps_i = 0.4 ** (1 + 7 i / (N - 1)): 0.4 for the first actor, 0.4 ** 8 for the last."""
    np.testing.assert_allclose(apex_epsilons(3), [0.4, 0.4 ** 4.5, 0.4 ** 8])
    np.testing.assert_allclose(apex_epsilons(1), [0.4])
    np.testing.assert_allclose(apex_epsilons(2, epsilon=0.5, alpha=1.0), [0.5, 0.25])
    rates = apex_epsilons(360)
    assert rates.shape == (360,) and np.all(np.diff(rates) < 0)
    assert rates[0] == pytest.approx(0.4) and rates[-1] == pytest.approx(0.4 ** 8)


def test_the_edges_of_the_valid_range_are_accepted() -> None:
    np.testing.assert_allclose(apex_epsilons(2, epsilon=0.0, alpha=0.0), [0.0, 0.0])
    np.testing.assert_allclose(apex_epsilons(3, epsilon=1.0), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(apex_epsilons(np.int64(1), epsilon=1), [1.0])


@pytest.mark.parametrize("make, message", [
    (lambda: apex_epsilons(0), "num_workers must be a positive int; got 0"),
    (lambda: apex_epsilons(True), "num_workers must be a positive int; got True"),
    (lambda: apex_epsilons(2.0), "num_workers must be a positive int; got 2.0"),
    (lambda: apex_epsilons(4, epsilon=1.2), "epsilon must be a number in [0, 1]; got 1.2"),
    (lambda: apex_epsilons(4, epsilon=-0.1), "epsilon must be a number in [0, 1]; got -0.1"),
    (lambda: apex_epsilons(4, epsilon=False), "epsilon must be a number in [0, 1]; got False"),
    (lambda: apex_epsilons(4, alpha=-1.0), "alpha must be a finite non-negative number; got -1.0"),
    (lambda: apex_epsilons(4, alpha=float("inf")), "alpha must be a finite non-negative number; got inf"),
    (lambda: apex_epsilons(4, alpha=True), "alpha must be a finite non-negative number; got True"),
])
def test_bad_arguments_name_argument_and_value(make, message) -> None:
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)
