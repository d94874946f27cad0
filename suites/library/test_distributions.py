"""Distribution oracles: every stochastic method's draws tested against a NumPy oracle of its distribution.

Each check runs the real component through `GraphExecutor` on each backend with a fixed seed,
takes the number of draws the power calculation of `harness.testing.distributions` gives for
the check's stated effect (alpha 1e-4, power 0.99), and is shown to fail on planted bugs of
that effect and of the kinds named in docs/distribution_tests.md, planted the same way on both
backends by replacing the component's graph function (or the backend op / initializer) with
monkeypatch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import harness.backends.base as backend_base
from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, FloatBox, IntBox
from harness.testing import distributions as D
from harness.testing.plugin import selected_backends
from reference_agents.components.explorations import EpsilonGreedy
from reference_agents.components.memories import PrioritizedReplay, ReplayMemory
from reference_agents.components.policies import CategoricalAdapter, GaussianAdapter

BACKENDS = selected_backends()
backends = pytest.mark.parametrize("backend", BACKENDS)


def plant(monkeypatch: pytest.MonkeyPatch, cls: type, name: str, make: Any) -> None:
    """Replaces graph function ``name`` of ``cls`` by ``make(original_body)`` (same output spaces), for both backends."""
    original = cls.__dict__[name]
    body = make(original.spec.fn)
    body.__name__ = name
    monkeypatch.setattr(cls, name, graph_fn(body, output_spaces=original.spec.output_spaces,
                                            returns=original.spec.returns))


def must_fail(check: Any, *args: Any) -> str:
    with pytest.raises(D.DistributionMismatch) as info:
        check(*args)
    return str(info.value)


# ---- EpsilonGreedy.explore --------------------------------------------------------------------------
EPSILON = 0.3
#: The stated effect: epsilon 5% off.
EPSILON_EFFECT = 1.05
GREEDY = 1


def epsilon_greedy_probs(eps: float, actions: int, greedy: int) -> np.ndarray:
    """Oracle: the chosen action is uniform with probability eps, else the greedy one."""
    p = np.full(actions, eps / actions)
    p[greedy] += 1.0 - eps
    return p


def check_epsilon_greedy(backend: str, actions: int) -> None:
    p0 = epsilon_greedy_probs(EPSILON, actions, GREEDY)
    n = D.sample_size_chi_square(p0, epsilon_greedy_probs(EPSILON * EPSILON_EFFECT, actions, GREEDY))
    ex = GraphExecutor(EpsilonGreedy(actions, {"type": "constant", "value": EPSILON}),
                       {"greedy_actions": f"int64[B](0,{actions - 1})", "time_step": "int64[]"},
                       backend=backend, seed=11, api_methods=["explore"])
    draws = ex.execute("explore", np.full(n, GREEDY, np.int64), np.int64(0))
    D.check_chi_square(D.Where("EpsilonGreedy", "explore", "", backend), draws, p0)


@backends
@pytest.mark.parametrize("actions", [2, 3, 6])
def test_epsilon_greedy(backend: str, actions: int) -> None:
    check_epsilon_greedy(backend, actions)


@pytest.mark.parametrize("bug", ["1-eps", "eps*1.05"])
def test_epsilon_greedy_planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    change = (lambda e: 1.0 - e) if bug == "1-eps" else (lambda e: e * EPSILON_EFFECT)
    plant(monkeypatch, EpsilonGreedy, "_graph_fn_explore",
          lambda fn: lambda self, F, greedy_actions, epsilon: fn(self, F, greedy_actions, change(epsilon)))
    for backend in BACKENDS:
        message = must_fail(check_epsilon_greedy, backend, 3)
        assert f"EpsilonGreedy.explore [{backend}]" in message and "p-value" in message


# ---- CategoricalAdapter.sample_action -------------------------------------------------------------
LOGITS = np.array([1.0, -0.5, 0.3, 2.0, -1.2])
#: The stated effect: softmax temperature 1.05.
TEMPERATURE = 1.05


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.exp(logits / temperature - np.max(logits / temperature))
    return z / z.sum()


def check_categorical(backend: str) -> None:
    p0 = softmax(LOGITS)
    n = D.sample_size_chi_square(p0, softmax(LOGITS, TEMPERATURE))
    ex = GraphExecutor(CategoricalAdapter(len(LOGITS)), {"parameters": f"float32[B,{len(LOGITS)}]"},
                       backend=backend, seed=3, api_methods=["sample_action"])
    draws = ex.execute("sample_action", np.repeat(LOGITS[None].astype(np.float32), n, 0))
    D.check_chi_square(D.Where("CategoricalAdapter", "sample_action", "", backend), draws, p0,
                       what="softmax(logits)")


@backends
def test_categorical(backend: str) -> None:
    check_categorical(backend)


def test_categorical_planted_temperature(monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, CategoricalAdapter, "_graph_fn_sample",
          lambda fn: lambda self, F, parameters: fn(self, F, parameters / TEMPERATURE))
    for backend in BACKENDS:
        assert "softmax(logits)" in must_fail(check_categorical, backend)


# ---- GaussianAdapter.sample_action ----------------------------------------------------------------
MEAN = np.array([1.5, -0.4, 0.7])
STD = np.array([0.5, 2.0, 1.1])
#: The stated effects: the mean shifted by 5% of the std, the std scaled by 1.05.
SHIFT, SCALE = 0.05, 1.05
MOMENT_TESTS = 2 * len(MEAN) + 1  # mean and scale per coordinate, and the pooled KS


def moment_sample_size(tests: int) -> int:
    each = D.ALPHA / tests
    return max(D.sample_size_mean(SHIFT, each), D.sample_size_scale(SCALE, each))


def check_gaussian(backend: str) -> None:
    n = moment_sample_size(MOMENT_TESTS)
    ex = GraphExecutor(GaussianAdapter(len(MEAN)), {"parameters": f"[B](float32[{len(MEAN)}], float32[{len(MEAN)}])"},
                       backend=backend, seed=5, api_methods=["sample_action"])
    params = tuple(np.repeat(v[None].astype(np.float32), n, 0) for v in (MEAN, np.log(STD)))
    draws = ex.execute("sample_action", params)
    # the oracle's parameters are the float32 values fed
    D.check_moments(D.Where("GaussianAdapter", "sample_action", "action", backend), draws,
                    MEAN.astype(np.float32), np.exp(np.log(STD).astype(np.float32).astype(np.float64)))


@backends
def test_gaussian(backend: str) -> None:
    check_gaussian(backend)


GAUSSIAN_BUGS = {
    "mean+0.05*std": lambda F, mean, log_std: (mean + SHIFT * F.exp(log_std), log_std),
    "std*1.05": lambda F, mean, log_std: (mean, log_std + math.log(SCALE)),
    "mean/std swapped": lambda F, mean, log_std: (F.exp(log_std), F.log(F.abs(mean))),
}


@pytest.mark.parametrize("bug", list(GAUSSIAN_BUGS))
def test_gaussian_planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    change = GAUSSIAN_BUGS[bug]
    plant(monkeypatch, GaussianAdapter, "_graph_fn_sample",
          lambda fn: lambda self, F, parameters: fn(self, F, change(F, *parameters)))
    for backend in BACKENDS:
        assert "GaussianAdapter.sample_action leaf 'action" in must_fail(check_gaussian, backend)


# ---- ReplayMemory.get_records ---------------------------------------------------------------------
CAPACITY, FILLED = 10, 7


def check_replay(backend: str) -> None:
    p0 = np.full(FILLED, 1.0 / FILLED)
    # the stated effect: one filled slot never drawn
    n = D.sample_size_chi_square(p0, np.r_[np.full(FILLED - 1, 1.0 / (FILLED - 1)), 0.0])
    ex = GraphExecutor(ReplayMemory(CAPACITY), {"records": "int64[B]", "num_records": "int64[]"},
                       backend=backend, seed=7, api_methods=["insert_records", "get_records"])
    ex.execute("insert_records", np.arange(FILLED, dtype=np.int64))  # record i lives in slot i
    draws = ex.execute("get_records", np.int64(n))
    D.check_chi_square(D.Where("ReplayMemory", "get_records", "slot", backend), draws, p0,
                       what="uniform over the filled slots")


@backends
def test_replay_uniform(backend: str) -> None:
    check_replay(backend)


def test_replay_planted_missing_last_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(fn: Any) -> Any:
        def body(self: Any, F: Any, num_records: Any) -> Any:
            u = F.random_uniform(F.reshape(num_records, [1]), dtype="float64")
            filled = F.maximum(self.size - 1, 1)  # the bug: the last filled slot is never drawn
            return self._gather(F, F.minimum(F.cast(u * F.cast(filled, "float64"), "int64"), filled - 1))
        return body

    plant(monkeypatch, ReplayMemory, "_graph_fn_get_records", make)
    for backend in BACKENDS:
        assert "uniform over the filled slots" in must_fail(check_replay, backend)


# ---- PrioritizedReplay.get_records ----------------------------------------------------------------
PER_ALPHA, PER_BETA, PER_EPSILON = 0.7, 0.3, 1e-6
PRIORITIES = np.array([0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
#: The stated effect: alpha 5% off.
ALPHA_EFFECT = 1.05


def per_probs(alpha: float) -> np.ndarray:
    """Oracle: ``P(i) = p_i^alpha / sum_k p_k^alpha`` with ``p_i = |priority_i| + epsilon``."""
    q = (np.abs(PRIORITIES) + PER_EPSILON) ** alpha
    return q / q.sum()


def per_weights(slots: np.ndarray) -> np.ndarray:
    """Oracle: ``w_i = (N P(i))^-beta / max_j (N P(j))^-beta`` over the N filled slots."""
    p = per_probs(PER_ALPHA)
    w = (len(p) * p) ** -PER_BETA
    return w[slots] / w.max()


def check_prioritized(backend: str) -> None:
    p0 = per_probs(PER_ALPHA)
    n = D.sample_size_chi_square(p0, per_probs(PER_ALPHA * ALPHA_EFFECT))
    ex = GraphExecutor(PrioritizedReplay(16, alpha=PER_ALPHA, beta=PER_BETA, epsilon=PER_EPSILON),
                       {"records": "int64[B]", "num_records": "int64[]", "indices": "int64[B]",
                        "priorities": "float32[B]"}, backend=backend, seed=5)
    filled = len(PRIORITIES)
    ex.execute("insert_records", np.arange(filled, dtype=np.int64))
    ex.execute("update_records", np.arange(filled, dtype=np.int64), PRIORITIES.astype(np.float32))
    records, slots, weights = ex.execute("get_records", np.int64(n))
    where = D.Where("PrioritizedReplay", "get_records", "slots", backend)
    assert np.array_equal(records, slots), f"{where}: records must be those of the returned slots"
    D.check_chi_square(where, slots, p0, what="p_i^alpha / sum_k p_k^alpha")
    expected = per_weights(np.asarray(slots))
    bad = ~np.isclose(weights, expected, rtol=2e-5, atol=0)
    if bad.any():
        raise D.DistributionMismatch(
            f"PrioritizedReplay.get_records leaf 'weights' [{backend}]: importance weights differ from "
            f"(N P(i))^-beta / max_j (N P(j))^-beta at {int(bad.sum())} of {bad.size} draws; first at slot "
            f"{int(np.asarray(slots)[bad][0])}: expected {expected[bad][0]:.7g}, observed {weights[bad][0]:.7g}")


@backends
def test_prioritized(backend: str) -> None:
    check_prioritized(backend)


def _per_update(alpha: Any) -> Any:
    def make(fn: Any) -> Any:
        def body(self: Any, F: Any, priorities: Any) -> Any:
            p = F.abs(F.cast(priorities, "float32")) + self.epsilon
            F.assign(self.max_priority, F.maximum(self.max_priority, F.reduce_max(p)))
            return p if alpha is None else self._power(F, p, alpha)
        return body
    return make


@pytest.mark.parametrize("bug", ["alpha ignored", "alpha*1.05"])
def test_prioritized_planted_alpha(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    plant(monkeypatch, PrioritizedReplay, "_graph_fn_update_max",
          _per_update(None if bug == "alpha ignored" else PER_ALPHA * ALPHA_EFFECT))
    for backend in BACKENDS:
        assert "p_i^alpha / sum_k p_k^alpha" in must_fail(check_prioritized, backend)


def test_prioritized_planted_weights_not_max_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(fn: Any) -> Any:
        def body(self: Any, F: Any, weighted: Any, min_weighted: Any) -> Any:
            return self._power(F, F.maximum(weighted, 1e-30), -self.beta)  # (p_i^alpha)^-beta, no / max
        return body

    plant(monkeypatch, PrioritizedReplay, "_graph_fn_weights", make)
    for backend in BACKENDS:
        assert "importance weights differ" in must_fail(check_prioritized, backend)


# ---- the backends' random ops and initial values ------------------------------------------------
LOW, HIGH = -2.0, 3.0
NORMAL_MEAN, NORMAL_STD = 1.0, 2.0
GLOROT_SHAPE, NORMAL_INIT_STD = (128, 256), 0.3


def uniform_cdf(low: float, high: float) -> Any:
    return lambda x: np.clip((np.asarray(x) - low) / (high - low), 0.0, 1.0)


def normal_cdf(mean: float, std: float) -> Any:
    erf = np.frompyfunc(math.erf, 1, 1)
    return lambda x: 0.5 * (1.0 + erf((np.asarray(x, np.float64) - mean) / (std * math.sqrt(2.0))).astype(np.float64))


#: The stated effect for uniform draws: the range shifted by 5% of its width (KS distance 0.05).
UNIFORM_N = D.sample_size_ks(0.05)
GRID = np.linspace(-3.0, 3.0, 60001)
#: The stated effect for normal initial values: the std times 1.05 (KS distance sup |Phi(x) - Phi(x/1.05)|).
NORMAL_INIT_N = D.sample_size_ks(D.ks_distance(normal_cdf(0, 1), normal_cdf(0, SCALE), GRID), D.ALPHA / 2)
#: glorot_uniform: the limit times 1.05. (The initial-value check runs two KS tests, each at ALPHA / 2.)
GLOROT_LIMIT = math.sqrt(6.0 / sum(GLOROT_SHAPE))
GLOROT_N = D.sample_size_ks(D.ks_distance(uniform_cdf(-GLOROT_LIMIT, GLOROT_LIMIT),
                                          uniform_cdf(-SCALE * GLOROT_LIMIT, SCALE * GLOROT_LIMIT),
                                          GRID * GLOROT_LIMIT), D.ALPHA / 2)


#: random_integers(INT_HIGH): the stated effect is the top value drawn at 0.9 of its rate (an off-by-one or
#: rounding that starves the last value; the rest share its loss).
INT_HIGH = 5
INT_P0 = np.full(INT_HIGH, 1.0 / INT_HIGH)
INT_N = D.sample_size_chi_square(INT_P0, np.append(np.full(INT_HIGH - 1, 10.0), 9.0) / (10 * INT_HIGH - 1))

#: random_bernoulli(BERN_P): the stated effect is the probability times 1.05.
BERN_P = 0.3
BERN_N = D.sample_size_chi_square([1.0 - BERN_P, BERN_P], [1.0 - SCALE * BERN_P, SCALE * BERN_P])


class RandomOps(Component):
    """Draws of ``F.random_uniform(LOW, HIGH)``, ``F.random_normal(NORMAL_MEAN, NORMAL_STD)`` and
    ``F.random_integers(INT_HIGH)``, and two variables with the ``glorot_uniform`` and
    ``normal(NORMAL_INIT_STD)`` initializers."""

    def __init__(self) -> None:
        super().__init__(scope="random_ops")

    def create_variables(self, input_spaces: dict[str, Any]) -> None:
        self.get_variable("glorot", GLOROT_SHAPE, "float32", "glorot_uniform")
        self.get_variable("normal", (NORMAL_INIT_N,), "float64", f"normal({NORMAL_INIT_STD})")

    def _space(self, num: Any) -> Any:
        return FloatBox((), batch_rank=True, dtype="float64")

    @api
    def uniform(self, num: Any) -> Any:
        return self._graph_fn_uniform(num)

    @api
    def normal(self, num: Any) -> Any:
        return self._graph_fn_normal(num)

    @graph_fn(output_spaces=_space)
    def _graph_fn_uniform(self, F: Any, num: Any) -> Any:
        return F.random_uniform(F.reshape(num, [1]), LOW, HIGH, dtype="float64")

    @graph_fn(output_spaces=_space)
    def _graph_fn_normal(self, F: Any, num: Any) -> Any:
        return F.random_normal(F.reshape(num, [1]), NORMAL_MEAN, NORMAL_STD, dtype="float64")

    @api
    def integers(self, num: Any) -> Any:
        return self._graph_fn_integers(num)

    def _int_space(self, num: Any) -> Any:
        return IntBox(INT_HIGH, batch_rank=True)

    @graph_fn(output_spaces=_int_space)
    def _graph_fn_integers(self, F: Any, num: Any) -> Any:
        return F.random_integers(F.reshape(num, [1]), INT_HIGH)

    @api
    def bernoulli(self, num: Any) -> Any:
        return self._graph_fn_bernoulli(num)

    def _bool_space(self, num: Any) -> Any:
        return BoolBox(batch_rank=True)

    @graph_fn(output_spaces=_bool_space)
    def _graph_fn_bernoulli(self, F: Any, num: Any) -> Any:
        return F.random_bernoulli(F.reshape(num, [1]), BERN_P)


def random_ops(backend: str) -> GraphExecutor:
    return GraphExecutor(RandomOps(), {"num": "int64[]"}, backend=backend, seed=13)


def check_random_uniform(backend: str) -> None:
    draws = random_ops(backend).execute("uniform", np.int64(UNIFORM_N))
    D.check_ks(D.Where("Ops", "random_uniform", "", backend), draws, uniform_cdf(LOW, HIGH),
               what=f"U({LOW}, {HIGH})")


def check_random_normal(backend: str) -> None:
    draws = random_ops(backend).execute("normal", np.int64(moment_sample_size(3)))
    D.check_moments(D.Where("Ops", "random_normal", "", backend), draws[:, None], NORMAL_MEAN, NORMAL_STD)


def check_random_integers(backend: str) -> None:
    draws = random_ops(backend).execute("integers", np.int64(INT_N))
    assert draws.dtype == np.int64 and draws.shape == (INT_N,), (draws.dtype, draws.shape)
    D.check_chi_square(D.Where("Ops", "random_integers", "", backend), draws, INT_P0,
                       what=f"uniform integers 0..{INT_HIGH - 1}")


def check_random_bernoulli(backend: str) -> None:
    draws = random_ops(backend).execute("bernoulli", np.int64(BERN_N))
    assert draws.dtype == np.bool_ and draws.shape == (BERN_N,), (draws.dtype, draws.shape)
    D.check_chi_square(D.Where("Ops", "random_bernoulli", "", backend), draws.astype(np.int64),
                       [1.0 - BERN_P, BERN_P], what=f"True with probability {BERN_P}")


def check_initial_values(backend: str) -> None:
    weights = random_ops(backend).get_weights()
    glorot, normal = weights["random_ops/glorot"].ravel(), weights["random_ops/normal"]
    where = D.Where("initial_value", "glorot_uniform", "random_ops/glorot", backend)
    if np.abs(glorot).max() > GLOROT_LIMIT:
        raise D.DistributionMismatch(f"{where}: values beyond the limit sqrt(6 / (fan_in + fan_out)) = "
                                     f"{GLOROT_LIMIT:.6g}: largest |value| {np.abs(glorot).max():.6g}")
    assert glorot.size >= GLOROT_N, f"the glorot variable holds fewer values than the power calculation's {GLOROT_N}"
    D.check_ks(where, glorot[:GLOROT_N], uniform_cdf(-GLOROT_LIMIT, GLOROT_LIMIT), alpha=D.ALPHA / 2,
               what=f"U(-{GLOROT_LIMIT:.6g}, {GLOROT_LIMIT:.6g})")
    D.check_ks(D.Where("initial_value", f"normal({NORMAL_INIT_STD})", "random_ops/normal", backend), normal,
               normal_cdf(0.0, NORMAL_INIT_STD), alpha=D.ALPHA / 2, what=f"N(0, {NORMAL_INIT_STD}^2)")


@backends
@pytest.mark.parametrize("check", [check_random_uniform, check_random_normal, check_random_integers,
                                   check_random_bernoulli, check_initial_values],
                         ids=["random_uniform", "random_normal", "random_integers", "random_bernoulli",
                              "initial_values"])
def test_random_ops(backend: str, check: Any) -> None:
    check(backend)


def _patch_ops(monkeypatch: pytest.MonkeyPatch, name: str, make: Any) -> None:
    from harness.backends.tf.ops import TFOps
    from harness.backends.torch.ops import TorchOps
    for cls in (TFOps, TorchOps):
        monkeypatch.setattr(cls, name, make(getattr(cls, name)))


def test_random_uniform_planted_shift(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_ops(monkeypatch, "random_uniform", lambda fn: lambda self, shape, low=0.0, high=1.0, dtype="float32":
               fn(self, shape, low, high, dtype) + 0.05 * (high - low))
    for backend in BACKENDS:
        assert "KS D" in must_fail(check_random_uniform, backend)


@pytest.mark.parametrize("bug", ["top value never", "top value at 0.9"])
def test_random_integers_planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    def make(fn: Any) -> Any:
        def integers(self: Any, shape: Any, high: int, dtype: str = "int64") -> Any:
            if bug == "top value never":  # an off-by-one range
                return fn(self, shape, high - 1, dtype)
            return fn(self, shape, 10 * high - 1, dtype) // 10  # the stated effect: 9 of 10 shares for the top
        return integers

    _patch_ops(monkeypatch, "random_integers", make)
    for backend in BACKENDS:
        assert "p-value" in must_fail(check_random_integers, backend)


@pytest.mark.parametrize("bug", ["p*1.05", "1-p"])
def test_random_bernoulli_planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    def make(fn: Any) -> Any:
        def bernoulli(self: Any, shape: Any, p: Any) -> Any:
            return fn(self, shape, p * SCALE if bug == "p*1.05" else 1.0 - p)
        return bernoulli

    _patch_ops(monkeypatch, "random_bernoulli", make)
    for backend in BACKENDS:
        assert "p-value" in must_fail(check_random_bernoulli, backend)


@pytest.mark.parametrize("bug", ["mean+0.05*std", "std*1.05"])
def test_random_normal_planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    def make(fn: Any) -> Any:
        def normal(self: Any, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: str = "float32") -> Any:
            return fn(self, shape, mean + SHIFT * std, std, dtype) if bug.startswith("mean") \
                else fn(self, shape, mean, std * SCALE, dtype)
        return normal

    _patch_ops(monkeypatch, "random_normal", make)
    for backend in BACKENDS:
        must_fail(check_random_normal, backend)


@pytest.mark.parametrize("bug", ["glorot limit*1.05", "glorot limit/1.05", "normal std*1.05"])
def test_initial_values_planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> None:
    original = backend_base.initial_value

    def planted(path: str, shape: Any, dtype: Any, initializer: Any, seed: int) -> np.ndarray:
        value = original(path, shape, dtype, initializer, seed)
        hit = initializer == "glorot_uniform" if bug.startswith("glorot") else str(initializer).startswith("normal")
        factor = 1.0 / SCALE if bug.endswith("/1.05") else SCALE
        return (value * factor).astype(value.dtype) if hit else value

    monkeypatch.setattr(backend_base, "initial_value", planted)
    for backend in BACKENDS:
        assert "initial_value" in must_fail(check_initial_values, backend)
