"""`ComponentTest`: builds one component as a root on one backend and checks its API outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.graph.build import BuildProfile
from harness.graph.component import Component
from harness.spaces import Dict, Space

__all__ = ["ComponentTest", "assert_outputs_equal"]

_DEFAULT_RTOL = 1e-5
_DEFAULT_ATOL = 1e-6


class ComponentTest:
    """A component built as the root of its own graph, ready to run and compare.

    Args:
        component: the component under test; it becomes the root (build it once).
        input_spaces: a space (or space text) for every argument of the API methods
            to build, keyed by argument name.
        backend: ``"tf"`` or ``"torch"``.
        seed: seeds the initial weights (identical across backends) and random ops.
        device_map: ``{component scope path: device}``, as for `GraphExecutor`.
        api_methods: build only these API methods (default: all of them).

    Example:
        >>> test = ComponentTest(Dense(2), {"inputs": FloatBox(3, batch_rank=True)}, backend="torch")
        >>> test.test("apply", np.ones((4, 3), np.float32), expected=...)
    """

    def __init__(self, component: Component, input_spaces: dict[str, Any], backend: str = "tf", seed: int = 10,
                 device_map: dict[str, str] | None = None, api_methods: list[str] | None = None) -> None:
        self.component = component
        self._executor = GraphExecutor(component, input_spaces, backend=backend, seed=seed,
                                       device_map=device_map, api_methods=api_methods)

    # ---- running ---------------------------------------------------------------------
    def test(self, method: str, inputs: Any = None, expected: Any = None, decimals: int | None = None,
             rtol: float | None = None, atol: float | None = None) -> Any:
        """Executes one API method and, if ``expected`` is given, compares its outputs.

        Args:
            method: the API method to run.
            inputs: None for a method without inputs; the value itself for a
                one-argument method (even when that value is a tuple or dict); a
                tuple/list of positional values; or a dict of values by argument name.
            expected: the expected (nested) outputs; None skips the comparison.
            decimals: compare floats like `np.testing.assert_almost_equal`
                (``abs(actual - expected) < 1.5 * 10**-decimals``); excludes rtol/atol.
            rtol: relative tolerance for floats (default 1e-5).
            atol: absolute tolerance for floats (default 1e-6).

        Returns:
            The outputs as NumPy arrays (nested like the method's output space).

        Raises:
            AssertionError: naming the method, the key path of the first differing
                leaf, the largest absolute difference and both values.
        """
        args, kwargs = self._arguments(method, inputs)
        outputs = self._executor.execute(method, *args, **kwargs)
        if expected is not None:
            assert_outputs_equal(outputs, expected, what=f"{method!r}", decimals=decimals, rtol=rtol, atol=atol)
        return outputs

    def _arguments(self, method: str, inputs: Any) -> tuple[tuple, dict]:
        if inputs is None:
            return (), {}
        api = self._executor.apis.get(method)
        if api is None:  # let execute() raise UnknownApiError listing the methods
            return (inputs,), {}
        names = list(api.arg_spaces)
        if len(names) == 1:
            space = api.arg_spaces[names[0]]
            if isinstance(inputs, Mapping) and set(inputs) == {names[0]} and not _is_dict_value(space, inputs):
                return (), dict(inputs)
            return (inputs,), {}
        if isinstance(inputs, Mapping):
            return (), dict(inputs)
        if isinstance(inputs, (tuple, list)):
            return tuple(inputs), {}
        return (inputs,), {}

    # ---- variables -------------------------------------------------------------------
    def variable_names(self) -> list[str]:
        """The scope paths of all variables of the graph (``"root/sub/kernel"``)."""
        return list(self._executor.variables())

    def _resolve(self, name: str) -> str:
        known = self._executor.variables()
        if name in known:
            return name
        relative = f"{self._executor.root.global_scope}/{name}"
        if relative in known:
            return relative
        raise KeyError(f"no variable {name!r} in {self._executor.root.global_scope!r}; variables: {sorted(known)}")

    def read_variable_values(self, names: str | list[str] | None = None) -> dict[str, np.ndarray]:
        """Variable values as NumPy arrays keyed by full scope path.

        Args:
            names: one name or a list of names, each a full scope path or a path
                relative to the root component (``"dense/kernel"``); None reads all.

        Raises:
            KeyError: for a name that matches no variable, listing the variables.
        """
        weights = self._executor.get_weights()
        if names is None:
            return weights
        if isinstance(names, str):
            names = [names]
        return {key: weights[key] for key in (self._resolve(n) for n in names)}

    def write_variable_values(self, values: dict[str, Any]) -> None:
        """Overwrites some variables; keys are full or root-relative scope paths.

        Raises:
            KeyError: for a name that matches no variable.
            ValueError: for a value whose shape or dtype does not fit its variable.
        """
        self._executor.set_weights({self._resolve(k): v for k, v in values.items()}, strict=False)

    def get_weights(self) -> dict[str, np.ndarray]:
        """All variables as NumPy arrays keyed by scope path."""
        return self._executor.get_weights()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Loads all variables (the keys must match `variable_names` exactly)."""
        self._executor.set_weights(weights)

    # ---- introspection -------------------------------------------------------------------
    @property
    def executor(self) -> GraphExecutor:
        """The `GraphExecutor` holding the built graph."""
        return self._executor

    @property
    def output_spaces(self) -> dict[str, Any]:
        """The output space of each built API method (nested spaces, or None)."""
        return {name: api.output_space for name, api in self._executor.apis.items()}

    @property
    def profile(self) -> BuildProfile:
        """Where the build's time went."""
        return self._executor.profile

    def __repr__(self) -> str:
        return f"ComponentTest({self.component!r}, backend={self._executor.backend_name!r})"


def _is_dict_value(space: Space, value: Mapping) -> bool:
    """Whether ``value`` is meant as a value of a Dict space (rather than inputs by name)."""
    return isinstance(space, Dict) and set(value) == set(space.keys())


def assert_outputs_equal(actual: Any, expected: Any, what: str = "outputs", decimals: int | None = None,
                         rtol: float | None = None, atol: float | None = None) -> None:
    """Asserts that nested outputs (dicts, tuples/lists, arrays) match ``expected``.

    Integer and boolean leaves must match exactly; float leaves within ``decimals``
    (as `np.testing.assert_almost_equal`) or ``rtol``/``atol`` (default 1e-5/1e-6).
    NaNs match NaNs at the same positions. A list or tuple expected where the output
    is an array is compared as an array.

    Args:
        actual: the outputs.
        expected: the expected outputs, of the same structure.
        what: names the outputs in the message (e.g. the API method).
        decimals, rtol, atol: float tolerances.

    Raises:
        AssertionError: naming ``what``, the key path of the first differing leaf,
            the largest absolute difference and both values.
        ValueError: if ``decimals`` is combined with ``rtol``/``atol``.
    """
    if decimals is not None and (rtol is not None or atol is not None):
        raise ValueError("assert_outputs_equal: give either decimals or rtol/atol, not both")
    tol = {"decimals": decimals, "rtol": _DEFAULT_RTOL if rtol is None else rtol,
           "atol": _DEFAULT_ATOL if atol is None else atol}
    _compare(actual, expected, "", what, tol)


def _fail(what: str, path: str, reason: str, actual: Any, expected: Any) -> None:
    where = f"key path {path!r}" if path else "the root"
    raise AssertionError(
        f"{what}: output at {where} differs: {reason}\n  actual:   {_show(actual)}\n  expected: {_show(expected)}"
    )


def _show(value: Any) -> str:
    text = np.array2string(value, threshold=40, edgeitems=3) if isinstance(value, np.ndarray) else repr(value)
    return text.replace("\n", "\n            ")


def _join(path: str, key: Any) -> str:
    return f"{path}/{key}" if path else str(key)


def _compare(actual: Any, expected: Any, path: str, what: str, tol: dict[str, Any]) -> None:
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            _fail(what, path, f"expected a dict, got {type(actual).__name__}", actual, expected)
        if set(actual) != set(expected):
            missing, extra = sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected))
            reason = f"dict keys differ: missing {missing}, unexpected {extra}"
            _fail(what, path, reason, sorted(actual), sorted(expected))
        for key in expected:
            _compare(actual[key], expected[key], _join(path, key), what, tol)
        return
    if isinstance(expected, (tuple, list)) and not isinstance(actual, (np.ndarray, np.generic)):
        if not isinstance(actual, (tuple, list)):
            _fail(what, path, f"expected a sequence, got {type(actual).__name__}", actual, expected)
        if len(actual) != len(expected):
            _fail(what, path, f"length {len(actual)} != expected length {len(expected)}", actual, expected)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, _join(path, i), what, tol)
        return
    if isinstance(actual, (Mapping, tuple, list)):
        _fail(what, path, f"expected a leaf, got {type(actual).__name__}", actual, expected)
    _compare_leaf(np.asarray(actual), np.asarray(expected), path, what, tol)


