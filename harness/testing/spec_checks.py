"""The space checks of a spec (build, in-space, bad spaces) and what every spec check shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from harness.execution.executor import GraphExecutor
from harness.graph.errors import SpaceMismatchError, SpacegraphError
from harness.spaces import BoolBox, Dict, Space, Tuple
from harness.specs import LoadedSpec, Tolerance
from harness.testing.strategies import from_space

__all__ = ["SpecCheckError", "Built", "built", "example_count", "check_build", "check_in_space", "check_bad_spaces",
           "check_bad_configs",
           "compare_outputs", "describe_value", "FLOAT_LIMIT"]

#: Largest magnitude of drawn floats where an input space is unbounded: keeps float32
#: rounding (summed over a few products) inside the default tolerances.
FLOAT_LIMIT = 100.0
#: The example count a spec's ``hypothesis.max_examples`` means: the ``dev`` profile's.
DEV_EXAMPLES = 30
#: Most hypothesis examples per method and check, whatever the profile, so a spec stays fast.
MAX_EXAMPLES = 250


class SpecCheckError(AssertionError):
    """A spec check failed; the message names the spec file, the check, the backend(s) and the method."""


def fail(spec: LoadedSpec, check: str, backends: str, message: str) -> SpecCheckError:
    """A `SpecCheckError` whose first line locates the failure."""
    return SpecCheckError(f"{spec.path}: check {check!r} on {backends} failed: {message}")


# ---- built executors, cached per worker ---------------------------------------------------------


@dataclass
class Built:
    """A built executor and the weights it started from."""

    executor: GraphExecutor
    initial: dict[str, np.ndarray]
    spec_path: str

    def restore(self, weights: dict[str, np.ndarray] | None = None) -> None:
        """Loads ``weights`` (default: the initial ones) and re-seeds the random ops: a fresh state."""
        self.executor.set_weights(self.initial if weights is None else weights)
        self.executor.backend.reset_rng()

    def relative_weights(self) -> dict[str, np.ndarray]:
        """The initial weights keyed relative to the component under test (``"kernel"``)."""
        return relative_weights(self.initial, self.executor.root.global_scope)

    def call(self, method: str, inputs: Mapping[str, Any]) -> Any:
        """Executes ``method`` on inputs given by argument name.

        Raises:
            SpecCheckError: when the method raises (on inputs drawn from its input spaces).
        """
        try:
            return self.executor.execute(method, **inputs)
        except Exception as exc:  # noqa: BLE001 - reported with the inputs
            raise SpecCheckError(f"{self.spec_path}: method {method!r} on {self.executor.backend_name} raised "
                                 f"{type(exc).__name__}: {exc}\n  inputs:\n{describe_value(inputs)}") from exc


_CACHE: dict[tuple, Built | BaseException] = {}


def relative_weights(weights: Mapping[str, np.ndarray], scope: str) -> dict[str, np.ndarray]:
    """Weights with the root's scope prefix stripped, as oracles and models take them."""
    prefix = scope + "/"
    return {(k[len(prefix):] if k.startswith(prefix) else k): np.array(v, copy=True) for k, v in weights.items()}


def built(spec: LoadedSpec, backend: str, seed: int | None = None, instance: str = "") -> Built:
    """The executor of ``spec`` on ``backend``, built once per worker and cached.

    Args:
        spec: the loaded spec.
        backend: ``"tf"`` or ``"torch"``.
        seed: the build seed (default: the spec's).
        instance: tells apart several builds with one seed (the determinism twin).

    Raises:
        SpecCheckError: when the build fails (the failure is cached too).
    """
    seed = spec.spec.seed if seed is None else seed
    key = (spec.path, backend, seed, instance)
    if key not in _CACHE:
        try:
            executor = GraphExecutor(spec.make(), spec.input_spaces, backend=backend, seed=seed,
                                     api_methods=list(spec.spec.methods))
            _CACHE[key] = Built(executor, executor.get_weights(), spec.path)
        except Exception as exc:  # noqa: BLE001 - reported as the check's failure
            _CACHE[key] = exc
    entry = _CACHE[key]
    if isinstance(entry, BaseException):
        raise fail(spec, "build", backend, f"building with seed {seed} raised "
                   f"{type(entry).__name__}: {entry}") from entry
    return entry


# ---- hypothesis -----------------------------------------------------------------------------------


