"""`import_tensorflow`: TensorFlow without the eager Keras import (outside the `tf` package, whose import
loads TensorFlow: callers that must catch TensorFlow's start-up output import this first)."""

from __future__ import annotations

import os
import sys
from typing import Any

#: Modules that only TensorFlow's legacy internal Keras (``tensorflow.python.keras``, which its
#: ``feature_column`` API loads; not ``tf.keras``, which is Keras 3) imports while TensorFlow loads, each
#: import in a ``try: ... except ImportError`` (``h5py`` for HDF5 model files, ``scipy`` for
#: ``scipy.sparse.issparse``, which brings in ``numpy.f2py`` too). Leaving them out made TF start-up about 0.2 s
#: shorter here (paired runs, of a ~2.2 s import).
_LEGACY_KERAS_OPTIONAL = ("h5py", "scipy")

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

    The same way, ``h5py`` and ``scipy`` (`_LEGACY_KERAS_OPTIONAL`), when not loaded yet, are
    not importable while TensorFlow loads: only TensorFlow's deprecated internal copy of Keras
    (``tensorflow.python.keras``, not ``tf.keras``) asks for them, and it takes them as not
    installed (it then cannot write HDF5 files nor take ``scipy.sparse`` inputs). Afterwards
    they import as usual. TensorFlow's own guard for h5py (``HDF5_PLUGIN_PATH=disable``) is set
    by TensorFlow before its attempt, so a later ``import h5py`` has it too. While TensorFlow
    loads, another thread importing any of these modules gets an ImportError.

    Returns:
        The ``tensorflow`` module.
    """
    if "tensorflow" in sys.modules or "keras" in sys.modules:
        import tensorflow

        return tensorflow
    # `import keras...` raises ImportError meanwhile, and so do the legacy internal Keras's optional imports
    # of modules not loaded yet (one loaded already is left alone: its module stays in use)
    blocked = ["keras", *(name for name in _LEGACY_KERAS_OPTIONAL if name not in sys.modules)]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import tensorflow
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    path = getattr(tensorflow, "__path__", None)
    if path is not None:  # the folders TensorFlow looked up while Keras was blocked, as it finds them now
        legacy = os.environ.get("TF_USE_LEGACY_KERAS", None) in ("true", "True", "1")
        for i, module in enumerate(_KERAS_PATH_MODULES[legacy][:len(path)]):
            if path[i] is None:
                path[i] = _parent_dir_for_name(module)
    return tensorflow
