"""The scenario registry: what `spacegraph report` can measure, by name.

A `Scenario` has a name (``--only NAME``), a title, the figure of the RLgraph paper (or other
source) it corresponds to, ``run(ctx) -> list[Figure]`` and ``render(result) -> list[Figure]``,
which draws the figures from a measured result without measuring (each figure keeps that result in
``Figure.raw``, so ``spacegraph report --from-json`` draws a committed run again). The runner gives
``run`` a `Context`: quick or full budgets, how many seeds, a progress bar, and whether the peers
(RLlib) should run.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from harness.measure.figures import Figure
from harness.measure.progress import Progress


@dataclasses.dataclass
class Context:
    """What a scenario is run with.

    Args:
        quick: small budgets (the whole quick report within 10 minutes on 2 cores).
        seeds: seeds for the scenarios that repeat over seeds.
        progress: the scenario's progress bar.
        peers: run the peers (RLlib); False leaves them out with a note.
    """

    quick: bool
    seeds: int
    progress: Progress
    peers: bool = True


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A report scenario (see the module docstring); ``figure_ref`` names the figure it reproduces."""

    name: str
    title: str
    figure_ref: str
    run: Callable[[Context], list[Figure]]
    steps: Callable[[Context], int] = lambda ctx: 1
    render: Callable[[dict[str, Any]], list[Figure]] | None = None


SCENARIOS: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    """Adds ``scenario`` to `SCENARIOS` (a second one of the same name replaces the first)."""
    SCENARIOS[scenario.name] = scenario
    return scenario


def select(only: list[str] | None, registry: dict[str, Scenario] | None = None) -> list[Scenario]:
    """The scenarios named in ``only`` (in registry order), or all of them.

    Raises:
        ValueError: naming the unknown names and the known ones.
    """
    registry = SCENARIOS if registry is None else registry
    if not only:
        return list(registry.values())
    unknown = [n for n in only if n not in registry]
    if unknown:
        raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(registry)}")
    return [s for name, s in registry.items() if name in only]