def _compare_leaf(actual: np.ndarray, expected: np.ndarray, path: str, what: str, tol: dict[str, Any]) -> None:
    if actual.shape != expected.shape:
        _fail(what, path, f"shape {actual.shape} != expected shape {expected.shape}", actual, expected)
    exact = actual.dtype.kind in "biu" and expected.dtype.kind in "biu"
    if not exact and (actual.dtype.kind not in "biuf" or expected.dtype.kind not in "biuf"):
        if not np.array_equal(actual, expected):
            _fail(what, path, "values differ", actual, expected)
        return
    a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - e64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    same_inf = np.isinf(a64) & (a64 == e64)
    diff = np.where(both_nan | same_inf, 0.0, diff)
    if exact:
        bad = actual != expected
        rule = "exact comparison"
    elif tol["decimals"] is not None:
        bad = ~(diff < 1.5 * 10.0 ** (-tol["decimals"]))
        rule = f"decimals={tol['decimals']}"
    else:
        bad = ~np.isclose(a64, e64, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
        rule = f"rtol={tol['rtol']}, atol={tol['atol']}"
    if np.any(bad):
        index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
        max_diff = float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))) if diff.size else 0.0
        reason = (f"{int(np.sum(bad))} of {bad.size} element(s) differ ({rule}); max abs difference {max_diff:.6g}; "
                  f"first at index {index}: {actual[index].tolist()!r} vs {expected[index].tolist()!r}")
        _fail(what, path, reason, actual, expected)
