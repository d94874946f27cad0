"""Update overhead: one DQN learning step through the framework vs the same step written by hand.

Two networks, each the real agent's (called as the agent calls it:
``executor.execute("update_from_batch", records, weights)`` with NumPy in and NumPy
``(loss, grad_norm, td_errors)`` out; the target sync is left out on both sides):

- ``cartpole`` (``reference_agents/configs/dqn_cartpole.yaml``): a 256-unit dense torso,
  dueling head, double Q, 3-step discounts fed per record, Huber loss (delta 1), Adam
  (lr 5e-4) with global-norm clipping at 10;
- ``nature`` (``dqn_pong.yaml``): uint8 ``[B,84,84,4]`` frames divided by 255 in the graph,
  the Nature CNN (three relu convolutions, a 512-unit relu dense layer), dueling head,
  double Q, Huber loss, Adam (lr 1e-4) with global-norm clipping at 10.

The hand-written side is the same network, loss and optimizer written directly against
the backend, starting from the framework's weights (``executor.get_weights()``), NumPy
in and NumPy out as well, as one would write it for that backend:

- PyTorch: ``torch.from_numpy`` inputs, the network as plain tensor code (the CNN in
  PyTorch's own NCHW layout: frames permuted once per call, kernels stored OIHW and the
  first dense layer's rows reordered at setup), ``torch.optim.Adam(fused=True)`` and
  ``clip_grad_norm_``;
- TensorFlow: one ``tf.function`` with a fixed input signature, a ``GradientTape``,
  ``tf.clip_by_global_norm`` and TF's fused Adam kernel (``ResourceApplyAdam``) on
  ``tf.Variable`` slots (the CNN in TF's own NHWC layout).

Both hand-written optimizers are the fastest form each framework offers (the framework's
`Adam` runs the same kernels through ``F.adam_update``).

`setup_pair` checks that both sides give the same loss and TD errors on the first batch
before any timing, so the comparison is between two implementations of the same step.
"""

from __future__ import annotations

import os
import statistics
from typing import Any, Callable

import numpy as np

from harness.measure.timing import interleaved_rates

#: The networks measured: the agent config each comes from.
CONFIGS = {"cartpole": "dqn_cartpole", "nature": "dqn_pong"}
BACKENDS = ("tf", "torch")
_HEAD = ("dueling_head/value/kernel", "dueling_head/value/bias", "dueling_head/advantage/kernel",
         "dueling_head/advantage/bias")
#: The online network's variables (relative to the Q-network), in the order the hand-written code takes them.
_VARIABLES = {"cartpole": ("network/dense_0/kernel", "network/dense_0/bias", *_HEAD),
              "nature": (*(f"network/conv2d_{i}/{v}" for i in range(3) for v in ("kernel", "bias")),
                         "network/dense_4/kernel", "network/dense_4/bias", *_HEAD)}
_STRIDES = (4, 2, 1)  # the Nature CNN's


def _config_path(network: str = "cartpole") -> str:
    import reference_agents

    return os.path.join(os.path.dirname(reference_agents.__file__), "configs", f"{CONFIGS[network]}.yaml")


def make_batch(batch: int, seed: int = 0, network: str = "cartpole") -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``(records, importance_weights)``: a random batch of the network's environment as the replay hands it over."""
    rng = np.random.default_rng(seed)
    if network == "nature":  # stacked 84x84 gray frames, uint8 as the frame replay stores them
        states = rng.integers(0, 256, (batch, 84, 84, 4), dtype=np.uint8)
        next_states = rng.integers(0, 256, (batch, 84, 84, 4), dtype=np.uint8)
        actions = rng.integers(0, 6, batch)
    else:  # inside CartPole's observation box (pole angle bound 0.419 rad), so input validation passes
        states = rng.uniform(-0.4, 0.4, (batch, 4)).astype(np.float32)
        next_states = rng.uniform(-0.4, 0.4, (batch, 4)).astype(np.float32)
        actions = rng.integers(0, 2, batch)
    records = {"states": states, "next_states": next_states, "actions": actions.astype(np.int64),
               "rewards": rng.choice(np.array([-1.0, 0.0, 1.0], np.float32), batch),
               "terminals": rng.random(batch) < 0.05, "discounts": np.full(batch, 0.99 ** 3, np.float32)}
    return records, rng.uniform(0.2, 1.0, batch).astype(np.float32)


def _weights(weights: dict[str, np.ndarray], q_network: str, network: str) -> list[np.ndarray]:
    return [np.array(weights[f"dqn/{q_network}/{k}"], copy=True) for k in _VARIABLES[network]]


def _torch_layout(ws: list[np.ndarray], network: str) -> list[np.ndarray]:
    """The Nature CNN's weights in PyTorch's layout: kernels OIHW, the first dense layer's rows in (c, h, w)
    order (what flattening an NCHW feature map gives); the MLP's as they are."""
    if network != "nature":
        return ws
    out = [np.ascontiguousarray(w.transpose(3, 2, 0, 1)) if w.ndim == 4 else w for w in ws]
    out[6] = np.ascontiguousarray(ws[6].reshape(7, 7, 64, 512).transpose(2, 0, 1, 3).reshape(3136, 512))
    return out


