"""The pytest plugin for spec files in any project: ``pytest --spacegraph-specs DIR``.

Installing spacegraph registers this module with pytest (entry point ``spacegraph`` in
``pytest11``); without the entry point (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, a source tree
on ``PYTHONPATH``) load it with ``-p harness.testing.pytest_plugin``. It does nothing
unless spec locations are given:

- ``--spacegraph-specs PATH`` (repeatable): a spec file, or a folder searched like
  `harness.specs.find_specs` (``PATH/components`` when that exists, else ``PATH``, recursively
  for ``*.yaml``/``*.yml``). The locations are collected in addition to pytest's own arguments.
- ``spacegraph_specs`` (ini, one location a line, relative to the ini file's folder): the
  same, collected when pytest runs without path arguments (as ``testpaths`` are).
- ``--spacegraph-backends tf,torch``: the backends (default ``SPACEGRAPH_BACKENDS``, else both).

Every spec file becomes a `harness.testing.plugin.SpecFile` with the checks the component
suite runs (build, in-space, oracle, determinism, stateful, bad-spaces per backend;
parity between the backends), ids ``specs/components/noisy.yaml::oracle[torch]``. A spec
that does not load is one failing ``load`` item listing all its problems.

The classes a spec names import from its project root (`harness.specs.project`): the
nearest folder above the spec holding ``pyproject.toml``, ``setup.cfg``, ``setup.py``,
``pytest.ini``, ``tox.ini`` or ``.git``, and that root's ``src/``; both go to the front of
``sys.path`` before the specs load, so a project's own package is tested from its source
without installing it. Installed packages import as usual.

This module imports only pytest at start-up: it is loaded in every pytest session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

_SPEC_FILES = pytest.StashKey[set]()
_SPEC_LOCATIONS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--spacegraph-specs``, ``--spacegraph-backends`` and the ``spacegraph_specs`` ini option."""
    group = parser.getgroup("spacegraph", "spacegraph spec files")
    group.addoption("--spacegraph-specs", action="append", default=[], metavar="PATH", dest="spacegraph_specs",
                    help="collect the spec checks of the spec files in PATH (a file, or a folder: PATH/components "
                         "when it exists, else PATH); repeatable")
    group.addoption("--spacegraph-backends", default=None, metavar="LIST", dest="spacegraph_backends",
                    help="backends to check, comma-separated (default: SPACEGRAPH_BACKENDS, else tf,torch)")
    parser.addini("spacegraph_specs", type="paths", default=[],
                  help="spec files or folders (one a line, relative to the ini file) collected when pytest "
                       "runs without path arguments, like testpaths")


def spec_locations(config: pytest.Config) -> list[Path]:
    """The spec locations of this session: the command line's, then the ini file's when they apply.

    Raises:
        pytest.UsageError: for a location that does not exist.
    """
    locations = [Path(p).resolve() for p in config.getoption("spacegraph_specs") or []]
    if not locations and config.args_source != pytest.Config.ArgsSource.ARGS:
        locations = [Path(p).resolve() for p in config.getini("spacegraph_specs")]
    for path in locations:
        if not path.exists():
            raise pytest.UsageError(f"spacegraph specs: {path} is neither a spec file nor a folder")
    return list(dict.fromkeys(locations))


def _covered(path: Path, args: list[str]) -> bool:
    for arg in args:
        target = Path(arg.split("::")[0]).resolve()
        if path == target or target in path.parents:
            return True
    return False


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Finds the spec files, makes their project roots importable and adds the locations to the arguments."""
    locations = spec_locations(config)
    config.stash[_SPEC_LOCATIONS] = locations
    if not locations:
        config.stash[_SPEC_FILES] = set()
        return
    from harness.specs import find_specs
    from harness.specs.project import add_import_roots

    files: set[Path] = set()
    for location in locations:
        found = [location] if location.is_file() else [Path(p).resolve() for p in find_specs(location)]
        if not found:
            raise pytest.UsageError(f"spacegraph specs: {location} holds no *.yaml or *.yml spec files")
        files.update(found)
    config.stash[_SPEC_FILES] = files
    add_import_roots([*locations, config.rootpath])
    extra = [str(loc) for loc in locations if not _covered(loc, config.args)]
    if extra:
        config.args = [*config.args, *extra]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    """A `SpecFile` for each spec file under the configured locations; nothing for other files."""
    files = parent.config.stash.get(_SPEC_FILES, set())
    if files and file_path.suffix in (".yaml", ".yml") and file_path.resolve() in files:
        from harness.testing.plugin import SpecFile

        return SpecFile.from_parent(parent, path=file_path)
    return None


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """One header line naming the spec locations (and the backends)."""
    locations = config.stash.get(_SPEC_LOCATIONS, [])
    if not locations:
        return None
    from harness.testing.plugin import selected_backends

    shown = [os.path.relpath(p, config.rootpath) if config.rootpath in p.parents else str(p) for p in locations]
    return [f"spacegraph specs: {', '.join(shown)} (backends: {','.join(selected_backends(config))})"]
