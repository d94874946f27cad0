"""Backends: TensorFlow and PyTorch, chosen per executor; imported lazily."""

from __future__ import annotations

from harness.backends.base import Backend

BACKENDS = ("tf", "torch")


def get_backend(name: str, seed: int = 0) -> Backend:
    """A new backend instance by name (``"tf"`` or ``"torch"``).

    Raises:
        ValueError: for an unknown name, listing the known ones.
        ImportError: if the framework is not installed, naming the pip extra.
    """
    if name == "tf":
        try:
            from harness.backends.tf.backend import TFBackend
        except ImportError as exc:
            raise ImportError(f"backend 'tf' needs tensorflow: pip install 'spacegraph[tf]' ({exc})") from exc
        return TFBackend(seed)
    if name in ("torch", "pytorch"):
        try:
            from harness.backends.torch.backend import TorchBackend
        except ImportError as exc:
            raise ImportError(f"backend 'torch' needs torch: pip install 'spacegraph[torch]' ({exc})") from exc
        return TorchBackend(seed)
    raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")


def _threads_module(name: str):
    """The thread-pool module of a backend (it imports only the framework, not the backend)."""
    if name == "tf":
        from harness.backends.tf import threads
    elif name in ("torch", "pytorch"):
        from harness.backends.torch import threads
    else:
        raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    return threads


def set_threads(name: str, threads: int, inter_op: bool = True) -> bool:
    """Sets a backend framework's CPU thread pools (intra-op, and inter-op with ``inter_op``).

    Small models (DQN updates, act calls) run fastest on one thread on a shared machine; both
    frameworks accept some of these settings only before their first op.

    Returns:
        True if every pool asked for now has ``threads``, False if the framework had started already.

    Raises:
        ValueError: for an unknown backend name or a ``threads`` that is not a positive int.
        ImportError: if the framework is not installed.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0:
        raise ValueError(f"set_threads: threads must be a positive int; got {threads!r}")
    return _threads_module(name).set_threads(threads, inter_op)


def get_threads(name: str) -> dict[str, int]:
    """A backend framework's ``{"intra_op": n, "inter_op": n}`` (TensorFlow: 0 is its default, all cores)."""
    return _threads_module(name).get_threads()


__all__ = ["Backend", "BACKENDS", "get_backend", "get_threads", "set_threads"]