def example_count(spec: LoadedSpec) -> int:
    """The spec's example count scaled by the active profile relative to ``dev``, capped."""
    current = settings.default.max_examples
    try:
        dev = settings.get_profile("dev").max_examples
    except InvalidArgument:
        dev = DEV_EXAMPLES
    scaled = round(spec.spec.hypothesis.max_examples * current / dev)
    return max(1, min(MAX_EXAMPLES, scaled))


def hypothesis_settings(examples: int, shrink: bool = True, **extra: Any) -> settings:
    """The active profile's settings (derandomize, database, ...) with ``examples`` and no deadline.

    The explain phase is left out (it costs seconds per failure, re-running the
    component hundreds of times); ``shrink=False`` leaves out shrinking too.
    """
    parent = settings.default
    suppressed = set(parent.suppress_health_check) | {HealthCheck.too_slow, HealthCheck.data_too_large}
    dropped = {Phase.explain} if shrink else {Phase.explain, Phase.shrink}
    phases = [p for p in parent.phases if p not in dropped]
    return settings(parent, max_examples=examples, deadline=None, suppress_health_check=list(suppressed),
                    phases=phases, **extra)


def run_examples(spec: LoadedSpec, key: str, strategy: st.SearchStrategy, body: Callable[[Any], None],
                 examples: int, shrink: bool = True) -> None:
    """Runs ``body(value)`` on ``examples`` hypothesis draws of ``strategy``; shrinks on failure.

    ``key`` (check, backend, method) separates the example-database entries of the
    many checks that share this one test function.
    """
    @hypothesis_settings(examples, shrink=shrink)
    @given(strategy)
    def check_example(inputs: Any) -> None:
        body(inputs)

    check_example.hypothesis.inner_test._hypothesis_internal_add_digest = f"{spec.path}::{key}".encode()
    check_example()


def input_strategy(spec: LoadedSpec, args: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Values by argument name for ``args``, sharing one batch and one time size across arguments."""
    spaces = spec.input_spaces
    missing = [a for a in args if a not in spaces]
    if missing:
        raise ValueError(f"{spec.path}: no input space for argument(s) {missing}")
    if not args:
        return st.just({})
    hyp = spec.spec.hypothesis
    return from_space(Dict({a: spaces[a] for a in args}), batch_size=hyp.batch_size, time_size=hyp.time_size,
                      float_limit=FLOAT_LIMIT)


def method_args(b: Built, method: str) -> list[str]:
    """The fed arguments of a built method (defaults bound at the build are left out)."""
    return list(b.executor.apis[method].arg_spaces)


def stateless_methods(spec: LoadedSpec) -> list[str]:
    """Methods that do not change state (the stateless checks run only these)."""
    return [m for m, ms in spec.spec.methods.items() if not ms.stateful]


def tolerance(spec: LoadedSpec, method: str) -> Tolerance:
    """The method's tolerance, else the spec's."""
    return spec.spec.methods[method].tolerance or spec.spec.tolerance


# ---- describing and comparing values --------------------------------------------------------------


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(key_path, leaf)`` over nested dicts, tuples and lists (dict keys sorted)."""
    if isinstance(value, Mapping):
        for k in sorted(value, key=str):
            yield from leaves(value[k], f"{path}/{k}" if path else str(k))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}/{i}" if path else str(i))
    else:
        yield path, value


