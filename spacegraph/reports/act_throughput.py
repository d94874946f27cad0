"""Act throughput (RLgraph paper, Fig. 5b): a dueling Nature-DQN actor through the framework vs by hand.

The framework side is `QActor` built by `GraphExecutor` and called per call through
``executor.api_function("q_values")`` with a backend tensor. The hand-written side is
the same network written directly against the backend (``torch.nn.functional`` under
``torch.no_grad()``, or a ``tf.function`` with an input signature) holding the SAME
weights, taken from ``executor.get_weights()``.

States are Pong-shaped ``float32[B,84,84,4]``. The ``uint8 -> float32`` conversion (and
any scaling) an Atari actor would do is left out on BOTH sides, so both measure the
network alone.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api
from harness.measure.timing import calls_per_s
from reference_agents.components.nn import DuelingHead, NeuralNetwork
from reference_agents.components.nn.network import nature_dqn_layers

NUM_ACTIONS = 6
STATE_SPACE = "float32[B,84,84,4]"
#: (scope, stride) of the Nature DQN convolutions, all 'valid' and relu.
NATURE_CONVS = (("conv2d_0", 4), ("conv2d_1", 2), ("conv2d_2", 1))
#: The backends and batch sizes the act throughput is measured at.
BACKENDS = ("tf", "torch")
BATCH_SIZES = (1, 4, 16, 64)


class QActor(Component):
    """Nature DQN torso plus a dueling head: ``q_values(states float32[B,84,84,4]) -> float32[B,6]``."""

    def __init__(self, num_actions: int = NUM_ACTIONS, scope: str = "q_actor") -> None:
        network = NeuralNetwork(layers=nature_dqn_layers(), scope="network")
        head = DuelingHead(num_actions=num_actions, scope="dueling_head")
        super().__init__(network, head, scope=scope)
        self.network, self.head = network, head

    @api
    def q_values(self, states: Any) -> Any:
        """Q-values ``[B, num_actions]`` for ``states``."""
        return self.head.apply(self.network.apply(states))


def build(backend: str) -> GraphExecutor:
    """A built `QActor` executor on ``backend``.

    The biases start at zero; they are set to small random values here so that the
    hand-written actors' agreement check covers them too (timing is unaffected).
    """
    executor = GraphExecutor(QActor(), {"states": STATE_SPACE}, backend=backend)
    rng = np.random.default_rng(0)
    weights = executor.get_weights()
    executor.set_weights({k: (rng.uniform(-0.1, 0.1, v.shape).astype(v.dtype) if k.endswith("/bias") else v)
                          for k, v in weights.items()})
    return executor


def weight_ending(weights: dict[str, np.ndarray], suffix: str) -> np.ndarray:
    """The one weight whose key ends with ``/suffix`` (keys carry the root's scope path)."""
    hits = [k for k in weights if k == suffix or k.endswith("/" + suffix)]
    if len(hits) != 1:
        raise KeyError(f"expected one weight ending in {suffix!r}; got {hits} among {sorted(weights)}")
    return weights[hits[0]]


def hand_written(backend: str, weights: dict[str, np.ndarray]) -> Callable[[Any], Any]:
    """The same network written by hand on ``backend`` with ``weights`` (canonical layouts).

    Convolution kernels are ``(h, w, in, out)`` for NHWC images, dense kernels
    ``(in, out)``; all three convolutions are 'valid', so no padding is needed.
    """
    convs = [(weight_ending(weights, f"{s}/kernel"), weight_ending(weights, f"{s}/bias"), stride) for s, stride in NATURE_CONVS]
    dense = (weight_ending(weights, "dense_4/kernel"), weight_ending(weights, "dense_4/bias"))
    value = (weight_ending(weights, "value/kernel"), weight_ending(weights, "value/bias"))
    adv = (weight_ending(weights, "advantage/kernel"), weight_ending(weights, "advantage/bias"))
    if backend == "torch":
        return _torch_actor(convs, dense, value, adv)
    if backend == "tf":
        return _tf_actor(convs, dense, value, adv)
    raise ValueError(f"unknown backend {backend!r}")


def _torch_actor(convs, dense, value, adv) -> Callable[[Any], Any]:
    import torch
    import torch.nn.functional as fn

    t = torch.from_numpy
    # Kernels to OIHW once, here; biases as they are.
    tconvs = [(t(np.ascontiguousarray(k.transpose(3, 2, 0, 1))), t(b), s) for k, b, s in convs]
    (dk, db), (vk, vb), (ak, ab) = [(t(k), t(b)) for k, b in (dense, value, adv)]

    @torch.no_grad()
    def act(states: Any) -> Any:
        x = states.permute(0, 3, 1, 2)  # NHWC -> NCHW, once per call
        for kernel, bias, stride in tconvs:
            x = torch.relu(fn.conv2d(x, kernel, bias, stride=stride))
        # Flatten in the framework's NHWC order (h, w, c) so the dense kernel lines up.
        x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        h = torch.relu(torch.addmm(db, x, dk))  # addmm: what torch.nn.Linear runs (matmul and bias in one op)
        v = torch.addmm(vb, h, vk)
        a = torch.addmm(ab, h, ak)
        return v + a - a.mean(dim=-1, keepdim=True)
    return act


def _tf_actor(convs, dense, value, adv) -> Callable[[Any], Any]:
    import tensorflow as tf

    c = tf.constant
    tconvs = [(c(k), c(b), s) for k, b, s in convs]
    (dk, db), (vk, vb), (ak, ab) = [(c(k), c(b)) for k, b in (dense, value, adv)]

    @tf.function(input_signature=[tf.TensorSpec([None, 84, 84, 4], tf.float32)], autograph=False)
    def act(states: Any) -> Any:
        x = states
        for kernel, bias, stride in tconvs:
            x = tf.nn.relu(tf.nn.conv2d(x, kernel, strides=[1, stride, stride, 1], padding="VALID") + bias)
        x = tf.reshape(x, [tf.shape(x)[0], 7 * 7 * 64])
        h = tf.nn.relu(tf.matmul(x, dk) + db)
        v = tf.matmul(h, vk) + vb
        a = tf.matmul(h, ak) + ab
        return v + a - tf.reduce_mean(a, axis=-1, keepdims=True)
    return act


def setup_pair(backend: str, batch: int, executor: GraphExecutor | None = None,
               rtol: float = 1e-4, atol: float = 1e-5) -> tuple[Callable, Callable, Any]:
    """``(framework, hand, states)`` for one batch size, checked to agree before any timing.

    Raises:
        AssertionError: when the hand-written actor's Q-values differ from the framework's.
    """
    executor = executor or build(backend)
    states_np = np.random.default_rng(batch).uniform(0.0, 1.0, (batch, 84, 84, 4)).astype(np.float32)
    states = executor.backend.to_tensor(states_np)
    framework = executor.api_function("q_values")
    hand = hand_written(backend, executor.get_weights())
    expected = executor.backend.to_numpy(framework(states))
    got = np.asarray(hand(states))
    assert expected.shape == (batch, NUM_ACTIONS), expected.shape
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    return framework, hand, states


def measure(backend: str, batch_sizes: tuple[int, ...] = BATCH_SIZES,
            seconds: float = 0.5) -> dict[int, dict[str, float]]:
    """Per batch size: framework calls/s, hand-written calls/s and their ratio (framework / hand)."""
    executor = build(backend)
    out: dict[int, dict[str, float]] = {}
    for batch in batch_sizes:
        framework, hand, states = setup_pair(backend, batch, executor)
        fw = calls_per_s(lambda: framework(states), seconds, rounds=3, warmup=5)
        hd = calls_per_s(lambda: hand(states), seconds, rounds=3, warmup=5)
        out[batch] = {"framework_calls_per_s": fw, "hand_calls_per_s": hd, "ratio": fw / hd}
    return out

