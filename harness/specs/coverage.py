"""Which component and agent classes of a package no spec file names (`spacegraph spec coverage`).

Conventions:

- Every `Component` subclass defined in the package needs a spec naming it as
  ``component:`` under ``specs/components/``, unless the class itself (not a
  base) sets ``spec_exempt = "reason"`` (abstract bases, mixins).
- A class may set ``spec_covers = (OtherClass, ...)``: a spec naming it counts
  for those classes too. Fixture roots and constructor adapters in
  ``reference_agents.oracles.fixtures`` use it for components that cannot be
  a spec's root alone (`Synchronizer`) or take positional arguments.
- Agent classes are the classes under ``<package>.agents`` with ``get_actions``
  and ``update`` methods; each needs a file under ``specs/agents/`` naming it
  as ``agent:`` (or ``component:``). The folder may be absent.
- Every hyperparameter (constructor argument with a default) of a class named
  directly by a component spec must run away from its default in some spec's
  ``config:``; `harness.specs.defaults` says which only ever run at the default.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.graph import Component
from harness.specs.defaults import default_only
from harness.specs.loader import import_object


@dataclass
class CoverageReport:
    """What `coverage` found.

    Attributes:
        components: every non-exempt component class, by dotted path.
        agents: every non-exempt agent class, by dotted path.
        covered: the dotted paths some spec names (directly or via ``spec_covers``).
        exempt: exempt classes with their reasons.
        problems: modules that do not import and spec files that do not read, with why.
        default_only: ``{class path: [hyperparameter, ...]}`` of the specced classes whose
            hyperparameters only ever run at their default.
        default_exempt: ``{class path: {hyperparameter: reason}}`` from ``spec_default_only``.
    """

    components: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    exempt: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    default_only: dict[str, list[str]] = field(default_factory=dict)
    default_exempt: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def missing_components(self) -> list[str]:
        """Component classes no spec names."""
        return [c for c in self.components if c not in self.covered]

    @property
    def missing_agents(self) -> list[str]:
        """Agent classes no spec names."""
        return [a for a in self.agents if a not in self.covered]

    @property
    def ok(self) -> bool:
        """No class lacks a spec and nothing failed to import or read."""
        return not (self.missing_components or self.missing_agents or self.problems or self.default_only)


def class_path(cls: type) -> str:
    """``module.QualName`` of a class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _walk_modules(package: str, problems: list[str]) -> list[Any]:
    try:
        root = importlib.import_module(package)
    except ImportError as exc:
        problems.append(f"package {package!r} does not import: {exc}")
        return []
    modules = [root]
    if not hasattr(root, "__path__"):
        return modules

    def failed(name: str) -> None:
        problems.append(f"module {name!r} does not import")

    for info in pkgutil.walk_packages(root.__path__, prefix=package + ".", onerror=failed):
        try:
            modules.append(importlib.import_module(info.name))
        except Exception as exc:  # a broken module must be reported, whatever it raises
            problems.append(f"module {info.name!r} does not import: {type(exc).__name__}: {exc}")
    return modules


def _classes(modules: list[Any], package: str) -> list[type]:
    seen: dict[str, type] = {}
    for module in modules:
        for obj in vars(module).values():
            if inspect.isclass(obj) and (obj.__module__ == package or obj.__module__.startswith(package + ".")):
                seen.setdefault(class_path(obj), obj)
    return [seen[k] for k in sorted(seen)]


def _is_agent(cls: type) -> bool:
    return callable(getattr(cls, "get_actions", None)) and callable(getattr(cls, "update", None))


def _spec_targets(spec_root: Path, problems: list[str]) -> list[tuple[str, str, str, Any]]:
    """(spec file, kind, dotted class path, config) for every spec under ``spec_root/components`` and ``/agents``."""
    out = []
    for kind, keys in (("components", ("component",)), ("agents", ("agent", "component"))):
        folder = spec_root / kind
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml")):
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as exc:
                problems.append(f"spec {path} does not read: {type(exc).__name__}: {exc}")
                continue
            names = [data.get(k) for k in keys] if isinstance(data, dict) else []
            target = next((n for n in names if isinstance(n, str)), None)
            if target is None:
                problems.append(f"spec {path} names no class ({' or '.join(keys)}: ...)")
            else:
                out.append((str(path), kind, target, data.get("config")))
    return out


def coverage(package: str, spec_root: str | os.PathLike = "specs") -> CoverageReport:
    """Lists the component and agent classes of ``package`` and which specs under ``spec_root`` name them.

    Args:
        package: an importable package; every module under it is imported.
        spec_root: the folder holding ``components/`` (and, optionally, ``agents/``).

    Returns:
        A `CoverageReport`; a spec naming a class that does not import is a problem.
    """
    report = CoverageReport()
    modules = _walk_modules(package, report.problems)
    for cls in _classes(modules, package):
        reason = cls.__dict__.get("spec_exempt")
        is_component = issubclass(cls, Component)
        in_agents = cls.__module__ == f"{package}.agents" or cls.__module__.startswith(f"{package}.agents.")
        if not is_component and not (in_agents and _is_agent(cls)):
            continue
        if reason:
            report.exempt[class_path(cls)] = str(reason)
        elif is_component:
            report.components.append(class_path(cls))
        else:
            report.agents.append(class_path(cls))
    configs: dict[type, list[Any]] = {}
    for spec_file, kind, target, config in _spec_targets(Path(spec_root), report.problems):
        try:
            cls = import_object(target)
        except ImportError as exc:
            report.problems.append(f"spec {spec_file}: class does not import: {exc}")
            continue
        if not inspect.isclass(cls):
            report.problems.append(f"spec {spec_file}: {target} is not a class")
            continue
        report.covered.add(class_path(cls))
        if kind == "components":
            configs.setdefault(cls, []).append(config if isinstance(config, dict) else {})
        for other in cls.__dict__.get("spec_covers", ()):
            report.covered.add(class_path(other))
    for cls, seen in configs.items():
        names, exempt = default_only(cls, seen)
        if names:
            report.default_only[class_path(cls)] = names
        if exempt:
            report.default_exempt[class_path(cls)] = exempt
    return report


def format_report(report: CoverageReport, verbose: bool = False) -> str:
    """The text `spacegraph spec coverage` prints."""
    lines = [f"problem: {p}" for p in report.problems]
    for kind, total, missing in (("component", report.components, report.missing_components),
                                 ("agent", report.agents, report.missing_agents)):
        if missing:
            lines.append(f"{len(missing)} of {len(total)} {kind} classes have no spec:")
            lines += [f"  {name}" for name in missing]
    if not report.missing_components and not report.missing_agents:
        summary = f"all {len(report.components)} component classes have specs"
        if report.agents:
            summary += f"; all {len(report.agents)} agent classes have specs"
        lines.append(summary)
    if report.default_only:
        lines.append(f"{len(report.default_only)} specced classes have hyperparameters that only ever run at "
                     f"their default (set them in some spec's config:):")
        lines += [f"  {name}: {', '.join(params)}" for name, params in sorted(report.default_only.items())]
    if verbose:
        lines += [f"exempt: {name} ({why})" for name, why in sorted(report.exempt.items())]
        lines += [f"default only: {name}.{param} ({why})" for name, params in sorted(report.default_exempt.items())
                  for param, why in sorted(params.items())]
    return "\n".join(lines)
