"""Row scatters into backend variables: the one op the memories need that ``F`` lacks."""

from __future__ import annotations

from typing import Any


def scatter_rows_tf(var: Any, rows: Any, values: Any) -> None:
    """``var[rows[i]] = values[i]`` for a `tf.Variable` (rows: int64 ``[K]``, distinct or equal-valued)."""
    import tensorflow as tf

    var.scatter_nd_update(tf.expand_dims(rows, 1), values)


def scatter_rows_torch(var: Any, rows: Any, values: Any) -> None:
    """``var[rows[i]] = values[i]`` in place for a torch tensor (rows: int64 ``[K]``, distinct or equal-valued)."""
    import torch

    with torch.no_grad():
        var.index_copy_(0, rows, values.to(var.dtype))


def torch_arange(n: int, like: Any) -> Any:
    """``0..n-1`` as int64 on ``like``'s device."""
    import torch

    return torch.arange(n, dtype=torch.int64, device=like.device)


def tf_arange(n: Any) -> Any:
    """``0..n-1`` as int64."""
    import tensorflow as tf

    return tf.range(n, dtype=tf.int64)


def last_of_repeats_tf(rows: Any, values: Any) -> tuple[Any, Any]:
    """``(rows, values)`` with each repeated row kept once, with its last value (sorted by row)."""
    import tensorflow as tf

    order = tf.argsort(rows, stable=True)
    ordered = tf.gather(rows, order)
    last = tf.not_equal(ordered, tf.concat([ordered[1:], tf.constant([-1], ordered.dtype)], 0))
    return tf.boolean_mask(ordered, last), tf.boolean_mask(tf.gather(values, order), last)


def last_of_repeats_torch(rows: Any, values: Any) -> tuple[Any, Any]:
    """``(rows, values)`` with each repeated row kept once, with its last value (sorted by row)."""
    import torch

    ordered, order = torch.sort(rows, stable=True)
    last = ordered != torch.cat([ordered[1:], ordered.new_full((1,), -1)])
    return ordered[last], values[order][last]
