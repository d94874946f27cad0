"""NumPy oracles for the neural-network components, written from their definitions.

See `reference_agents.oracles.common` for the oracle signature. Float maths runs
in float64 and is cast back to the input's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_agents.oracles.common import ACTIVATIONS, dense


def _pair(value: Any) -> tuple[int, int]:
    return (int(value[0]), int(value[1])) if isinstance(value, (tuple, list)) else (int(value), int(value))


def _axis_padding(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int, int]:
    """``(out, before, after)`` along one axis; SAME as TensorFlow documents it (the odd pad after)."""
    if padding == "valid":
        return int(np.floor((size - kernel) / stride)) + 1, 0, 0
    out = int(np.ceil(size / stride))
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


def conv2d(x: np.ndarray, weights: dict[str, np.ndarray], config: dict[str, Any], prefix: str = "") -> np.ndarray:
    """``activation(conv(x, kernel) + bias)`` for NHWC ``x`` with any leading ranks, in float64.

    Each output pixel ``(i, j)`` sums ``x[i*sh + a - top, j*sw + b - left, c] *
    kernel[a, b, c, f]`` over the window offsets ``(a, b)`` and channels ``c``,
    with zeros outside the image.

    Args:
        x: inputs ``[..., H, W, C]``.
        weights: relative weights with ``{prefix}kernel`` ``(kh, kw, C, F)`` and, unless
            ``config["use_bias"]`` is false, ``{prefix}bias`` ``(F,)``.
        config: a `Conv2D` config.
        prefix: the layer's path inside the component under test, with a trailing ``/``.
    """
    x = np.asarray(x)
    lead, (h, w, c) = x.shape[:-3], x.shape[-3:]
    images = x.reshape((-1, h, w, c)).astype(np.float64)
    kernel = np.asarray(weights[f"{prefix}kernel"], np.float64)
    kh, kw = kernel.shape[:2]
    sh, sw = _pair(config.get("strides", 1))
    padding = config.get("padding", "valid")
    h_out, top, bottom = _axis_padding(h, kh, sh, padding)
    w_out, left, right = _axis_padding(w, kw, sw, padding)
    padded = np.pad(images, ((0, 0), (top, bottom), (left, right), (0, 0)))
    out = np.zeros((images.shape[0], h_out, w_out, kernel.shape[3]))
    for a in range(kh):
        for b in range(kw):
            window = padded[:, a:a + sh * (h_out - 1) + 1:sh, b:b + sw * (w_out - 1) + 1:sw, :]
            out += np.einsum("nhwc,cf->nhwf", window, kernel[a, b])
    if config.get("use_bias", True):
        out = out + np.asarray(weights[f"{prefix}bias"], np.float64)
    out = ACTIVATIONS[config.get("activation")](out)
    return out.reshape(lead + out.shape[1:]).astype(x.dtype)


def conv2d_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Conv2D.apply`."""
    return conv2d(inputs["inputs"], weights, config)


