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
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise SpecError(path, [("", f"cannot read the file: {exc}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError(path, [("", f"not valid YAML: {exc}")]) from None
    if not isinstance(data, dict):
        raise SpecError(path, [("", f"expected a mapping at the top, got {type(data).__name__}")])
    return data


def load_spec(path: str | os.PathLike) -> LoadedSpec:
    """Reads, validates and resolves one spec file.

    Raises:
        SpecError: listing every problem with its key path.
    """
    path = str(path)
    data = read_spec_mapping(path)
    try:
        spec = ComponentSpec.model_validate(data)
    except ValidationError as exc:
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
        raise SpecError(path, problems) from None
    problems: list[tuple[str, str]] = []
    cls: Any = None
    try:
        cls = import_object(spec.component)
    except ImportError as exc:
        problems.append(("component", f"class does not import: {exc}"))
    api_specs: dict[str, Any] = {}
    if cls is not None:
        from harness.graph import Component

        if not (isinstance(cls, type) and issubclass(cls, Component)):
            problems.append(("component", f"{spec.component} is not a spacegraph Component class"))
            cls = None
        else:
            api_specs = cls.api_specs()
    for method in spec.methods:
        if cls is not None and method not in api_specs:
            problems.append((f"methods.{method}", f"{cls.__name__} declares no API method {method!r}; "
                             f"it declares {sorted(api_specs)}"))
    oracles: dict[str, Callable] = {}
    for method, mspec in spec.methods.items():
        if mspec.oracle:
            try:
                oracles[method] = import_object(mspec.oracle)
            except ImportError as exc:
                problems.append((f"methods.{method}.oracle", f"oracle does not import: {exc}"))
    model = None
    if spec.stateful is not None:
        try:
            model = import_object(spec.stateful.model)
        except ImportError as exc:
            problems.append(("stateful.model", f"model does not import: {exc}"))
        for i, m in enumerate(spec.stateful.methods):
            if cls is not None and m not in api_specs:
                problems.append((f"stateful.methods.{i}", f"{cls.__name__} declares no API method {m!r}"))
            elif m not in spec.methods:
                problems.append((f"stateful.methods.{i}", f"{m!r} is not under methods: list it there (with "
                                 f"stateful: true where it changes state) so that it is built"))
    if cls is not None:
        args = {a for m in spec.methods if m in api_specs for a in api_specs[m].arg_names}
        defaults = {a for m in spec.methods if m in api_specs for a in api_specs[m].defaults}
        for a in sorted(args - set(spec.input_spaces) - defaults):
            problems.append(("input_spaces", f"no space for argument {a!r} of the exercised methods"))
        for a in sorted(set(spec.input_spaces) - args):
            problems.append((f"input_spaces.{a}", f"no exercised API method takes an argument {a!r}"))
    if problems:
        raise SpecError(path, problems)
    loaded = LoadedSpec(path, Path(path).stem, spec, cls, oracles, model)
    problems = _lint(loaded)
    if problems:
        raise SpecError(path, problems)
    return loaded


def _lint(loaded: LoadedSpec) -> list[tuple[str, str]]:
    """Checks beyond `load_spec` that the spec checks rely on.

    The config must fit and pass the constructor, and ``deterministic_inputs``
    and ``bad_spaces`` must name arguments the spec feeds.

    Args:
        loaded: a `LoadedSpec`.

    Returns:
        ``(key path, problem)`` pairs; empty when the spec is fine.
    """
    problems = []
    spec = loaded.spec
    try:
        inspect.signature(loaded.component_class).bind(**spec.config)
    except TypeError as exc:
        params = [p for p in inspect.signature(loaded.component_class).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        problems.append(("config", f"does not fit {loaded.component_class.__name__}"
                         f"({', '.join(p.name for p in params)}): {exc}"))
    else:
        try:
            loaded.make()
        except Exception as exc:  # the constructor's own argument checks, whatever they raise
            problems.append(("config", f"{loaded.component_class.__name__}(**config) raised "
                             f"{type(exc).__name__}: {exc}"))
    api_specs = loaded.component_class.api_specs()
    for method, mspec in spec.methods.items():
        for arg in mspec.deterministic_inputs or {}:
            if arg not in api_specs[method].arg_names:
                problems.append((f"methods.{method}.deterministic_inputs.{arg}", f"not an argument of {method!r} "
                                 f"(expected one of {list(api_specs[method].arg_names)})"))
    for i, entry in enumerate(spec.bad_spaces):
        for arg in entry:
            if arg not in spec.input_spaces:
                problems.append((f"bad_spaces.{i}.{arg}", f"not an argument in input_spaces "
                                 f"(expected one of {sorted(spec.input_spaces)})"))
    return problems


def find_specs(root: str | os.PathLike, kind: str = "components") -> list[str]:
    """Every ``*.yaml``/``*.yml`` under ``root/kind`` (or under ``root`` if it is that folder), sorted."""
    base = Path(root)
    if (base / kind).is_dir():
        base = base / kind
    return sorted(str(p) for p in base.rglob("*.y*ml"))
