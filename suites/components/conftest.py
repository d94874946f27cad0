"""Makes ``test_specs.py`` collect one item per spec file, backend and check (see `harness.testing.plugin`)."""

from __future__ import annotations

import os

from harness.testing.plugin import SpecModule

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Workers share the cores: one framework thread each (set before TF/torch are imported).
    for _var in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(_var, "1")


def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name == "test_specs.py":
        return SpecModule.from_parent(parent, path=module_path)
    return None
