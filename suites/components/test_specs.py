"""The spec checks of every component spec under ``specs/components/`` (items made by ``conftest.py``).

Per spec and backend: ``build``, ``in-space``, ``oracle``, ``determinism``,
``stateful`` and ``bad-spaces`` (those that apply); per spec, ``parity`` between
the two backends. See `harness.testing.plugin`.
"""

from pathlib import Path

SPEC_ROOT = Path(__file__).resolve().parents[2] / "specs" / "components"
