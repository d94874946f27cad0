"""Framework thread pools for training: small DQN updates run fastest on one thread on a shared machine."""

from __future__ import annotations


def set_framework_threads(backend: str, threads: int) -> bool:
    """Sets the backend framework's intra- and inter-op thread pools to ``threads``.

    Small DQN updates run fastest on one thread on a shared machine (torch's default
    pool made one update 15x slower under load). TensorFlow accepts this only before it
    has run anything; torch's inter-op pool likewise.

    Args:
        backend: ``"tf"`` or ``"torch"``.
        threads: a positive int.

    Returns:
        True if every setting took effect, False if the framework was already initialised.

    Raises:
        ValueError: for an unknown backend or a non-positive ``threads``.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0:
        raise ValueError(f"set_framework_threads: threads must be a positive int; got {threads!r}")
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:  # only allowed before the first parallel work
            return torch.get_num_interop_threads() == threads
        return True
    if backend == "tf":
        import tensorflow as tf

        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:  # TensorFlow has already been initialised
            return tf.config.threading.get_intra_op_parallelism_threads() == threads
        return True
    raise ValueError(f"set_framework_threads: backend must be 'tf' or 'torch'; got {backend!r}")
