"""The pieces the spec checks are made of: comparisons, space differences, the z-test, example counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from harness.spaces import parse
from harness.specs import Tolerance, load_spec
from harness.testing.parity import with_fixed, z_test
from harness.testing.spec_checks import (
    MAX_EXAMPLES, SpecCheckError, compare_outputs, describe_value, example_count, space_difference,
)

HERE = Path(__file__).resolve().parent
TOL = Tolerance(rtol=1e-5, atol=1e-6)


def test_compare_outputs_names_key_path_and_largest_differences():
    expected = {"a": np.zeros(3, np.float32), "b": (np.array([1.0, 2.0, 4.0]), np.arange(3))}
    actual = {"a": np.zeros(3, np.float32), "b": (np.array([1.0, 2.5, 4.0]), np.arange(3))}
    message = compare_outputs(actual, expected, TOL)
    assert message.startswith("at key path 'b/0': 1 of 3 element(s) differ (rtol=1e-05, atol=1e-06)")
    assert "largest absolute difference 0.5, largest relative difference 0.25; at index (1,): 2.5 vs expected 2.0" \
        in message
    assert compare_outputs(expected, expected, TOL) is None


@pytest.mark.parametrize("actual, expected, tol, exact_dtype, problem", [
    (np.array([1, 2]), np.array([1, 3]), TOL, False, "1 of 2 element(s) differ (exact)"),
    (np.array([np.nan]), np.array([np.nan]), None, False, None),
    (np.array([1.0]), np.array([1.0 + 1e-9]), None, False, "(exact)"),
    (np.array([1.0], np.float32), np.array([1.0]), TOL, True, "dtype float32 vs float64"),
    (np.zeros((2, 3)), np.zeros((3, 2)), TOL, False, "shape (2, 3) vs expected (3, 2)"),
    ({"a": np.zeros(1)}, {"b": np.zeros(1)}, TOL, False, "structures differ"),
    ((np.zeros(1),), [np.zeros(1)], TOL, False, None),
    (None, None, TOL, False, None),
])
def test_compare_outputs_table(actual, expected, tol, exact_dtype, problem):
    message = compare_outputs(actual, expected, tol, exact_dtype=exact_dtype)
    if problem is None:
        assert message is None
    else:
        assert problem in message


@pytest.mark.parametrize("declared, built, problem", [
    ("float32[B,3](0,1)", "float32[B,3]", None),                       # bounds are ignored
    ("int64[B](0,5)", "int64[B]", None),
    ("float32[B,3]", "float32[B,4]", "at the root: core shape (3,) declared, (4,) built"),
    ("float32[B,3]", "float64[B,3]", "dtype float32 declared, float64 built"),
    ("float32[B,3]", "int32[B,3]", "leaf type FloatBox declared, IntBox built"),
    ("float32[B,T,3]", "float32[T,B,3]", "extra ranks ('B', 'T') declared, ('T', 'B') built"),
    ("float32[B,3]", "float32[3]", "extra ranks ('B',) declared, () built"),
    ("{a: float32[2], b: bool[]}", "{a: float32[2], c: bool[]}", "structures differ"),
    ("{a: float32[2], b: bool[]}", "{a: float32[2], b: int8[]}", "at key path 'b': leaf type BoolBox"),
    ("(float32[2],)", "{'0': float32[2]}", "structures differ"),
])
def test_space_difference(declared, built, problem):
    message = space_difference(parse(declared), parse(built))
    if problem is None:
        assert message is None
    else:
        assert message is not None and problem in message


def test_z_test_finds_a_shifted_mean_and_not_an_equal_one():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 1.0, (400, 8)), rng.normal(0.0, 1.0, (400, 8))
    differs, z, critical = z_test(a, b, 0.999)
    assert not differs.any() and critical == pytest.approx(3.9, abs=0.1)  # 0.001 / 8 two-sided
    differs, z, _ = z_test(a, b + np.array([0, 0, 0, 1.0, 0, 0, 0, 0]), 0.999)
    assert differs.tolist() == [False, False, False, True, False, False, False, False] and z[3] > 10


def test_z_test_compares_constant_columns_within_tolerance():
    a = np.ones((50, 2))
    b = np.stack([np.ones(50), np.full(50, 1.5)], axis=1)
    differs, z, _ = z_test(a, b, 0.999, rtol=1e-5, atol=1e-6)
    assert differs.tolist() == [False, True] and z[1] == np.inf


def test_describe_value_truncates_and_shows_shapes():
    text = describe_value({"obs": np.arange(1000, dtype=np.float32), "flag": np.array(True)})
    lines = text.splitlines()
    assert lines[0] == "    flag: bool[] = True"
    assert lines[1].startswith("    obs: float32[1000] = [  0.   1. ...")
    assert len(lines[1]) < 260


def test_example_count_scales_with_the_profile():
    spec = load_spec(HERE / "specs_ok" / "affine.yaml")  # max_examples: 10
    before = settings.get_current_profile_name()
    settings.register_profile("harness-test-x5", max_examples=5 * settings.get_profile("dev").max_examples)
    settings.register_profile("harness-test-huge", max_examples=10**6)
    try:
        settings.load_profile("dev")
        assert example_count(spec) == 10
        settings.load_profile("harness-test-x5")
        assert example_count(spec) == 50
        settings.load_profile("harness-test-huge")
        assert example_count(spec) == MAX_EXAMPLES
    finally:
        settings.load_profile(before)


def test_deterministic_inputs_take_the_drawn_dtype_and_shape():
    spec = load_spec(HERE / "specs_ok" / "exploring_noise.yaml")
    drawn = {"inputs": np.zeros((2, 2), np.float32), "explore": np.ones((2,), bool)}
    fixed = with_fixed(spec, "apply", drawn, {"explore": False})
    assert fixed["explore"].dtype == bool and fixed["explore"].tolist() == [False, False]
    assert fixed["inputs"] is drawn["inputs"]
    with pytest.raises(SpecCheckError, match=r"deterministic_inputs names 'noise', which is not a fed argument"):
        with_fixed(spec, "apply", drawn, {"noise": 0.0})


def test_bad_spaces_reports_a_backend_exception(monkeypatch: pytest.MonkeyPatch):
    """Independent of any core bug: a build that raises a non-SpacegraphError fails the check."""
    from harness.testing import spec_checks

    def raising(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for @: 'Tensor' and 'int'")

    monkeypatch.setattr(spec_checks, "GraphExecutor", raising)
    spec = load_spec(HERE / "specs_ok" / "affine.yaml")
    with pytest.raises(SpecCheckError, match=r"bad_spaces.0 .*the build raised TypeError \(not a SpacegraphError"):
        spec_checks.check_bad_spaces(spec, "torch")
