"""Components are written once: no graph function under reference_agents/components has a
backend-specific (``@fn.tf`` / ``@fn.torch``) body, no code there branches on the backend's
name, and every framework import there carries a ``# why:`` comment (the only ones allowed
build backend variables or modules)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMPONENTS = REPO / "reference_agents" / "components"
FRAMEWORKS = ("tensorflow", "torch", "keras", "jax")
BACKEND_NAMES = ("tf", "torch", "pytorch", "tensorflow")
WHY = "# why:"


def _is_framework(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in FRAMEWORKS


def _has_why(lines: list[str], lineno: int) -> bool:
    """A ``# why:`` comment on the import's line or on a comment line directly above it."""
    line = lines[lineno - 1]
    if WHY in line:
        return True
    above = lines[lineno - 2].strip() if lineno >= 2 else ""
    return above.startswith("#") and WHY in above


def violations(path: Path) -> list[str]:
    """What in the module at ``path`` breaks the one-body rule, as ``"file:line: reason"`` strings."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if isinstance(target, ast.Attribute) and target.attr in ("tf", "torch"):
                    found.append(f"{path}:{deco.lineno}: {node.name} is a backend-specific body "
                                 f"(@{ast.unparse(target)}); write one body against F")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_framework(alias.name) and not _has_why(lines, node.lineno):
                    found.append(f"{path}:{node.lineno}: 'import {alias.name}' without a '{WHY}' comment")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_framework(node.module) and not _has_why(lines, node.lineno):
                found.append(f"{path}:{node.lineno}: 'from {node.module} import ...' without a '{WHY}' comment")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            names = [o.value for o in operands if isinstance(o, ast.Constant) and o.value in BACKEND_NAMES]
            reads_name = any(isinstance(o, ast.Attribute) and o.attr in ("name", "backend", "backend_name")
                             for o in operands)
            if names and reads_name:
                found.append(f"{path}:{node.lineno}: compares {ast.unparse(node)!r}: components do not branch "
                             f"on the backend")
    return found


def walk(root: Path) -> list[str]:
    """`violations` of every Python module under ``root``."""
    return [v for path in sorted(root.rglob("*.py")) for v in violations(path)]


def test_components_have_one_body_and_explained_framework_imports() -> None:
    assert COMPONENTS.is_dir(), COMPONENTS
    found = walk(COMPONENTS)
    assert not found, "backend-specific code under reference_agents/components:\n" + "\n".join(found)


PLANTED = '''\
from typing import Any

import numpy as np
import torch
from tensorflow import nn as tfnn
import tensorflow as tf  # why: builds a tf.Module holding the layer's variables
# why: torch.nn.Module is what a torch optimizer steps over
import torch.nn

from harness.graph import Component, graph_fn


class Bad(Component):
    @graph_fn
    def _graph_fn_apply(self, F: Any, x: Any) -> Any:
        return x

    @_graph_fn_apply.tf
    def _graph_fn_apply_tf(self, F: Any, x: Any) -> Any:
        return x

    @_graph_fn_apply.torch
    def _graph_fn_apply_torch(self, F: Any, x: Any) -> Any:
        return x

    @graph_fn
    def _graph_fn_branch(self, F: Any, x: Any) -> Any:
        if F.name == "torch":
            return x
        return x
'''


def test_the_walker_catches_planted_violations(tmp_path: Path) -> None:
    module = tmp_path / "pkg" / "bad.py"
    module.parent.mkdir()
    module.write_text(PLANTED)
    (tmp_path / "pkg" / "clean.py").write_text("import numpy as np\n\nfrom harness.graph import graph_fn\n")
    found = walk(tmp_path)
    reasons = sorted(f.split(":", 2)[2].strip() for f in found)
    assert reasons == sorted([
        "'import torch' without a '# why:' comment",
        "'from tensorflow import ...' without a '# why:' comment",
        "_graph_fn_apply_tf is a backend-specific body (@_graph_fn_apply.tf); write one body against F",
        "_graph_fn_apply_torch is a backend-specific body (@_graph_fn_apply.torch); write one body against F",
        "compares \"F.name == 'torch'\": components do not branch on the backend",
    ]), found
    assert all(f.startswith(str(module)) for f in found)  # the clean module and the explained imports pass
    lines = [int(f.split(":")[1]) for f in found]
    assert sorted(lines) == [4, 5, 18, 22, 28]
