"""Update overhead: one DQN learning step through the framework vs the same step written by hand.

The framework side is the real agent (``reference_agents/configs/dqn_cartpole.yaml``: a
256-unit dense torso, dueling head, double Q, 3-step discounts fed per record, Huber
loss (delta 1), Adam (lr 5e-4) with global-norm clipping at 10), called as the agent
calls it: ``executor.execute("update_from_batch", records, weights)`` with NumPy in and
NumPy ``(loss, grad_norm, td_errors)`` out. The target sync is left out on both sides.

The hand-written side is the same network, loss and optimizer written directly against
the backend, starting from the framework's weights (``executor.get_weights()``), NumPy
in and NumPy out as well:

- PyTorch: ``torch.from_numpy`` inputs, the dueling MLP as plain tensor code,
  ``torch.optim.Adam`` (foreach) and ``clip_grad_norm_``;
- TensorFlow: one ``tf.function`` with a fixed input signature, a ``GradientTape``,
  ``tf.clip_by_global_norm`` and Adam written out on ``tf.Variable`` slots.

`setup_pair` checks that both sides give the same loss on the first batch before any
timing, so the comparison is between two implementations of the same step.
"""

from __future__ import annotations

import os
import statistics
from typing import Any, Callable

import numpy as np

from harness.measure.timing import interleaved_rates

CONFIG = "dqn_cartpole"
BACKENDS = ("tf", "torch")
_ONLINE = ("network/dense_0/kernel", "network/dense_0/bias", "dueling_head/value/kernel",
           "dueling_head/value/bias", "dueling_head/advantage/kernel", "dueling_head/advantage/bias")


def _config_path() -> str:
    import reference_agents

    return os.path.join(os.path.dirname(reference_agents.__file__), "configs", f"{CONFIG}.yaml")


