"""Properties of the action adapters and `Policy` that the spec harness cannot express, on each backend."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api
from harness.graph.errors import SpacegraphError
from harness.testing.plugin import selected_backends
from reference_agents.components.common import Dense
from reference_agents.components.policies import CategoricalAdapter, GaussianAdapter, Policy
from reference_agents.oracles.policies import DensePolicy

BACKENDS = pytest.mark.parametrize("backend", selected_backends())
#: Draws per statistical test, and how many standard errors a frequency may stray (family-wise ~1e-4).
DRAWS = 20000
SIGMAS = 4.5


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---- constructor arguments -----------------------------------------------------------------------

BAD_ARGUMENTS = [
    (lambda: CategoricalAdapter(0), "num_actions must be a positive int; got 0"),
    (lambda: CategoricalAdapter(True), "num_actions must be a positive int; got True"),
    (lambda: CategoricalAdapter(2.0), "num_actions must be a positive int; got 2.0"),
    (lambda: GaussianAdapter(0), "action_dim must be a positive int; got 0"),
    (lambda: GaussianAdapter(2, low=[0, 1, 2]), "low must be None, a number or 2 numbers"),
    (lambda: GaussianAdapter(2, high="x"), "high must be None, a number or 2 numbers"),
    (lambda: GaussianAdapter(2, low=1.0, high=0.0), "low must not exceed high"),
    (lambda: GaussianAdapter(2, log_std_min=1.0, log_std_max=1.0), "log_std_min must be below log_std_max"),
    (lambda: GaussianAdapter(2, log_std_min=float("nan")), "log_std_min must be a finite number"),
    (lambda: Policy(object(), "int64[](0,2)"), "network must be a Component with an API method 'apply'"),
    (lambda: Policy(Dense(3), "int64[](-1,2)"), "an IntBox action must be a scalar 0..n-1"),
    (lambda: Policy(Dense(3), "int64[2](0,2)"), "an IntBox action must be a scalar 0..n-1"),
    (lambda: Policy(Dense(3), "float32[]"), "a FloatBox action must have shape (D,)"),
    (lambda: Policy(Dense(3), "bool[]"), "leaves must be IntBox or FloatBox"),
    (lambda: Policy(Dense(3), "{a: {b: int64[](0,2)}}"), "nested container action spaces are not supported"),
    (lambda: Policy(Dense(3), "not a space"), "action_space 'not a space' is not a space"),
]


@pytest.mark.parametrize("make, message", BAD_ARGUMENTS, ids=[m for _, m in BAD_ARGUMENTS])
def test_bad_arguments_name_argument_and_value(make: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


# ---- categorical sampling -----------------------------------------------------------------------

@BACKENDS
def test_categorical_samples_follow_softmax(backend: str) -> None:
    """Gumbel-max draws hit each action with frequency softmax(logits)_a (per row of a large batch)."""
    logits = np.array([[2.0, 0.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0], [-30.0, 3.0, 3.0, -30.0]], np.float32)
    ex = GraphExecutor(CategoricalAdapter(4), {"parameters": "float32[B,4]"}, backend=backend, seed=3,
                       api_methods=["sample_action"])
    draws = ex.execute("sample_action", parameters=np.repeat(logits, DRAWS, axis=0)).reshape(3, DRAWS)
    p = _softmax(logits.astype(np.float64))
    freq = np.stack([(draws == a).mean(axis=1) for a in range(4)], axis=1)
    se = np.sqrt(p * (1 - p) / DRAWS)
    assert np.all(np.abs(freq - p) <= SIGMAS * se + 1e-12), (freq, p)
    # an action of probability ~1e-14 is never drawn
    assert not np.isin(draws[2], [0, 3]).any()


@BACKENDS
def test_categorical_log_probs_sum_to_one_over_actions(backend: str) -> None:
    """exp(log_prob(s, a)) over all actions a sums to 1; the greedy action has the largest log-probability."""
    root = DensePolicy(5, "int64[](0,3)")
    ex = GraphExecutor(root, {"states": "float32[B,3]", "actions": "int64[B](0,3)"}, backend=backend,
                       api_methods=["log_probs", "greedy_actions"])
    states = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    logp = np.stack([ex.execute("log_probs", states=states, actions=np.full(6, a, np.int64)) for a in range(4)], 1)
    np.testing.assert_allclose(np.exp(logp.astype(np.float64)).sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(ex.execute("greedy_actions", states=states), logp.argmax(axis=1))


# ---- Gaussian sampling --------------------------------------------------------------------------

@BACKENDS
def test_gaussian_samples_have_the_mean_and_std(backend: str) -> None:
    """Unbounded draws have mean `mean` and standard deviation exp(log_std), dimension by dimension."""
    mean = np.array([[0.5, -2.0]], np.float32)
    log_std = np.array([[-1.0, 0.7]], np.float32)
    ex = GaussianAdapter(2)
    ex = GraphExecutor(ex, {"parameters": "[B](float32[2], float32[2])"}, backend=backend, seed=5,
                       api_methods=["sample_action"])
    draws = ex.execute("sample_action", parameters=(np.repeat(mean, DRAWS, 0), np.repeat(log_std, DRAWS, 0)))
    std = np.exp(log_std[0].astype(np.float64))
    assert np.all(np.abs(draws.mean(axis=0) - mean[0]) <= SIGMAS * std / math.sqrt(DRAWS))
    # the sample variance's standard error is ~ sigma^2 sqrt(2 / n)
    assert np.all(np.abs(draws.var(axis=0) - std ** 2) <= SIGMAS * std ** 2 * math.sqrt(2.0 / DRAWS))


@BACKENDS
def test_gaussian_bounded_samples_are_clipped_not_resampled(backend: str) -> None:
    """With bounds, draws beyond a bound sit on it, in the proportion the Gaussian puts beyond it."""
    ex = GraphExecutor(GaussianAdapter(1, low=-1.0, high=1.0), {"parameters": "[B](float32[1], float32[1])"},
                       backend=backend, seed=7, api_methods=["sample_action"])
    draws = ex.execute("sample_action", parameters=(np.zeros((DRAWS, 1), np.float32),
                                                     np.zeros((DRAWS, 1), np.float32)))[:, 0]
    assert draws.min() >= -1.0 and draws.max() <= 1.0
    beyond = 0.5 * math.erfc(1.0 / math.sqrt(2.0))  # P(N(0,1) > 1)
    se = math.sqrt(beyond * (1 - beyond) / DRAWS)
    assert abs((draws == 1.0).mean() - beyond) <= SIGMAS * se
    assert abs((draws == -1.0).mean() - beyond) <= SIGMAS * se


@BACKENDS
def test_gaussian_entropy_is_minus_the_expected_log_density(backend: str) -> None:
    """entropy(params) ~ -mean(log_prob(params, samples)) over many samples (Monte Carlo, unbounded)."""
    params = (np.full((DRAWS, 2), 0.3, np.float32), np.tile(np.array([[-0.5, 0.4]], np.float32), (DRAWS, 1)))
    ex = GraphExecutor(GaussianAdapter(2), {"parameters": "[B](float32[2], float32[2])", "actions": "float32[B,2]"},
                       backend=backend, seed=11, api_methods=["sample_action", "log_prob", "entropy"])
    samples = ex.execute("sample_action", parameters=params)
    logp = ex.execute("log_prob", parameters=params, actions=samples).astype(np.float64)
    entropy = ex.execute("entropy", parameters=params)[0]
    assert abs(-logp.mean() - entropy) <= SIGMAS * logp.std() / math.sqrt(DRAWS)


# ---- Policy ---------------------------------------------------------------------------------------

@BACKENDS
def test_policy_dict_sample_actions_are_nested_like_the_action_space(backend: str) -> None:
    root = DensePolicy(4, "{move: int64[](0,2), aim: float32[2](-1,1)}")
    ex = GraphExecutor(root, {"states": "float32[B,3]"}, backend=backend, api_methods=["sample_actions"])
    out = ex.execute("sample_actions", states=np.zeros((5, 3), np.float32))
    assert set(out) == {"move", "aim"}
    assert out["move"].dtype == np.int64 and out["move"].shape == (5,)
    assert out["aim"].dtype == np.float32 and out["aim"].shape == (5, 2)


class _IdentityPolicy(Component):
    """A root holding a `Policy` over a network that passes the states through as features."""

    def __init__(self) -> None:
        self.policy = Policy(_Identity(), "int64[](0,1)")
        super().__init__(self.policy, scope="root")

    @api
    def q(self, states: Any) -> Any:
        return self.policy.action_logits(states)


class _Identity(Component):
    def __init__(self) -> None:
        super().__init__(scope="identity")

    @api
    def apply(self, inputs: Any) -> Any:
        return inputs


@BACKENDS
def test_policy_takes_any_network_with_apply(backend: str) -> None:
    """A network is any component with `apply`; the adapter's Dense maps its features to the Q-values."""
    ex = GraphExecutor(_IdentityPolicy(), {"states": "float32[B,3]"}, backend=backend)
    w = ex.get_weights()
    states = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    expected = states @ w["root/policy/adapter/logits/kernel"] + w["root/policy/adapter/logits/bias"]
    np.testing.assert_allclose(ex.execute("q", states=states), expected, rtol=1e-5, atol=1e-6)


@BACKENDS
def test_policy_rejects_features_the_adapters_cannot_take(backend: str) -> None:
    """Features of the wrong rank fail the build with a spacegraph error naming the adapter's layer."""
    with pytest.raises(SpacegraphError) as info:
        GraphExecutor(_IdentityPolicy(), {"states": "float32[B,3,2]"}, backend=backend)
    assert "root/policy/adapter/logits" in str(info.value)
