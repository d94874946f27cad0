"""Build-overhead measurement: phase times of building a component on a backend."""

from __future__ import annotations

import importlib
import json
import statistics
from typing import Any, Callable

from harness.execution.executor import GraphExecutor
from harness.graph import Component
from harness.spaces import parse


def load_class(path: str) -> type:
    """A class from ``"package.module.Class"`` or ``"package.module:Class"``.

    Raises:
        ValueError: naming the path and what failed to import.
    """
    module, sep, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not module or not name:
        raise ValueError(f"class path {path!r} must look like 'package.module.Class'")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import class {path!r}: {exc}") from None
    if not isinstance(obj, type):
        raise ValueError(f"{path!r} is not a class")
    return obj


def load_target(target: str, config: dict | None = None, spaces: dict | None = None) -> tuple[Callable[[], Component], dict]:
    """A component factory and input spaces from a spec file or a class path.

    A spec file (``specs/components/*.yaml``) gives the class, its config and the
    input spaces; ``config``/``spaces`` given here override its entries.

    Raises:
        ValueError: naming the file or class path and what is wrong.
    """
    file_spaces: dict[str, Any] = {}
    file_config: dict[str, Any] = {}
    if target.endswith((".yaml", ".yml")):
        from harness.specs import load_spec

        loaded = load_spec(target)  # SpecError is a ValueError naming the file and key path
        cls = loaded.component_class
        file_config = dict(loaded.spec.config)
        file_spaces = dict(loaded.spec.input_spaces)
    else:
        cls = load_class(target)
    kwargs = {**file_config, **(config or {})}
    input_spaces = {k: parse(v) for k, v in {**file_spaces, **(spaces or {})}.items()}

    def factory() -> Component:
        comp = cls(**kwargs)
        if not isinstance(comp, Component):
            raise ValueError(f"{cls.__name__} is not a spacegraph Component")
        return comp

    return factory, input_spaces


def profile_build(factory: Callable[[], Component], input_spaces: dict, backend: str, repeats: int = 5,
                  seed: int = 0) -> dict[str, Any]:
    """Builds ``repeats`` fresh copies and reports the median of each phase (after one warm-up)."""
    GraphExecutor(factory(), input_spaces, backend=backend, seed=seed)  # warm-up: imports, first traces
    runs = []
    executor = None
    for _ in range(repeats):
        executor = GraphExecutor(factory(), input_spaces, backend=backend, seed=seed)
        runs.append(executor.profile.as_dict())
    assert executor is not None
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return {"backend": backend, "repeats": repeats, "median": medians, "api_table": executor.api_table()}


def format_profile(result: dict[str, Any]) -> str:
    """A readable table of a `profile_build` result (milliseconds)."""
    m = result["median"]
    rows = [
        ("assembly", m["assembly_s"]), ("build overhead", m["build_overhead_s"]),
        ("backend variable creation", m["variable_creation_s"]), ("backend op creation", m["op_creation_s"]),
        ("build total", m["build_total_s"]), ("framework overhead (assembly + build overhead)", m["framework_overhead_s"]),
    ]
    lines = [f"backend {result['backend']}: median of {result['repeats']} builds, "
             f"{int(m['components'])} components, {int(m['graph_fn_calls'])} graph-function steps run on samples to "
             f"infer their outputs, {int(m['variables'])} variables"]
    lines += [f"  {name:<48} {value * 1e3:9.2f} ms" for name, value in rows]
    lines += ["API:"] + ["  " + line for line in result["api_table"].splitlines()]
    return "\n".join(lines)


def to_json(result: dict[str, Any]) -> str:
    """The result as JSON."""
    return json.dumps(result, indent=2)
