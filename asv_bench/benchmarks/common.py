"""Helpers the benchmark modules share: skipping what a tree lacks, agent configs, smoke-run budgets."""

from __future__ import annotations

import importlib.util
import os

BACKEND_MODULES = {"tf": "tensorflow", "torch": "torch"}


def quick() -> bool:
    """Whether this is a smoke run: ``SPACEGRAPH_BENCH_QUICK`` set to anything but ``""`` or ``"0"``.

    ``run_offline.py --quick`` and the benchmark smoke test (suites/bench) set it;
    benchmarks with a fixed work budget (training steps, timing windows) shrink it then,
    and parameter grids shrink to a value or two (`grid`).
    """
    return os.environ.get("SPACEGRAPH_BENCH_QUICK", "") not in ("", "0")


def grid(full: list, smoke: list) -> list:
    """A benchmark parameter's values: ``smoke`` in a smoke run (`quick`), else ``full``.

    asv reads ``params`` when it imports a benchmark module, in processes that inherit
    ``SPACEGRAPH_BENCH_QUICK`` from ``run_offline.py --quick``; every benchmark runs once
    per combination of its parameters, in a process of its own (a TensorFlow import
    alone takes seconds), so a smaller grid is what shortens the quick pass.
    """
    return list(smoke) if quick() else list(full)


def require_module(name: str) -> None:
    """Skips the benchmark (asv's ``NotImplementedError``) while module ``name`` does not exist in this tree.

    A folder without ``__init__.py`` (a namespace package: work in progress) counts
    as missing; errors raised while importing an existing module are not caught, so
    a broken module fails the benchmark.

    Raises:
        NotImplementedError: naming the missing module.
    """
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent package is missing
        spec = None
    if spec is None or spec.origin in (None, "namespace"):
        raise NotImplementedError(f"{name} does not exist in this tree")


def agent_config_path(name: str) -> str:
    """``reference_agents/configs/<name>.yaml`` of the tree being benchmarked.

    Raises:
        NotImplementedError: while the agents or that config do not exist in this tree.
    """
    require_module("reference_agents.agents")
    import reference_agents

    path = os.path.join(os.path.dirname(reference_agents.__file__), "configs", f"{name}.yaml")
    if not os.path.exists(path):
        raise NotImplementedError(f"{path} does not exist in this tree")
    return path


def installed_backends() -> list[str]:
    """The backends whose framework is installed, restricted to ``SPACEGRAPH_BACKENDS`` (a comma list) if set."""
    wanted = [b.strip() for b in os.environ.get("SPACEGRAPH_BACKENDS", "").split(",") if b.strip()] or list(BACKEND_MODULES)
    return [b for b in BACKEND_MODULES if b in wanted and importlib.util.find_spec(BACKEND_MODULES[b]) is not None]
