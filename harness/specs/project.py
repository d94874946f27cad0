"""Where a user's project lives, so that the classes its spec files name import.

A spec names its component, oracle and model by dotted path (``my_components.noisy.Noisy``).
They import from the *project root* of the spec file: the nearest folder above it holding
``pyproject.toml``, ``setup.cfg``, ``setup.py``, ``pytest.ini``, ``tox.ini`` or ``.git`` (and its
``src/`` folder, for a src layout). That is where ``python -m pytest`` run from the root would
import them from; an installed package imports as usual.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["PROJECT_MARKERS", "project_root", "import_roots", "add_import_folders", "add_import_roots"]

#: Files and folders that mark a project root.
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "pytest.ini", "tox.ini", ".git")


def project_root(path: str | os.PathLike) -> Path | None:
    """The nearest folder at or above ``path`` (a file or folder) holding a project marker; None if none."""
    start = Path(path).resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return candidate
    return None


def import_roots(paths: list[str | os.PathLike]) -> list[Path]:
    """The project roots of ``paths`` (and their ``src/`` folders), without repeats, in order."""
    roots: list[Path] = []
    for path in paths:
        root = project_root(path)
        if root is None:
            continue
        for folder in (root, root / "src"):
            if folder.is_dir() and folder not in roots:
                roots.append(folder)
    return roots


def add_import_folders(folders: list[str | os.PathLike]) -> list[Path]:
    """Puts ``folders`` at the front of ``sys.path``, in order (those not on it yet).

    Returns:
        The folders added.
    """
    present = {os.path.abspath(p or os.curdir) for p in sys.path}
    added = []
    for folder in reversed([Path(f) for f in folders]):
        if os.path.abspath(folder) not in present:
            sys.path.insert(0, str(folder))
            added.append(folder)
    return added[::-1]


def add_import_roots(paths: list[str | os.PathLike]) -> list[Path]:
    """Puts the project roots of ``paths`` at the front of ``sys.path`` (those not on it yet).

    Returns:
        The folders added.
    """
    return add_import_folders(import_roots(paths))
