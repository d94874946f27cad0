"""Which hyperparameters of a component only ever run at their default in the specs (`spacegraph spec coverage`).

A hyperparameter is a constructor argument with a default (the arguments of
`Component` itself (``scope``, ``device``, ...) and ``*args``/``**kwargs``
excluded). It counts as exercised when some spec naming the
class directly (``component: path.Class``) sets it in ``config:`` to a value that
differs from the default; a spec that repeats the default does not count. A class
may set ``spec_default_only = {"name": "reason"}`` in its own body for an argument
whose other values no spec can run (a device name, a path); those are listed as
exempt, not as missing. Classes covered only through a fixture's ``spec_covers``
are not checked (their configuration is the fixture's).
"""

from __future__ import annotations

import inspect
from typing import Any, Iterable

from harness.graph import Component

NOT_HYPERPARAMETERS = frozenset(inspect.signature(Component.__init__).parameters)


def hyperparameters(cls: type) -> dict[str, Any]:
    """``{name: default}`` of the constructor arguments of ``cls`` that have a default."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    return {name: p.default for name, p in params.items()
            if name not in NOT_HYPERPARAMETERS and p.default is not inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}


def _plain(value: Any) -> Any:
    """Tuples as lists (YAML has no tuples), recursively, so that ``(2, 2)`` equals ``[2, 2]``."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def differs(value: Any, default: Any) -> bool:
    """Whether a spec's config value is away from the default (``1`` and ``1.0`` are the same value)."""
    try:
        return bool(_plain(value) != _plain(default))
    except Exception:  # an object without a usable ==: treat it as set on purpose
        return True


def default_only(cls: type, configs: Iterable[dict]) -> tuple[list[str], dict[str, str]]:
    """The hyperparameters of ``cls`` no config moves from its default, and the exempt ones with reasons.

    Args:
        cls: a component class.
        configs: the ``config:`` mappings of every spec naming ``cls`` directly.

    Returns:
        ``(names, exempt)``: sorted names that only ever run at their default, and
        ``{name: reason}`` from the class's own ``spec_default_only``.
    """
    exempt = {str(k): str(v) for k, v in dict(cls.__dict__.get("spec_default_only", {})).items()}
    configs = [c for c in configs if isinstance(c, dict)]
    names = []
    for name, default in hyperparameters(cls).items():
        if name in exempt:
            continue
        if not any(name in config and differs(config[name], default) for config in configs):
            names.append(name)
    return sorted(names), exempt
