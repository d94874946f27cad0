"""Loading and validating spec files, with errors located by file and key path."""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import ValidationError

from harness.specs.schema import ComponentSpec
from harness.spaces import Space, parse


class SpecError(ValueError):
    """A spec file is invalid: names the file, the key path inside it and what was expected."""

    def __init__(self, file: str, problems: list[tuple[str, str]]) -> None:
        self.file = file
        self.problems = problems
        lines = [f"{file}: {len(problems)} problem(s)"] + [f"  {path or '<top>'}: {msg}" for path, msg in problems]
        super().__init__("\n".join(lines))


def import_object(path: str) -> Any:
    """An object from ``"package.module.name"`` or ``"package.module:name"``."""
    if ":" in path:
        module, _, name = path.partition(":")
    else:
        module, _, name = path.rpartition(".")
    if not module or not name:
        raise ImportError(f"{path!r} is not a dotted path like 'package.module.name'")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"cannot import module {module!r}: {exc}") from None
    try:
        return getattr(mod, name)
    except AttributeError:
        raise ImportError(f"module {module!r} has no attribute {name!r}") from None


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with its imports resolved."""

    path: str
    name: str                     # file stem, used in test ids
    spec: ComponentSpec
    component_class: type
    oracles: dict[str, Callable]  # method -> oracle
    stateful_model: type | None

    @property
    def input_spaces(self) -> dict[str, Space]:
        """The root API argument spaces, parsed."""
        return {k: parse(v) for k, v in self.spec.input_spaces.items()}

    def output_space(self, method: str) -> Space | None:
        """The declared output space of ``method`` (None if not declared)."""
        text = self.spec.methods[method].output_space
        return None if text is None else parse(text)

    def make(self) -> Any:
        """A fresh component instance from the spec's class and config."""
        return self.component_class(**self.spec.config)


def _loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def read_spec_mapping(path: str) -> dict[str, Any]:
    """The YAML mapping in a spec file; `SpecError` naming the file when it does not read or is no mapping."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except UnicodeDecodeError as exc:
        raise SpecError(path, [("", f"not a text file (UTF-8): {exc}")]) from None
    except OSError as exc:
        raise SpecError(path, [("", f"cannot read the file: {exc}")]) from None
    except (yaml.YAMLError, RecursionError) as exc:
        why = exc if isinstance(exc, yaml.YAMLError) else "nested too deep"
        raise SpecError(path, [("", f"not valid YAML: {why}")]) from None
    if not isinstance(data, dict):
        raise SpecError(path, [("", f"expected a mapping at the top, got {type(data).__name__}")])
    return data


def load_spec(path: str | os.PathLike) -> LoadedSpec:
    """Reads, validates and resolves one spec file.

    Every problem is reported at once: the schema's (structure, space texts), and the
    imports and cross-checks of every key the schema did not reject (the class, its API
    methods, oracles, the model, argument names, the config against the constructor).

    Raises:
        SpecError: listing every problem with its key path.
    """
    path = str(path)
    data = read_spec_mapping(path)
    spec: ComponentSpec | None = None
    try:
        spec = ComponentSpec.model_validate(data)
        problems: list[tuple[str, str]] = []
    except ValidationError as exc:
        problems = _schema_problems(exc)
    rejected = {key for key, _ in problems if key}

    def clean(key: str) -> bool:
        """No schema problem at ``key`` or at a key around it (problems inside it are reported by themselves)."""
        return not any(r == key or key.startswith(r + ".") for r in rejected)

    resolved, cross = _resolve(data, clean)
    problems += cross
    if resolved.cls is not None:
        problems += _lint(resolved, data, clean)
    if problems:
        raise SpecError(path, problems)
    assert spec is not None  # no problem means the schema accepted it
    return LoadedSpec(path, Path(path).stem, spec, resolved.cls, resolved.oracles, resolved.model)


def _schema_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """``(key path, message)`` for each of pydantic's errors, one per bad space value."""
    problems = []
    union_types = ("string_type", "dict_type", "list_type")
    seen_union: set[str] = set()
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        if "input" in err and err["type"] not in ("missing", "value_error"):
            got = repr(err["input"])
            msg += f" (got {got[:80] + '...' if len(got) > 80 else got})"
        loc = tuple(p for p in err["loc"] if p not in ("str", "dict[str,any]", "list[any]"))
        if err["type"] in union_types and len(loc) < len(err["loc"]):
            # one bad space value fails each branch of the text/mapping/list union: say it once
            if _loc(loc) in seen_union:
                continue
            seen_union.add(_loc(loc))
            msg = f"expected space text, a mapping or a list (got {err['input']!r})"
        problems.append((_loc(loc), msg))
    return problems


