"""The backward recursion ``acc_t = x_t + a_t * acc_{t+1}`` over a leading time axis, per backend."""

from __future__ import annotations

from typing import Any


def reverse_recursion(F: Any, x: Any, a: Any) -> Any:
    """``acc_t = x_t + a_t * acc_{t+1}`` with ``acc_T = 0``, by a Python loop over axis 0.

    Works wherever the time size is a Python int at run time (PyTorch, eager
    code); TensorFlow graphs with a dynamic time size use `reverse_recursion_tf`.

    Args:
        F: the backend op namespace.
        x: the summands, time-major ``[T, ...]``.
        a: the per-step factors, of ``x``'s shape.

    Returns:
        ``acc`` of ``x``'s shape.
    """
    steps = int(F.dim(x, 0))
    if steps == 0:
        return F.zeros_like(x)
    acc = F.zeros_like(x[0])
    out = []
    for t in range(steps - 1, -1, -1):
        acc = x[t] + a[t] * acc
        out.append(acc)
    return F.stack(out[::-1], 0)


def reverse_recursion_tf(F: Any, x: Any, a: Any) -> Any:
    """`reverse_recursion` as one ``tf.scan`` (``reverse=True``), for a dynamic time size."""
    import tensorflow as tf

    return tf.scan(lambda acc, xa: xa[0] + xa[1] * acc, (x, a), initializer=tf.zeros(tf.shape(x)[1:], x.dtype),
                   reverse=True)
