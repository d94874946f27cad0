"""`harness.backends.tf_import.import_tensorflow`: TensorFlow without its eager Keras import, and nothing
else changed (each check in a fresh interpreter: the import happens once per process)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="tensorflow is not installed")

_REPORT = """
import json, sys
keras_after_tf = "keras" in sys.modules  # the prelude imported TensorFlow
import tensorflow as tf
path = list(tf.__path__)
from tensorflow.keras import layers   # resolved through the folders in tf.__path__
dense = tf.keras.layers.Dense(3)       # the lazy tf.keras attribute loads Keras now
import keras
print(json.dumps({"keras_after_tf": keras_after_tf, "path": path, "layers": layers.Dense.__module__,
                  "dense": type(dense).__module__, "keras": keras.__version__, "x": float(tf.reduce_sum([1., 2.]))}))
"""


def _run(prelude: str, report: str = _REPORT) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("HDF5_PLUGIN_PATH", None)  # (what TensorFlow's import sets it to is checked below)
    done = subprocess.run([sys.executable, "-c", prelude + report], capture_output=True, text=True, timeout=180,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_tensorflow_loads_without_keras_and_keras_still_imports_afterwards():
    plain = _run("import tensorflow\n")
    ours = _run("from harness.backends.tf_import import import_tensorflow\nimport_tensorflow()\n")
    assert plain["keras_after_tf"] is True, "TensorFlow no longer imports Keras eagerly: import_tensorflow is moot"
    assert ours["keras_after_tf"] is False, "import_tensorflow let TensorFlow import Keras"
    assert None not in ours["path"] and ours["path"] == plain["path"], (ours["path"], plain["path"])
    for key in ("layers", "dense", "keras", "x"):
        assert ours[key] == plain[key], (key, ours[key], plain[key])


def test_the_backend_package_and_an_earlier_keras_import():
    through_backend = _run("import harness.backends.tf.ops\n")
    assert through_backend["keras_after_tf"] is False
    keras_first = _run("import keras\nfrom harness.backends.tf_import import import_tensorflow\n"
                       "import_tensorflow()\n")  # Keras loaded already: a plain import, Keras untouched
    assert keras_first["keras_after_tf"] is True and None not in keras_first["path"]


_OPTIONAL_REPORT = """
import json, os, sys
loaded = {name: name in sys.modules for name in NAMES}  # after the prelude imported TensorFlow
import importlib
modules = {name: importlib.import_module(name).__name__ for name in NAMES}
if "scipy" in NAMES:
    import scipy.sparse
    modules["scipy.sparse"] = scipy.sparse.__name__
print(json.dumps({"loaded": loaded, "modules": modules, "hdf5_plugins": os.environ.get("HDF5_PLUGIN_PATH"),
                  "x": float(__import__("tensorflow").reduce_sum([1., 2.]))}))
"""


def _installed_optional() -> list[str]:
    from harness.backends.tf_import import _LEGACY_KERAS_OPTIONAL

    return [name for name in _LEGACY_KERAS_OPTIONAL if importlib.util.find_spec(name) is not None]


def _run_optional(prelude: str, names: list[str]) -> dict:
    return _run(f"NAMES = {names!r}\n" + prelude, _OPTIONAL_REPORT)


def test_the_legacy_keras_optional_modules_are_not_loaded_and_import_afterwards():
    names = _installed_optional()
    if not names:
        pytest.skip("neither h5py nor scipy is installed: nothing to leave out")
    plain = _run_optional("import tensorflow\n", names)
    assert all(plain["loaded"].values()), f"a plain TensorFlow import no longer loads {plain['loaded']}: moot"
    ours = _run_optional("from harness.backends.tf_import import import_tensorflow\nimport_tensorflow()\n", names)
    assert not any(ours["loaded"].values()), f"import_tensorflow let TensorFlow load {ours['loaded']}"
    assert ours["modules"] == plain["modules"] and ours["x"] == plain["x"] == 3.0
    # TensorFlow sets its HDF5 guard before it tries h5py: a later h5py import runs under it too
    if "h5py" in names:
        assert ours["hdf5_plugins"] == plain["hdf5_plugins"] == "disable"


def test_an_optional_module_loaded_before_tensorflow_is_left_in_place():
    names = _installed_optional()
    if not names:
        pytest.skip("neither h5py nor scipy is installed")
    first = names[0]
    prelude = (f"import {first}\nbefore = sys.modules[{first!r}]\n"
               "from harness.backends.tf_import import import_tensorflow\nimport_tensorflow()\n"
               f"assert sys.modules[{first!r}] is before\n")
    report = _run_optional("import sys\n" + prelude, names)
    assert report["loaded"][first] is True and report["modules"][first] == first
