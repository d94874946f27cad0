"""A spec fixture (``spec_covers``) has the defaults of the class it covers, so the specs test the class's defaults.

`RMSPropRegression` takes `RMSProp`'s keyword arguments and passes every one on, so a spec that
leaves ``centered`` out runs the fixture's default, never `RMSProp`'s own: a changed default in the
class (the mutation report's ``rmsprop.py`` ``centered: bool = False`` made ``True``) passed every
spec. Here every argument that a fixture and a class it covers share, both with a default, must
have the same default; the specs then cover the class's defaults through the fixture's.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from harness.specs import find_specs, load_spec

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``); the last test keeps it in step
MUTATION_COVERS = ("reference_agents.components.common.synchronizer",
                   "reference_agents.components.optimizers.adam",
                   "reference_agents.components.optimizers.rmsprop",
                   "reference_agents.components.optimizers.sgd")

SPECS = Path(__file__).resolve().parents[2] / "specs" / "components"


def defaults(cls: type) -> dict[str, Any]:
    return {name: p.default for name, p in inspect.signature(cls).parameters.items()
            if p.default is not p.empty and name != "scope"}


def shared_defaults(fixture: type, covered: type) -> dict[str, tuple[Any, Any]]:
    """``{argument: (fixture's default, class's default)}`` for the arguments both give a default."""
    mine, theirs = defaults(fixture), defaults(covered)
    return {name: (mine[name], theirs[name]) for name in mine.keys() & theirs.keys()}


def fixtures() -> list[tuple[type, type]]:
    classes = {load_spec(p).component_class for p in find_specs(SPECS)}
    return sorted({(f, c) for f in classes for c in getattr(f, "spec_covers", ())}, key=lambda fc: fc[0].__name__)


def test_fixtures_have_the_defaults_of_the_classes_they_cover() -> None:
    differ = [f"{f.__name__}.{name} = {a!r} but {c.__name__}.{name} = {b!r}"
              for f, c in fixtures() for name, (a, b) in sorted(shared_defaults(f, c).items()) if a != b]
    assert not differ, "\n".join(differ)


def test_a_different_default_is_found() -> None:
    from reference_agents.components.optimizers import RMSProp

    class Fixture:
        def __init__(self, learning_rate: float = 0.01, centered: bool = True, units: int = 2) -> None: ...

    assert shared_defaults(Fixture, RMSProp) == {"centered": (True, False)}


def test_mutation_covers_lists_the_modules_compared_here() -> None:
    compared = {c.__module__ for f, c in fixtures() if shared_defaults(f, c)}
    assert compared == set(MUTATION_COVERS)
