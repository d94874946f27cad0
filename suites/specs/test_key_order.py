"""Dict input spaces in the component specs list their keys in an order that is not sorted.

A component that sorts keys where it should keep them (or keeps them where it should
sort) passes every spec whose keys are already sorted; the specs must not hide it.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
GROUP = re.compile(r"\{([^{}]*)\}")          # an innermost Dict space text, `{a: float32[2], b: bool[]}`
KEY = re.compile(r"(?:^|,)\s*(\w+)\s*:")


def sorted_dicts(spec: dict) -> list[str]:
    """``arg: [keys]`` for each innermost Dict of several keys, in a spec's input spaces, whose keys are sorted."""
    found = []
    for arg, text in (spec.get("input_spaces") or {}).items():
        if not isinstance(text, str):
            continue
        for group in GROUP.findall(text):
            keys = KEY.findall(group)
            if len(keys) > 1 and keys == sorted(keys):
                found.append(f"{arg}: {keys}")
    return found


def test_a_sorted_dict_is_found() -> None:
    assert sorted_dicts({"input_spaces": {"x": "[B]{a: float32[2], b: {c: bool[], d: int64[]}}"}}) == [
        "x: ['c', 'd']"]
    assert sorted_dicts({"input_spaces": {"x": "[B]{b: float32[2], a: int64[]}", "y": "float32[B]"}}) == []
    assert sorted_dicts({"input_spaces": {"x": "[B]{a: float32[2]}"}}) == []  # one key has no order


def test_component_specs_have_no_sorted_dict_inputs() -> None:
    found = {}
    for path in sorted((REPO / "specs" / "components").glob("*.yaml")):
        hits = sorted_dicts(yaml.safe_load(path.read_text()) or {})
        if hits:
            found[path.name] = hits
    assert found == {}, f"Dict inputs with sorted keys (write them unsorted): {found}"
