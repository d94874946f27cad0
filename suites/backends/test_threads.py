"""Framework thread pools through the backend layer (`harness.backends.set_threads` / `get_threads`)."""

from __future__ import annotations

import importlib.util

import pytest

from harness.backends import get_threads, set_threads
from harness.measure.machine import configure_threads
from reference_agents.training import set_framework_threads


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_thread_counts_must_be_positive_ints(bad):
    with pytest.raises(ValueError, match="threads must be a positive int"):
        set_threads("torch", bad)
    with pytest.raises(ValueError, match="set_framework_threads: threads must be a positive int"):
        set_framework_threads("torch", bad)


def test_unknown_backends_are_named():
    with pytest.raises(ValueError, match="unknown backend 'jax'"):
        set_threads("jax", 1)
    with pytest.raises(ValueError, match="set_framework_threads: backend must be 'tf' or 'torch'; got 'jax'"):
        set_framework_threads("jax", 1)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_pools_are_set_and_read_back():
    current = get_threads("torch")["intra_op"]
    assert set_threads("torch", current, inter_op=False) is True   # the current count: harmless to the process
    assert get_threads("torch")["intra_op"] == current
    assert configure_threads(current)["torch"] == current


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")
def test_tf_pools_cannot_change_once_the_runtime_has_started():
    import tensorflow as tf

    (tf.constant(1.0) + 1.0).numpy()                                 # the runtime is started now
    intra = get_threads("tf")["intra_op"]
    assert set_threads("tf", intra + 1) is False                     # refused: reported, not raised
    assert get_threads("tf")["intra_op"] == intra
    if intra > 0:
        assert set_threads("tf", intra) is True
    settings = configure_threads(intra + 1)
    assert settings["tf_intra_op"] == intra                          # kept and reported
