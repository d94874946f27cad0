"""The value checks of a spec: against its NumPy oracle, TF against torch (parity), a build against its twin."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any, Callable

import numpy as np

from harness.specs import LoadedSpec, MethodSpec, Tolerance
from harness.testing.spec_checks import (
    Built, SpecCheckError, built, compare_outputs, describe_value, example_count, fail, input_strategy, leaves,
    method_args, run_examples, stateless_methods, tolerance,
)

__all__ = ["check_oracle", "check_parity", "check_determinism", "z_test", "with_fixed"]

PAIR = "tf-torch"
#: Calls compared per example where a method is stochastic or stateful (determinism).
SEQUENCE_CALLS = 3
#: Most hypothesis examples for a statistical comparison (each runs ``samples`` calls per backend).
MAX_STATISTICAL_EXAMPLES = 3


def with_fixed(spec: LoadedSpec, method: str, inputs: dict[str, Any],
               fixed: Mapping[str, Any] | None) -> dict[str, Any]:
    """``inputs`` with the method's ``deterministic_inputs`` put in, in the dtype and shape of the drawn values.

    Raises:
        SpecCheckError: when ``deterministic_inputs`` names an argument that is not fed.
    """
    out = dict(inputs)
    for arg, value in (fixed or {}).items():
        if arg not in inputs:
            raise SpecCheckError(f"{spec.path}: methods.{method}.deterministic_inputs names {arg!r}, which is not "
                                 f"a fed argument of {method!r} (fed: {sorted(inputs)}); give it an input space")
        drawn = np.asarray(inputs[arg])
        out[arg] = np.broadcast_to(np.asarray(value, dtype=drawn.dtype), drawn.shape).copy()
    return out


def check_oracle(spec: LoadedSpec, backend: str) -> None:
    """Outputs match ``oracle(inputs, weights_relative, config)`` within tolerance."""
    b = built(spec, backend)
    b.restore()
    weights = b.relative_weights()
    examples = example_count(spec)
    for method, oracle in spec.oracles.items():
        mspec = spec.spec.methods[method]
        if mspec.stateful:
            continue
        if mspec.stochastic and not mspec.deterministic_inputs:
            raise fail(spec, "oracle", backend, f"method {method!r} is stochastic and has no deterministic_inputs: "
                       f"its oracle cannot be compared value by value")
        tol = tolerance(spec, method)

        def body(inputs: dict[str, Any], method: str = method, oracle: Callable = oracle, tol: Tolerance = tol,
                 fixed: Any = mspec.deterministic_inputs) -> None:
            inputs = with_fixed(spec, method, inputs, fixed)
            outputs = b.call(method, inputs)
            expected = oracle(copy.deepcopy(inputs), copy.deepcopy(weights), copy.deepcopy(spec.spec.config))
            diff = compare_outputs(outputs, expected, tol)
            if diff:
                raise fail(spec, "oracle", backend, f"method {method!r} disagrees with its oracle "
                           f"{mspec.oracle}: {diff}\n  inputs:\n{describe_value(inputs)}")

        run_examples(spec, f"oracle/{backend}/{method}", input_strategy(spec, method_args(b, method)), body,
                     examples)


def check_parity(spec: LoadedSpec) -> None:
    """TF and torch builds agree on hypothesis inputs once torch is given TF's weights.

    The torch build uses another seed, so agreement cannot come from equal initial
    values, only from `set_weights`. Stochastic methods are compared with their
    ``deterministic_inputs`` if given, else by statistics (see `z_test`).
    """
    tf, torch = built(spec, "tf"), built(spec, "torch", seed=spec.spec.seed + 1, instance="parity")
    tf.restore()
    try:
        torch.restore(tf.initial)
    except ValueError as exc:
        raise fail(spec, "parity", PAIR, f"the torch build cannot take the tf build's weights: {exc}") from exc
    examples = example_count(spec)
    for method in stateless_methods(spec):
        mspec = spec.spec.methods[method]
        if mspec.stochastic and not mspec.deterministic_inputs:
            _compare_statistics(spec, method, mspec, tf, torch, examples)
        else:
            _compare_values(spec, method, mspec, tf, torch, examples)


def _compare_values(spec: LoadedSpec, method: str, mspec: MethodSpec, tf: Built, torch: Built,
                    examples: int) -> None:
    tol = tolerance(spec, method)
    given = " and the same deterministic_inputs" if mspec.deterministic_inputs else ""

    def body(inputs: dict[str, Any]) -> None:
        inputs = with_fixed(spec, method, inputs, mspec.deterministic_inputs)
        expected, actual = tf.call(method, inputs), torch.call(method, inputs)
        diff = compare_outputs(actual, expected, tol, exact_dtype=True)
        if diff:
            raise fail(spec, "parity", PAIR, f"method {method!r}: torch (actual) differs from tf (expected) given "
                       f"the same weights{given}: {diff}\n  inputs:\n{describe_value(inputs)}")

    run_examples(spec, f"parity/{method}", input_strategy(spec, method_args(tf, method)), body, examples)


def _samples(b: Built, method: str, inputs: dict[str, Any], n: int) -> dict[str, np.ndarray]:
    """``n`` calls' outputs: per key path, the values stacked along a new first axis."""
    calls = [{path: np.asarray(leaf) for path, leaf in leaves(b.call(method, inputs)) if leaf is not None}
             for _ in range(n)]
    return {path: np.stack([c[path] for c in calls]) for path in calls[0]} if calls else {}


