"""Framework thread pools for training: small DQN updates run fastest on one thread on a shared machine."""

from __future__ import annotations

from harness.backends import BACKENDS, set_threads


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
    if backend not in BACKENDS:
        raise ValueError(f"set_framework_threads: backend must be 'tf' or 'torch'; got {backend!r}")
    return set_threads(backend, threads)
