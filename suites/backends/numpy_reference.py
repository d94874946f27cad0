"""NumPy references of the ops of ``F`` that need more than a NumPy one-liner (`test_ops.py` compares every
backend with them): float64 in, written from each op's declared semantics in `harness.backends.ops`."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def conv2d(x: np.ndarray, k: np.ndarray, strides: tuple[int, int], padding: str,
               bias: np.ndarray | None = None) -> np.ndarray:
    """A direct NHWC/HWIO cross-correlation with TensorFlow's SAME padding (odd pad after)."""
    n, h, w, _ = x.shape
    kh, kw, _, o = k.shape
    sh, sw = strides
    if padding == "same":
        oh, ow = -(-h // sh), -(-w // sw)
        ph, pw = max((oh - 1) * sh + kh - h, 0), max((ow - 1) * sw + kw - w, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    else:
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = np.zeros((n, oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
            out[:, i, j, :] = np.tensordot(patch, k, axes=([1, 2, 3], [0, 1, 2]))
    return out if bias is None else out + bias


def max_pool2d(x: np.ndarray, pool: tuple[int, int], strides: tuple[int, int], padding: str) -> np.ndarray:
    """A direct NHWC window maximum; SAME pads with -inf (the odd pad after), so padding never wins."""
    n, h, w, c = x.shape
    (ph, pw), (sh, sw) = pool, strides
    if padding == "same":
        oh, ow = -(-h // sh), -(-w // sw)
        th, tw = max((oh - 1) * sh + ph - h, 0), max((ow - 1) * sw + pw - w, 0)
        x = np.pad(x, ((0, 0), (th // 2, th - th // 2), (tw // 2, tw - tw // 2), (0, 0)), constant_values=-np.inf)
    else:
        oh, ow = (h - ph) // sh + 1, (w - pw) // sw + 1
    out = np.empty((n, oh, ow, c), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j, :] = x[:, i * sh:i * sh + ph, j * sw:j * sw + pw, :].max(axis=(1, 2))
    return out


def max_pool2d_grad(x: np.ndarray, pool: tuple[int, int], strides: tuple[int, int], padding: str) -> np.ndarray:
    """d sum(max_pool2d(v * x)) / d v at v = 1 for ``v`` of one image's shape: each window's winner gets its x."""
    n, h, w, c = x.shape
    (ph, pw), (sh, sw) = pool, strides
    oh, ow = -(-h // sh), -(-w // sw)
    top, left = max((oh - 1) * sh + ph - h, 0) // 2, max((ow - 1) * sw + pw - w, 0) // 2
    grad = np.zeros((h, w, c))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                r0, c0 = max(i * sh - top, 0), max(j * sw - left, 0)
                window = x[b, r0:i * sh - top + ph, c0:j * sw - left + pw, :]
                for ch in range(c):
                    r, col = np.unravel_index(np.argmax(window[:, :, ch]), window.shape[:2])
                    grad[r0 + r, c0 + col, ch] += x[b, r0 + r, c0 + col, ch]
    return grad


def adam(ws: list, gs: list, ms: list, vs: list, t: int, lr: float, b1: float, b2: float, eps: float) -> tuple:
    """Adam (Kingma & Ba, Algorithm 1) written out: the variables, then m, then v, after one step at ``t``."""
    new_m = [b1 * m + (1 - b1) * g for m, g in zip(ms, gs)]
    new_v = [b2 * v + (1 - b2) * g * g for v, g in zip(vs, gs)]
    new_w = [w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) for w, m, v in zip(ws, new_m, new_v)]
    return (*new_w, *new_m, *new_v)


def rmsprop(ws: list, gs: list, ms: list, mg: list | None, mom: list | None, lr: float, rho: float, mu: float,
                eps: float, outside: bool = False) -> tuple:
    """TF1's RMSProp written out (``outside``: epsilon added to the root, PyTorch's form): the variables, then ms
    (then mg, then mom, when given) after one step."""
    new_ms = [rho * s + (1 - rho) * g * g for s, g in zip(ms, gs)]
    if mg is not None:
        new_mg = [rho * a + (1 - rho) * g for a, g in zip(mg, gs)]
        var = [np.maximum(s - a * a, 0.0) for s, a in zip(new_ms, new_mg)]
    else:
        new_mg, var = [], new_ms
    denom = [np.sqrt(v) + eps if outside else np.sqrt(v + eps) for v in var]
    if mom is not None:
        new_mom = [mu * b + lr * g / d for b, g, d in zip(mom, gs, denom)]
        new_w = [w - b for w, b in zip(ws, new_mom)]
    else:
        new_mom, new_w = [], [w - lr * g / d for w, g, d in zip(ws, gs, denom)]
    return (*new_w, *new_ms, *new_mg, *new_mom)


def scatter(ref: np.ndarray, rows: np.ndarray, updates: np.ndarray) -> np.ndarray:
    out = ref.copy()
    for k, row in enumerate(rows):  # in order: the last repeat wins
        out[row] = updates[k]
    return out


def scan(fn: Callable, elems: Any, init: Any, reverse: bool = False) -> tuple[Any, Any]:
    nested = isinstance(elems, tuple)
    steps = (elems[0] if nested else elems).shape[0]
    carry, carries = init, [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        carry = fn(carry, tuple(e[t] for e in elems) if nested else elems[t])
        carries[t] = carry
    if isinstance(init, tuple):
        stacked = tuple(np.stack([c[i] for c in carries]) if steps else np.zeros((0, *init[i].shape))
                        for i in range(len(init)))
    else:
        stacked = np.stack(carries) if steps else np.zeros((0, *init.shape))
    return carry, stacked