#: Integer outputs with at most this many distinct values are compared by category frequencies.
MAX_CATEGORIES = 32


def _features(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Columns whose means both backends must share, and a label per column.

    Float elements contribute their values and their squares (mean and spread);
    integer and bool elements with few distinct values contribute one indicator
    column per value (their category frequencies), others their values.
    """
    cols_a, cols_b, labels = [], [], []
    for path in a:
        x, y = a[path].reshape(len(a[path]), -1), b[path].reshape(len(b[path]), -1)
        shape = a[path].shape[1:]
        for j in range(x.shape[1]):
            index = tuple(int(i) for i in np.unravel_index(j, shape)) if shape else ()
            where = f"key path {path!r} index {index}" if path else f"index {index}"
            xa, yb = x[:, j], y[:, j]
            values = np.union1d(xa, yb)
            if xa.dtype.kind in "iub" and len(values) <= MAX_CATEGORIES:
                for v in values:
                    cols_a.append((xa == v).astype(np.float64))
                    cols_b.append((yb == v).astype(np.float64))
                    labels.append(f"{where}, frequency of value {v.item()!r}")
                continue
            xa, yb = xa.astype(np.float64), yb.astype(np.float64)
            cols_a += [xa, xa ** 2]
            cols_b += [yb, yb ** 2]
            labels += [f"{where}, mean", f"{where}, mean of squares"]
    n_a, n_b = len(next(iter(a.values()), ())), len(next(iter(b.values()), ()))
    stack = lambda cols, n: np.stack(cols, axis=1) if cols else np.zeros((n, 0))  # noqa: E731
    return stack(cols_a, n_a), stack(cols_b, n_b), labels


def z_test(a: np.ndarray, b: np.ndarray, confidence: float, rtol: float = 0.0,
           atol: float = 0.0) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-column two-sample z-test of equal means, Bonferroni-corrected over the columns.

    Args:
        a, b: samples, one row per call and one column per output element.
        confidence: the family-wise confidence (e.g. 0.999).
        rtol, atol: columns with zero variance on both sides compare their means
            within these tolerances instead.

    Returns:
        ``(differs, z, critical)``: a bool per column, the z statistics, and the
        critical ``|z|`` above which a column differs.
    """
    columns = max(1, a.shape[1])
    critical = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / (2.0 * columns))
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, np.abs(mean_a - mean_b) / se, 0.0)
    constant = se == 0
    differs = np.where(constant, ~np.isclose(mean_b, mean_a, rtol=rtol, atol=atol), z > critical)
    z = np.where(constant & differs, np.inf, z)
    return differs, z, critical


