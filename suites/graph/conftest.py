"""Backend selection for the graph suites: ``SPACEGRAPH_BACKENDS=tf,torch`` (default both).

A test that takes a ``backend`` argument runs once per selected backend; ``backends``
is the list itself, for tests that compare backends with each other.
"""

from __future__ import annotations

import importlib.util

import pytest

from harness.testing.plugin import selected_backends

_KNOWN = {"tf": "tensorflow", "torch": "torch"}


def _param(name: str) -> object:
    missing = importlib.util.find_spec(_KNOWN[name]) is None
    marks = [pytest.mark.skip(reason=f"{_KNOWN[name]} is not installed")] if missing else []
    return pytest.param(name, id=name, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", [_param(n) for n in selected_backends()])


@pytest.fixture
def backends() -> list[str]:
    """All selected backends that are installed."""
    return [n for n in selected_backends() if importlib.util.find_spec(_KNOWN[n]) is not None]


@pytest.fixture
def both_backends(backends: list[str]) -> tuple[str, str]:
    """``("tf", "torch")``; skips the test unless both are selected and installed."""
    if set(backends) != {"tf", "torch"}:
        pytest.skip("needs both backends (SPACEGRAPH_BACKENDS=tf,torch)")
    return "tf", "torch"
