"""Makes ``test_specs.py`` collect one item per spec file, check and backend (see `harness.testing.plugin`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.testing.plugin import SpecModule

def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """``test_specs.py`` becomes a `SpecModule`; other modules are collected as usual."""
    if module_path.name == "test_specs.py":
        return SpecModule.from_parent(parent, path=module_path)
    return None
