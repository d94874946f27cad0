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


__all__ = ["Backend", "BACKENDS", "get_backend"]