@dataclass
class _Resolved:
    cls: Any = None
    api_specs: dict[str, Any] | None = None
    oracles: dict[str, Callable] | None = None
    model: Any = None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _resolve(data: dict[str, Any], clean: Callable[[str], bool]) -> tuple[_Resolved, list[tuple[str, str]]]:
    """Imports what the spec names and cross-checks names, on the raw mapping (keys ``clean`` allows)."""
    problems: list[tuple[str, str]] = []
    out = _Resolved(oracles={})
    component = data.get("component")
    if isinstance(component, str) and clean("component"):
        try:
            cls = import_object(component)
        except ImportError as exc:
            problems.append(("component", f"class does not import: {exc}"))
        else:
            from harness.graph import Component

            if isinstance(cls, type) and issubclass(cls, Component):
                out.cls, out.api_specs = cls, cls.api_specs()
            else:
                problems.append(("component", f"{component} is not a spacegraph Component class"))
    cls, api_specs = out.cls, out.api_specs or {}
    methods = _mapping(data.get("methods")) if clean("methods") else {}
    for method in methods:
        if cls is not None and method not in api_specs and clean(f"methods.{method}"):
            problems.append((f"methods.{method}", f"{cls.__name__} declares no API method {method!r}; "
                             f"it declares {sorted(api_specs)}"))
    for method, mspec in methods.items():
        oracle = _mapping(mspec).get("oracle")
        if isinstance(oracle, str) and oracle and clean(f"methods.{method}.oracle"):
            try:
                out.oracles[method] = import_object(oracle)
            except ImportError as exc:
                problems.append((f"methods.{method}.oracle", f"oracle does not import: {exc}"))
    stateful = data.get("stateful")
    if isinstance(stateful, dict):
        model = stateful.get("model")
        if isinstance(model, str) and clean("stateful.model"):
            try:
                out.model = import_object(model)
            except ImportError as exc:
                problems.append(("stateful.model", f"model does not import: {exc}"))
        rules = stateful.get("methods") if clean("stateful.methods") else None
        for i, m in enumerate(rules if isinstance(rules, list) else []):
            if not clean(f"stateful.methods.{i}"):
                continue
            if cls is not None and m not in api_specs:
                problems.append((f"stateful.methods.{i}", f"{cls.__name__} declares no API method {m!r}"))
            elif m not in methods and clean("methods"):
                problems.append((f"stateful.methods.{i}", f"{m!r} is not under methods: list it there (with "
                                 f"stateful: true where it changes state) so that it is built"))
    spaces = data.get("input_spaces")
    if cls is not None and methods and isinstance(spaces, dict) and clean("input_spaces"):
        args = {a for m in methods if m in api_specs for a in api_specs[m].arg_names}
        defaults = {a for m in methods if m in api_specs for a in api_specs[m].defaults}
        for a in sorted(args - set(spaces) - defaults):
            problems.append(("input_spaces", f"no space for argument {a!r} of the exercised methods"))
        for a in sorted(set(spaces) - args):
            problems.append((f"input_spaces.{a}", f"no exercised API method takes an argument {a!r}"))
    return out, problems


def _lint(resolved: _Resolved, data: dict[str, Any], clean: Callable[[str], bool]) -> list[tuple[str, str]]:
    """Checks beyond the imports that the spec checks rely on.

    The config must fit and pass the constructor, ``deterministic_inputs``
    and ``bad_spaces`` must name arguments the spec feeds, and each ``bad_configs``
    entry must name constructor arguments (whether it is refused is the
    ``bad-configs`` check's business, not the loader's).

    Args:
        resolved: the imported class and its API specs.
        data: the spec file's mapping.
        clean: whether a key path is free of schema problems.

    Returns:
        ``(key path, problem)`` pairs; empty when the spec is fine.
    """
    problems = []
    cls, api_specs = resolved.cls, resolved.api_specs or {}
    config = data.get("config", {})
    if isinstance(config, dict) and clean("config"):
        try:
            inspect.signature(cls).bind(**config)
        except TypeError as exc:
            params = [p for p in inspect.signature(cls).parameters.values()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            problems.append(("config", f"does not fit {cls.__name__}"
                             f"({', '.join(p.name for p in params)}): {exc}"))
        else:
            try:
                cls(**config)
            except Exception as exc:  # the constructor's own argument checks, whatever they raise
                problems.append(("config", f"{cls.__name__}(**config) raised {type(exc).__name__}: {exc}"))
    bad_configs = data.get("bad_configs")
    if isinstance(bad_configs, list) and clean("bad_configs"):
        params = [p for p in inspect.signature(cls).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        names = [p.name for p in params]
        takes_any = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(cls).parameters.values())
        for i, entry in enumerate(bad_configs):
            for arg in _mapping(entry):
                if arg not in names and not takes_any and clean(f"bad_configs.{i}.{arg}"):
                    problems.append((f"bad_configs.{i}.{arg}", f"not an argument of {cls.__name__}"
                                     f"({', '.join(names)})"))
    methods = _mapping(data.get("methods"))
    for method, mspec in methods.items():
        fixed = _mapping(mspec).get("deterministic_inputs")
        if method not in api_specs or not isinstance(fixed, dict) or not clean(f"methods.{method}.deterministic_inputs"):
            continue
        for arg in fixed:
            if arg not in api_specs[method].arg_names and clean(f"methods.{method}.deterministic_inputs.{arg}"):
                problems.append((f"methods.{method}.deterministic_inputs.{arg}", f"not an argument of {method!r} "
                                 f"(expected one of {list(api_specs[method].arg_names)})"))
    spaces = data.get("input_spaces")
    bad_spaces = data.get("bad_spaces")
    if isinstance(spaces, dict) and isinstance(bad_spaces, list) and clean("input_spaces"):
        for i, entry in enumerate(bad_spaces):
            for arg in _mapping(entry):
                if arg not in spaces and clean(f"bad_spaces.{i}.{arg}"):
                    problems.append((f"bad_spaces.{i}.{arg}", f"not an argument in input_spaces "
                                     f"(expected one of {sorted(spaces)})"))
    return problems


def find_specs(root: str | os.PathLike, kind: str = "components") -> list[str]:
    """Every ``*.yaml``/``*.yml`` under ``root/kind`` (or under ``root`` if it is that folder), sorted."""
    base = Path(root)
    if (base / kind).is_dir():
        base = base / kind
    return sorted(str(p) for p in base.rglob("*.y*ml"))
