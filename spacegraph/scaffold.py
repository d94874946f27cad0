"""``spacegraph new component NAME``: a template component, its spec and an oracle stub in a user's project.

The component builds and runs as written (``scale * inputs``, one trainable scale per feature, with
the space check of docs/tutorials/own_component.md); the oracle stub raises
``NotImplementedError`` naming the function to write, so ``spacegraph spec test`` fails on the
oracle check until the oracle is written from the component's definition.
"""

from __future__ import annotations

import keyword
import os
import re
from pathlib import Path

#: Files whose presence marks a folder as a project root (as the spec loader sees it).
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "pytest.ini", "tox.ini")

COMPONENT = '''"""`{name}`: what it computes goes here (a template written by `spacegraph new component`)."""

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox


class {name}(Component):
    """``scale * inputs``, one trainable scale per feature. Change it to what your component computes,
    then its spec (specs/components/{snake}.yaml) and its oracle ({package}.oracles.{snake}_apply)."""

    def __init__(self, scope="{kebab}"):
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces):        # runs at build, before create_variables
        space = input_spaces["inputs"]
        if not (isinstance(space, FloatBox) and space.has_batch_rank and space.rank == 1):
            raise self.space_mismatch("inputs", "a FloatBox with a batch rank and core rank 1 (float32[B,n])", space)

    def create_variables(self, input_spaces):
        n = input_spaces["inputs"].shape[0]
        self.scale = self.get_variable("scale", (n,), initializer="ones")

    @api
    def apply(self, inputs):
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F, inputs):
        return inputs * self.scale
'''

ORACLES_HEADER = '''"""NumPy oracles of the components in this package, written from their definitions (the specs name them)."""

import numpy as np  # noqa: F401  (the oracles compute with NumPy)
'''

ORACLE = '''

def {snake}_apply(inputs, weights, config):
    """NumPy oracle of `{name}.apply`: ``inputs["inputs"]`` and the weights ``weights["scale"]`` -> the output."""
    raise NotImplementedError("write the oracle {package}.oracles.{snake}_apply: compute {name}.apply in NumPy "
                              "from its definition (the spec's oracle check fails until then)")
'''

SPEC = '''# {name} ({package}/{snake}.py): `spacegraph spec test specs` runs its checks.
component: {package}.{snake}.{name}
config: {{}}
input_spaces: {{inputs: "float32[B,3]"}}
methods:
  apply:
    output_space: "float32[B,3]"
    oracle: {package}.oracles.{snake}_apply
bad_spaces: [{{inputs: "int64[B,3]"}}, {{inputs: "float32[3]"}}]
'''

PYPROJECT = '''[project]
name = "{project}"
version = "0.1.0"
dependencies = ["spacegraph"]

[tool.pytest.ini_options]
spacegraph_specs = ["specs"]      # plain `pytest` here also runs the spec checks
'''


def snake_case(name: str) -> str:
    """``MyLayer`` -> ``my_layer``, ``QHead`` -> ``q_head``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _packages(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()
                  and p.name not in ("specs", "tests") and p.name.isidentifier())


def new_component(name: str, folder: str | os.PathLike = ".", package: str | None = None) -> list[Path]:
    """Writes the template component ``name``, its spec and an oracle stub into the project ``folder``.

    Writes ``<package>/<snake>.py``, ``specs/components/<snake>.yaml`` and ``<snake>_apply`` in
    ``<package>/oracles.py`` (appended, or a new file); ``<package>/__init__.py`` when the package is
    new and ``pyproject.toml`` when ``folder`` has no project marker. ``package`` defaults to the one
    package in ``folder`` (``my_components`` when there is none).

    Returns:
        The files written or changed.

    Raises:
        ValueError: for a name that is not a CapWords identifier, an ambiguous or bad package, or a
            file or oracle that already exists (nothing is written then).
    """
    if not (name.isidentifier() and not keyword.iskeyword(name) and name[0].isupper()):
        raise ValueError(f"NAME must be a class name in CapWords (e.g. MyLayer); got {name!r}")
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--dir {root} is not a folder")
    if package is None:
        found = _packages(root) if root.is_dir() else []
        if len(found) > 1:
            raise ValueError(f"{root} holds several packages ({', '.join(found)}); choose one with --package")
        package = found[0] if found else "my_components"
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in package.split(".")):
        raise ValueError(f"--package must be a Python package name; got {package!r}")
    snake = snake_case(name)
    fields = {"name": name, "snake": snake, "kebab": snake.replace("_", "-"), "package": package,
              "project": re.sub(r"[^A-Za-z0-9._-]+", "-", root.resolve().name) or "my-project"}
    pkg_dir = root.joinpath(*package.split("."))
    module = pkg_dir / f"{snake}.py"
    spec = root / "specs" / "components" / f"{snake}.yaml"
    oracles = pkg_dir / "oracles.py"
    for path in (module, spec):
        if path.exists():
            raise ValueError(f"{path} exists already; nothing written (choose another NAME or remove it)")
    oracle_text = oracles.read_text() if oracles.exists() else ""
    if re.search(rf"^def {snake}_apply\(", oracle_text, re.M):
        raise ValueError(f"{oracles} defines {snake}_apply already; nothing written")

    written = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)

    if not any((root / marker).exists() for marker in PROJECT_MARKERS):
        write(root / "pyproject.toml", PYPROJECT.format(**fields))
    if not (pkg_dir / "__init__.py").exists():
        write(pkg_dir / "__init__.py", f'"""{package}: components of this project."""\n')
    write(module, COMPONENT.format(**fields))
    write(oracles, (oracle_text or ORACLES_HEADER) + ORACLE.format(**fields))
    write(spec, SPEC.format(**fields))
    return written
