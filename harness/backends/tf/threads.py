"""TensorFlow's CPU thread pools (imports only TensorFlow: setting them must precede its first op)."""

from __future__ import annotations

import tensorflow as tf


def set_threads(threads: int, inter_op: bool = True) -> bool:
    """Sets the intra-op (and, with ``inter_op``, the inter-op) pool to ``threads``.

    TensorFlow accepts this only before its runtime has started; afterwards its settings stay.

    Returns:
        True if the pools now have ``threads`` (set now, or already so).
    """
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        if inter_op:
            tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # the runtime has already started
        return tf.config.threading.get_intra_op_parallelism_threads() == threads
    return True


def get_threads() -> dict[str, int]:
    """``{"intra_op": n, "inter_op": n}``; 0 means TensorFlow's default (all cores)."""
    return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