def _compare_statistics(spec: LoadedSpec, method: str, mspec: MethodSpec, tf: Built, torch: Built,
                        examples: int) -> None:
    stats, tol = mspec.statistics, tolerance(spec, method)

    def body(inputs: dict[str, Any]) -> None:
        samples_a = _samples(tf, method, inputs, stats.samples)
        samples_b = _samples(torch, method, inputs, stats.samples)
        layout_a = [(p, v.shape[1:], v.dtype.kind) for p, v in samples_a.items()]
        layout_b = [(p, v.shape[1:], v.dtype.kind) for p, v in samples_b.items()]
        if layout_a != layout_b:
            raise fail(spec, "parity", PAIR, f"method {method!r}: output layouts differ: tf {layout_a}, "
                       f"torch {layout_b}\n  inputs:\n{describe_value(inputs)}")
        a, b, labels = _features(samples_a, samples_b)
        differs, z, critical = z_test(a, b, stats.confidence, tol.rtol, tol.atol)
        if not differs.any():
            return
        worst = int(np.argmax(np.where(differs, z, -1.0)))
        raise fail(spec, "parity", PAIR, (
            f"method {method!r} is stochastic (no deterministic_inputs), so it was compared by statistics: "
            f"{stats.samples} calls per backend; per element the mean and mean of squares (floats) or the "
            f"frequency of each value (integers with at most {MAX_CATEGORIES} values); two-sample z-test at "
            f"confidence {stats.confidence} with a Bonferroni correction over {a.shape[1]} column(s) "
            f"(|z| > {critical:.3g}); {int(differs.sum())} column(s) differ; the worst is {labels[worst]}: "
            f"tf {a[:, worst].mean():.6g} vs torch {b[:, worst].mean():.6g} (z = {z[worst]:.3g})"
            f"\n  inputs:\n{describe_value(inputs)}"))

    # Not shrunk: every shrink step costs `samples` calls per backend, and a shift in
    # distribution rarely depends on the inputs.
    count = max(1, min(MAX_STATISTICAL_EXAMPLES, examples // 10))
    run_examples(spec, f"parity-statistics/{method}", input_strategy(spec, method_args(tf, method)), body, count,
                 shrink=False)


def check_determinism(spec: LoadedSpec, backend: str) -> None:
    """Two builds with the spec's seed start equal and give identical outputs (sequences, where random)."""
    first, second = built(spec, backend), built(spec, backend, instance="twin")
    diff = compare_outputs(first.initial, second.initial, None, exact_dtype=True)
    if diff:
        raise fail(spec, "determinism", backend, f"two builds with seed {spec.spec.seed} start from different "
                   f"weights: {diff}")
    examples = example_count(spec)
    for method, mspec in spec.spec.methods.items():
        calls = SEQUENCE_CALLS if (mspec.stochastic or mspec.stateful) else 1

        def body(inputs: dict[str, Any], method: str = method, calls: int = calls) -> None:
            first.restore()
            second.restore()
            for i in range(calls):
                a, b = first.call(method, inputs), second.call(method, inputs)
                diff = compare_outputs(a, b, None, exact_dtype=True)
                if diff:
                    call = f" (call {i + 1} of a sequence of {calls} from a fresh state)" if calls > 1 else ""
                    raise fail(spec, "determinism", backend, f"method {method!r}: two builds with seed "
                               f"{spec.spec.seed} give different outputs{call}: {diff}\n  inputs:\n"
                               f"{describe_value(inputs)}")

        run_examples(spec, f"determinism/{backend}/{method}", input_strategy(spec, method_args(first, method)),
                     body, max(1, examples // 2))
