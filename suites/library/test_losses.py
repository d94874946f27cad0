"""Unit tests of the loss and return helpers that the spec harness cannot express (gradients, NumPy helpers)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.graph.errors import SpaceMismatchError
from harness.testing.plugin import selected_backends
from reference_agents.components.common import Dense
from reference_agents.components.helpers import DiscountedReturns, n_step_transitions
from reference_agents.components.losses import DQNLoss
from reference_agents.oracles import losses as oracles

_MODULES = {"tf": "tensorflow", "torch": "torch"}
BACKENDS = [pytest.param(b, id=b, marks=[pytest.mark.skip(reason=f"{_MODULES[b]} is not installed")]
                         if importlib.util.find_spec(_MODULES[b]) is None else [])
            for b in selected_backends()]


# ---- n_step_transitions ------------------------------------------------------------------------------


def test_n_step_transitions_by_hand():
    # one rollout of 5 steps, the episode ends with step 2; n = 2, gamma = 0.5
    rewards = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    terminals = np.array([False, False, True, False, False])
    out = n_step_transitions(rewards, terminals, n=2, gamma=0.5)
    np.testing.assert_allclose(out["rewards"], [1 + 0.5 * 2, 2 + 0.5 * 4, 4, 8 + 0.5 * 16, 16])
    np.testing.assert_array_equal(out["steps"], [2, 2, 1, 2, 1])
    np.testing.assert_allclose(out["discounts"], [0.25, 0.25, 0.5, 0.25, 0.5])
    np.testing.assert_array_equal(out["terminals"], [False, True, True, False, False])
    np.testing.assert_array_equal(out["next_index"], [2, 3, 3, 5, 5])
    np.testing.assert_array_equal(out["valid"], [True, True, True, True, False])
    assert n_step_transitions(rewards, terminals, 2, 0.5, keep_partial=True)["valid"].all()


def _n_step_loop(r, d, n, gamma):
    """One window at a time, straight from the definition."""
    length = len(r)
    rows = []
    for t in range(length):
        total, k, ended = 0.0, 0, False
        while k < n and t + k < length:
            total += gamma ** k * r[t + k]
            k += 1
            if d[t + k - 1]:
                ended = True
                break
        rows.append((total, gamma ** k, ended, t + k, k))
    return rows


@pytest.mark.parametrize("n", [1, 3, 6])
def test_n_step_transitions_match_a_loop_per_column(n):
    rng = np.random.default_rng(n)
    rewards = rng.normal(size=(9, 4))
    terminals = rng.random((9, 4)) < 0.25
    out = n_step_transitions(rewards, terminals, n=n, gamma=0.9)
    for b in range(4):
        rows = _n_step_loop(rewards[:, b], terminals[:, b], n, 0.9)
        total, disc, ended, nxt, k = map(np.array, zip(*rows))
        np.testing.assert_allclose(out["rewards"][:, b], total, rtol=1e-12)
        np.testing.assert_allclose(out["discounts"][:, b], disc, rtol=1e-12)
        np.testing.assert_array_equal(out["terminals"][:, b], ended)
        np.testing.assert_array_equal(out["next_index"][:, b], nxt)
        np.testing.assert_array_equal(out["valid"][:, b], ended | (k == n))


@pytest.mark.parametrize("call, message", [
    (lambda: n_step_transitions([1.0], [False], n=0, gamma=0.9), "n must be a positive int; got 0"),
    (lambda: n_step_transitions([1.0], [False], n=2, gamma=1.5), "gamma must be a number in [0, 1]; got 1.5"),
    (lambda: n_step_transitions([1.0], [0], n=2, gamma=0.9), "terminals must be bools"),
    (lambda: n_step_transitions([1.0, 2.0], [False], n=2, gamma=0.9), "share one shape"),
])
def test_n_step_transitions_rejects_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()


# ---- constructor checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("make, message", [
    (lambda: DiscountedReturns(gamma=1.2), "DiscountedReturns: gamma must be a number in [0, 1]; got 1.2"),
    (lambda: DQNLoss(gamma=-0.1), "DQNLoss: gamma must be a number in [0, 1]; got -0.1"),
    (lambda: DQNLoss(huber_delta=0.0), "DQNLoss: huber_delta must be a positive number or None; got 0.0"),
    (lambda: DQNLoss(n_step=0), "DQNLoss: n_step must be a positive int; got 0"),
    (lambda: DQNLoss(double_q=1), "DQNLoss: double_q must be a bool; got 1"),
    (lambda: DQNLoss(importance_weights="yes"), "DQNLoss: importance_weights must be a bool; got 'yes'"),
])
def test_constructors_reject_bad_arguments(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


@pytest.mark.parametrize("backend", BACKENDS)
def test_dqn_loss_names_a_missing_optional_argument(backend):
    spaces = {"q_values": "float32[B,3]", "actions": "int64[B](0,2)", "rewards": "float32[B]",
              "terminals": "bool[B]", "next_q_values_target": "float32[B,3]"}
    with pytest.raises(SpaceMismatchError, match="next_q_values_online"):
        GraphExecutor(DQNLoss(importance_weights=False), spaces, backend=backend, api_methods=["loss"])
    with pytest.raises(SpaceMismatchError, match="importance_weights"):
        GraphExecutor(DQNLoss(double_q=False), spaces, backend=backend, api_methods=["loss"])


# ---- gradients through the DQN loss --------------------------------------------------------------------------


class QLearner(Component):
    """A linear Q-network, the DQN loss on its outputs (bootstrapping from the same network), and dL/dvariables."""

    def __init__(self, **loss_config):
        q_net = Dense(3, scope="q")
        super().__init__(q_net, DQNLoss(**loss_config), scope="learner")
        self.q_net, self.dqn = q_net, self.sub_components["dqn_loss"]

    @api
    def gradients(self, obs, actions, rewards, terminals, next_obs, weights):
        next_q = self.q_net.apply(next_obs)
        loss, _ = self.dqn.loss(self.q_net.apply(obs), actions, rewards, terminals, next_q, next_q, weights)
        return self._graph_fn_gradients(loss)

    @graph_fn(gradients=True, returns=3)
    def _graph_fn_gradients(self, F, loss):
        grads = F.gradients(loss, [self.q_net.kernel, self.q_net.bias])
        return loss, grads[0], grads[1]


LEARNER_SPACES = {"obs": "float32[B,4]", "actions": "int64[B](0,2)", "rewards": "float32[B]", "terminals": "bool[B]",
                  "next_obs": "float32[B,4]", "weights": "float32[B]"}


def _learner_batch(seed=0, size=6):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(size, 4)).astype(np.float32) * 2, rng.integers(0, 3, size=size),
            rng.normal(size=size).astype(np.float32) * 2, rng.random(size) < 0.3,
            rng.normal(size=(size, 4)).astype(np.float32) * 2, rng.random(size).astype(np.float32))


def _numpy_dqn_gradients(kernel, bias, batch, gamma, delta):
    """dL/dW, dL/db with the target held fixed: dL/dQ(s_i, a_i) = -w_i huber'(td_i) / B."""
    obs, actions, rewards, terminals, next_obs, weights = (np.asarray(v, np.float64) for v in batch)
    kernel, bias = kernel.astype(np.float64), bias.astype(np.float64)
    q, next_q = obs @ kernel + bias, next_obs @ kernel + bias
    a = actions.astype(int)
    best = np.argmax(next_q, axis=1)
    target = rewards + (1 - terminals) * gamma * next_q[np.arange(len(a)), best]
    td = target - q[np.arange(len(a)), a]
    slope = np.where(np.abs(td) <= delta, td, delta * np.sign(td))
    grad_q = np.zeros_like(q)
    grad_q[np.arange(len(a)), a] = -weights * slope / len(a)
    return obs.T @ grad_q, grad_q.sum(axis=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dqn_loss_gradients_follow_numpy_with_a_fixed_target(backend):
    ex = GraphExecutor(QLearner(gamma=0.9, huber_delta=1.0), LEARNER_SPACES, backend=backend, seed=3)
    w = ex.get_weights()
    batch = _learner_batch()
    loss, g_kernel, g_bias = ex.execute("gradients", *batch)
    want_kernel, want_bias = _numpy_dqn_gradients(w["learner/q/kernel"], w["learner/q/bias"], batch, 0.9, 1.0)
    np.testing.assert_allclose(g_kernel, want_kernel, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g_bias, want_bias, rtol=1e-4, atol=1e-6)
    assert np.abs(want_kernel).max() > 1e-3  # the batch exercises both Huber branches with real gradients


def test_dqn_loss_gradients_agree_across_backends():
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    batch = _learner_batch(seed=1, size=5)
    results = {}
    for backend in ("tf", "torch"):
        ex = GraphExecutor(QLearner(gamma=0.99, n_step=2), LEARNER_SPACES, backend=backend, seed=7)
        results[backend] = ex.execute("gradients", *batch)
    for tf_value, torch_value in zip(results["tf"], results["torch"]):
        np.testing.assert_allclose(torch_value, tf_value, rtol=1e-5, atol=1e-6)


# ---- discounted returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_discounted_returns_on_a_long_sequence(backend):
    rng = np.random.default_rng(5)
    rewards = rng.normal(size=(3, 40)).astype(np.float32)
    terminals = rng.random((3, 40)) < 0.1
    ex = GraphExecutor(DiscountedReturns(gamma=0.95), {"rewards": "float32[B,T]", "terminals": "bool[B,T]"},
                       backend=backend)
    got = ex.execute("discounted_sums", rewards, terminals)
    want = oracles.discounted_sums_batch_major({"rewards": rewards, "terminals": terminals}, {}, {"gamma": 0.95})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- V-trace and IMPALA ---------------------------------------------------------------------------------------


def test_vtrace_oracle_on_policy_is_the_bootstrapped_n_step_return():
    # pi = mu: rho = c = 1, so v_s = sum_k gamma_s..k r + (prod gamma) V(x_T) (Espeholt et al. 2018, section 4.1)
    rng = np.random.default_rng(2)
    length, gamma = 6, 0.9
    rewards, values = rng.normal(size=(length, 1)), rng.normal(size=(length, 1))
    discounts = np.ones((length, 1))
    discounts[3] = 0.0
    boot = np.array([2.5])
    vs, adv = oracles.vtrace_targets(np.zeros((length, 1)), discounts, rewards, values, boot, {"gamma": gamma})
    for s in range(length):
        total, scale = 0.0, 1.0
        for t in range(s, length):
            total += scale * rewards[t, 0]
            scale *= gamma * discounts[t, 0]
        np.testing.assert_allclose(vs[s, 0], total + scale * boot[0], rtol=1e-12)
    next_vs = np.append(vs[1:, 0], boot)
    np.testing.assert_allclose(adv[:, 0], rewards[:, 0] + gamma * discounts[:, 0] * next_vs - values[:, 0])


VTRACE_SPACES = {"log_rhos": "float32[T,B]", "discounts": "float32[T,B]", "rewards": "float32[T,B]",
                 "values": "float32[T,B]", "bootstrap_value": "float32[B]"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_vtrace_on_a_long_rollout(backend):
    from reference_agents.components.losses import VTrace

    rng = np.random.default_rng(8)
    inputs = {"log_rhos": rng.uniform(-1, 1, (50, 3)), "discounts": (rng.random((50, 3)) > 0.1) * 1.0,
              "rewards": rng.normal(size=(50, 3)), "values": rng.normal(size=(50, 3)),
              "bootstrap_value": rng.normal(size=3)}
    inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
    config = {"rho_bar": 1.0, "c_bar": 0.9, "rho_bar_pg": 2.0, "gamma": 0.97}
    ex = GraphExecutor(VTrace(**config), VTRACE_SPACES, backend=backend)
    got = ex.execute("vtrace", **inputs)
    want = oracles.vtrace(inputs, {}, config)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make, message", [
    (lambda: __import__("reference_agents.components.losses", fromlist=["VTrace"]).VTrace(rho_bar=0.0),
     "VTrace: rho_bar must be a positive number or None; got 0.0"),
    (lambda: __import__("reference_agents.components.losses", fromlist=["VTrace"]).VTrace(gamma=2),
     "VTrace: gamma must be a number in [0, 1]; got 2"),
    (lambda: __import__("reference_agents.components.losses", fromlist=["IMPALALoss"]).IMPALALoss(entropy_cost=-1),
     "IMPALALoss: entropy_cost must be a number >= 0; got -1"),
    (lambda: __import__("reference_agents.components.losses", fromlist=["IMPALALoss"]).IMPALALoss(reduction="max"),
     "IMPALALoss: reduction must be one of ('sum', 'mean'); got 'max'"),
])
def test_vtrace_and_impala_constructors_reject_bad_arguments(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


class ActorCriticLearner(Component):
    """A linear policy-and-value head over observations, the IMPALA loss, and dL/dvariables."""

    def __init__(self):
        from reference_agents.components.common import FoldTimeRank, UnfoldTimeRank
        from reference_agents.components.losses import IMPALALoss

        head = Dense(3, scope="head")  # 2 logits and 1 value
        super().__init__(head, FoldTimeRank(scope="fold"), UnfoldTimeRank(scope="unfold"),
                         IMPALALoss(entropy_cost=0.1), scope="learner")
        self.head = head

    @api
    def gradients(self, obs, actions, behaviour_logits, rewards, discounts, bootstrap_value):
        out = self.sub_components["unfold"].unfold(self.head.apply(self.sub_components["fold"].fold(obs)), obs)
        logits, values = self._graph_fn_split(out)
        losses = self.sub_components["impala_loss"].loss(logits, actions, behaviour_logits, rewards, discounts,
                                                          values, bootstrap_value)
        return self._graph_fn_gradients(losses)

    @graph_fn(returns=2)
    def _graph_fn_split(self, F, out):
        return out[..., :2], out[..., 2]

    @graph_fn(gradients=True, returns=3)
    def _graph_fn_gradients(self, F, losses):
        grads = F.gradients(losses[0], [self.head.kernel, self.head.bias])
        return losses[0], grads[0], grads[1]


def test_impala_loss_gradients_agree_across_backends():
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    length, batch = 5, 3
    args = (rng.normal(size=(length, batch, 4)).astype(np.float32), rng.integers(0, 2, (length, batch)),
            rng.normal(size=(length, batch, 2)).astype(np.float32), rng.normal(size=(length, batch)).astype(np.float32),
            np.full((length, batch), 1.0, np.float32), rng.normal(size=batch).astype(np.float32))
    spaces = {"obs": "float32[T,B,4]", "actions": "int64[T,B](0,1)", "behaviour_logits": "float32[T,B,2]",
              "rewards": "float32[T,B]", "discounts": "float32[T,B]", "bootstrap_value": "float32[B]"}
    results = {b: GraphExecutor(ActorCriticLearner(), spaces, backend=b, seed=2).execute("gradients", *args)
               for b in ("tf", "torch")}
    for tf_value, torch_value in zip(results["tf"], results["torch"]):
        np.testing.assert_allclose(torch_value, tf_value, rtol=1e-4, atol=1e-5)
    assert np.abs(results["tf"][1]).min() > 0  # every kernel entry gets a gradient (policy and value columns)