def _structure(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _structure(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return tuple(_structure(v) for v in value)
    return None if value is None else "leaf"


def describe_value(value: Any, indent: str = "    ") -> str:
    """Shapes, dtypes and (truncated) values of a nested value, one leaf per line."""
    lines = []
    for path, leaf in leaves(value):
        if leaf is None:
            lines.append(f"{indent}{path or '<root>'}: None")
            continue
        arr = np.asarray(leaf)
        text = np.array2string(arr, threshold=16, edgeitems=2, precision=6, max_line_width=100)
        text = text.replace("\n", " ")
        if len(text) > 240:
            text = text[:237] + "..."
        lines.append(f"{indent}{path or '<root>'}: {arr.dtype}{list(arr.shape)} = {text}")
    return "\n".join(lines) if lines else f"{indent}(no values)"


def compare_outputs(actual: Any, expected: Any, tol: Tolerance | None, exact_dtype: bool = False) -> str | None:
    """None if the nested values agree, else where and by how much they differ.

    Integer and bool leaves must match exactly, float leaves within ``tol`` (exactly
    when ``tol`` is None; NaN matches NaN). With ``exact_dtype`` the dtypes must match too.
    """
    if _structure(actual) != _structure(expected):
        return (f"structures differ: {_structure(actual)!r} vs expected {_structure(expected)!r}")
    for (path, a), (_, e) in zip(leaves(actual), leaves(expected)):
        if a is None and e is None:
            continue
        where = f"key path {path!r}" if path else "the root"
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return f"at {where}: shape {a.shape} vs expected {e.shape}"
        if exact_dtype and a.dtype != e.dtype:
            return f"at {where}: dtype {a.dtype} vs {e.dtype}"
        problem = _leaf_difference(a, e, tol)
        if problem:
            return f"at {where}: {problem}"
    return None


def _leaf_difference(a: np.ndarray, e: np.ndarray, tol: Tolerance | None) -> str | None:
    if a.dtype.kind not in "biuf" or e.dtype.kind not in "biuf":
        return None if np.array_equal(a, e) else "values differ"
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    exact = tol is None or (a.dtype.kind in "biu" and e.dtype.kind in "biu")
    if exact:
        bad = ~((a64 == e64) | (np.isnan(a64) & np.isnan(e64)))
        rule = "exact"
    else:
        bad = ~np.isclose(a64, e64, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
        rule = f"rtol={tol.rtol:g}, atol={tol.atol:g}"
    if not bad.any():
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(bad, np.abs(a64 - e64), 0.0)
        rel = np.where(bad & (e64 != 0), diff / np.abs(e64), np.where(bad, np.inf, 0.0))
    diff = np.where(np.isnan(diff), np.inf, diff)
    rel = np.where(np.isnan(rel), np.inf, rel)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape)) if diff.ndim else ()
    return (f"{int(bad.sum())} of {bad.size} element(s) differ ({rule}); largest absolute difference "
            f"{float(diff.max()):.6g}, largest relative difference {float(rel.max()):.6g}; at index {index}: "
            f"{a[index].item()!r} vs expected {e[index].item()!r}")


# ---- spaces -----------------------------------------------------------------------------------------


def as_space(value: Any) -> Space | None:
    """A built output space (nested dicts/tuples of spaces) as one `Space`."""
    if value is None or isinstance(value, Space):
        return value
    if isinstance(value, Mapping):
        return Dict({k: as_space(v) for k, v in value.items()})
    return Tuple([as_space(v) for v in value])


def space_difference(declared: Space, got: Space | None) -> str | None:
    """None if the spaces agree ignoring bounds, else the first difference by key path."""
    if got is None:
        return "the built method returns nothing"
    if declared.without_bounds() == got.without_bounds():
        return None
    d_flat, g_flat = declared.flatten(), got.flatten()
    if list(d_flat) != list(g_flat) or declared.map(_skeleton) != got.map(_skeleton):
        return f"structures differ: key paths {list(d_flat)} declared, {list(g_flat)} built"
    for path, d in d_flat.items():
        g = g_flat[path]
        where = f"at key path {path!r}" if path else "at the root"
        for what, dv, gv in (("leaf type", type(d).__name__, type(g).__name__), ("dtype", d.dtype, g.dtype),
                             ("core shape", d.shape, g.shape), ("extra ranks", d.extra_ranks, g.extra_ranks)):
            if dv != gv:
                return f"{where}: {what} {dv} declared, {gv} built"
    return "the spaces differ"


def _skeleton(path: str, leaf: Space) -> Space:
    return BoolBox()


def _mask_nan(space: Space, value: Any) -> Any:
    """``value`` with NaNs replaced by an in-bounds value (for methods that may return NaN)."""
    def one(path: str, leaf: Any, v: Any) -> Any:
        arr = np.asarray(v)
        if arr.dtype.kind != "f" or not np.isnan(arr).any():
            return v
        try:
            fill = np.broadcast_to(np.clip(np.zeros(leaf.shape), leaf.low, leaf.high), arr.shape)
        except ValueError:
            return v  # a wrong shape: why_not says so
        return np.where(np.isnan(arr), fill, arr).astype(arr.dtype)
    try:
        return space.map_value(one, value)
    except ValueError:
        return value  # a wrong structure: why_not says so


# ---- the checks ---------------------------------------------------------------------------------------


def check_build(spec: LoadedSpec, backend: str) -> None:
    """The spec builds, and each declared output space equals the built one ignoring bounds."""
    b = built(spec, backend)
    problems = []
    for method in spec.spec.methods:
        declared = spec.output_space(method)
        if declared is None:
            continue
        got = as_space(b.executor.apis[method].output_space)
        diff = space_difference(declared, got)
        if diff:
            problems.append(f"method {method!r}: declared output space {declared!r}, built {got!r}: {diff}")
    if problems:
        raise fail(spec, "build", backend, f"{len(problems)} problem(s):\n  " + "\n  ".join(problems))


def check_in_space(spec: LoadedSpec, backend: str) -> None:
    """Outputs on hypothesis inputs lie in the declared output spaces (NaN only with allow_nan)."""
    b = built(spec, backend)
    b.restore()
    examples = example_count(spec)
    for method in stateless_methods(spec):
        declared = spec.output_space(method)
        if declared is None:
            continue
        allow_nan = spec.spec.methods[method].allow_nan

        def body(inputs: dict[str, Any], method: str = method, declared: Space = declared,
                 allow_nan: bool = allow_nan) -> None:
            outputs = b.call(method, inputs)
            reason = declared.why_not(_mask_nan(declared, outputs) if allow_nan else outputs)
            if reason:
                raise fail(spec, "in-space", backend, f"method {method!r}: output not in the declared space "
                           f"{declared!r}: {reason}\n  inputs:\n{describe_value(inputs)}\n  outputs:\n"
                           f"{describe_value(outputs)}")

        run_examples(spec, f"in-space/{backend}/{method}", input_strategy(spec, method_args(b, method)), body,
                     examples)


def check_bad_spaces(spec: LoadedSpec, backend: str) -> None:
    """Each ``bad_spaces`` entry makes the build fail with a SpaceMismatchError naming the component's scope.

    A space check must refuse it: another SpacegraphError (a `BuildError` wrapping a backend error
    raised while the graph functions ran on the bad space) means the space got past the checks.
    """
    problems = []
    for i, entry in enumerate(spec.spec.bad_spaces):
        spaces = {**spec.spec.input_spaces, **entry}
        component = spec.make()
        scope = component.global_scope
        try:
            GraphExecutor(component, spaces, backend=backend, seed=spec.spec.seed, api_methods=list(spec.spec.methods))
        except SpaceMismatchError as exc:
            if scope not in str(exc):
                problems.append(f"bad_spaces.{i} {entry}: {type(exc).__name__} does not name the component's "
                                f"scope {scope!r}: {exc}")
        except SpacegraphError as exc:
            problems.append(f"bad_spaces.{i} {entry}: no space check refused it; the build failed later with "
                            f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - what the check is about
            problems.append(f"bad_spaces.{i} {entry}: the build raised {type(exc).__name__} (not a "
                            f"SpacegraphError, so a backend exception reached the user): {exc}")
        else:
            problems.append(f"bad_spaces.{i} {entry}: the build accepted the space silently (no SpaceMismatchError "
                            f"or BuildError)")
    if problems:
        raise fail(spec, "bad-spaces", backend, f"{len(problems)} problem(s):\n  " + "\n  ".join(problems))


def check_bad_configs(spec: LoadedSpec, backend: str) -> None:
    """Each ``bad_configs`` entry, merged over ``config``, makes the constructor raise a ValueError naming an argument.

    The message must name one of the entry's arguments at least (an entry of two, such as a capacity below the
    stack depth, may be refused by either's name). The constructor does not depend on the backend; the item runs
    per backend like the others.
    """
    problems = []
    for i, entry in enumerate(spec.spec.bad_configs):
        config = {**spec.spec.config, **entry}
        try:
            spec.component_class(**config)
        except ValueError as exc:
            if not any(arg in str(exc) for arg in entry):
                problems.append(f"bad_configs.{i} {entry}: the ValueError names none of {sorted(entry)}: {exc}")
        except Exception as exc:  # noqa: BLE001 - what the check is about
            problems.append(f"bad_configs.{i} {entry}: the constructor raised {type(exc).__name__} (not a "
                            f"ValueError naming the argument): {exc}")
        else:
            problems.append(f"bad_configs.{i} {entry}: the constructor accepted the config silently (no ValueError)")
    if problems:
        raise fail(spec, "bad-configs", backend, f"{len(problems)} problem(s):\n  " + "\n  ".join(problems))
