"""Backend selection for the backend suites: ``SPACEGRAPH_BACKENDS=tf,torch`` (default both).

``backends`` lists the selected backends that are installed; a test comparing TF with
PyTorch uses both when both are there.
"""

from __future__ import annotations

import importlib.util

import pytest

from harness.testing.plugin import selected_backends

_KNOWN = {"tf": "tensorflow", "torch": "torch"}


@pytest.fixture
def backends() -> list[str]:
    """All selected backends that are installed."""
    found = [n for n in selected_backends() if importlib.util.find_spec(_KNOWN[n]) is not None]
    if not found:
        pytest.skip("no selected backend is installed")
    return found