def make_batch(batch: int, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``(records, importance_weights)``: a random CartPole batch as the replay would hand it over."""
    rng = np.random.default_rng(seed)
    records = {
        # Inside CartPole's observation box (pole angle bound 0.419 rad), so input validation passes.
        "states": rng.uniform(-0.4, 0.4, (batch, 4)).astype(np.float32),
        "next_states": rng.uniform(-0.4, 0.4, (batch, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, batch).astype(np.int64),
        "rewards": np.ones(batch, np.float32),
        "terminals": rng.random(batch) < 0.05,
        "discounts": np.full(batch, 0.99 ** 3, np.float32),
    }
    return records, np.ones(batch, np.float32)


def _weights(weights: dict[str, np.ndarray], network: str) -> list[np.ndarray]:
    return [np.array(weights[f"dqn/{network}/{k}"], copy=True) for k in _ONLINE]


def _torch_update(weights: dict[str, np.ndarray], lr: float, clip: float) -> Callable:
    import torch

    params = [torch.nn.Parameter(torch.from_numpy(w)) for w in _weights(weights, "q_network")]
    target = [torch.from_numpy(w) for w in _weights(weights, "target_q_network")]
    opt = torch.optim.Adam(params, lr=lr, eps=1e-8, foreach=True)

    def q(ps: list, x: Any) -> Any:
        k0, b0, vk, vb, ak, ab = ps
        h = torch.relu(x @ k0 + b0)
        a = h @ ak + ab
        return h @ vk + vb + a - a.mean(-1, keepdim=True)

    def update(records: dict[str, np.ndarray], weights_: np.ndarray) -> tuple:
        t = torch.from_numpy
        s, s2, act = t(records["states"]), t(records["next_states"]), t(records["actions"])
        q_taken = q(params, s).gather(1, act[:, None]).squeeze(1)
        with torch.no_grad():
            best = q(params, s2).argmax(-1, keepdim=True)
            boot = q(target, s2).gather(1, best).squeeze(1)
            y = t(records["rewards"]) + (~t(records["terminals"])).float() * t(records["discounts"]) * boot
        td = y - q_taken
        mag = td.abs()
        per_item = t(weights_) * torch.where(mag <= 1.0, 0.5 * td * td, mag - 0.5)
        loss = per_item.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
        opt.step()
        return loss.item(), norm.item(), td.detach().numpy()

    return update


def _tf_update(weights: dict[str, np.ndarray], lr: float, clip: float) -> Callable:
    import tensorflow as tf

    params = [tf.Variable(w) for w in _weights(weights, "q_network")]
    target = [tf.constant(w) for w in _weights(weights, "target_q_network")]
    ms = [tf.Variable(tf.zeros_like(p)) for p in params]
    vs = [tf.Variable(tf.zeros_like(p)) for p in params]
    step = tf.Variable(0.0, dtype=tf.float32)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def q(ps: list, x: Any) -> Any:
        k0, b0, vk, vb, ak, ab = ps
        h = tf.nn.relu(tf.matmul(x, k0) + b0)
        a = tf.matmul(h, ak) + ab
        return tf.matmul(h, vk) + vb + a - tf.reduce_mean(a, axis=-1, keepdims=True)

    f32 = tf.float32
    sig = [tf.TensorSpec([None, 4], f32), tf.TensorSpec([None, 4], f32), tf.TensorSpec([None], tf.int64),
           tf.TensorSpec([None], f32), tf.TensorSpec([None], tf.bool), tf.TensorSpec([None], f32),
           tf.TensorSpec([None], f32)]

    @tf.function(input_signature=sig, autograph=False)
    def step_fn(s, s2, act, r, term, disc, w):
        best = tf.argmax(q(params, s2), axis=-1)
        boot = tf.gather(q(target, s2), best, batch_dims=1)
        y = tf.stop_gradient(r + (1.0 - tf.cast(term, f32)) * disc * boot)
        with tf.GradientTape() as tape:
            q_taken = tf.gather(q(params, s), act, batch_dims=1)
            td = y - q_taken
            mag = tf.abs(td)
            loss = tf.reduce_mean(w * tf.where(mag <= 1.0, 0.5 * td * td, mag - 0.5))
        grads = tape.gradient(loss, params)
        clipped, norm = tf.clip_by_global_norm(grads, clip)
        t = step.assign_add(1.0)
        alpha = lr * tf.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
        for p, g, m, v in zip(params, clipped, ms, vs):
            m.assign(b1 * m + (1 - b1) * g)
            v.assign(b2 * v + (1 - b2) * g * g)
            p.assign_sub(alpha * m / (tf.sqrt(v) + eps * tf.sqrt(1.0 - b2 ** t)))
        return loss, norm, td

    step_fn.get_concrete_function()

    def update(records: dict[str, np.ndarray], weights_: np.ndarray) -> tuple:
        loss, norm, td = step_fn(records["states"], records["next_states"], records["actions"],
                                 records["rewards"], records["terminals"], records["discounts"], weights_)
        return float(loss), float(norm), td.numpy()

    return update


def setup_pair(backend: str, batch: int = 32, seed: int = 0) -> tuple[Callable, Callable]:
    """``(framework, hand)`` no-argument callables doing one update each on the same batch.

    Raises:
        AssertionError: when the two sides' first losses or TD errors differ.
    """
    from reference_agents.agents import build_agent

    agent = build_agent(_config_path(), backend=backend, seed=seed)
    opt = agent.config.optimizer
    make = _torch_update if backend == "torch" else _tf_update
    hand = make(agent.executor.get_weights(), float(opt.learning_rate), float(opt.clip_grad_norm))
    records, weights = make_batch(batch, seed)
    execute = agent.executor.execute
    got_fw = execute("update_from_batch", records, weights)
    got_hand = hand(records, weights)
    np.testing.assert_allclose(float(got_hand[0]), float(got_fw[0]), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_hand[2]), np.asarray(got_fw[2]), rtol=1e-4, atol=1e-5)
    return (lambda: execute("update_from_batch", records, weights)), (lambda: hand(records, weights))


def measure(backend: str, batch: int = 32, seconds: float = 2.0, rounds: int = 8) -> dict[str, float]:
    """Medians over interleaved rounds of updates per CPU-second, and ``ratio`` = hand time / framework time."""
    framework, hand = setup_pair(backend, batch)
    rates = interleaved_rates({"framework": framework, "hand": hand}, seconds, rounds)
    fw = statistics.median(rates["framework"]["cpu"])
    hw = statistics.median(rates["hand"]["cpu"])
    ratios = [f / h for f, h in zip(rates["framework"]["cpu"], rates["hand"]["cpu"])]
    return {"framework_per_s": fw, "hand_per_s": hw, "ratio": fw / hw,
            "ratio_min": min(ratios), "ratio_max": max(ratios)}
