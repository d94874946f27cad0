"""The import contract of the project's layers (docs/architecture.md, "Layers").

Each layer imports only the layers below it, and no two modules import each other, directly or
around a circle (function-level imports count; ``if TYPE_CHECKING:`` imports do not).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.testing.imports import check_cycles, check_layers, import_graph

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ["harness", "reference_agents", "spacegraph"]

#: Top to bottom; a module belongs to the layer of its longest matching prefix.
LAYERS = [
    ["spacegraph.cli"],                                  # the `spacegraph` command
    ["spacegraph"],                                      # demo, report scenarios against peers
    ["reference_agents.training"],                       # Trainer behind `spacegraph train`
    ["reference_agents.agents.apex",                     # each agent's distributed coordination: Ape-X (workers,
     "reference_agents.agents.impala.actor_learner",     # shards, learner loop), IMPALA's actor-learner and
     "reference_agents.agents.impala.central_inference"],  # central-inference workers
    ["reference_agents.workers"],                        # vectorised env workers
    ["reference_agents.agents",                          # agents: the registry, shared config and checkpoint
     "reference_agents.agents.apex.config"],             # parts, one folder per agent (graph, config, checkpoints)
    ["reference_agents.environments"],                   # env factories, Atari frames
    ["reference_agents.oracles"],                        # NumPy oracles and models of the components
    ["reference_agents"],                                # the component library (components/)
    ["harness.measure", "harness.testing"],              # generic measurement; the test harness
    ["harness.specs"],                                   # spec files: schema, loading, coverage
    ["harness.execution.ray"],                           # the Ray executor: the one package that imports ray
    ["harness.execution"],                               # executors, strategies, serialization, actor interfaces
    ["harness.backends"],                                # TF and PyTorch: variables, ops namespace F
    ["harness.graph"],                                   # components, assembly, build (backend-free)
    ["harness.spaces"],                                  # spaces (NumPy only)
    ["harness"],                                         # the package root (version)
]


#: The modules that may import ray: the Ray executor, and the RLlib comparisons of the reports (peers run there).
RAY_IMPORTERS = ("harness.execution.ray", "spacegraph.reports")


def ray_importers(root: Path = REPO) -> dict[str, list[str]]:
    """``module -> ["file:line", ...]`` for every module of the three packages that imports ray (any form)."""
    import ast

    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                if any(n == "ray" or n.startswith("ray.") for n in names):
                    module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
                    found.setdefault(module, []).append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def _ray_violations(root: Path = REPO) -> list[str]:
    return [f"{module} imports ray ({', '.join(where)}); only {RAY_IMPORTERS} may"
            for module, where in ray_importers(root).items()
            if not any(module == p or module.startswith(p + ".") for p in RAY_IMPORTERS)]


def test_only_the_ray_executor_imports_ray():
    """Agents, components, workers, training and the harness outside ``harness.execution.ray`` know no Ray."""
    assert not _ray_violations(), "\n".join(_ray_violations())
    assert "harness.execution.ray.executor" in ray_importers()  # the scan sees the executor's own import


def _graph(root: Path = REPO):
    return import_graph(PACKAGES, root)


def test_no_upward_imports():
    problems = check_layers(_graph(), LAYERS)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_no_import_cycles():
    problems = check_cycles(_graph())
    assert not problems, "import cycles:\n" + "\n".join(problems)


def test_every_module_is_in_a_layer():
    graph = _graph()
    from harness.testing.imports import _layer_of

    outside = [m for m in graph.modules if _layer_of(m, LAYERS) is None]
    assert not outside, f"modules in no layer of the contract: {outside}"


@pytest.fixture
def tree_copy(tmp_path):
    """A copy of the three packages, to plant violations in without touching the checkout."""
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize("module,line", [
    ("harness/spaces/planted.py", "from reference_agents.components import Dense\n"),
    ("harness/graph/planted.py", "def f():\n    import harness.backends.tf.ops\n"),            # lazy upward import
    ("reference_agents/components/planted.py", "from ..agents import config\n"),            # relative
    ("reference_agents/agents/planted.py", "import spacegraph.cli\n"),
])
def test_planted_upward_import_fails(tree_copy, module, line):
    (tree_copy / module).write_text(line)
    problems = check_layers(import_graph(PACKAGES, tree_copy), LAYERS)
    planted = module[:-3].replace("/", ".")
    assert any(p.split(": ")[1].startswith(planted + " ") for p in problems), problems
    assert check_layers(_graph(), LAYERS) == []


def test_planted_cycle_fails(tree_copy):
    (tree_copy / "harness/spaces/planted_a.py").write_text("from harness.spaces import planted_b\n")
    (tree_copy / "harness/spaces/planted_b.py").write_text("def f():\n    from . import planted_a\n")
    problems = check_cycles(import_graph(PACKAGES, tree_copy))
    assert any("harness.spaces.planted_a, harness.spaces.planted_b" in p for p in problems), problems


def test_type_checking_imports_are_not_edges(tree_copy):
    (tree_copy / "harness/spaces/planted.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reference_agents.agents import DQNAgent\n")
    assert check_layers(import_graph(PACKAGES, tree_copy), LAYERS) == []


@pytest.mark.parametrize("module,line", [
    ("reference_agents/agents/apex/planted.py", "import ray\n"),
    ("harness/execution/planted.py", "def f():\n    from ray.exceptions import RayActorError\n"),
    ("reference_agents/training/planted.py", "import ray.util as u\n"),
])
def test_planted_ray_import_fails(tree_copy, module, line):
    (tree_copy / module).write_text(line)
    problems = _ray_violations(tree_copy)
    planted = module[:-3].replace("/", ".")
    assert any(p.startswith(planted + " imports ray") for p in problems), problems
