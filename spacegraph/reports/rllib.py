"""Importing RLlib beside our TensorFlow backend, and saying why it cannot be imported."""

from __future__ import annotations

import importlib

INSTALL_HINT = "pip install -e '.[peers]'"


def import_rllib_safely() -> None:
    """Imports TensorFlow (when installed) before RLlib.

    RLlib's ``try_import_tf`` calls ``tf.compat.v1.disable_v2_behavior()`` when it is
    the first to import TensorFlow, which switches eager execution off for the whole
    process and breaks our TF backend (its API functions then return symbolic
    tensors). With TensorFlow already imported, RLlib leaves it alone.
    """
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        pass


def rllib_missing(*modules: str) -> str | None:
    """None when the RLlib ``modules`` import (TensorFlow first, see `import_rllib_safely`), else why not."""
    import_rllib_safely()
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as exc:
        return f"ray[rllib] is not installed ({exc}); {INSTALL_HINT}"
    return None
