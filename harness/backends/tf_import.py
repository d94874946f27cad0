"""`import_tensorflow`: TensorFlow without the eager Keras import (outside the `tf` package, whose import
loads TensorFlow: callers that must catch TensorFlow's start-up output import this first)."""

from __future__ import annotations

import os
import sys
from typing import Any

#: The modules whose parent folders TensorFlow 2.21's ``__init__`` puts in front of ``tensorflow.__path__``
#: (so that ``tensorflow.keras`` imports resolve), in the order they end up there.
_KERAS_PATH_MODULES = {False: ("keras.api._v2.keras", "keras._tf_keras.keras"),
                       True: ("tf_keras.api._v2.keras", "keras._tf_keras.keras")}


def _parent_dir_for_name(module_name: str) -> str | None:
    # What TensorFlow's module_util.get_parent_dir_for_name computes: found without importing anything.
    import importlib.util

    top, *rest = module_name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except ValueError:
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.join(os.path.dirname(spec.origin), *rest[:-1])


def import_tensorflow() -> Any:
    """``import tensorflow``, without the eager import of all of Keras that TensorFlow does at its end.

    TensorFlow 2.16+ imports ``keras.src.optimizers`` as the last step of its own import (to
    register Keras optimizers with SavedModel), which loads all of Keras 3 and, through Keras's
    plotting helpers, matplotlib.pyplot: 1.3-1.9 s of a 5.3 s ``import tensorflow`` on the
    dev VM. Nothing here uses Keras. While TensorFlow loads, ``import keras`` raises ImportError
    (TensorFlow catches it, as it does when Keras is not installed); afterwards Keras imports as
    usual: ``tf.keras`` stays the lazy attribute that loads it on first use, and the folders
    TensorFlow could not find for ``tensorflow.keras`` imports (None in ``tensorflow.__path__``)
    are put back. When TensorFlow or Keras is loaded already, this is a plain import.

    Returns:
        The ``tensorflow`` module.
    """
    if "tensorflow" in sys.modules or "keras" in sys.modules:
        import tensorflow

        return tensorflow
    sys.modules["keras"] = None  # type: ignore[assignment]  # `import keras...` raises ImportError meanwhile
    try:
        import tensorflow
    finally:
        if "keras" in sys.modules and sys.modules["keras"] is None:
            del sys.modules["keras"]
    path = getattr(tensorflow, "__path__", None)
    if path is not None:  # the folders TensorFlow looked up while Keras was blocked, as it finds them now
        legacy = os.environ.get("TF_USE_LEGACY_KERAS", None) in ("true", "True", "1")
        for i, module in enumerate(_KERAS_PATH_MODULES[legacy][:len(path)]):
            if path[i] is None:
                path[i] = _parent_dir_for_name(module)
    return tensorflow
