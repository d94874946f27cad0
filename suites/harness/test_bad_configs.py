"""The ``bad_configs`` spec key: located load errors, and the ``bad-configs`` check on real components.

The check itself is shown failing on a broken component in ``test_harness_fails.py``
(``broken/specs/silent_bad_config.yaml``); here the loader's key paths, and the check on
`Dense` with its argument checks taken out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.specs import SpecError, load_spec
from harness.testing.spec_checks import SpecCheckError, check_bad_configs
from reference_agents.components.common import Dense

DENSE = {"component": "reference_agents.components.common.Dense", "config": {"units": 2},
         "input_spaces": {"inputs": "float32[B,3]"}, "methods": {"apply": {}}}


def write(tmp_path: Path, **changes: Any) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**DENSE, **changes}, sort_keys=False))
    return path


@pytest.mark.parametrize("bad_configs, key_path, fragment", [
    ([{"unit": 0}], "bad_configs.0.unit", "not an argument of Dense(units, activation"),
    ([{"units": 0}, {}], "bad_configs.1", "at least 1 item"),
    ({"units": 0}, "bad_configs", "valid list"),
])
def test_bad_configs_problems_are_located(tmp_path: Path, bad_configs: Any, key_path: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, bad_configs=bad_configs))
    assert any(path == key_path and fragment in msg for path, msg in info.value.problems), info.value.problems


def test_the_check_passes_on_dense_and_fails_without_its_argument_checks(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(write(tmp_path, bad_configs=[{"units": 0}, {"activation": "swish"}, {"use_bias": 1}]))
    check_bad_configs(spec, "torch")
    original = Dense.__init__

    def unchecked(self: Dense, units: int, activation: Any = None, use_bias: Any = True, **kwargs: Any) -> None:
        original(self, max(int(units), 1), None, True, **kwargs)  # swallows the three bad values

    monkeypatch.setattr(Dense, "__init__", unchecked)
    with pytest.raises(SpecCheckError, match=r"3 problem\(s\)(.|\n)*bad_configs.0 (.|\n)*accepted the config "
                                             r"silently(.|\n)*bad_configs.2"):
        check_bad_configs(spec, "torch")
