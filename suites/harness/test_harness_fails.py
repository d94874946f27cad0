"""Every spec check can fail: each broken component fails exactly the checks it is broken for, with details.

The specs under ``broken/specs`` each name one component of ``broken/components.py``
broken in one way; ``EXPECTED`` lists, per spec, the checks that must fail and
what their messages must say. Every other applicable check must pass, and so
must every check of the correct specs under ``specs_ok``.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

from harness.specs import LoadedSpec, find_specs, load_spec
from harness.testing.parity import check_parity
from harness.testing.plugin import CHECKS, applicable_checks, selected_backends
from harness.testing.spec_checks import SpecCheckError

HERE = Path(__file__).resolve().parent
BROKEN = HERE / "broken" / "specs"
OK = HERE / "specs_ok"

#: spec name -> check -> substrings its failure message must contain (on every backend it runs on).
EXPECTED: dict[str, dict[str, list[str]]] = {
    "wrong_output_space": {
        "build": ["wrong_output_space.yaml", "check 'build' on {backend}", "method 'apply'",
                  "declared output space float32[B,3], built float32[B,4]", "core shape (3,) declared, (4,) built"],
        "in-space": ["check 'in-space' on {backend}", "dimension 1 has size 4, expected 3", "inputs:"],
    },
    "out_of_bounds": {
        "in-space": ["out_of_bounds.yaml", "check 'in-space' on {backend}", "method 'apply'",
                     "not in the declared space float32[B,4](0.0,1.0)", "is below the lower bound 0.0",
                     "inputs:\n    inputs: float32[", "outputs:"],
    },
    "nan_output": {
        "in-space": ["nan_output.yaml", "check 'in-space' on {backend}", "NaN at index"],
    },
    "oracle_mismatch": {
        "oracle": ["oracle_mismatch.yaml", "check 'oracle' on {backend}", "method 'apply'",
                   "broken.components.affine_apply", "at the root", "largest absolute difference 0.001",
                   "largest relative difference", "(rtol=1e-05, atol=1e-06)", "inputs:\n    inputs: float32["],
    },
    "parity_mismatch": {
        "parity": ["parity_mismatch.yaml", "check 'parity' on tf-torch", "method 'apply'",
                   "torch (actual) differs from tf (expected) given the same weights",
                   "largest absolute difference 0.0001", "largest relative difference", "inputs:"],
    },
    "statistics_mismatch": {
        "parity": ["check 'parity' on tf-torch", "method 'apply' is stochastic", "compared by statistics",
                   "400 calls per backend", "two-sample z-test at confidence 0.999",
                   "Bonferroni correction over", "mean: tf", "vs torch", "inputs:"],
    },
    "frequency_mismatch": {
        "parity": ["check 'parity' on tf-torch", "compared by statistics", "frequency of value 1"],
    },
    "nondeterministic": {
        "determinism": ["nondeterministic.yaml", "check 'determinism' on {backend}",
                        "two builds with seed 0 start from different weights", "key path 'affine/scale'",
                        "largest absolute difference"],
    },
    "stateful_divergence": {
        "stateful": ["stateful_divergence.yaml", "check 'stateful' on {backend}", "method 'insert'",
                     "disagree", "inputs:\n    value: float32[]"],
    },
    "silent_bad_space": {
        "bad-spaces": ["silent_bad_space.yaml", "check 'bad-spaces' on {backend}", "bad_spaces.0",
                       "int64[B,4]", "accepted the space silently"],
    },
    "late_bad_space": {
        "bad-spaces": ["late_bad_space.yaml", "check 'bad-spaces' on {backend}", "bad_spaces.0",
                       "no space check refused it; the build failed later with BuildError"],
    },
    "silent_bad_config": {
        "bad-configs": ["silent_bad_config.yaml", "check 'bad-configs' on {backend}", "2 problem(s)",
                        "bad_configs.0", "the ValueError names none of ['factor']",
                        "bad_configs.1", "the constructor accepted the config silently"],
    },
}

_MODULES = {"tf": "tensorflow", "torch": "torch"}


def _backends() -> list[str]:
    return [b for b in selected_backends() if importlib.util.find_spec(_MODULES[b]) is not None]


@functools.cache
def _spec(path: str) -> LoadedSpec:
    return load_spec(path)


def _cases(folder: Path) -> list:
    """One pytest param per (spec, backend or pair, check) that applies under the selected backends."""
    backends, cases = _backends(), []
    for path in find_specs(folder):
        spec = _spec(path)
        chosen = [b for b in spec.spec.backends if b in backends]
        for backend in chosen:
            cases += [pytest.param(path, check, backend, id=f"{spec.name}-{check}-{backend}")
                      for check in applicable_checks(spec)]
        if {"tf", "torch"} <= set(chosen):
            cases.append(pytest.param(path, "parity", "tf-torch", id=f"{spec.name}-parity-tf-torch"))
    return cases


def _run(path: str, check: str, backend: str) -> None:
    spec = _spec(path)
    if check == "parity":
        check_parity(spec)
    else:
        CHECKS[check](spec, backend)


def test_every_check_has_a_broken_spec():
    failing = {check for checks in EXPECTED.values() for check in checks}
    assert failing == set(CHECKS) | {"parity"}
    assert {Path(p).stem for p in find_specs(BROKEN)} == set(EXPECTED)


@pytest.mark.parametrize("path, check, backend", _cases(BROKEN))
def test_broken_component(path: str, check: str, backend: str):
    expected = EXPECTED[Path(path).stem].get(check)
    if expected is None:
        _run(path, check, backend)  # not what this component is broken for: must pass
        return
    with pytest.raises(SpecCheckError) as info:
        _run(path, check, backend)
    message = str(info.value)
    missing = [s.format(backend=backend) for s in expected if s.format(backend=backend) not in message]
    assert not missing, f"the failure message lacks {missing}:\n{message}"


@pytest.mark.parametrize("path, check, backend", _cases(OK))
def test_correct_component(path: str, check: str, backend: str):
    _run(path, check, backend)
