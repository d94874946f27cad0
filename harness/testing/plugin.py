"""Pytest collection of spec checks: one item per spec file, backend and check.

A test module becomes a spec module through ``pytest_pycollect_makemodule`` in a
``conftest.py``; the module names its spec folder in ``SPEC_ROOT``::

    # conftest.py
    from harness.testing.plugin import SpecModule

    def pytest_pycollect_makemodule(module_path, parent):
        if module_path.name == "test_specs.py":
            return SpecModule.from_parent(parent, path=module_path)

    # test_specs.py
    SPEC_ROOT = pathlib.Path(__file__).parents[2] / "specs" / "components"

Item ids read ``test_specs.py::dense::oracle[torch]`` and, for the one parity item
of a spec, ``test_specs.py::dense::parity[tf-torch]``. ``SPACEGRAPH_BACKENDS``
(a comma list, default ``tf,torch``) selects the backends. A spec that does not
load gives one failing item ``NAME::load`` instead of stopping the collection.

Outside this repository the spec files themselves are collected (`SpecFile`, ids
``specs/components/noisy.yaml::oracle[torch]``) by the pytest plugin
`harness.testing.pytest_plugin` (``pytest --spacegraph-specs DIR``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from harness.specs import LoadedSpec, SpecError, find_specs, load_spec
from harness.testing.parity import check_determinism, check_oracle, check_parity
from harness.testing.spec_checks import (
    SpecCheckError, check_bad_configs, check_bad_spaces, check_build, check_in_space, stateless_methods,
)
from harness.testing.stateful import check_stateful

__all__ = ["SpecModule", "SpecFile", "CHECKS", "selected_backends", "applicable_checks"]

_MODULES = {"tf": "tensorflow", "torch": "torch"}

#: The per-backend checks, in the order their items are collected.
CHECKS: dict[str, Callable[[LoadedSpec, str], None]] = {
    "build": check_build,
    "in-space": check_in_space,
    "oracle": check_oracle,
    "determinism": check_determinism,
    "stateful": check_stateful,
    "bad-spaces": check_bad_spaces,
    "bad-configs": check_bad_configs,
}


def selected_backends(config: pytest.Config | None = None) -> list[str]:
    """The backends named by ``--spacegraph-backends`` or else ``SPACEGRAPH_BACKENDS`` (comma lists).

    Default ``tf,torch``.

    Raises:
        pytest.UsageError: for an unknown backend name.
    """
    option = config.getoption("spacegraph_backends", None) if config is not None else None
    source = "--spacegraph-backends" if option else "SPACEGRAPH_BACKENDS"
    raw = (option or os.environ.get("SPACEGRAPH_BACKENDS", "")).strip() or "tf,torch"
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in _MODULES]
    if unknown:
        raise pytest.UsageError(f"{source} names unknown backend(s) {unknown}; known: {sorted(_MODULES)}")
    return list(dict.fromkeys(names))


def applicable_checks(spec: LoadedSpec) -> list[str]:
    """The per-backend checks that apply to ``spec`` (e.g. ``oracle`` only with an oracle)."""
    methods = spec.spec.methods
    stateless = stateless_methods(spec)
    wanted = {
        "build": True,
        "in-space": any(methods[m].output_space is not None for m in stateless),
        "oracle": any(m in spec.oracles for m in stateless),
        "determinism": True,
        "stateful": spec.spec.stateful is not None,
        "bad-spaces": bool(spec.spec.bad_spaces),
        "bad-configs": bool(spec.spec.bad_configs),
    }
    return [name for name in CHECKS if wanted[name]]


class SpecModule(pytest.Module):
    """A test module that also collects the checks of every spec under its ``SPEC_ROOT``."""

    def collect(self) -> list[Any]:
        items = list(super().collect())
        root = getattr(self.obj, "SPEC_ROOT", None)
        if root is None:
            raise self.CollectError(f"{self.path.name}: a spec module must set SPEC_ROOT (the spec folder)")
        if not Path(root).is_dir():
            raise self.CollectError(f"{self.path.name}: SPEC_ROOT {str(root)!r} is not a folder")
        backends = selected_backends(self.config)
        for path in find_specs(root):
            items.extend(_spec_nodes(self, path, backends))
        return items


def _spec_nodes(parent: pytest.Collector, path: str, backends: list[str]) -> Iterator[pytest.Collector]:
    name = Path(path).stem
    try:
        spec = load_spec(path)
    except SpecError as exc:
        yield SpecGroup.from_parent(parent, name=name, spec=None, backends=[], error=exc)
        return
    yield SpecGroup.from_parent(parent, name=name, spec=spec, backends=[b for b in spec.spec.backends if b in backends])


def _check_items(parent: pytest.Collector, spec: LoadedSpec | None, backends: list[str],
                 error: Exception | None) -> list[pytest.Item]:
    """``CHECK[BACKEND]`` items and ``parity[tf-torch]`` under ``parent`` (``load`` for a spec that does not load)."""
    if spec is None:
        return [SpecItem.from_parent(parent, name="load", spec=None, check="load", backends=(), error=error)]
    items = [SpecItem.from_parent(parent, name=f"{check}[{backend}]", spec=spec, check=check, backends=(backend,))
             for check in applicable_checks(spec) for backend in backends]
    if {"tf", "torch"} <= set(backends):
        items.append(SpecItem.from_parent(parent, name="parity[tf-torch]", spec=spec, check="parity",
                                          backends=("tf", "torch")))
    return items


class SpecFile(pytest.File):
    """A spec file collected by itself: ``noisy.yaml::build[tf]`` ... ``noisy.yaml::parity[tf-torch]``.

    Made by `harness.testing.pytest_plugin` for the files under ``--spacegraph-specs``; the
    same checks as a `SpecGroup`, with the file's own path as the id's first part.
    """

    def collect(self) -> list[pytest.Item]:
        try:
            spec: LoadedSpec | None = load_spec(self.path)
            error: Exception | None = None
        except SpecError as exc:
            spec, error = None, exc
        backends = [] if spec is None else [b for b in spec.spec.backends if b in selected_backends(self.config)]
        return _check_items(self, spec, backends, error)


class SpecGroup(pytest.Collector):
    """The checks of one spec (``dense``): ``CHECK[BACKEND]`` items and ``parity[tf-torch]``.

    The backend goes last, in brackets, as pytest's own parametrization does: a node
    id such as ``test_specs.py::dense::oracle[torch]`` can be passed back to pytest,
    and ``test_specs.py::dense::oracle`` selects the check on every backend.
    """

    def __init__(self, *, spec: LoadedSpec | None, backends: list[str], error: Exception | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.backends, self.error = spec, backends, error

    def collect(self) -> list[pytest.Item]:
        return _check_items(self, self.spec, self.backends, self.error)


class SpecItem(pytest.Item):
    """One check of one spec on one backend (or the backend pair, for parity)."""

    def __init__(self, *, spec: LoadedSpec | None, check: str, backends: tuple[str, ...],
                 error: Exception | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.check, self.backends, self.error = spec, check, backends, error
        for backend in backends:
            if importlib.util.find_spec(_MODULES[backend]) is None:
                self.add_marker(pytest.mark.skip(reason=f"{_MODULES[backend]} is not installed"))

    def runtest(self) -> None:
        if self.error is not None:
            raise SpecCheckError(str(self.error))
        if self.check == "parity":
            check_parity(self.spec)
        else:
            CHECKS[self.check](self.spec, self.backends[0])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        exc = excinfo.value
        if isinstance(exc, SpecCheckError):
            notes = "\n".join(getattr(exc, "__notes__", ()))
            return str(exc) + (f"\n{notes}" if notes else "")
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        path = self.spec.path if self.spec is not None else getattr(self.error, "file", self.path)
        # pytest shows the domain with its dots as '::': a spec file's own name ('noisy.yaml') stays out
        return path, None, self.name if isinstance(self.parent, SpecFile) else f"{self.parent.name}::{self.name}"
