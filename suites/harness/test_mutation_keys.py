"""Mutants named by content (`harness.testing.mutation.content_key`): stable under unrelated edits, never shared."""

from __future__ import annotations

from pathlib import Path

from harness.testing.mutation import mutants
from harness.testing.mutation_run import module_name

SOURCE = '''"""A module."""


class Box:
    def clip(self, x, lo=0):
        if x < lo:
            return lo
        return x - 1


def scale(values):
    out = [v * 2 for v in values]
    return [v - 1 for v in out]
'''

EDITED = '''"""A module, edited above and between the mutants."""
import math

LIMIT = 3 + 4


class Box:
    size = 2

    def clip(self, x, lo=0):
        if x < lo:
            return lo
        return x - 1


def helper():
    return math.pi


def scale(values):
    out = [v * 2 for v in values]
    return [v - 1 for v in out]
'''


def test_an_unrelated_edit_above_keeps_every_key_and_shifts_the_indices() -> None:
    before, after = mutants(SOURCE), mutants(EDITED)
    keys_after = {m.key: m for m in after}
    for m in before:
        assert m.key in keys_after, m.key
    moved = keys_after[next(m.key for m in before if m.what == "Lt -> LtE")]
    assert moved.key == "Box.clip:compare:x < lo -> x <= lo"
    assert moved.index != next(m.index for m in before if m.what == "Lt -> LtE") and moved.line == 11
    # a constant is named with the expression it sits in; the same text twice in one scope gets #2
    assert "scale:constant:v * 2 -> v * 3" in keys_after and "Box.clip:constant:x - 1 -> x - 2" in keys_after
    assert "<module>:constant:3 + 4 -> 4 + 4" in keys_after
    twice = mutants("def f(a):\n    a = a + 1\n    a = a + 1\n    return a\n")
    assert [m.key for m in twice if m.operator == "arith"] == ["f:arith:a + 1 -> a - 1", "f:arith:a + 1 -> a - 1 #2"]


def test_no_two_mutants_of_the_components_share_a_key() -> None:
    repo = Path(__file__).resolve().parents[2]
    files = sorted(p for p in (repo / "reference_agents" / "components").rglob("*.py") if p.name != "__init__.py")
    keys = [f"{module_name(p, repo)}:{m.key}" for p in files for m in mutants(p.read_text())]
    assert len(keys) > 2000 and len(set(keys)) == len(keys)
    assert all(" -> " in k and "\n" not in k for k in keys)


def test_every_equivalent_mutant_named_in_the_report_folder_exists_in_the_tree() -> None:
    """A key of reports/mutation/equivalent.json that names no mutant was left behind by a change to its line."""
    import json

    repo = Path(__file__).resolve().parents[2]
    equivalent = json.loads((repo / "reports" / "mutation" / "equivalent.json").read_text())
    files = sorted(p for p in (repo / "reference_agents" / "components").rglob("*.py") if p.name != "__init__.py")
    keys = {f"{module_name(p, repo)}:{m.key}" for p in files for m in mutants(p.read_text())}
    stale = sorted(set(equivalent) - keys)
    assert not stale, (f"reports/mutation/equivalent.json: {stale} name no mutant of reference_agents/components: "
                       "the code changed there; read the reason again and re-key the entry or drop it")