def max_pool2d(x: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """The maximum of each ``pool_size`` window per channel, for NHWC ``x`` with any leading ranks.

    Windows step by ``strides`` (default: the window); SAME padding as TensorFlow documents it,
    with padded positions at minus infinity so that they never win.
    """
    x = np.asarray(x)
    lead, (h, w, c) = x.shape[:-3], x.shape[-3:]
    images = x.reshape((-1, h, w, c)).astype(np.float64)
    ph, pw = _pair(config.get("pool_size", 2))
    sh, sw = _pair(config["strides"]) if config.get("strides") is not None else (ph, pw)
    padding = config.get("padding", "valid")
    h_out, top, bottom = _axis_padding(h, ph, sh, padding)
    w_out, left, right = _axis_padding(w, pw, sw, padding)
    padded = np.pad(images, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=-np.inf)
    out = np.full((images.shape[0], h_out, w_out, c), -np.inf)
    for a in range(ph):
        for b in range(pw):
            out = np.maximum(out, padded[:, a:a + sh * (h_out - 1) + 1:sh, b:b + sw * (w_out - 1) + 1:sw, :])
    return out.reshape(lead + out.shape[1:]).astype(x.dtype)


def max_pool2d_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `MaxPool2D.apply`."""
    return max_pool2d(inputs["inputs"], config)


def residual_block(x: np.ndarray, weights: dict[str, np.ndarray], config: dict[str, Any],
                   prefix: str = "") -> np.ndarray:
    """``x + conv_b(act(conv_a(act(x))))`` with both convolutions linear, stride 1 and 'same', in float64."""
    x = np.asarray(x)
    act = ACTIVATIONS[config.get("activation", "relu")]
    conv = {"kernel_size": config.get("kernel_size", 3), "padding": "same"}
    hidden = conv2d(act(x.astype(np.float64)), weights, conv, prefix=f"{prefix}conv_a/")
    return (x + conv2d(act(hidden), weights, conv, prefix=f"{prefix}conv_b/")).astype(x.dtype)


def residual_block_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                         config: dict[str, Any]) -> np.ndarray:
    """Oracle of `ResidualBlock.apply`."""
    return residual_block(inputs["inputs"], weights, config)


def flatten_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Flatten.apply` on batch-only values: each row's elements in row-major order."""
    x = np.asarray(inputs["inputs"])
    return np.stack([row.ravel() for row in x]) if len(x) else x.reshape((0, -1))


def flatten_time_rank(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Flatten.apply` on ``[B,T,...]``/``[T,B,...]`` values: the two leading axes kept."""
    x = np.asarray(inputs["inputs"])
    return x.reshape(x.shape[:2] + (int(np.prod(x.shape[2:], dtype=np.int64)),))


def network(x: np.ndarray, weights: dict[str, np.ndarray], layers: list[dict[str, Any]], prefix: str = "") -> np.ndarray:
    """The layers of a `NeuralNetwork` config applied in order to ``x`` (layer ``i`` at ``{type}_{i}/``)."""
    out = np.asarray(x)
    # The batch (and time) axes: what the first layer does not take as its core (a lone flatten: batch only).
    lead = out.ndim - {"conv2d": 3, "max_pool2d": 3, "residual_block": 3, "dense": 1}.get(layers[0]["type"],
                                                                                          out.ndim - 1)
    for i, layer in enumerate(layers):
        kind = layer["type"]
        scope = f"{prefix}{layer.get('scope', f'{kind}_{i}')}/"
        if kind == "dense":
            out = dense(out, weights, layer, prefix=scope)
        elif kind == "conv2d":
            out = conv2d(out, weights, layer, prefix=scope)
        elif kind == "max_pool2d":
            out = max_pool2d(out, layer)
        elif kind == "residual_block":
            out = residual_block(out, weights, layer, prefix=scope)
        elif kind == "flatten":
            out = out.reshape(out.shape[:lead] + (-1,))
        else:
            raise ValueError(f"unknown layer type {kind!r}")
    return out


def network_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `NeuralNetwork.apply`."""
    return network(inputs["inputs"], weights, config["layers"])


def dueling(x: np.ndarray, weights: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(V(s) [...], A(s, .) [..., A])`` of a `DuelingHead`: two linear layers ``value`` and ``advantage``."""
    value = dense(x, weights, {}, prefix="value/")[..., 0]
    return value, dense(x, weights, {}, prefix="advantage/")


def dueling_q_values(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `DuelingHead.apply`: ``Q(s,a) = V(s) + A(s,a) - mean_a' A(s,a')`` (Wang et al., 2016, eq. 9)."""
    value, advantages = dueling(inputs["inputs"], weights)
    v, a = value.astype(np.float64), advantages.astype(np.float64)
    return (v[..., None] + a - a.mean(axis=-1, keepdims=True)).astype(advantages.dtype)


def dueling_value_and_advantages(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                                 config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Oracle of `DuelingHead.value_and_advantages`: the two streams before they are combined."""
    return dueling(inputs["inputs"], weights)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_apply(inputs: dict[str, Any], weights: dict[str, np.ndarray],
               config: dict[str, Any]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Oracle of `LSTM.apply`: the cell equations stepped over ``T`` in float64.

    ``z = [x_t, h] @ kernel + bias`` split into gates (i, f, g, o);
    ``c = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h = sigmoid(o) * tanh(c)``.
    """
    return _lstm_steps(inputs, weights, config, None)


def lstm_apply_with_resets(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                           config: dict[str, Any]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Oracle of `LSTM.apply_with_resets`: as `lstm_apply`, with ``h`` and ``c`` of row ``b`` set to zeros
    before step ``t`` wherever ``resets[b, t]``."""
    return _lstm_steps(inputs, weights, config, np.asarray(inputs["resets"], bool))


def _lstm_steps(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any],
                resets: np.ndarray | None) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    x = np.asarray(inputs["inputs"])
    h, c = (np.asarray(s, np.float64) for s in inputs["initial_state"])
    kernel = np.asarray(weights["kernel"], np.float64)
    bias = np.asarray(weights["bias"], np.float64)
    u = config["units"]
    outputs = np.zeros(x.shape[:2] + (u,))
    for t in range(x.shape[1]):
        if resets is not None:
            keep = ~resets[:, t, None]
            h, c = h * keep, c * keep
        z = np.concatenate([x[:, t].astype(np.float64), h], axis=-1) @ kernel + bias
        i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        outputs[:, t] = h
    return outputs.astype(x.dtype), (h.astype(x.dtype), c.astype(x.dtype))