def _torch_update(weights: dict[str, np.ndarray], lr: float, clip: float, network: str = "cartpole") -> Callable:
    import torch
    import torch.nn.functional as F

    params = [torch.nn.Parameter(torch.from_numpy(w))
              for w in _torch_layout(_weights(weights, "q_network", network), network)]
    target = [torch.from_numpy(w) for w in _torch_layout(_weights(weights, "target_q_network", network), network)]
    opt = torch.optim.Adam(params, lr=lr, eps=1e-8, fused=True)  # PyTorch's fastest Adam on CPU and CUDA

    def head(h: Any, vk: Any, vb: Any, ak: Any, ab: Any) -> Any:
        a = torch.addmm(ab, h, ak)  # addmm: what torch.nn.Linear runs (matmul and bias in one op)
        return torch.addmm(vb, h, vk) + a - a.mean(-1, keepdim=True)

    def q_mlp(ps: list, x: Any) -> Any:
        k0, b0, *rest = ps
        return head(torch.relu(torch.addmm(b0, x, k0)), *rest)

    def q_nature(ps: list, frames: Any) -> Any:
        x = frames.permute(0, 3, 1, 2).float() / 255.0
        for i, stride in enumerate(_STRIDES):
            x = torch.relu(F.conv2d(x, ps[2 * i], ps[2 * i + 1], stride=stride))
        return head(torch.relu(torch.addmm(ps[7], x.flatten(1), ps[6])), *ps[8:])

    q = q_nature if network == "nature" else q_mlp

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


def _tf_update(weights: dict[str, np.ndarray], lr: float, clip: float, network: str = "cartpole") -> Callable:
    import tensorflow as tf

    params = [tf.Variable(w) for w in _weights(weights, "q_network", network)]
    target = [tf.constant(w) for w in _weights(weights, "target_q_network", network)]
    ms = [tf.Variable(tf.zeros_like(p)) for p in params]
    vs = [tf.Variable(tf.zeros_like(p)) for p in params]
    step = tf.Variable(0.0, dtype=tf.float32)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def head(h: Any, vk: Any, vb: Any, ak: Any, ab: Any) -> Any:
        a = tf.matmul(h, ak) + ab
        return tf.matmul(h, vk) + vb + a - tf.reduce_mean(a, axis=-1, keepdims=True)

    def q_mlp(ps: list, x: Any) -> Any:
        k0, b0, *rest = ps
        return head(tf.nn.relu(tf.matmul(x, k0) + b0), *rest)

    def q_nature(ps: list, frames: Any) -> Any:
        x = tf.cast(frames, tf.float32) / 255.0
        for i, stride in enumerate(_STRIDES):
            x = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, ps[2 * i], stride, "VALID"), ps[2 * i + 1]))
        return head(tf.nn.relu(tf.matmul(tf.reshape(x, [-1, 3136]), ps[6]) + ps[7]), *ps[8:])

    q = q_nature if network == "nature" else q_mlp
    f32 = tf.float32
    state = tf.TensorSpec([None, 84, 84, 4], tf.uint8) if network == "nature" else tf.TensorSpec([None, 4], f32)
    sig = [state, state, tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], f32), tf.TensorSpec([None], tf.bool),
           tf.TensorSpec([None], f32), tf.TensorSpec([None], f32)]

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
        p1, p2 = b1 ** t, b2 ** t
        for p, g, m, v in zip(params, clipped, ms, vs):  # TF's fused Adam kernel, epsilon as in the paper
            tf.raw_ops.ResourceApplyAdam(var=p.handle, m=m.handle, v=v.handle, beta1_power=p1, beta2_power=p2,
                                         lr=tf.constant(lr, f32), beta1=tf.constant(b1, f32),
                                         beta2=tf.constant(b2, f32), epsilon=eps * tf.sqrt(1.0 - p2), grad=g)
        return loss, norm, td

    step_fn.get_concrete_function()

    def update(records: dict[str, np.ndarray], weights_: np.ndarray) -> tuple:
        loss, norm, td = step_fn(records["states"], records["next_states"], records["actions"],
                                 records["rewards"], records["terminals"], records["discounts"], weights_)
        return float(loss), float(norm), td.numpy()

    return update


def setup_pair(backend: str, batch: int = 32, seed: int = 0, network: str = "cartpole") -> tuple[Callable, Callable]:
    """``(framework, hand)`` no-argument callables doing one update each on the same batch.

    Raises:
        AssertionError: when the two sides' first losses or TD errors differ.
    """
    from reference_agents.agents import build_agent

    if network not in CONFIGS:
        raise ValueError(f"update_overhead: network must be one of {sorted(CONFIGS)}; got {network!r}")
    agent = build_agent(_config_path(network), backend=backend, seed=seed)
    opt = agent.config.optimizer
    make = _torch_update if backend == "torch" else _tf_update
    hand = make(agent.executor.get_weights(), float(opt.learning_rate), float(opt.clip_grad_norm), network)
    records, weights = make_batch(batch, seed, network)
    execute = agent.executor.execute
    got_fw = execute("update_from_batch", records, weights)
    got_hand = hand(records, weights)
    np.testing.assert_allclose(float(got_hand[0]), float(got_fw[0]), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_hand[2]), np.asarray(got_fw[2]), rtol=1e-4, atol=1e-5)
    return (lambda: execute("update_from_batch", records, weights)), (lambda: hand(records, weights))


def measure(backend: str, batch: int = 32, seconds: float = 2.0, rounds: int = 8,
            network: str = "cartpole") -> dict[str, float]:
    """Medians over interleaved rounds of updates per CPU-second, and ``ratio`` = hand time / framework time."""
    framework, hand = setup_pair(backend, batch, network=network)
    rates = interleaved_rates({"framework": framework, "hand": hand}, seconds, rounds)
    fw = statistics.median(rates["framework"]["cpu"])
    hw = statistics.median(rates["hand"]["cpu"])
    ratios = [f / h for f, h in zip(rates["framework"]["cpu"], rates["hand"]["cpu"])]
    return {"framework_per_s": fw, "hand_per_s": hw, "ratio": fw / hw,
            "ratio_min": min(ratios), "ratio_max": max(ratios)}
